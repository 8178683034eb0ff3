package lab

import (
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/lowlat/lowlat/internal/lab/vm"
)

// VMOptions tune RunInVM.
type VMOptions struct {
	// Exe is the lowlat binary to put into the guest; os.Executable() when
	// empty. A dynamically linked one is copied with its libraries.
	Exe string
	// Kernel and Modules name the user's own kernel image (bzImage) and its
	// /lib/modules/<release> tree; empty fetches a stock Debian kernel
	// (linux-image-6.1.0-*-amd64) with apt once and reuses it.
	Kernel, Modules string
	// Initrd is an extra initramfs unpacked first (firmware, modules of the
	// user's kernel).
	Initrd   string
	Variants []string
	Scale    float64
	// Timeout bounds the whole run (fetch, boot, scenario); 20 minutes when 0.
	Timeout time.Duration
	// Console receives the guest console live; Log the harness's own lines.
	Console, Log io.Writer
	// WorkDir keeps the initramfs there (removed with the run's state).
	WorkDir string
	// CakeAutorate is a cake-autorate checkout, copied into the guest at
	// the same path with bash, fping and tc (Options.CakeAutorate).
	CakeAutorate string
}

// guestCakeAutorate is where a cake-autorate checkout goes in the guest.
const guestCakeAutorate = "/opt/cake-autorate"

// ErrVMNoResult: the guest ran but wrote no result file.
var ErrVMNoResult = errors.New("the scenario in the VM wrote no result")

// guestScript runs the scenario in the guest. The guest is a throwaway
// machine standing in for a stock host, so its initial namespace lets the
// lab's namespaces choose cubic and BBR, as an admin's host would use them
// directly.
func guestScript(exe, name string, o VMOptions) string {
	var b strings.Builder
	b.WriteString("allowed=/proc/sys/net/ipv4/tcp_allowed_congestion_control\n")
	b.WriteString(`avail=$(cat /proc/sys/net/ipv4/tcp_available_congestion_control)` + "\n")
	b.WriteString(`echo "$avail" > $allowed || echo "lab vm: could not allow $avail in namespaces" >&2` + "\n")
	args := []string{exe, "lab", "run", name, "-o", "/out/result.json"}
	for _, v := range o.Variants {
		args = append(args, "--variant", v)
	}
	if o.Scale > 0 && o.Scale != 1 {
		args = append(args, "--scale", fmt.Sprint(o.Scale))
	}
	if o.CakeAutorate != "" {
		args = append(args, "--cake-autorate", o.CakeAutorate)
	}
	b.WriteString("exec")
	for _, a := range args {
		b.WriteString(" '" + strings.ReplaceAll(a, "'", `'\''`) + "'")
	}
	b.WriteString("\n")
	return b.String()
}

// isStatic reports whether the ELF file has no program interpreter.
func isStatic(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

// RunInVM runs a scenario inside a stock Debian kernel under qemu (TCG): it
// builds an initramfs holding lowlat, boots it, runs "lowlat lab run NAME"
// there and returns the result the guest wrote to /out. The guest's exit
// status does not matter: a scenario whose expectations missed still returns
// its result.
func RunInVM(ctx context.Context, name string, o VMOptions) (*Result, *vm.Result, error) {
	sc, err := Lookup(name)
	if err != nil {
		return nil, nil, fmt.Errorf("lab vm: %w", err)
	}
	if _, err := vm.FindQEMU(""); err != nil {
		return nil, nil, fmt.Errorf("lab vm: %w", err)
	}
	exe := o.Exe
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return nil, nil, fmt.Errorf("lab vm: %w", err)
		}
	}
	static, err := isStatic(exe)
	if err != nil {
		return nil, nil, fmt.Errorf("lab vm: lowlat binary %s: %w", exe, err)
	}
	work, untrack := trackVM(ctx, name)
	defer untrack()
	if o.WorkDir == "" {
		o.WorkDir = work
	}
	cfg := vm.Config{
		Initrd:  o.Initrd,
		Timeout: o.Timeout,
		Console: o.Console,
		Log:     o.Log,
		WorkDir: o.WorkDir,
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 20 * time.Minute
	}
	const guestExe = "/bin/lowlat"
	cfg.Files = []vm.File{{Path: guestExe, Source: exe, Mode: 0o755}}
	if !static {
		// A cgo build: HostBinaries brings its interpreter and libraries
		// (and a copy at its host path, which /tmp's tmpfs may hide).
		cfg.HostBinaries = []string{exe}
	}
	if name == "path-hops" {
		// The scenario runs Debian's mtr beside lowlat (and mtr runs its
		// mtr-packet helper).
		for _, b := range []string{"mtr", "mtr-packet"} {
			p, err := exec.LookPath(b)
			if err != nil {
				return nil, nil, fmt.Errorf("lab vm: path-hops runs mtr beside lowlat: %s not found (apt-get install mtr-tiny)", b)
			}
			cfg.HostBinaries = append(cfg.HostBinaries, p)
		}
	}
	if o.CakeAutorate != "" {
		abs, err := filepath.Abs(o.CakeAutorate)
		if err != nil {
			return nil, nil, fmt.Errorf("lab vm: --cake-autorate: %w", err)
		}
		bins, err := checkPeer(&AutorateRun{Peer: PeerCakeAutorate}, abs)
		if err != nil {
			return nil, nil, fmt.Errorf("lab vm: %w", err)
		}
		cfg.HostBinaries = append(cfg.HostBinaries, bins...)
		// fping looks up "icmp" there, and without it exits at once, silently
		// under cake-autorate.
		cfg.HostFiles = append(cfg.HostFiles, "/etc/protocols")
		// Not at its host path: the guest's /tmp is a tmpfs of its own.
		cfg.Files = append(cfg.Files, vm.File{Path: guestCakeAutorate, Source: abs})
		o.CakeAutorate = guestCakeAutorate
	}
	if _, err := exec.LookPath("busybox"); err != nil {
		if _, err := os.Stat("/bin/busybox"); err != nil {
			return nil, nil, errors.New("lab vm: busybox not found (the guest's shell): apt-get install busybox-static")
		}
	}
	if o.Kernel != "" {
		k, err := vm.LocalKernel(o.Kernel, o.Modules)
		if err != nil {
			return nil, nil, fmt.Errorf("lab vm: --kernel: %w", err)
		}
		cfg.Kernel = k
		if o.Modules == "" {
			// A kernel without a modules tree must have everything built in.
			cfg.NoDefaultModules = true
		}
	} else {
		k, err := vm.DebianKernel(ctx, vm.FetchOptions{Log: o.Log})
		if err != nil {
			return nil, nil, fmt.Errorf("lab vm: no stock kernel: the lab boots Debian's linux-image-6.1.0-<N>-amd64 package, fetched once with apt-get download (apt must know Debian bookworm's main archive), or your own with --kernel (%v)", err)
		}
		cfg.Kernel = k
	}
	budget := time.Duration(float64(sc.Estimate) * 4)
	res, err := vm.Run(ctx, cfg, vm.Command{
		Script:  guestScript(guestExe, name, o),
		Env:     []string{"LOWLAT_LAB_ENV=qemu-tcg"},
		Timeout: min(cfg.Timeout-time.Minute, max(budget, 5*time.Minute)),
	})
	if err != nil {
		return nil, res, fmt.Errorf("lab vm: %w", err)
	}
	b, ok := res.Files["result.json"]
	if !ok {
		tail := string(res.Output)
		if i := len(tail) - 1500; i > 0 {
			tail = tail[i:]
		}
		return nil, res, fmt.Errorf("lab vm: %w (guest exit status %d); its output ends:\n%s", ErrVMNoResult, res.ExitCode, strings.TrimSpace(tail))
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, res, fmt.Errorf("lab vm: guest result: %w", err)
	}
	r.Environment = "qemu-tcg"
	note := fmt.Sprintf("ran in qemu (TCG, no KVM) on kernel %s", r.Kernel.Version)
	if res.Kernel != nil && res.Kernel.Package != "" {
		note += " from " + strings.Fields(res.Kernel.Package)[0]
	}
	note += fmt.Sprintf(" (boot %.1f s, whole VM %.0f s): emulated CPUs are several times slower, so CPU-bound figures and sub-millisecond timings carry emulation overhead; delays of milliseconds and more measure true", res.BootDuration.Seconds(), res.Duration.Seconds())
	r.Notes = append(r.Notes, note)
	if o.Scale > 0 && o.Scale != 1 {
		r.Notes = append(r.Notes, fmt.Sprintf("measurement durations scaled by %g for the VM", o.Scale))
	}
	return &r, res, nil
}
