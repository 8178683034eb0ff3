package cli

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/testnet"
)

// TestMonitorCheckRefusesRates: 'monitor --check' refuses a rate that
// gives no usable schedule (TOML's inf and nan, rates beyond what a watch
// runs) as one line naming the value's position, exit 2; before, inf and
// 1e12 passed the check and probed once a second.
func TestMonitorCheckRefusesRates(t *testing.T) {
	for _, tt := range []struct{ rate, want string }{
		{"inf", "inf: want probes per second, a finite number more than 0"},
		{"nan", "nan: want probes per second, a finite number more than 0"},
		{"-inf", "-inf: want probes per second, a finite number more than 0"},
		{"1e12", "1e12: at most 100 probes per second (an interval of 10ms)"},
		{"1e-300", "1e-300: at least 0.001667 probes per second (an interval of 10m0s)"},
	} {
		t.Run(tt.rate, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "monitor.toml")
			text := "[[target]]\nname = \"a\"\nkind = \"udp\"\naddress = \"192.0.2.1:7431\"\nrate = " + tt.rate + "\n"
			if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			r := runIsolated(t, "monitor", "--check", "--config", cfg)
			want := "lowlat: monitor: " + cfg + ":5:8: rate: " + tt.want + "\n"
			if got := mainStderr(r.err); got != want || exitCode(r.err) != ExitUsage || r.stdout != "" || r.stderr != "" {
				t.Errorf("exit %d, stdout %q, stderr %q\nwant exit 2 and %q", exitCode(r.err), r.stdout, got, want)
			}
		})
	}
}

// TestHangupEndsOtherCommands: with SIGHUP caught from the process's start
// (Env.Hangup), a command that does not reload on it ends on it as on
// SIGTERM, as it did when SIGHUP killed it: a reflector returns.
func TestHangupEndsOtherCommands(t *testing.T) {
	hup := make(chan os.Signal, 1)
	var stderr testnet.Log
	env := &Env{Stdout: io.Discard, Stderr: &stderr, Stdin: strings.NewReader(""), Getenv: func(string) string { return "" }, Hangup: hup}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Main(ctx, []string{"reflector", "--listen", "127.0.0.1:0", "--quiet"}, env) }()
	for end := time.Now().Add(10 * time.Second); !strings.Contains(stderr.String(), "listening on"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the reflector did not start: %q", stderr.String())
		}
	}
	hup <- syscall.SIGHUP
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("reflector after SIGHUP: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the reflector runs on 5 s after a SIGHUP")
	}
}
