package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/lowlat/lowlat/internal/lab/vm"
)

// errFailed means tests or builds failed and the output already says which.
var errFailed = errors.New("failed")

// DefaultRequire is the qdisc set the stock kernel must have: tests that need
// one of these fail in the VM instead of skipping.
const DefaultRequire = "fq_codel,fq,cake,netem,prio,sfq,fentry"

// defaultPatterns are searched for packages with integration tests when no
// -pkg is given.
var defaultPatterns = []string{"./internal/...", "./cmd/..."}

// excluded packages never run in the VM: the harness's own VM test boots a
// VM and belongs on the host.
var excluded = map[string]bool{"github.com/lowlat/lowlat/internal/lab/vm": true}

type options struct {
	run          string
	pkgs         []string
	timeout      time.Duration
	pkgTimeout   time.Duration
	require      string
	tags         string
	memory, cpus int
	kernel       string
	modules      string
	outDir       string
	workDir      string
	hostBins     []string
	extraEnv     []string
	extraMods    []string
	quiet        bool
}

type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error {
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			*l = append(*l, f)
		}
	}
	return nil
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("vmtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.run, "run", "^TestIntegration", "`regexp` passed to each test binary as -test.run")
	var pkgs, hostBins, env, mods listFlag
	fs.Var(&pkgs, "pkg", "package `patterns` to test (repeatable, comma-separated); default: packages under ./internal and ./cmd with TestIntegration tests")
	fs.DurationVar(&o.timeout, "timeout", 20*time.Minute, "limit for the whole run: builds, boot and tests")
	fs.DurationVar(&o.pkgTimeout, "pkg-timeout", 10*time.Minute, "-test.timeout of each test binary (capped by what is left of -timeout)")
	fs.StringVar(&o.require, "require", DefaultRequire, "LOWLAT_REQUIRE_QDISCS: kernel features that must exist in the VM")
	fs.StringVar(&o.tags, "tags", "vm", "build tags for the test binaries")
	fs.IntVar(&o.memory, "mem", 1024, "guest memory in MiB")
	fs.IntVar(&o.cpus, "smp", 2, "guest CPUs")
	fs.StringVar(&o.kernel, "kernel", os.Getenv("LOWLAT_VM_KERNEL"), "boot this kernel image instead of the cached Debian one ($LOWLAT_VM_KERNEL)")
	fs.StringVar(&o.modules, "modules", os.Getenv("LOWLAT_VM_MODULES"), "the -kernel's /lib/modules/<release> directory ($LOWLAT_VM_MODULES)")
	fs.StringVar(&o.outDir, "out", "", "write the files tests leave under /out (and results.txt) to this `dir`")
	fs.StringVar(&o.workDir, "work", "", "keep binaries and the initramfs in this `dir` (default: a temporary one)")
	fs.Var(&hostBins, "host-bin", "host programs copied into the VM with their libraries (default: /usr/sbin/ip,/usr/sbin/tc,/usr/bin/prometheus,/usr/sbin/bpftool,/usr/bin/setpriv,/usr/bin/mtr,/usr/bin/mtr-packet,/usr/sbin/nft when installed)")
	fs.Var(&env, "env", "extra `K=V` for the tests (repeatable)")
	fs.Var(&mods, "module", "extra kernel `modules` to load (repeatable, comma-separated)")
	fs.BoolVar(&o.quiet, "q", false, "do not stream the console; print each package's output after the run")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if _, err := regexp.Compile(o.run); err != nil {
		return nil, fmt.Errorf("-run: %w", err)
	}
	o.pkgs, o.hostBins, o.extraEnv, o.extraMods = pkgs, hostBins, env, mods
	if o.hostBins == nil {
		// Prometheus scrapes the monitor in internal/cli's tests; bpftool
		// shows what sock_ops left, setpriv runs lowlat as nobody; mtr (and
		// its mtr-packet helper) is probe path's peer; nft reads the MSS
		// clamp's rules back with nftables' own decoder.
		for _, p := range []string{"/usr/sbin/ip", "/usr/sbin/tc", "/usr/bin/prometheus", "/usr/sbin/bpftool", "/usr/bin/setpriv", "/usr/bin/mtr", "/usr/bin/mtr-packet", "/usr/sbin/nft"} {
			if _, err := os.Stat(p); err == nil {
				o.hostBins = append(o.hostBins, p)
			}
		}
	}
	for _, kv := range o.extraEnv {
		if !strings.Contains(kv, "=") {
			return nil, fmt.Errorf("-env %q: want K=V", kv)
		}
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	start := time.Now()

	// Fail before the builds when the VM cannot run at all.
	if _, err := vm.FindQEMU(""); err != nil {
		return err
	}
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	work := o.workDir
	if work == "" {
		if work, err = os.MkdirTemp("", "lowlat-vmtest-"); err != nil {
			return err
		}
		defer os.RemoveAll(work)
	}
	if err := os.MkdirAll(filepath.Join(work, "tests"), 0o755); err != nil {
		return err
	}

	patterns := o.pkgs
	discover := len(patterns) == 0
	if discover {
		patterns = defaultPatterns
	}
	pkgs, err := listPackages(ctx, root, o.tags, patterns)
	if err != nil {
		return err
	}
	if discover {
		pkgs = withIntegrationTests(pkgs)
	}
	if len(pkgs) == 0 {
		fmt.Fprintln(stdout, "vmtest: no packages with tests; nothing to run")
		fmt.Fprintln(stdout, "vmtest: 0 passed, 0 failed")
		return nil
	}

	// Build lowlat and the test binaries.
	lowlat := filepath.Join(work, "lowlat")
	fmt.Fprintln(stdout, "vmtest: building ./cmd/lowlat")
	// The test hooks (kill -9 at a chosen write) are compiled into the lowlat
	// the tests drive; never into a release build.
	if out, err := goCmd(ctx, root, "build", "-tags", "lowlat_testhooks", "-o", lowlat, "./cmd/lowlat"); err != nil {
		return fmt.Errorf("build ./cmd/lowlat: %w\n%s", err, out)
	}
	var runs []*testRun
	buildFailed := false
	for _, p := range pkgs {
		r := &testRun{pkg: p, name: binaryName(p.ImportPath)}
		runs = append(runs, r)
		if len(p.TestGoFiles)+len(p.XTestGoFiles) == 0 {
			r.status = statusNoTests
			continue
		}
		bin := filepath.Join(work, "tests", r.name+".test")
		fmt.Fprintf(stdout, "vmtest: building %s test binary\n", p.ImportPath)
		out, err := goCmd(ctx, root, "test", "-c", "-tags", o.tags, "-o", bin, p.ImportPath)
		if err != nil {
			r.status, r.detail = statusBuildFailed, strings.TrimSpace(string(out))
			buildFailed = true
			fmt.Fprintf(stdout, "vmtest: %s: build failed: %v\n%s\n", p.ImportPath, err, out)
			continue
		}
		if _, err := os.Stat(bin); err != nil {
			r.status = statusNoTests
			continue
		}
		r.bin = bin
	}

	var toRun []*testRun
	for _, r := range runs {
		if r.bin != "" {
			toRun = append(toRun, r)
		}
	}
	var vmErr error
	if len(toRun) > 0 {
		vmErr = runInVM(ctx, o, root, lowlat, toRun, stdout)
	}
	failed := printSummary(stdout, runs, time.Since(start))
	switch {
	case vmErr != nil:
		return vmErr
	case failed || buildFailed:
		return errFailed
	}
	return nil
}

// runInVM boots the VM once and runs every test binary in it.
func runInVM(ctx context.Context, o *options, root, lowlat string, runs []*testRun, stdout io.Writer) error {
	deadline, _ := ctx.Deadline()
	remaining := time.Until(deadline)
	// Leave the guest's own deadline a margin for boot and the /out transfer,
	// so a hung test is reported by the guest rather than cut off.
	guestTimeout := remaining - time.Minute
	if guestTimeout < remaining/2 {
		guestTimeout = remaining / 2
	}

	files := []vm.File{{Path: "/bin/lowlat", Source: lowlat, Mode: 0o755}}
	for _, r := range runs {
		files = append(files, vm.File{Path: "/tests/" + r.name + ".test", Source: r.bin, Mode: 0o755})
		r.guestDir = "/src/" + r.pkg.relDir(root)
		if td := filepath.Join(r.pkg.Dir, "testdata"); isDir(td) {
			files = append(files, vm.File{Path: r.guestDir + "/testdata", Source: td})
		} else {
			files = append(files, vm.File{Path: r.guestDir + "/.keep", Data: nil})
		}
	}
	var hostFiles []string
	for _, p := range []string{"/usr/lib/tc", "/etc/iproute2"} {
		if isDir(p) {
			hostFiles = append(hostFiles, p)
		}
	}

	cfg := vm.Config{
		Files:        files,
		HostBinaries: o.hostBins,
		HostFiles:    hostFiles,
		Modules:      o.extraMods,
		MemoryMB:     o.memory,
		CPUs:         o.cpus,
		Timeout:      remaining,
		Log:          stdout,
		OutDir:       o.outDir,
	}
	if o.workDir != "" {
		cfg.WorkDir = filepath.Join(o.workDir, "vm")
	}
	if o.kernel != "" {
		k, err := vm.LocalKernel(o.kernel, o.modules)
		if err != nil {
			return err
		}
		cfg.Kernel = k
	}
	var console *splitter
	if !o.quiet {
		cfg.Console = stdout
	} else {
		console = &splitter{}
		cfg.Console = console
	}
	env := append([]string{
		"LOWLAT_BIN=/bin/lowlat",
		"LOWLAT_IN_VM=1",
		"LOWLAT_REQUIRE_QDISCS=" + o.require,
		"LOWLAT_VM_OUT=/out",
	}, o.extraEnv...)

	res, err := vm.Run(ctx, cfg, vm.Command{
		Script:  guestScript(runs, o.run, min(o.pkgTimeout, guestTimeout)),
		Env:     env,
		Timeout: guestTimeout,
	})
	if res != nil {
		if res.Kernel != nil {
			fmt.Fprintf(stdout, "vmtest: kernel %s (%s); prepare %s, boot %s, total %s; modules missing from this kernel: %v\n",
				res.Kernel.Release, res.Kernel.Package, res.PrepareDuration.Round(time.Millisecond),
				res.BootDuration.Round(time.Millisecond), res.Duration.Round(time.Millisecond), res.MissingModules)
		}
		applyResults(runs, res.Files["vmtest/results.txt"], res.Output)
		if o.quiet {
			for _, r := range runs {
				if r.status != statusPass {
					fmt.Fprintf(stdout, "--- output of %s\n%s", r.pkg.ImportPath, r.output)
				}
			}
		}
	}
	if err != nil {
		return fmt.Errorf("vm: %w", err)
	}
	return nil
}

// splitter swallows the live console when -q is given; the output is taken
// from the result afterwards.
type splitter struct{ bytes.Buffer }

// moduleRoot returns the directory of the main module.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside a Go module: run vmtest from the lowlat repository")
	}
	return filepath.Dir(gomod), nil
}

// goCmd runs the go tool in dir with CGO disabled: the VM has no C library
// unless a host binary brought one.
func goCmd(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	return cmd.CombinedOutput()
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// scanLines calls f for each line of b.
func scanLines(b []byte, f func(string)) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f(sc.Text())
	}
}
