package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/lowlat/lowlat/internal/atomicfile"
	"github.com/lowlat/lowlat/internal/host"
)

// captureOptions are capture's flags.
type captureOptions struct {
	out  string
	tree string
	src  factsSource
}

func newCaptureCmd(env *Env) *cobra.Command {
	o := captureOptions{src: factsSource{sockets: true}}
	cmd := &cobra.Command{
		Use:   "capture -o FILE",
		Short: "write a snapshot of this host's facts to send to someone who helps you",
		Args:  noArgs,
		RunE:  runWith(env, &o, runCapture),
	}
	f := cmd.Flags()
	f.StringVarP(&o.out, "output", "o", "", "write the snapshot to `FILE` (- for stdout); read it back with --from FILE")
	f.StringVar(&o.tree, "tree", "", "also copy the raw /proc, /sys and /etc files lowlat reads into `DIR` (read back with --root DIR)")
	f.StringVar(&o.src.root, "root", "", "capture a tree at `DIR` instead of this host")
	return cmd
}

func runCapture(ctx context.Context, env *Env, o *captureOptions, args []string) error {
	if o.out == "" && o.tree == "" {
		return &ExitError{Code: 2, Err: fmt.Errorf("capture: -o FILE is required (see 'lowlat capture --help')")}
	}
	if o.tree != "" {
		if ents, err := os.ReadDir(o.tree); err == nil && len(ents) > 0 {
			return &ExitError{Code: ExitUsage, Err: fmt.Errorf("capture: --tree %s is not empty (nothing was written)", o.tree)}
		}
	}
	f, err := o.src.load(ctx)
	if err != nil {
		return err
	}
	if o.tree != "" {
		if err := host.CaptureTree(host.Root{Dir: o.src.root}, o.tree); err != nil {
			return fmt.Errorf("capture --tree: %w", err)
		}
		if err := host.WriteStaticNetlink(o.tree, f); err != nil {
			return fmt.Errorf("capture --tree: %w", err)
		}
	}
	if o.out == "" {
		fmt.Fprintf(env.Stderr, "wrote tree %s\n", o.tree)
		return nil
	}
	var buf bytes.Buffer
	if err := host.Save(&buf, f); err != nil {
		return err
	}
	if o.out == "-" {
		_, err := env.Stdout.Write(buf.Bytes())
		return err
	}
	abs, _ := filepath.Abs(o.out)
	// Written whole or not at all: a half-written snapshot would mislead
	// whoever reads it later.
	if err := atomicfile.Write(abs, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("capture: write %s: %w", o.out, err)
	}
	fmt.Fprintf(env.Stderr, "wrote %s (%d interfaces, %d sysctls, %d IRQs; %d sources unreadable)\n", o.out, len(f.Interfaces), len(f.Sysctls), len(f.IRQs), len(f.Errors))
	return nil
}
