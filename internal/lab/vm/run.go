package vm

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
)

// Config describes the VM: kernel, modules, what goes into the initramfs, and
// the limits.
type Config struct {
	// Kernel to boot. Nil fetches (once, then reuses) a stock Debian kernel
	// with DebianKernel into CacheDir.
	Kernel *Kernel
	// CacheDir for DebianKernel; DefaultCacheDir() when empty.
	CacheDir string
	// Initrd is an optional prebuilt initramfs (cpio, compressed or not) loaded
	// before the generated one; the generated /init wins. Use it for firmware
	// or modules of one's own kernel that are not in Kernel.ModulesDir.
	Initrd string

	// Modules are loaded in addition to DefaultModules (unless
	// NoDefaultModules); a module the kernel lacks is an error.
	Modules []string
	// OptionalModules are loaded in addition to DefaultOptionalModules when
	// the kernel has them.
	OptionalModules  []string
	NoDefaultModules bool

	// Files are put into the guest: programs such as /bin/lowlat and test
	// binaries, fixtures.
	Files []File
	// HostBinaries are host programs copied to the same guest path with their
	// ELF interpreter and shared libraries, e.g. "/usr/sbin/ip",
	// "/usr/sbin/tc". They replace busybox's applets of the same name.
	HostBinaries []string
	// HostFiles are host files or directory trees copied to the same guest
	// path, e.g. "/usr/lib/tc" (netem's delay distributions).
	HostFiles []string
	// Busybox is the host busybox binary (busybox-static); found on PATH or
	// at /bin/busybox when empty.
	Busybox string

	// MemoryMB is the guest RAM; 1024 when 0. The initramfs lives in it.
	MemoryMB int
	// CPUs is the number of guest CPUs; 2 when 0.
	CPUs int
	// Timeout bounds the whole run including the kernel fetch and the boot;
	// 10 minutes when 0. The guest command gets its own, shorter deadline
	// (Command.Timeout) so a hung test still reports.
	Timeout time.Duration
	// KernelArgs are appended to the kernel command line.
	KernelArgs []string
	// Hostname of the guest; "lowlat-vm" when empty.
	Hostname string
	// Compression of the generated initramfs. The default, none, boots
	// fastest: qemu copies the archive into guest memory and the kernel
	// unpacks it without inflating under emulation.
	Compression Compression
	// QEMU is the qemu-system-x86_64 binary; looked up on PATH when empty.
	QEMU string
	// NoPVH boots the bzImage itself instead of the vmlinux extracted from it
	// (which qemu enters through the PVH entry point, about 3 s faster under
	// TCG than the kernel's own decompressor).
	NoPVH bool

	// Console receives the guest console as it arrives (kernel messages and
	// the command's output, without the /out transfers); nil discards.
	Console io.Writer
	// Log receives the harness's own progress lines; nil discards.
	Log io.Writer
	// OutDir, when set, receives the files the command wrote under /out.
	OutDir string
	// WorkDir, when set, keeps the generated initramfs there; otherwise it goes
	// to a temporary directory removed after the run.
	WorkDir string
}

// Compression is how the generated initramfs is compressed.
type Compression string

const (
	CompressNone Compression = "none"
	CompressGzip Compression = "gzip"
)

// File is one file (or directory tree) put into the guest.
type File struct {
	// Path is the absolute guest path.
	Path string
	// Source is a host file or directory (copied recursively). When empty,
	// Data is the file's contents.
	Source string
	Data   []byte
	// Mode sets the permissions; 0 keeps Source's, or 0644 for Data.
	Mode fs.FileMode
}

// Command is what the guest runs once it has booted.
type Command struct {
	// Args is the program and its arguments. A program name without a slash
	// is looked up on the guest PATH; a real program is called by its full
	// path so that busybox does not run its own applet of that name.
	Args []string
	// Script, when Args is empty, is a busybox sh script to run instead.
	// Inside it, call iproute2 as /usr/sbin/ip and /usr/sbin/tc: busybox sh
	// prefers its own applets to PATH for bare names.
	Script string
	// Env is the command's environment ("K=V") on top of PATH, HOME=/root,
	// TMPDIR=/tmp and LOWLAT_IN_VM=1; the host's environment is not passed.
	Env []string
	// Dir is the working directory; "/" when empty.
	Dir string
	// Timeout bounds the command in the guest; when 0 it is Config.Timeout
	// less two minutes for fetch and boot (at least half of Config.Timeout).
	Timeout time.Duration
}

// Result is what a run produced. Run returns it, as far as it got, with an
// error too.
type Result struct {
	// ExitCode is the command's exit status (128+n when killed by signal n).
	ExitCode int
	// Output is the command's stdout and stderr as they appeared on the
	// console, kernel messages printed meanwhile included.
	Output []byte
	// Console is everything the console showed except the /out transfers.
	Console []byte
	// Files maps paths relative to /out to their contents.
	Files map[string][]byte
	// Duration is from starting qemu to its exit; BootDuration from starting
	// qemu to the command's start; PrepareDuration is the kernel lookup (or
	// download) plus the initramfs build.
	Duration, BootDuration, PrepareDuration time.Duration
	// Kernel is the kernel that ran.
	Kernel *Kernel
	// Modules lists the modules loaded, in order; BuiltinModules the
	// requested ones the kernel has built in; MissingModules the optional
	// ones it lacks.
	Modules, BuiltinModules, MissingModules []string
	// InitrdBytes is the size of the generated initramfs.
	InitrdBytes int64
	// TimedOut reports that the guest-side timeout killed the command.
	TimedOut bool
}

// Errors Run wraps.
var (
	ErrQEMUNotFound = errors.New("qemu-system-x86_64 not found: apt-get install qemu-system-x86")
	// ErrTimeout: the command or the whole run exceeded its deadline.
	ErrTimeout = errors.New("timed out")
	// ErrNoExit: the guest stopped (kernel panic, init failure, killed qemu)
	// without reporting the command's exit code.
	ErrNoExit = errors.New("guest stopped without reporting an exit code")
)

func (c *Config) withDefaults() Config {
	d := *c
	if d.MemoryMB == 0 {
		d.MemoryMB = 1024
	}
	if d.CPUs == 0 {
		d.CPUs = 2
	}
	if d.Timeout == 0 {
		d.Timeout = 10 * time.Minute
	}
	if d.Hostname == "" {
		d.Hostname = "lowlat-vm"
	}
	if d.Compression == "" {
		d.Compression = CompressNone
	}
	if d.Log == nil {
		d.Log = io.Discard
	}
	return d
}

func commandTimeout(cfg Config, cmd Command) time.Duration {
	if cmd.Timeout > 0 {
		return cmd.Timeout
	}
	t := cfg.Timeout - 2*time.Minute
	if t < cfg.Timeout/2 {
		t = cfg.Timeout / 2
	}
	return t
}

// FindQEMU returns the path of qemu-system-x86_64 (or of name when set), or
// an error wrapping ErrQEMUNotFound.
func FindQEMU(name string) (string, error) {
	if name == "" {
		name = "qemu-system-x86_64"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%w (%v)", ErrQEMUNotFound, err)
	}
	return p, nil
}

// Run boots the VM described by cfg, runs cmd in it and returns its result.
// A command that exits non-zero is not an error: read Result.ExitCode. Run
// kills qemu on every path out (deadline, ctx cancellation, error), so
// nothing is left running.
func Run(ctx context.Context, cfg Config, cmd Command) (*Result, error) {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	res := &Result{Files: map[string][]byte{}}

	qemu, err := FindQEMU(cfg.QEMU)
	if err != nil {
		return res, err
	}
	prepStart := time.Now()
	k := cfg.Kernel
	if k == nil {
		k, err = DebianKernel(ctx, FetchOptions{CacheDir: cfg.CacheDir, Log: cfg.Log})
		if err != nil {
			return res, timeoutErr(ctx, err)
		}
	}
	res.Kernel = k

	workDir := cfg.WorkDir
	if workDir == "" {
		workDir, err = os.MkdirTemp("", "lowlat-vm-")
		if err != nil {
			return res, fmt.Errorf("vm: %w", err)
		}
		defer os.RemoveAll(workDir)
	} else if err := os.MkdirAll(workDir, 0o755); err != nil {
		return res, fmt.Errorf("vm: %w", err)
	}

	nonce, err := newNonce()
	if err != nil {
		return res, err
	}
	initrd := filepath.Join(workDir, "initramfs.cpio")
	if cfg.Compression == CompressGzip {
		initrd += ".gz"
	}
	if err := buildInitramfs(cfg, cmd, k, nonce, initrd, res); err != nil {
		return res, err
	}
	if cfg.Initrd != "" {
		// The kernel unpacks concatenated archives in order; later files win.
		combined := filepath.Join(workDir, "initramfs-combined")
		if err := concatFiles(combined, cfg.Initrd, initrd); err != nil {
			return res, fmt.Errorf("vm: initrd: %w", err)
		}
		initrd = combined
	}
	bootImage := k.Image
	if !cfg.NoPVH {
		cache := cfg.CacheDir
		if cache == "" {
			cache = DefaultCacheDir()
		}
		if p := pvhKernel(k, cache, cfg.Log); p != "" {
			bootImage = p
		}
	}
	res.PrepareDuration = time.Since(prepStart)
	fmt.Fprintf(cfg.Log, "vm: kernel %s, initramfs %.1f MiB, %d modules, prepared in %s\n",
		k.Release, float64(res.InitrdBytes)/(1<<20), len(res.Modules), res.PrepareDuration.Round(time.Millisecond))

	// tsc=reliable keeps the TSC clocksource, which TCG's vCPUs share, so
	// clock reads stay in the vDSO (8x cheaper than the HPET the kernel
	// otherwise falls back to). mitigations=off spares emulated cycles.
	appendLine := []string{"console=ttyS0", "quiet", "panic=-1", "rdinit=/init", "mitigations=off", "tsc=reliable"}
	appendLine = append(appendLine, cfg.KernelArgs...)
	args := []string{
		"-accel", "tcg",
		"-m", strconv.Itoa(cfg.MemoryMB),
		"-smp", strconv.Itoa(cfg.CPUs),
		"-kernel", bootImage,
		"-initrd", initrd,
		"-append", strings.Join(appendLine, " "),
		"-nographic", "-nodefaults", "-serial", "stdio", "-monitor", "none",
		"-no-reboot", "-nic", "none",
	}
	return res, runQEMU(ctx, cfg, qemu, args, nonce, res)
}

func timeoutErr(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("vm: %w: %w", ErrTimeout, err)
	}
	return err
}

func newNonce() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("vm: nonce: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func concatFiles(dst string, srcs ...string) error {
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	for _, s := range srcs {
		in, err := os.Open(s)
		if err != nil {
			out.Close()
			return err
		}
		_, err = io.Copy(out, in)
		in.Close()
		if err != nil {
			out.Close()
			return err
		}
		// Each archive starts 4-byte aligned.
		if off, _ := out.Seek(0, io.SeekCurrent); off%4 != 0 {
			out.Write(make([]byte, 4-off%4))
		}
	}
	return out.Close()
}

func findBusybox(name string) (string, error) {
	if name != "" {
		return name, nil
	}
	if p, err := exec.LookPath("busybox"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("busybox not found: apt-get install busybox-static")
}

// buildInitramfs writes the guest's initramfs to dst and records what it
// holds in res.
func buildInitramfs(cfg Config, cmd Command, k *Kernel, nonce, dst string, res *Result) error {
	ir := newInitramfs()
	libs := newLibResolver("/")

	// Modules.
	required, optional := cfg.Modules, cfg.OptionalModules
	if !cfg.NoDefaultModules {
		required = append(append([]string(nil), DefaultModules...), required...)
		optional = append(append([]string(nil), DefaultOptionalModules...), optional...)
	}
	var modPaths []string
	if len(required)+len(optional) > 0 {
		if k.ModulesDir == "" {
			return fmt.Errorf("vm: kernel %s has no modules directory but modules were asked for", k.Image)
		}
		tree, err := openModuleTree(k.ModulesDir)
		if err != nil {
			return fmt.Errorf("vm: %w", err)
		}
		mr, err := resolveModules(tree, required, optional)
		if err != nil {
			return fmt.Errorf("vm: kernel %s: %w", k.Release, err)
		}
		res.Modules, res.BuiltinModules, res.MissingModules = mr.load, mr.builtin, mr.missingOptional
		base := "/lib/modules/" + k.Release + "/"
		for _, name := range mr.load {
			rel := tree.paths[name]
			data, err := readModule(filepath.Join(k.ModulesDir, rel))
			if err != nil {
				return fmt.Errorf("vm: %w", err)
			}
			gp := base + guestModulePath(rel)
			if err := ir.data(gp, data, 0o644); err != nil {
				return fmt.Errorf("vm: %w", err)
			}
			modPaths = append(modPaths, gp)
		}
		dep, alias, err := modulesDep(tree, mr.load)
		if err != nil {
			return fmt.Errorf("vm: %w", err)
		}
		ir.data(base+"modules.dep", dep, 0o644)
		ir.data(base+"modules.alias", alias, 0o644)
		for _, f := range []string{"modules.builtin", "modules.builtin.modinfo", "modules.order"} {
			if _, err := os.Stat(filepath.Join(k.ModulesDir, f)); err == nil {
				ir.hostFile(base+f, filepath.Join(k.ModulesDir, f), 0o644)
			}
		}
	}

	// Host programs and files, then the caller's files, which win.
	for _, hb := range cfg.HostBinaries {
		if !path.IsAbs(hb) {
			p, err := exec.LookPath(hb)
			if err != nil {
				return fmt.Errorf("vm: host binary %s: %w", hb, err)
			}
			hb = p
		}
		if err := ir.hostBinary(hb, libs); err != nil {
			return fmt.Errorf("vm: %w", err)
		}
	}
	for _, hf := range cfg.HostFiles {
		if err := ir.hostTree(hf, hf); err != nil {
			return fmt.Errorf("vm: host file: %w", err)
		}
	}
	for _, f := range cfg.Files {
		var err error
		switch {
		case f.Source != "":
			st, serr := os.Stat(f.Source)
			if serr != nil {
				return fmt.Errorf("vm: file %s: %w", f.Path, serr)
			}
			if st.IsDir() {
				err = ir.hostTree(f.Path, f.Source)
			} else {
				err = ir.hostFile(f.Path, f.Source, f.Mode)
			}
		default:
			mode := f.Mode
			if mode == 0 {
				mode = 0o644
			}
			err = ir.data(f.Path, f.Data, mode)
		}
		if err != nil {
			return fmt.Errorf("vm: file %s: %w", f.Path, err)
		}
	}

	bb, err := findBusybox(cfg.Busybox)
	if err != nil {
		return fmt.Errorf("vm: %w", err)
	}
	applets, err := busyboxApplets(bb)
	if err != nil {
		return fmt.Errorf("vm: %w", err)
	}
	if err := ir.busybox(bb, applets, libs); err != nil {
		return fmt.Errorf("vm: %w", err)
	}

	// The command.
	args := cmd.Args
	if len(args) == 0 {
		if cmd.Script == "" {
			return errors.New("vm: command has neither Args nor Script")
		}
		ir.data("/etc/lowlat/command.sh", []byte(cmd.Script), 0o755)
		args = []string{"/bin/sh", "/etc/lowlat/command.sh"}
	}
	args = append([]string(nil), args...)
	if !strings.Contains(args[0], "/") {
		if p := ir.lookPath(args[0]); p != "" {
			args[0] = p
		}
	}
	env := mergeEnv([]string{"PATH=" + guestPATH, "HOME=/root", "TMPDIR=/tmp", "LOWLAT_IN_VM=1"}, cmd.Env)
	dir := cmd.Dir
	if dir == "" {
		dir = "/"
	}
	script, err := initScript(initParams{
		nonce: nonce, hostname: cfg.Hostname, release: k.Release, modules: modPaths,
		dir: dir, env: env, args: args, timeout: commandTimeout(cfg, cmd),
	})
	if err != nil {
		return err
	}
	ir.entries["init"] = &irEntry{mode: 0o755, data: []byte(script)}
	ir.data("/etc/hostname", []byte(cfg.Hostname+"\n"), 0o644)
	ir.data("/etc/passwd", []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"), 0o644)
	ir.data("/etc/group", []byte("root:x:0:\nnogroup:x:65534:\n"), 0o644)
	ir.data("/etc/hosts", []byte("127.0.0.1\tlocalhost "+cfg.Hostname+"\n::1\tlocalhost ip6-localhost\n"), 0o644)

	f, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("vm: initramfs: %w", err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	var w io.Writer = bw
	var zw *gzip.Writer
	if cfg.Compression == CompressGzip {
		zw, _ = gzip.NewWriterLevel(bw, gzip.BestSpeed)
		w = zw
	} else if cfg.Compression != CompressNone {
		f.Close()
		return fmt.Errorf("vm: unknown initramfs compression %q", cfg.Compression)
	}
	err = ir.writeTo(w)
	if err == nil && zw != nil {
		err = zw.Close()
	}
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("vm: initramfs: %w", err)
	}
	if st, err := os.Stat(dst); err == nil {
		res.InitrdBytes = st.Size()
	}
	return nil
}

// mergeEnv returns base with over's entries replacing same-named ones.
func mergeEnv(base, over []string) []string {
	idx := map[string]int{}
	var out []string
	for _, kv := range append(append([]string(nil), base...), over...) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// runQEMU starts qemu, follows the console and makes sure qemu is gone when
// it returns.
func runQEMU(ctx context.Context, cfg Config, qemu string, args []string, nonce string, res *Result) error {
	cmd := exec.Command(qemu, args...)
	setProcessGroup(cmd)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("vm: %w", err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &limitedBuffer{buf: &stderr, max: 64 << 10}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("vm: %w", ErrQEMUNotFound)
		}
		return fmt.Errorf("vm: start %s: %w", qemu, err)
	}
	// From here on qemu must not outlive this function.
	defer killGroup(cmd)

	con := newConsole(nonce, cfg.Console, start)
	readerDone := make(chan struct{})
	go func() {
		con.run(stdout)
		close(readerDone)
	}()

	var ctxErr error
	select {
	case <-readerDone:
	case <-con.doneEvent:
		// The guest powers off by itself; give it a moment, then stop
		// waiting: there is nothing left in a RAM-only VM to lose.
		select {
		case <-readerDone:
		case <-time.After(5 * time.Second):
		case <-ctx.Done():
		}
	case <-ctx.Done():
		ctxErr = ctx.Err()
	}
	killGroup(cmd)
	<-readerDone
	waitErr := cmd.Wait()
	res.Duration = time.Since(start)

	res.Console = con.all.Bytes()
	res.Output = con.output.Bytes()
	res.Files = con.files
	res.TimedOut = con.timedOut
	if con.started {
		res.BootDuration = con.bootTime
	}
	if con.exited {
		res.ExitCode = con.exitCode
	} else {
		res.ExitCode = -1
	}
	if cfg.OutDir != "" && len(con.files) > 0 {
		if err := writeOutFiles(cfg.OutDir, con.files); err != nil {
			return err
		}
	}

	switch {
	case con.guestErr != "":
		return fmt.Errorf("vm: guest setup failed: %s; console tail:\n%s", con.guestErr, con.tail(20))
	case con.timedOut:
		return fmt.Errorf("vm: command: %w after %s (guest-side limit); console tail:\n%s", ErrTimeout, res.Duration.Round(time.Second), con.tail(20))
	case !con.exited && ctxErr != nil:
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			return fmt.Errorf("vm: %w after %s, before the command reported (booted: %v); console tail:\n%s", ErrTimeout, res.Duration.Round(time.Second), con.started, con.tail(20))
		}
		return fmt.Errorf("vm: %w", ctxErr)
	case !con.exited:
		why := "kernel panic, init failure or qemu error"
		if p := con.panicLine(); p != "" {
			why = p
		}
		return fmt.Errorf("vm: %w (%s; booted: %v, qemu: %v %s); console tail:\n%s",
			ErrNoExit, why, con.started, waitErr, strings.TrimSpace(stderr.String()), con.tail(30))
	case len(con.fileErrs) > 0:
		return fmt.Errorf("vm: /out transfer: %s", strings.Join(con.fileErrs, "; "))
	case !con.done:
		return fmt.Errorf("vm: guest stopped during the /out transfer (%d files received)", len(con.files))
	}
	return nil
}

// writeOutFiles writes the transferred /out files under dir.
func writeOutFiles(dir string, files map[string][]byte) error {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := filepath.Join(dir, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("vm: out dir: %w", err)
		}
		if err := os.WriteFile(p, files[n], 0o644); err != nil {
			return fmt.Errorf("vm: out dir: %w", err)
		}
	}
	return nil
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		if len(p) > room {
			l.buf.Write(p[:room])
		} else {
			l.buf.Write(p)
		}
	}
	return len(p), nil
}
