//go:build linux

package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/cgroup"
	"github.com/lowlat/lowlat/internal/testnet"
)

// TestBreakWatchdogDiesWithItsCgroup: the dead-man watchdog of apply
// --confirm (and of apply --prove --hold, the canary's held change) is a
// setsid child of the apply, in the apply's own cgroup. A service manager
// ends that cgroup with the session or service that ran the apply:
// systemd kills every process of a login session's scope when the session
// closes (logind KillUserProcesses=yes, upstream's default; Ansible's
// SSH session, which the canary playbook closes on purpose right after
// the tuning with meta: reset_connection), and every remaining process of
// a service's cgroup when the service stops (KillMode=control-group, the
// default: ansible-pull or any oneshot unit that runs lowlat apply). setsid
// leaves the cgroup unchanged. The watchdog is then gone, nothing rolls
// the change back at its deadline, and it stays in force until some root
// lowlat command happens to settle the journal: the host the dead-man
// switch was for (cut off, nobody logs in) keeps the change indefinitely.
//
// This test plays what systemd does at the end of the session or unit:
// the apply runs in a cgroup of its own (cgroup v2), and once it has
// returned, cgroup.kill ends what is left there. 15 s after a 3 s
// deadline the change is still in force and the transaction still awaits
// confirmation. (The VM has no systemd; on a systemd host the same is
// `systemd-run --wait --unit=t lowlat apply --yes --confirm 60s --profile
// live-edge`, then `lowlat status` after 60 s: "awaiting confirm" past its
// deadline, the change in force.) A watchdog started in a unit of its own
// (systemd-run --unit lowlat-watchdog-TXN, or a transient scope), as
// lowlat-boot.service is, would outlive both.
func TestBreakWatchdogDiesWithItsCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a namespace and a cgroup")
	}
	hs, err := cgroup.FS{}.Hierarchies()
	if err != nil || hs[0].Version != 2 {
		t.Skipf("no cgroup v2 hierarchy here (%v)", err)
	}
	root := hs[0].Dir
	w := newWorld(t)
	before := w.snapshot()
	cg := filepath.Join(root, fmt.Sprintf("lowlat-break2-%d", os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.WriteFile(filepath.Join(cg, "cgroup.kill"), []byte("1"), 0)
		waitFor(5*time.Second, func() bool { return os.Remove(cg) == nil })
	})
	fd, err := syscall.Open(cg, syscall.O_DIRECTORY|syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)

	bin, _ := lowlatBin()
	cmd := w.ns.Command(bin, append([]string{"apply", "--yes", "--confirm", "3s"}, profileArgs("live-edge")...)...)
	cmd.Env = append(cmd.Env, "LOWLAT_JOURNAL="+w.journal)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	if w.snapshot() == before {
		t.Fatal("apply changed nothing")
	}
	// The watchdog runs (outside the apply's cgroup, with the fix; in it,
	// without).
	wd := journalState(t, w.journal).Txns[0].Meta.WatchdogPID
	if wd <= 0 || syscall.Kill(wd, 0) != nil {
		t.Fatalf("the apply's watchdog (pid %d) does not run: the test shows nothing", wd)
	}
	procs, _ := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
	wdCgroup, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", wd))
	// The session (or unit) ends: systemd kills what is left in its cgroup.
	if err := os.WriteFile(filepath.Join(cg, "cgroup.kill"), []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	if !waitFor(15*time.Second, func() bool { return w.snapshot() == before }) {
		tx := journalState(t, w.journal).Txns[0]
		diff := strings.Count(testnet.DiffLines(before, w.snapshot()), "\n+ ")
		t.Errorf("15 s after a 3 s deadline, its watchdog (pid %d, cgroup %q) killed with the apply's cgroup (pids %q): still in force (%d settings changed), awaiting confirmation %v",
			wd, strings.TrimSpace(string(wdCgroup)), strings.Fields(string(procs)), diff, tx.PendingConfirm())
	}
	w.run(nil, "rollback") // the test's own cleanup
}
