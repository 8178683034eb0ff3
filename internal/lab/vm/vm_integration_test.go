package vm

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// testKernel returns the kernel the integration tests boot: the one named by
// LOWLAT_VM_KERNEL (and LOWLAT_VM_MODULES), or the cached/fetched Debian one.
func testKernel(t *testing.T, ctx context.Context) *Kernel {
	t.Helper()
	if img := os.Getenv("LOWLAT_VM_KERNEL"); img != "" {
		k, err := LocalKernel(img, os.Getenv("LOWLAT_VM_MODULES"))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k, err := DebianKernel(ctx, FetchOptions{Log: testLogWriter{t}})
	if err != nil {
		t.Fatalf("fetch kernel: %v", err)
	}
	return k
}

// requireVM skips when the VM cannot run here, unless LOWLAT_VM_REQUIRED is
// set (CI sets it), in which case a missing qemu is a failure.
func requireVM(t *testing.T) {
	t.Helper()
	if os.Getenv("LOWLAT_IN_VM") != "" {
		t.Skip("already inside the test VM: no nested VM")
	}
	if _, err := FindQEMU(""); err != nil {
		if os.Getenv("LOWLAT_VM_REQUIRED") != "" {
			t.Fatalf("LOWLAT_VM_REQUIRED is set: %v", err)
		}
		t.Skipf("%v (set LOWLAT_VM_REQUIRED=1 to make this a failure)", err)
	}
}

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func TestIntegrationVMBoots(t *testing.T) {
	requireVM(t)
	for _, p := range []string{"/usr/sbin/ip", "/usr/sbin/tc"} {
		if !fileExists(p) {
			if os.Getenv("LOWLAT_VM_REQUIRED") != "" {
				t.Fatalf("%s missing: apt-get install iproute2", p)
			}
			t.Skipf("%s missing: apt-get install iproute2", p)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	prog := filepath.Join(t.TempDir(), "guestprog")
	build := exec.CommandContext(ctx, goTool(), "build", "-o", prog, "./testdata/guestprog")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build guest program: %v\n%s", err, out)
	}

	var console bytes.Buffer
	outDir := t.TempDir()
	cfg := Config{
		Kernel:       testKernel(t, ctx),
		Files:        []File{{Path: "/bin/guestprog", Source: prog}},
		HostBinaries: []string{"/usr/sbin/ip", "/usr/sbin/tc"},
		Timeout:      6 * time.Minute,
		Console:      &console,
		Log:          testLogWriter{t},
		OutDir:       outDir,
	}
	res, err := Run(ctx, cfg, Command{
		Args: []string{"guestprog", "it's one arg", "two"},
		Env:  []string{"LOWLAT_TEST_VAR=a b'c"},
	})
	t.Logf("console:\n%s", console.String())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	t.Logf("prepare %s, boot %s, total %s, initramfs %d bytes, modules %v, builtin %v, missing %v",
		res.PrepareDuration, res.BootDuration, res.Duration, res.InitrdBytes, res.Modules, res.BuiltinModules, res.MissingModules)
	if res.ExitCode != 7 {
		t.Errorf("ExitCode = %d, want 7", res.ExitCode)
	}
	if !bytes.Contains(res.Output, []byte("guestprog: done")) {
		t.Errorf("Output lacks the program's last line:\n%s", res.Output)
	}
	qd := string(res.Files["qdisc.txt"])
	for _, want := range []string{"qdisc netem", "qdisc fq_codel"} {
		if !strings.Contains(qd, want) {
			t.Errorf("tc qdisc show lacks %q:\n%s", want, qd)
		}
	}
	if mods := string(res.Files["modules.txt"]); !strings.Contains(mods, "sch_netem") || !strings.Contains(mods, "sch_cake") {
		t.Errorf("/proc/modules lacks sch_netem or sch_cake:\n%s", mods)
	}
	wantArgs := "it's one arg\ntwo\nLOWLAT_TEST_VAR=a b'c\n"
	if got := string(res.Files["sub/args.txt"]); got != wantArgs {
		t.Errorf("sub/args.txt = %q, want %q", got, wantArgs)
	}
	if b, err := os.ReadFile(filepath.Join(outDir, "sub", "args.txt")); err != nil || string(b) != wantArgs {
		t.Errorf("OutDir copy of sub/args.txt = %q, %v", b, err)
	}
}

func TestIntegrationVMTimeoutAndSetupErrors(t *testing.T) {
	requireVM(t)
	if testing.Short() {
		t.Skip("boots the VM twice")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	k := testKernel(t, ctx)

	t.Run("guest timeout", func(t *testing.T) {
		res, err := Run(ctx, Config{Kernel: k, NoDefaultModules: true, Timeout: 3 * time.Minute},
			Command{Script: "echo sleeping; sleep 600", Timeout: 2 * time.Second})
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("Run error = %v, want ErrTimeout", err)
		}
		if !res.TimedOut || !bytes.Contains(res.Output, []byte("sleeping")) {
			t.Errorf("TimedOut = %v, Output = %q", res.TimedOut, res.Output)
		}
	})
	t.Run("missing module", func(t *testing.T) {
		_, err := Run(ctx, Config{Kernel: k, NoDefaultModules: true, Modules: []string{"sch_does_not_exist"}},
			Command{Args: []string{"true"}})
		if err == nil || !strings.Contains(err.Error(), "sch_does_not_exist") {
			t.Fatalf("Run error = %v, want one naming the module", err)
		}
	})
	t.Run("extra initrd and script", func(t *testing.T) {
		// A caller's prebuilt (here gzip-compressed) archive is unpacked
		// before the generated one.
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		cw := newCPIOWriter(zw)
		cw.Dir("etc", 0o755)
		cw.File("etc/extra.txt", 0o644, 6, strings.NewReader("extra\n"))
		cw.Close()
		zw.Close()
		extra := filepath.Join(t.TempDir(), "extra.cpio.gz")
		os.WriteFile(extra, buf.Bytes(), 0o644)
		res, err := Run(ctx, Config{Kernel: k, NoDefaultModules: true, Initrd: extra},
			Command{Script: "cat /etc/extra.txt; cp /etc/extra.txt /out/; exit 3"})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 3 || !bytes.Contains(res.Output, []byte("extra")) || string(res.Files["extra.txt"]) != "extra\n" {
			t.Errorf("ExitCode %d, Output %q, Files %v", res.ExitCode, res.Output, res.Files)
		}
	})
	t.Run("kernel panic", func(t *testing.T) {
		res, err := Run(ctx, Config{Kernel: k, NoDefaultModules: true},
			Command{Script: "echo c > /proc/sysrq-trigger; sleep 60"})
		if !errors.Is(err, ErrNoExit) || !strings.Contains(err.Error(), "Kernel panic") {
			t.Fatalf("Run error = %v, want ErrNoExit with the panic in the console tail", err)
		}
		if res.ExitCode != -1 {
			t.Errorf("ExitCode = %d, want -1", res.ExitCode)
		}
	})
	t.Run("host deadline kills qemu", func(t *testing.T) {
		// The host-side deadline ends the run when the guest never reports,
		// and qemu is gone when Run returns.
		work := t.TempDir()
		start := time.Now()
		_, err := Run(ctx, Config{Kernel: k, NoDefaultModules: true, Timeout: 4 * time.Second, WorkDir: work},
			Command{Script: "sleep 600", Timeout: 10 * time.Minute})
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("Run error = %v, want ErrTimeout", err)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("Run took %s after a 4 s deadline", d)
		}
		if pids := processesMentioning(work); len(pids) > 0 {
			t.Errorf("processes still running with %s in their command line: %v", work, pids)
		}
	})
}

// processesMentioning lists the pids whose command line contains s.
func processesMentioning(s string) []string {
	var pids []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(s)) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}
