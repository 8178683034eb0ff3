package sockops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/testnet"
)

func TestMain(m *testing.M) { testnet.Main(m) }

func dial(t *testing.T, n *testnet.NS, port int) net.Conn { return testnet.Dial(t, n, port) }

// p50 is the median of count request/answer round trips on c.
func p50(t *testing.T, c net.Conn, count int) time.Duration {
	return testnet.Quantile(testnet.RoundTrips(t, c, count), 0.5)
}

// lowlatPrograms lists the BPF programs on the host whose name is lowlat's,
// as Debian's bpftool reports them.
func lowlatPrograms(t *testing.T) []string {
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
	var ours []string
	for _, p := range progs {
		if strings.HasPrefix(p.Name, "lowlat_") {
			ours = append(ours, fmt.Sprintf("%d %s", p.ID, p.Name))
		}
	}
	return ours
}

// TestIntegrationNagleFixedFromOutside is runbook 001's night: a server that
// replies in two writes without TCP_NODELAY stalls every answer on delayed
// ACK. lowlat enforces TCP_NODELAY on its port without touching the server:
// the sock_ops program for new connections, pidfd_getfd for the open one.
// A second server on another port keeps its stall. Clearing the entry
// detaches everything and restoring the open socket's value brings the
// stall back.
func TestIntegrationNagleFixedFromOutside(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	n := testnet.New(t)
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
	if p := lowlatPrograms(t); len(p) == 0 {
		t.Fatalf("bpftool shows no lowlat program while one is attached")
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
	if _, err := os.Stat(h.fs + "/lowlat"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s/lowlat is still there (%v)", h.fs, err)
	}
	if p := lowlatPrograms(t); len(p) != 0 {
		t.Errorf("bpftool still shows lowlat's programs: %v", p)
	}
	if d := p50(t, dial(t, n, port), 10); d < 30*time.Millisecond {
		t.Errorf("new connection after rollback: p50 %v, want the stall back", d)
	}
	if d := p50(t, open, 10); d < 30*time.Millisecond {
		t.Errorf("already-open connection after rollback: p50 %v, want the stall back", d)
	}
}
