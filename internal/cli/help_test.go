package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// runProbe runs 'lowlat probe ARGS...' in-process, as the probe tests do.
func runProbe(ctx context.Context, env *Env, args []string) error {
	return Main(ctx, append([]string{"probe"}, args...), env)
}

// TestHelpOncePerCommand: every command answers --help with its usage, once,
// on stdout, and succeeds.
func TestHelpOncePerCommand(t *testing.T) {
	for _, c := range newRootCmd(&Env{}).Commands() {
		if c.Hidden {
			continue
		}
		name := c.Name()
		t.Run(name, func(t *testing.T) {
			var out, errb bytes.Buffer
			env := &Env{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(""), Getenv: func(string) string { return "" }}
			if err := Main(context.Background(), []string{name, "--help"}, env); err != nil {
				t.Fatalf("%s --help: %v (stderr %q)", name, err, errb.String())
			}
			if n := strings.Count(out.String(), "Usage:"); n != 1 {
				t.Errorf("%s --help printed Usage %d times:\n%s", name, n, out.String())
			}
		})
	}
}
