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

	"github.com/spf13/cobra"

	"github.com/lowlat/lowlat/internal/lab"
	"github.com/lowlat/lowlat/internal/lab/vm"
)

// labVMOptions are lab vm's flags.
type labVMOptions struct {
	out      labOut
	kernel   string
	modules  string
	initrd   string
	timeout  time.Duration
	console  bool
	quiet    bool
	variants listFlag
	scale    float64
	// cakeAutorate is a cake-autorate checkout, for its peer variants.
	cakeAutorate string
}

func newLabVMCmd(env *Env) *cobra.Command {
	var o labVMOptions
	cmd := &cobra.Command{
		Use:   "vm NAME",
		Short: "the same inside a stock Debian kernel under qemu (every qdisc exists there)",
		Args:  exactArgs(1, "scenario NAME (see 'lowlat lab list')"),
		RunE:  runWith(env, &o, runLabVM),
	}
	f := cmd.Flags()
	o.out.register(f)
	f.StringVar(&o.kernel, "kernel", "", "boot your own kernel `BZIMAGE` instead of a stock Debian one (linux-image-6.1.0-*-amd64, fetched with apt once)")
	f.StringVar(&o.modules, "modules", "", "with --kernel: its /lib/modules/<release> `DIR` (without it, every qdisc must be built in)")
	f.StringVar(&o.initrd, "initrd", "", "an extra initramfs `FILE` unpacked first (firmware, your kernel's modules)")
	f.DurationVar(&o.timeout, "timeout", 20*time.Minute, "bound the whole run: kernel fetch, boot and scenario")
	f.BoolVar(&o.console, "console", false, "stream the guest's whole console (kernel messages included) to stderr")
	f.BoolVar(&o.quiet, "quiet", false, "no progress lines on stderr")
	f.Var(&o.variants, "variant", "run only this `variant` (repeatable; the baseline always runs)")
	f.Float64Var(&o.scale, "scale", 1, "multiply every measurement's duration by `X` (0.3..3)")
	f.StringVar(&o.cakeAutorate, "cake-autorate", "", "a cake-autorate checkout `DIR`, copied into the guest with bash, fping and tc, for the variants that run it beside lowlat autorate (named with --variant)")
	return cmd
}

func runLabVM(ctx context.Context, env *Env, o *labVMOptions, args []string) error {
	if err := checkScenario("lab vm", args[0], o.variants); err != nil {
		return err
	}
	if o.modules != "" && o.kernel == "" {
		return &ExitError{Code: 2, Err: errors.New("lab vm: --modules goes with --kernel")}
	}
	if o.scale < 0.3 || o.scale > 3 {
		return &ExitError{Code: 2, Err: fmt.Errorf("lab vm: --scale %g: want 0.3..3", o.scale)}
	}
	if o.timeout < time.Minute {
		return &ExitError{Code: 2, Err: fmt.Errorf("lab vm: --timeout %s: want at least 1m", o.timeout)}
	}
	var cons, logw io.Writer = io.Discard, io.Discard
	if !o.quiet {
		logw = env.Stderr
		cons = &labLines{w: env.Stderr}
	}
	if o.console {
		cons = env.Stderr
	}
	res, _, err := lab.RunInVM(ctx, args[0], lab.VMOptions{
		Kernel: o.kernel, Modules: o.modules, Initrd: o.initrd,
		Variants: o.variants, Scale: o.scale, Timeout: o.timeout, CakeAutorate: o.cakeAutorate,
		Console: cons, Log: logw,
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return &ExitError{Code: 130, Err: fmt.Errorf("lab vm %s: %w; qemu was stopped", args[0], lab.ErrInterrupted)}
	case errors.Is(err, vm.ErrQEMUNotFound):
		return &ExitError{Code: 1, Err: err}
	case err != nil:
		return err
	}
	return emitLab(env, &o.out, res)
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
