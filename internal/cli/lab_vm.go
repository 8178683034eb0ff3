package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/lowlat/lowlat/internal/lab"
	"github.com/lowlat/lowlat/internal/lab/vm"
)

func labVM(ctx context.Context, env *Env, args []string) error {
	fs := flagSet(env, "lab vm", "lab vm NAME [--json] [-o FILE] [--html FILE] [--kernel BZIMAGE [--modules DIR]] [--initrd FILE] [--timeout 20m] [--console] [--quiet]")
	o := addLabOut(fs)
	kernel := fs.String("kernel", "", "boot your own kernel `BZIMAGE` instead of a stock Debian one (linux-image-6.1.0-*-amd64, fetched with apt once)")
	modules := fs.String("modules", "", "with --kernel: its /lib/modules/<release> `DIR` (without it, every qdisc must be built in)")
	initrd := fs.String("initrd", "", "an extra initramfs `FILE` unpacked first (firmware, your kernel's modules)")
	timeout := fs.Duration("timeout", 20*time.Minute, "bound the whole run: kernel fetch, boot and scenario")
	console := fs.Bool("console", false, "stream the guest's whole console (kernel messages included) to stderr")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	var variants listFlag
	fs.Var(&variants, "variant", "run only this `variant` (repeatable; the baseline always runs)")
	scale := fs.Float64("scale", 1, "multiply every measurement's duration by `X` (0.3..3)")
	pos, err := parse(fs, args)
	if err != nil {
		return helpOK(err)
	}
	if err := positional(fs, pos, 1, 1, "scenario NAME (see 'lowlat lab list')"); err != nil {
		return err
	}
	if err := checkScenario("lab vm", pos[0], variants); err != nil {
		return err
	}
	if *modules != "" && *kernel == "" {
		return &ExitError{Code: 2, Err: errors.New("lab vm: --modules goes with --kernel")}
	}
	if *scale < 0.3 || *scale > 3 {
		return &ExitError{Code: 2, Err: fmt.Errorf("lab vm: --scale %g: want 0.3..3", *scale)}
	}
	if *timeout < time.Minute {
		return &ExitError{Code: 2, Err: fmt.Errorf("lab vm: --timeout %s: want at least 1m", *timeout)}
	}
	var cons, logw io.Writer = io.Discard, io.Discard
	if !*quiet {
		logw = env.Stderr
		cons = &labLines{w: env.Stderr}
	}
	if *console {
		cons = env.Stderr
	}
	res, _, err := lab.RunInVM(ctx, pos[0], lab.VMOptions{
		Kernel: *kernel, Modules: *modules, Initrd: *initrd,
		Variants: variants, Scale: *scale, Timeout: *timeout,
		Console: cons, Log: logw,
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return &ExitError{Code: 130, Err: fmt.Errorf("lab vm %s: %w; qemu was stopped", pos[0], lab.ErrInterrupted)}
	case errors.Is(err, vm.ErrQEMUNotFound):
		return &ExitError{Code: 1, Err: err}
	case err != nil:
		return err
	}
	return emitLab(env, o, res)
}

// labLines passes the guest's "lab: …" progress lines through, prefixed,
// and drops the rest of the console.
type labLines struct {
	w   io.Writer
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *labLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			// Keep the partial line for the next write.
			rest := line
			l.buf.Reset()
			l.buf.WriteString(rest)
			return len(p), nil
		}
		line = strings.TrimRight(line, "\r\n")
		if strings.HasPrefix(line, "lab: ") || strings.HasPrefix(line, "lowlat: ") {
			fmt.Fprintln(l.w, "vm "+line)
		}
	}
}
