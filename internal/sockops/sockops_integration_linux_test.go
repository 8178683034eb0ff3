package sockops

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/lowlat/lowlat/internal/testnet"
)

func TestMain(m *testing.M) { testnet.Main(m) }

func dial(t *testing.T, n *testnet.NS, port int) net.Conn { return testnet.Dial(t, n, port) }

// p50 is the median of count request/answer round trips on c.
func p50(t *testing.T, c net.Conn, count int) time.Duration {
	return testnet.Quantile(testnet.RoundTrips(t, c, count), 0.5)
}

// lowlatPrograms lists the IDs of the BPF programs on the host whose name
// is lowlat's, as Debian's bpftool reports them.
func lowlatPrograms(t *testing.T) map[int]string {
	t.Helper()
	out, err := exec.Command("bpftool", "-j", "prog", "show").Output()
	if err != nil {
		t.Fatalf("bpftool prog show: %v", err)
	}
	var progs []struct {
		ID   int    `json:"id"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(out, &progs); err != nil {
		t.Fatalf("bpftool prog show: %v", err)
	}
	ours := map[int]string{}
	for _, p := range progs {
		if strings.HasPrefix(p.Name, "lowlat_") {
			ours[p.ID] = p.Name
		}
	}
	return ours
}

// pinnedPrograms returns the IDs of the programs h pinned in its
// namespace's directory (through their link, or the program itself where
// the kernel has no bpf_link for cgroups). Other tests and packages run
// lowlat's sock_ops beside this one, in their own namespaces, so a test
// checks what it attached, never every lowlat program on the host.
func pinnedPrograms(t *testing.T, h *Host) []int {
	t.Helper()
	var ids []int
	for _, p := range h.Pins() {
		switch filepath.Base(p) {
		case pinLink:
			l, err := link.LoadPinnedLink(p, nil)
			if err != nil {
				t.Fatalf("load the pinned link %s: %v", p, err)
			}
			info, err := l.Info()
			l.Close()
			if err != nil {
				t.Fatalf("the pinned link %s: %v", p, err)
			}
			ids = append(ids, int(info.Program))
		case pinProg:
			prog, err := ebpf.LoadPinnedProgram(p, nil)
			if err != nil {
				t.Fatalf("load the pinned program %s: %v", p, err)
			}
			info, err := prog.Info()
			prog.Close()
			if err != nil {
				t.Fatalf("the pinned program %s: %v", p, err)
			}
			id, _ := info.ID()
			ids = append(ids, int(id))
		}
	}
	return ids
}

// noEmptyDirsAbove checks that dir is gone and that each directory above
// it up to fs is gone too or still holds something (another namespace's
// pins): a rollback leaves nothing of its own in bpffs.
func noEmptyDirsAbove(t *testing.T, fs, dir string) {
	t.Helper()
	for d := dir; d != fs && d != "/" && d != "."; d = filepath.Dir(d) {
		ents, err := os.ReadDir(d)
		if err == nil && (d == dir || len(ents) == 0) {
			t.Errorf("%s is still there (%d entries)", d, len(ents))
		}
	}
}

// neighbour sets lowlat's TCP_NODELAY entry for a port in a namespace of
// its own, cleared when the test ends, and returns its Host. Where the
// kernel cannot tell namespaces apart in sock_ops, all namespaces share one
// directory and the test cannot have a neighbour that is not in its way:
// it says so and returns a Host with no pins.
func neighbour(t *testing.T) *Host {
	t.Helper()
	n := testnet.New(t)
	sel := Selector{Port: 7099}
	var h *Host
	if err := n.Do(func() (err error) {
		if h, err = Open(); err != nil {
			return err
		}
		if !h.Support.NetnsCookie {
			return nil
		}
		return h.Set(sel, Entry{NoDelay: "1"})
	}); err != nil {
		t.Fatalf("the neighbour's entry: %v", err)
	}
	if !h.Support.NetnsCookie {
		t.Logf("no neighbour: this kernel's sock_ops has no network namespace cookie")
		return h
	}
	t.Cleanup(func() {
		if err := n.Do(func() error { return h.Set(sel, Entry{}) }); err != nil {
			t.Errorf("clear the neighbour's entry: %v", err)
		}
	})
	return h
}

// TestIntegrationNagleFixedFromOutside is runbook 001's night: a server that
// replies in two writes without TCP_NODELAY stalls every answer on delayed
// ACK. lowlat enforces TCP_NODELAY on its port without touching the server:
// the sock_ops program for new connections, pidfd_getfd for the open one.
// A second server on another port keeps its stall. Clearing the entry
// detaches everything and restoring the open socket's value brings the
// stall back. A neighbour, lowlat's entry in another network namespace
// (another test, another container's lowlat), is there throughout: the
// rollback leaves it whole, and the test's checks are of its own pins and
// programs (they once read every lowlat program on the host, and failed
// when another package's test ran beside).
func TestIntegrationNagleFixedFromOutside(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	n := testnet.New(t)
	nb := neighbour(t)
	const port, other = 7000, 7001
	testnet.NagleServer(t, n, port)
	testnet.NagleServer(t, n, other)

	open := dial(t, n, port)
	if d := p50(t, open, 10); d < 30*time.Millisecond {
		t.Fatalf("before: p50 %v, want the Nagle/delayed-ACK stall (>= 30 ms)", d)
	} else {
		t.Logf("before: p50 %v", d)
	}

	var h *Host
	var conns []Conn
	prev := map[uint64]string{}
	sel := Selector{Port: port}
	if err := n.Do(func() (err error) {
		if h, err = Open(); err != nil {
			return err
		}
		if err := h.Support.Check(NoDelay); err != nil {
			return err
		}
		if err := h.Set(sel, Entry{NoDelay: "1"}); err != nil {
			return err
		}
		if conns, err = Conns(context.Background(), sel); err != nil {
			return err
		}
		for _, c := range conns {
			p, err := SetConn(c, NoDelay, "1")
			if err != nil {
				return err
			}
			prev[c.Inode] = p
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Do(func() error { return h.Set(sel, Entry{}) }) })
	if len(conns) != 1 || prev[conns[0].Inode] != "0" || conns[0].PID == 0 {
		t.Fatalf("open connections on port %d: %v, previous values %v; want the server's one socket, nodelay 0", port, conns, prev)
	}
	if got, err := h.Read(sel); err != nil || got.String() != "nodelay=1" {
		t.Fatalf("entry for %s: %v, %v", sel, got, err)
	}
	ids := pinnedPrograms(t, h)
	if len(ids) == 0 {
		t.Fatalf("no program pinned in %s while an entry is set: %v", h.Dir, h.Pins())
	}
	for _, id := range ids {
		if _, ok := lowlatPrograms(t)[id]; !ok {
			t.Fatalf("bpftool does not show lowlat's program %d while it is attached", id)
		}
	}

	if d := p50(t, open, 20); d >= testnet.Unstalled {
		t.Errorf("already-open connection after the fix: p50 %v, want < %v (no stall)", d, testnet.Unstalled)
	} else {
		t.Logf("after, already-open connection: p50 %v", d)
	}
	fresh := dial(t, n, port)
	if d := p50(t, fresh, 20); d >= testnet.Unstalled {
		t.Errorf("new connection after the fix: p50 %v, want < %v (no stall)", d, testnet.Unstalled)
	} else {
		t.Logf("after, new connection: p50 %v", d)
	}
	if d := p50(t, dial(t, n, other), 10); d < 30*time.Millisecond {
		t.Errorf("the server on port %d is not selected but its p50 is %v (want the stall)", other, d)
	}
	if ok, refused, err := h.Counts(); err != nil || ok[NoDelay] == 0 || refused[NoDelay] != 0 {
		t.Errorf("counts: nodelay set on %d, refused on %d (%v); want > 0 and 0", ok[NoDelay], refused[NoDelay], err)
	}

	// Roll back: the entry, then the open socket's previous value.
	if err := n.Do(func() error {
		if err := h.Set(sel, Entry{}); err != nil {
			return err
		}
		for _, c := range conns {
			if _, err := SetConn(c, NoDelay, prev[c.Inode]); err != nil && !errors.Is(err, ErrGone) {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if p := h.Pins(); len(p) != 0 {
		t.Errorf("pins left after the last entry went: %v", p)
	}
	noEmptyDirsAbove(t, h.fs, h.Dir)
	progs := lowlatPrograms(t)
	for _, id := range ids {
		if name, ok := progs[id]; ok {
			t.Errorf("bpftool still shows lowlat's program %d (%s) after the last entry went", id, name)
		}
	}
	if len(nb.Pins()) == 0 {
		t.Errorf("the neighbour's pins in %s went with this namespace's rollback", nb.Dir)
	}
	for _, id := range pinnedPrograms(t, nb) {
		if _, ok := progs[id]; !ok {
			t.Errorf("the neighbour's program %d went with this namespace's rollback", id)
		}
	}
	if d := p50(t, dial(t, n, port), 10); d < 30*time.Millisecond {
		t.Errorf("new connection after rollback: p50 %v, want the stall back", d)
	}
	if d := p50(t, open, 10); d < 30*time.Millisecond {
		t.Errorf("already-open connection after rollback: p50 %v, want the stall back", d)
	}
}
