package sockops

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/lowlat/lowlat/internal/testnet"
)

// testCgroup makes a cgroup v2 directory below the hierarchy's root, named
// like a unit, and returns its path below the root; it goes when the test
// ends, once the processes in it are gone.
func testCgroup(t *testing.T) (root, rel string) {
	t.Helper()
	root, err := Cgroup2Root()
	if err != nil {
		t.Fatal(err)
	}
	rel = fmt.Sprintf("/lowlat-test-%d.service", time.Now().UnixNano())
	if err := os.Mkdir(root+rel, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		waitUntil(5*time.Second, func() bool { return os.Remove(root+rel) == nil })
	})
	return root, rel
}

func waitUntil(d time.Duration, ok func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if ok() {
			return true
		}
	}
	return ok()
}

// cgroupProgs lists the IDs of the sock_ops programs attached at cgroup dir
// itself, as the kernel says (BPF_PROG_QUERY), with their attach flags.
func cgroupProgs(t *testing.T, dir string) []ebpf.ProgramID {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	q, err := link.QueryPrograms(link.QueryOptions{Target: int(f.Fd()), Attach: ebpf.AttachCGroupSockOps})
	if err != nil {
		t.Fatalf("query %s: %v", dir, err)
	}
	var ids []ebpf.ProgramID
	for _, p := range q.Programs {
		ids = append(ids, p.ID)
	}
	return ids
}

func progLoaded(id ebpf.ProgramID) bool {
	p, err := ebpf.NewProgramFromID(id)
	if err == nil {
		p.Close()
	}
	return err == nil
}

// forceLegacy makes this process's sock_ops attach as on a kernel before
// bpf_link for cgroups (5.7): cilium/ebpf's answer there is
// ErrNotSupported, and the probe's memo is cleared around the test.
func forceLegacy(t *testing.T) {
	saved := cgroupLink
	cgroupLink = noCgroupLink
	probed.s = nil
	t.Cleanup(func() { cgroupLink, probed.s = saved, nil })
}

// TestIntegrationLegacyAttach runs the attachment of kernels before 5.7 on
// this one (the link probe made to answer "not supported"; then a real
// BPF_PROG_ATTACH): lowlat's program, on a client's cgroup, stays attached
// once Set has returned (cilium/ebpf's legacy attachment detaches on
// Close), is pinned, is attached beside another tool's program and not in
// its place, is attached again after it was detached by hand, and clearing
// the entry detaches exactly it: the other program stays.
func TestIntegrationLegacyAttach(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	forceLegacy(t)
	n := testnet.New(t)
	const port = 7100
	testnet.EchoServer(t, n, port)
	root, rel := testCgroup(t)
	cg := root + rel
	client := testnet.NagleClient(t, n, port, "/sys/fs/cgroup"+rel)
	if p50 := testnet.Quantile(client.Measure("new", 10), 0.5); p50 < 30*time.Millisecond {
		t.Fatalf("before: p50 %v, want the Nagle/delayed-ACK stall (>= 30 ms)", p50)
	}

	// Another tool's program at the same cgroup, attached the legacy way
	// with BPF_F_ALLOW_MULTI.
	other, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "other_tool", Type: ebpf.SockOps, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 1), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	cgf, err := os.Open(cg)
	if err != nil {
		t.Fatal(err)
	}
	defer cgf.Close()
	if err := link.RawAttachProgram(link.RawAttachProgramOptions{Target: int(cgf.Fd()), Program: other, Attach: ebpf.AttachCGroupSockOps, Flags: unix.BPF_F_ALLOW_MULTI}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		link.RawDetachProgram(link.RawDetachProgramOptions{Target: int(cgf.Fd()), Program: other, Attach: ebpf.AttachCGroupSockOps})
	})
	oi, _ := other.Info()
	otherID, _ := oi.ID()

	sel := Selector{Cgroup: rel}
	var h *Host
	if err := n.Do(func() (err error) {
		if h, err = Open(); err != nil {
			return err
		}
		return h.Set(sel, Entry{NoDelay: "1"})
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Do(func() error { return h.Set(sel, Entry{}) }) })
	if h.Support.CgroupLink {
		t.Fatalf("the probe found bpf_link for cgroups; the test made it answer not supported")
	}
	a, _ := h.attachmentOf(sel, false)
	if !exists(filepath.Join(a.dir, pinProg)) || exists(filepath.Join(a.dir, pinLink)) {
		t.Fatalf("pins %v: want the program pinned and no link", h.Pins())
	}
	ours, err := pinnedProgram(a.dir)
	if err != nil || ours == 0 {
		t.Fatalf("pinned program: %v, %v", ours, err)
	}
	if got, want := cgroupProgs(t, cg), []ebpf.ProgramID{otherID, ours}; !sameIDs(got, want) {
		t.Fatalf("programs at %s: %v, want the other tool's and lowlat's %v", cg, got, want)
	}
	if on, err := h.Attached(sel); !on || err != nil {
		t.Errorf("Attached: %v, %v; want true", on, err)
	}
	fresh := client.Measure("new", 20)
	t.Logf("attached (legacy), new connection: p50 %v", testnet.Quantile(fresh, 0.5))
	if n := testnet.Stalled(fresh); !testnet.NoStall(fresh) {
		t.Errorf("new connection with the legacy attachment: %d of %d round trips stalled (>= 30 ms), want at most a quarter", n, len(fresh))
	}

	// Detached by hand (bpftool cgroup detach): not attached, and the next
	// Set attaches the pinned program again, once.
	if err := exec.Command("bpftool", "cgroup", "detach", cg, "sock_ops", "id", fmt.Sprint(ours)).Run(); err != nil {
		t.Fatalf("bpftool cgroup detach: %v", err)
	}
	if on, err := h.Attached(sel); on || err != nil {
		t.Errorf("Attached after a detach by hand: %v, %v; want false", on, err)
	}
	if err := n.Do(func() error { return h.Set(sel, Entry{NoDelay: "1", NotSentLowat: "16384"}) }); err != nil {
		t.Fatal(err)
	}
	if got, want := cgroupProgs(t, cg), []ebpf.ProgramID{otherID, ours}; !sameIDs(got, want) {
		t.Errorf("programs at %s after attaching again: %v, want %v", cg, got, want)
	}
	if again := client.Measure("new", 20); !testnet.NoStall(again) {
		t.Errorf("new connection after attaching again: %d of %d round trips stalled (>= 30 ms), want at most a quarter", testnet.Stalled(again), len(again))
	}

	if err := n.Do(func() error { return h.Set(sel, Entry{}) }); err != nil {
		t.Fatal(err)
	}
	if got := cgroupProgs(t, cg); !sameIDs(got, []ebpf.ProgramID{otherID}) {
		t.Errorf("programs at %s after the entry went: %v, want only the other tool's %d", cg, got, otherID)
	}
	if p := h.Pins(); len(p) != 0 {
		t.Errorf("pins left: %v", p)
	}
	if !waitUntil(5*time.Second, func() bool { return !progLoaded(ours) }) {
		t.Errorf("program %d is still loaded 5 s after it was detached and unpinned", ours)
	}
	if p50 := testnet.Quantile(client.Measure("new", 10), 0.5); p50 < 30*time.Millisecond {
		t.Errorf("new connection after the entry went: p50 %v, want the stall back", p50)
	}
}

// TestIntegrationLegacyAttachRefused: without bpf_link, a cgroup whose
// program was attached without BPF_F_ALLOW_MULTI admits no other; lowlat
// refuses in one line naming the missing kernel feature, leaves no pin, and
// the other program stays.
func TestIntegrationLegacyAttachRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	forceLegacy(t)
	root, rel := testCgroup(t)
	other, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "other_tool", Type: ebpf.SockOps, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 1), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	cgf, err := os.Open(root + rel)
	if err != nil {
		t.Fatal(err)
	}
	defer cgf.Close()
	if err := link.RawAttachProgram(link.RawAttachProgramOptions{Target: int(cgf.Fd()), Program: other, Attach: ebpf.AttachCGroupSockOps}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		link.RawDetachProgram(link.RawDetachProgramOptions{Target: int(cgf.Fd()), Program: other, Attach: ebpf.AttachCGroupSockOps})
	})
	oi, _ := other.Info()
	otherID, _ := oi.ID()
	h, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	sel := Selector{Cgroup: rel}
	err = h.Set(sel, Entry{NoDelay: "1"})
	t.Logf("refused: %v", err)
	if err == nil {
		h.Set(sel, Entry{})
		t.Fatal("attached beside a program that admits no other")
	}
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "no bpf_link for cgroups (5.7)") || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q: want one line naming bpf_link (5.7), ErrUnsupported", err)
	}
	if p := h.Pins(); len(p) != 0 {
		t.Errorf("pins left: %v", p)
	}
	if got := cgroupProgs(t, root+rel); !sameIDs(got, []ebpf.ProgramID{otherID}) {
		t.Errorf("programs at the cgroup: %v, want only the other tool's %d", got, otherID)
	}
}

func sameIDs(a, b []ebpf.ProgramID) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestIntegrationBPFFSMount mounts and unmounts a bpffs on a test
// directory (never the machine's /sys/fs/bpf): a second mount is not made
// over the first, a bpffs holding a pin is not unmounted and the error
// names the pin, and an empty one is.
func TestIntegrationBPFFSMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	saved := privateMountNS
	privateMountNS = func() bool { return false }
	t.Cleanup(func() { privateMountNS = saved })
	dir := t.TempDir()
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	mounts := func() int {
		b, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 4 && f[4] == dir && strings.Contains(l, " - bpf ") {
				n++
			}
		}
		return n
	}
	if on, err := BPFFSMounted(dir); on || err != nil {
		t.Fatalf("before: mounted %v, %v", on, err)
	}
	for range 2 {
		if err := MountBPFFS(dir); err != nil {
			t.Fatal(err)
		}
	}
	if on, err := BPFFSMounted(dir); !on || err != nil || mounts() != 1 {
		t.Fatalf("after two mounts: mounted %v (%v), %d bpf mounts on %s; want one", on, err, mounts(), dir)
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Pin(filepath.Join(dir, "someone_elses")); err != nil {
		t.Fatal(err)
	}
	if err := UnmountBPFFS(dir); !errors.Is(err, ErrPinned) || !strings.Contains(err.Error(), "someone_elses") {
		t.Errorf("unmount with a pin: %v, want ErrPinned naming it", err)
	}
	if mounts() != 1 {
		t.Fatalf("a bpffs holding a pin was unmounted")
	}
	if err := m.Unpin(); err != nil {
		t.Fatal(err)
	}
	if err := UnmountBPFFS(dir); err != nil {
		t.Fatal(err)
	}
	if on, _ := BPFFSMounted(dir); on || mounts() != 0 {
		t.Errorf("still mounted after the unmount")
	}
	if err := UnmountBPFFS(dir); err != nil {
		t.Errorf("unmount of nothing: %v", err)
	}
}
