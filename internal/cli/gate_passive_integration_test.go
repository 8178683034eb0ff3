//go:build linux

package cli_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/cli"
	"github.com/lowlat/lowlat/internal/testnet"
)

// flood sends size-byte datagrams every gap from the world's client to the
// server's discard port until the test ends (at most limit).
func (w *gateWorld) flood(t *testing.T, size int, gap, limit time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		w.ns.Do(func() error {
			c, err := net.Dial("udp4", gateServer+":9")
			if err != nil {
				return err
			}
			defer c.Close()
			buf := make([]byte, size)
			next := time.Now()
			for ctx.Err() == nil {
				c.Write(buf)
				next = next.Add(gap)
				time.Sleep(time.Until(next))
			}
			return nil
		})
	}()
}

// A shaper far below the traffic's rate makes the host's own egress queue
// long: the passive gate, judging the real traffic's queueing on up0, rolls
// it back (exit 4), shows the traffic's volume in both windows, and leaves
// the namespace as it was.
func TestIntegrationGatePassiveWorse(t *testing.T) {
	testnet.HostOnly(t, "the gate's logic; the measurement it reads is tested on the stock kernel in internal/passive")
	w := newGateWorld(t, false)
	before := w.snapshot()
	// 1000-byte datagrams every 5 ms: 1.6 Mbit/s into a 400 kbit/s shaper.
	w.flood(t, 1000, 5*time.Millisecond, time.Minute)
	r := w.run(nil, "apply", "--yes", "--profile", "capped-uplink", "--set", "rate=400kbit",
		"--prove", "passive egress up0 --for 5s --min-samples 100", "--settle", "2s")
	if r.code != cli.ExitGateRolledBack {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, cli.ExitGateRolledBack, r.stdout, r.stderr)
	}
	for _, want := range []string{"p99", "worse", "Rolled back by the gate:", "traffic: before", "values/s", "fq's pacing delay"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, r.stdout)
		}
	}
	if after := w.snapshot(); after != before {
		t.Fatalf("not byte-identical after the gate's rollback:\n%s", testnet.DiffLines(before, after))
	}
}

// A shaper set far too low (400 kbit/s under 1.6 Mbit/s of traffic) keeps
// a standing queue on up0; the capped-uplink profile at 10 Mbit/s replaces
// it, and the RTT samples of a real TCP connection through that queue
// fall: the passive gate keeps the change, with both windows' volumes.
func TestIntegrationGatePassiveKeepsTheFix(t *testing.T) {
	testnet.HostOnly(t, "the gate's logic; the measurement it reads is tested on the stock kernel in internal/passive")
	w := newGateWorld(t, false)
	if out, err := w.ns.Command("tc", "qdisc", "add", "dev", "up0", "root", "tbf", "rate", "400kbit", "burst", "4kb", "latency", "200ms").CombinedOutput(); err != nil {
		t.Fatalf("tc: %v\n%s", err, out)
	}
	w.flood(t, 1000, 5*time.Millisecond, 90*time.Second)
	probeDone := make(chan result, 1)
	go func() {
		probeDone <- w.run(nil, "probe", "tcp", w.target, "--connections", "10", "--rate", "100", "--duration", "25s")
	}()
	time.Sleep(time.Second) // the connections are up
	r := w.run(nil, "apply", "--yes", "--json", "--profile", "capped-uplink", "--set", "rate=10mbit",
		"--prove", "passive port:"+gatePort+" --for 6s --min-samples 100", "--settle", "2s")
	<-probeDone
	g := decodeGate(t, r)
	t.Logf("verdict %s: %s", g.Gate.Verdict, g.Gate.Reason)
	if r.code != 0 || !g.Gate.Keep {
		t.Fatalf("exit %d, keep %v, want the fix kept\nstdout: %s\nstderr: %s", r.code, g.Gate.Keep, r.stdout, r.stderr)
	}
	if g.Gate.Before.Type != "passive" || g.Gate.After.Type != "passive" {
		t.Errorf("the gate's windows are %q and %q results, want passive", g.Gate.Before.Type, g.Gate.After.Type)
	}
	if !strings.Contains(r.stdout, "traffic: before") {
		t.Errorf("the gate's notes lack the windows' volumes:\n%s", r.stdout)
	}
	w.mustRun("rollback")
}

// No traffic, no proof: a baseline window with fewer values than the
// minimum changes nothing and exits 4, naming the minimum.
func TestIntegrationGatePassiveTooFew(t *testing.T) {
	testnet.HostOnly(t, "the refusal comes before anything is changed")
	w := newGateWorld(t, false)
	before := w.snapshot()
	r := w.run(nil, "apply", "--yes", "--profile", "capped-uplink", "--set", "rate=400kbit",
		"--prove", "passive port:7999 --for 5s", "--settle", "0s")
	if r.code != cli.ExitGateRolledBack || !strings.Contains(r.stderr, "at least 200") || !strings.Contains(r.stderr, "nothing was changed") {
		t.Errorf("exit %d, want %d and a line naming the minimum\nstderr: %s", r.code, cli.ExitGateRolledBack, r.stderr)
	}
	if after := w.snapshot(); after != before {
		t.Fatalf("changed without proof:\n%s", testnet.DiffLines(before, after))
	}
	for _, bad := range [][]string{
		{"passive port:0"}, {"passive egress"}, {"passive rx 7777"}, {"passive port:443 --for 1s"}, {"passive port:443 --min-samples 5"},
	} {
		if r := w.run(nil, "apply", "--yes", "--profile", "capped-uplink", "--prove", bad[0]); r.code != 2 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("--prove %q: exit %d, want 2 and one line\n%s", bad[0], r.code, r.stderr)
		}
	}
}
