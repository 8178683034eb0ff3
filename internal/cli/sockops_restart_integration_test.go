//go:build linux

package cli_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/lowlat/lowlat/internal/testnet"
)

// recreateCgroup does to the cgroup at dir what systemctl restart does to
// a service's: its processes leave it, it is removed, and a new one is
// made at the same path, without the old one's programs. The processes
// (the test's client) are put back in the new one, as a restarted
// service's new processes are.
func recreateCgroup(t *testing.T, root, dir string, pids ...int) {
	t.Helper()
	move := func(to string) {
		for _, pid := range pids {
			if err := os.WriteFile(filepath.Join(to, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
				t.Fatalf("move %d to %s: %v", pid, to, err)
			}
		}
	}
	move(root)
	if err := os.Remove(dir); err != nil {
		t.Fatalf("remove cgroup %s: %v", dir, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	move(dir)
}

// pinnedProgs lists the programs pinned (the legacy attachment's pins)
// or linked through pins under this namespace's pin directory.
func (w *sockopsWorld) pinnedProgs() []int {
	w.t.Helper()
	out, err := exec.Command("bpftool", "-j", "-f", "prog", "show").Output()
	if err != nil {
		w.t.Fatalf("bpftool prog show: %v", err)
	}
	var progs []struct {
		ID     int      `json:"id"`
		Pinned []string `json:"pinned"`
	}
	if err := json.Unmarshal(out, &progs); err != nil {
		w.t.Fatalf("bpftool prog show: %v", err)
	}
	ids := w.attached()
	for _, p := range progs {
		for _, f := range p.Pinned {
			if strings.HasPrefix(f, w.pins+"/") && !slices.Contains(ids, p.ID) {
				ids = append(ids, p.ID)
			}
		}
	}
	return ids
}

// TestIntegrationSocketsFixServiceRestart: a service's cgroup re-created
// (systemctl restart) loses the sock_ops program the kernel had attached
// to the old one, while the pins stay. The fix is gone on a new
// connection; status says so (exit 3, in words); lowlat sockets no longer
// claims the option is lowlat's; reassert attaches the pinned program to
// the new cgroup, and the fix is back. With bpf_link, and with the legacy
// attachment of kernels before 5.7.
func TestIntegrationSocketsFixServiceRestart(t *testing.T) {
	for _, c := range []struct {
		name string
		env  []string
	}{
		{"bpf_link", nil},
		{"legacy attachment", []string{"LOWLAT_TEST_NO_CGROUP_LINK=1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newSockopsWorld(t)
			run := func(args ...string) result { return w.run(c.env, args...) }
			const port = 7100
			testnet.EchoServer(t, w.ns, port)
			cg := testCgroup(t)
			service := strings.TrimPrefix(cg, "/")
			root := strings.TrimSuffix(cgroupRootOf(t), "/")
			client := testnet.NagleClient(t, w.ns, port, "/sys/fs/cgroup"+cg)
			knobID := "sockopt/service:" + service + "/nodelay"

			if r := run("sockets", "--fix", "nodelay", "--service", service, "--yes"); r.code != 0 {
				t.Fatalf("sockets --fix: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			progs := bpftoolCgroup(t, root+cg)
			if len(progs) != 1 {
				t.Fatalf("programs at %s: %v, want lowlat's", root+cg, progs)
			}
			fixed := client.Measure("new", 30)
			t.Logf("after --fix, new connection: %s", quantiles(fixed))
			if n := testnet.Stalled(fixed); !testnet.NoStall(fixed) {
				t.Fatalf("new connection after --fix: %d of %d round trips stalled (>= 30 ms), want at most a quarter", n, len(fixed))
			}

			recreateCgroup(t, root, root+cg, client.PID())
			if _, err := os.Stat(w.pins); err != nil {
				t.Fatalf("the pins went with the cgroup (%v): this test is about the pins that stay", err)
			}
			if at := bpftoolCgroup(t, root+cg); len(at) != 0 {
				t.Fatalf("the re-created cgroup has programs %v", at)
			}
			lost := client.Measure("new", 10)
			t.Logf("after the restart, new connection: %s", quantiles(lost))
			if p50 := testnet.Quantile(lost, 0.5); p50 < 30*time.Millisecond {
				t.Fatalf("after the restart: p50 %v, want the stall (the program went with the old cgroup)", p50)
			}
			st := run("status")
			if st.code != 3 || !strings.Contains(st.stdout, knobID) || !strings.Contains(st.stdout, "<detached>") || !strings.Contains(st.stdout, "no longer attached") {
				t.Errorf("status after the restart: exit %d, want 3 naming %s as <detached>, in words\n%s%s", st.code, knobID, st.stdout, st.stderr)
			}
			var rep struct {
				Sockets []struct {
					PID      int      `json:"pid"`
					Enforced []string `json:"enforced_by_lowlat"`
				} `json:"sockets"`
			}
			json.Unmarshal([]byte(w.mustRun("sockets", "--port", fmt.Sprint(port), "--state", "established", "--json").stdout), &rep)
			for _, s := range rep.Sockets {
				if s.PID == client.PID() && len(s.Enforced) != 0 {
					t.Errorf("lowlat sockets marks the client's connection %v while the program is detached", s.Enforced)
				}
			}

			r := run("reassert")
			if r.code != 0 || !strings.Contains(r.stdout, "put back") || !strings.Contains(r.stdout, knobID) {
				t.Fatalf("reassert: exit %d, want 0 putting back %s\n%s%s", r.code, knobID, r.stdout, r.stderr)
			}
			if at := bpftoolCgroup(t, root+cg); len(at) != 1 || at[0] != progs[0] {
				t.Errorf("programs at the new %s after reassert: %v, want the pinned one %d", root+cg, at, progs[0])
			}
			back := client.Measure("new", 30)
			t.Logf("after reassert, new connection: %s", quantiles(back))
			if n := testnet.Stalled(back); !testnet.NoStall(back) {
				t.Errorf("new connection after reassert: %d of %d round trips stalled (>= 30 ms), want at most a quarter", n, len(back))
			}
			if st := run("status"); st.code != 0 {
				t.Errorf("status after reassert: exit %d\n%s%s", st.code, st.stdout, st.stderr)
			}
			if r := run("reassert"); r.code != 0 || strings.Contains(r.stdout, "put back:") {
				t.Errorf("a second reassert: exit %d\n%s", r.code, r.stdout)
			}

			w.mustRun("rollback")
			if _, err := os.Stat(w.pins); err == nil {
				t.Errorf("pins left after rollback in %s", w.pins)
			}
			if at := bpftoolCgroup(t, root+cg); len(at) != 0 {
				t.Errorf("programs at %s after rollback: %v", root+cg, at)
			}
			if p50 := testnet.Quantile(client.Measure("new", 10), 0.5); p50 < 30*time.Millisecond {
				t.Errorf("new connection after rollback: p50 %v, want the stall back", p50)
			}
			// The kernel keeps a removed cgroup, and the programs attached
			// to it, while a socket opened in it lives (the client's first
			// connection, from before the restart): the program is freed
			// once the client is gone.
			syscall.Kill(client.PID(), syscall.SIGKILL)
			w.nothingLeft("after rollback, the client gone", progs)
		})
	}
}

// TestIntegrationSocketsFixLegacy: on a kernel without bpf_link for
// cgroups (before 5.7; made so here by the link probe answering "not
// supported", then a real BPF_PROG_ATTACH), the program lowlat attaches
// at the cgroup root stays attached after lowlat exits, pinned, with no
// link; rollback detaches exactly it, and a lowlat killed right after the
// attach leaves a pin the next rollback finds and detaches.
func TestIntegrationSocketsFixLegacy(t *testing.T) {
	w := newSockopsWorld(t)
	legacy := []string{"LOWLAT_TEST_NO_CGROUP_LINK=1"}
	root := strings.TrimSuffix(cgroupRootOf(t), "/")
	args := []string{"sockets", "--fix", "nodelay", "--port", fmt.Sprint(fixPort), "--yes"}
	if r := w.run(legacy, args...); r.code != 0 {
		t.Fatalf("sockets --fix: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if links := w.attached(); len(links) != 0 {
		t.Fatalf("links pinned %v: want the legacy attachment (a pinned program, no link)", links)
	}
	progs := w.pinnedProgs()
	if len(progs) != 1 || !slices.Contains(bpftoolCgroup(t, root), progs[0]) {
		t.Fatalf("pinned programs %v, attached at %s: %v; want one, attached there", progs, root, bpftoolCgroup(t, root))
	}
	fresh := testnet.RoundTrips(t, testnet.Dial(t, w.ns, fixPort), 20)
	t.Logf("legacy attachment, lowlat gone, new connection: %s", quantiles(fresh))
	if n := testnet.Stalled(fresh); !testnet.NoStall(fresh) {
		t.Errorf("new connection after lowlat exited: %d of %d round trips stalled (>= 30 ms), want at most a quarter", n, len(fresh))
	}
	if st := w.run(legacy, "status"); st.code != 0 {
		t.Errorf("status: exit %d\n%s%s", st.code, st.stdout, st.stderr)
	}
	w.mustRun("rollback")
	w.nothingLeft("after rollback", progs)
	if slices.Contains(bpftoolCgroup(t, root), progs[0]) {
		t.Errorf("program %d is still attached at %s after rollback", progs[0], root)
	}
	if p50 := testnet.Quantile(testnet.RoundTrips(t, testnet.Dial(t, w.ns, fixPort), 10), 0.5); p50 < 30*time.Millisecond {
		t.Errorf("new connection after rollback: p50 %v, want the stall back", p50)
	}

	r := w.run(append(legacy, "LOWLAT_TEST_CRASH=write:1"), args...)
	if !r.killed {
		t.Fatalf("not killed (exit %d): %s%s", r.code, r.stdout, r.stderr)
	}
	progs = w.pinnedProgs()
	if len(progs) != 1 || !slices.Contains(bpftoolCgroup(t, root), progs[0]) {
		t.Fatalf("killed after the attach: pinned %v, attached at %s: %v; want one, attached", progs, root, bpftoolCgroup(t, root))
	}
	w.mustRun("rollback")
	w.nothingLeft("killed, then rolled back", progs)
}

// bpfMountNS is a mount namespace of the test's own, in the world's
// network namespace, where nothing has mounted bpffs: a process (sleep)
// holds it, and lowlat runs in it through nsenter. The machine's
// /sys/fs/bpf is never unmounted: the namespace's mounts are slaves of
// the host's, and an unmount there stays there.
type bpfMountNS struct {
	w   *sockopsWorld
	pid int
}

func newBPFMountNS(w *sockopsWorld) *bpfMountNS {
	t := w.t
	t.Helper()
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Fatalf("nsenter (util-linux or busybox) is needed to run lowlat in a mount namespace: %v", err)
	}
	cmd := w.ns.Command("sh", "-c", "umount /sys/fs/bpf && echo ready && exec sleep 600")
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("mount namespace: %q, %v", line, err)
	}
	m := &bpfMountNS{w: w, pid: cmd.Process.Pid}
	// Runs before the kill above: whatever a failing test left goes.
	t.Cleanup(func() { m.run(nil, "rollback", "--all") })
	return m
}

// run runs lowlat in the mount namespace, taken for the host's.
func (m *bpfMountNS) run(env []string, args ...string) result {
	m.w.t.Helper()
	bin, _ := lowlatBin()
	cmd := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(m.pid), "-m", "-n", "--", bin}, args...)...)
	cmd.Env = append(os.Environ(), "LOWLAT_JOURNAL="+m.w.journal, "LOWLAT_TEST_HOST_MOUNTNS=1")
	cmd.Env = append(cmd.Env, env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
		ws, ok := ee.Sys().(syscall.WaitStatus)
		r.killed = ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
	} else if err != nil {
		m.w.t.Fatalf("nsenter lowlat %v: %v", args, err)
	}
	return r
}

// mounted reports whether a bpffs is mounted on /sys/fs/bpf in the
// namespace and shows there (the mount table also lists the host's, under
// the namespace's own /sys).
func (m *bpfMountNS) mounted() bool {
	var fs unix.Statfs_t
	var st, up unix.Stat_t
	if err := unix.Statfs(m.bpffs(), &fs); err != nil {
		m.w.t.Fatal(err)
	}
	if err := unix.Stat(m.bpffs(), &st); err != nil {
		m.w.t.Fatal(err)
	}
	if err := unix.Stat(filepath.Dir(m.bpffs()), &up); err != nil {
		m.w.t.Fatal(err)
	}
	return fs.Type == unix.BPF_FS_MAGIC && st.Dev != up.Dev
}

// bpffs is the namespace's /sys/fs/bpf as this process reaches it.
func (m *bpfMountNS) bpffs() string { return fmt.Sprintf("/proc/%d/root/sys/fs/bpf", m.pid) }

// TestIntegrationSocketsFixMountsBPFFS: where nothing has mounted bpffs,
// the plan mounts it as a knob of its own, journaled before the entry, so
// rollback unmounts it; one that holds someone else's pin by then stays
// mounted, and the rollback says so; a lowlat killed right after mounting
// leaves a journal whose rollback unmounts it.
func TestIntegrationSocketsFixMountsBPFFS(t *testing.T) {
	w := newSockopsWorld(t)
	m := newBPFMountNS(w)
	if m.mounted() {
		t.Fatal("bpffs is still mounted in the test's mount namespace")
	}
	args := []string{"sockets", "--fix", "nodelay", "--port", fmt.Sprint(fixPort), "--yes"}
	r := m.run(nil, append(args, "--json")...)
	var res applyJSON
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 0 {
		t.Fatalf("sockets --fix: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	var knobs []string
	for _, c := range res.Changed {
		knobs = append(knobs, c.Knob)
	}
	// The mount first, so a rollback (in reverse) undoes it last. (No
	// connection is open: the socket knob has nothing to change.)
	if want := []string{"bpffs/sys/fs/bpf", "sockopt/port:7000/nodelay"}; !slices.Equal(knobs, want) {
		t.Errorf("changed %v, want %v", knobs, want)
	}
	if !m.mounted() {
		t.Fatal("bpffs is not mounted after --fix")
	}
	if _, err := os.Stat(filepath.Join(m.bpffs(), "lowlat")); err != nil {
		t.Errorf("lowlat's pins are not in the bpffs it mounted: %v", err)
	}
	if _, err := os.Stat(w.pins); err == nil {
		t.Errorf("lowlat pinned in the machine's bpffs (%s), not in the one it mounted", w.pins)
	}
	if fixed := testnet.RoundTrips(t, testnet.Dial(t, w.ns, fixPort), 20); !testnet.NoStall(fixed) {
		t.Errorf("new connection after --fix: %d of %d round trips stalled (>= 30 ms), want at most a quarter", testnet.Stalled(fixed), len(fixed))
	}
	if st := m.run(nil, "status"); st.code != 0 || !strings.Contains(st.stdout, "No drift") {
		t.Errorf("status: exit %d\n%s%s", st.code, st.stdout, st.stderr)
	}
	if r := m.run(nil, "rollback"); r.code != 0 {
		t.Fatalf("rollback: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if m.mounted() {
		t.Error("bpffs is still mounted after rollback")
	}
	if p50 := testnet.Quantile(testnet.RoundTrips(t, testnet.Dial(t, w.ns, fixPort), 10), 0.5); p50 < 30*time.Millisecond {
		t.Errorf("new connection after rollback: p50 %v, want the stall back", p50)
	}

	// Someone else pins there while the fix is in force.
	if r := m.run(nil, args...); r.code != 0 || !m.mounted() {
		t.Fatalf("sockets --fix again: exit %d, mounted %v\n%s%s", r.code, m.mounted(), r.stdout, r.stderr)
	}
	mp, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer mp.Close()
	if err := mp.Pin(filepath.Join(m.bpffs(), "someone_elses")); err != nil {
		t.Fatal(err)
	}
	r = m.run(nil, "rollback", "--json")
	if !m.mounted() {
		t.Fatal("rollback unmounted a bpffs holding someone else's pin")
	}
	var rb struct {
		Inexact []struct{ Knob, Error string } `json:"inexact"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rb); err != nil || r.code != 0 || len(rb.Inexact) != 1 || rb.Inexact[0].Knob != "bpffs/sys/fs/bpf" ||
		!strings.Contains(rb.Inexact[0].Error, "someone_elses") || !strings.Contains(rb.Inexact[0].Error, "left mounted") {
		t.Errorf("rollback with someone else's pin: exit %d, %v; want bpffs/sys/fs/bpf not exact, left mounted for someone_elses\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(m.bpffs(), "lowlat")); err == nil {
		t.Error("lowlat's pins are still there after rollback")
	}
	if err := mp.Unpin(); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("nsenter", "-t", strconv.Itoa(m.pid), "-m", "umount", "/sys/fs/bpf").Run(); err != nil {
		t.Fatalf("umount in the test's namespace: %v", err)
	}

	// Killed right after the mount.
	if r := m.run([]string{"LOWLAT_TEST_CRASH=write:1"}, args...); !r.killed || !m.mounted() {
		t.Fatalf("killed after the mount: killed %v, mounted %v (exit %d)\n%s%s", r.killed, m.mounted(), r.code, r.stdout, r.stderr)
	}
	if r := m.run(nil, "rollback"); r.code != 0 || m.mounted() {
		t.Errorf("rollback after the kill: exit %d, mounted %v\n%s%s", r.code, m.mounted(), r.stdout, r.stderr)
	}
}
