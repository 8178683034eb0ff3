package cli

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"

	"github.com/lowlat/lowlat/internal/atomicfile"
	"github.com/lowlat/lowlat/internal/host"
)

func init() {
	register(&command{name: "capture", summary: "write a snapshot of this host's facts to send to someone who helps you", order: 15, run: runCapture})
}

func runCapture(ctx context.Context, env *Env, args []string) error {
	fs := flagSet(env, "capture", "capture -o FILE [--tree DIR] [--root DIR]")
	out := fs.String("o", "", "write the snapshot to `FILE` (- for stdout); read it back with --from FILE")
	tree := fs.String("tree", "", "also copy the raw /proc, /sys and /etc files lowlat reads into `DIR` (read back with --root DIR)")
	src := factsSource{sockets: true}
	fs.StringVar(&src.root, "root", "", "capture a tree at `DIR` instead of this host")
	pos, err := parse(fs, args)
	if err != nil {
		return helpOK(err)
	}
	if err := positional(fs, pos, 0, 0, ""); err != nil {
		return err
	}
	if *out == "" && *tree == "" {
		return &ExitError{Code: 2, Err: fmt.Errorf("capture: -o FILE is required (see 'lowlat capture --help')")}
	}
	f, err := src.load(ctx)
	if err != nil {
		return err
	}
	if *tree != "" {
		if err := host.CaptureTree(host.Root{Dir: src.root}, *tree); err != nil {
			return fmt.Errorf("capture --tree: %w", err)
		}
		if err := host.WriteStaticNetlink(*tree, f); err != nil {
			return fmt.Errorf("capture --tree: %w", err)
		}
	}
	if *out == "" {
		fmt.Fprintf(env.Stderr, "wrote tree %s\n", *tree)
		return nil
	}
	var buf bytes.Buffer
	if err := host.Save(&buf, f); err != nil {
		return err
	}
	if *out == "-" {
		_, err := env.Stdout.Write(buf.Bytes())
		return err
	}
	abs, _ := filepath.Abs(*out)
	// Written whole or not at all: a half-written snapshot would mislead
	// whoever reads it later.
	if err := atomicfile.Write(abs, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("capture: write %s: %w", *out, err)
	}
	fmt.Fprintf(env.Stderr, "wrote %s (%d interfaces, %d sysctls, %d IRQs; %d sources unreadable)\n", *out, len(f.Interfaces), len(f.Sysctls), len(f.IRQs), len(f.Errors))
	return nil
}
