//go:build linux

package knob_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/autorate"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/testnet"
)

// daemon is a stand-in for an autorate daemon: a process whose command line
// names autorate, with its pid in iface's pid file under root. exited is
// closed once it has been collected.
type daemon struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

func startDaemon(t *testing.T, root, iface string, argv0, mode string) *daemon {
	t.Helper()
	cmd, err := testnet.StartStandIn(argv0, mode)
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: cmd, exited: make(chan struct{})}
	go func() { d.err = cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-d.exited
	})
	pidFile := filepath.Join(root, autorate.PIDPath(iface))
	if err := os.MkdirAll(filepath.Dir(pidFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *daemon) running() bool {
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// exitedNow reports whether the process has exited: collected, or a zombie
// its parent (this test) has yet to collect.
func (d *daemon) exitedNow() bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(d.cmd.Process.Pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist) // collected
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X')
}

const itPolicy = "iface=eth0 min=1000000 base=1800000 max=3000000 reflectors= icmp= passive=on threshold=15ms"

// TestIntegrationAutorateStopsDaemon: removing the policy stops the daemon
// and returns only once it has exited, so a rollback restores the qdisc
// after the daemon is done with it.
func TestIntegrationAutorateStopsDaemon(t *testing.T) {
	ctx := context.Background()
	sys := &knob.System{Root: t.TempDir()}
	k, err := knob.New(sys, "autorate/eth0")
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Write(ctx, itPolicy); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, sys.Root, "eth0", "lowlat-autorate-test", "die")
	if err := k.Write(ctx, knob.Absent); err != nil {
		t.Fatal(err)
	}
	if !d.exitedNow() {
		t.Fatal("Write(Absent) returned while the daemon still runs")
	}
	select {
	case <-d.exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the daemon was not collected")
	}
	var ee *exec.ExitError
	if !errors.As(d.err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Errorf("daemon ended with %v, want SIGTERM", d.err)
	}
	if _, err := os.Stat(filepath.Join(sys.Root, autorate.PolicyPath("eth0"))); !os.IsNotExist(err) {
		t.Errorf("policy file: %v, want it removed", err)
	}
	if v, err := k.Read(ctx); err != nil || v != knob.Absent {
		t.Errorf("Read = %q, %v; want Absent", v, err)
	}
}

// TestIntegrationAutorateStubbornDaemon: a daemon that ignores SIGTERM
// makes the removal fail, naming it; the knob then does not read Absent, so
// a rollback that is run again tries again.
func TestIntegrationAutorateStubbornDaemon(t *testing.T) {
	defer func(old time.Duration) { *knob.AutorateStopTimeout = old }(*knob.AutorateStopTimeout)
	*knob.AutorateStopTimeout = 300 * time.Millisecond
	ctx := context.Background()
	sys := &knob.System{Root: t.TempDir()}
	k, _ := knob.New(sys, "autorate/eth0")
	if err := k.Write(ctx, itPolicy); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, sys.Root, "eth0", "lowlat-autorate-stubborn", "ignore")
	waitIgnoresTERM(t, d.cmd.Process.Pid)
	pid := strconv.Itoa(d.cmd.Process.Pid)
	start := time.Now()
	err := k.Write(ctx, knob.Absent)
	if err == nil || !strings.Contains(err.Error(), "pid "+pid) || !strings.Contains(err.Error(), "eth0") || !strings.Contains(err.Error(), "did not exit") {
		t.Fatalf("Write(Absent) = %v, want an error naming pid %s and eth0", err, pid)
	}
	if el := time.Since(start); el < 300*time.Millisecond || el > 3*time.Second {
		t.Errorf("gave up after %v, want the 300ms timeout", el)
	}
	if !d.running() {
		t.Fatal("the stubborn daemon exited")
	}
	v, err := k.Read(ctx)
	if err != nil || v == knob.Absent || !strings.Contains(v, pid) || knob.Same(k, v, knob.Absent) {
		t.Errorf("Read = %q, %v; want a value naming the daemon still running", v, err)
	}
	// Recorded as a previous value, it is no state lowlat can recreate: an
	// apply over it is refused unless forced, and a rollback then removes
	// the policy (stopping the daemon).
	r := k.(knob.Restorer)
	if err := r.Restorable(v); err == nil || !strings.Contains(err.Error(), "pid "+pid) {
		t.Errorf("Restorable(%q) = %v", v, err)
	}
	if r.Fallback(v) != knob.Absent {
		t.Errorf("Fallback(%q) = %q", v, r.Fallback(v))
	}
}

// TestIntegrationAutorateReusedPID: a pid file whose pid now belongs to a
// process that is no autorate daemon (the daemon was killed, the pid
// reused) gets no signal.
func TestIntegrationAutorateReusedPID(t *testing.T) {
	ctx := context.Background()
	sys := &knob.System{Root: t.TempDir()}
	k, _ := knob.New(sys, "autorate/eth0")
	d := startDaemon(t, sys.Root, "eth0", "sleep", "die")
	if err := k.Write(ctx, knob.Absent); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if !d.running() {
		t.Errorf("a process that is no autorate daemon was stopped: %v", d.err)
	}
}

// waitIgnoresTERM waits until pid has set SIGTERM to be ignored.
func waitIgnoresTERM(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "SigIgn:\t"); ok {
				if m, err := strconv.ParseUint(v, 16, 64); err == nil && m&(1<<(syscall.SIGTERM-1)) != 0 {
					return
				}
			}
		}
	}
	t.Fatal("the stubborn daemon never ignored SIGTERM")
}
