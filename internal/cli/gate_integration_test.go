//go:build linux

package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/cli"
	"github.com/lowlat/lowlat/internal/gate"
	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/probe"
	"github.com/lowlat/lowlat/internal/testnet"
)

// gateWorld is the lab's bufferbloat path in three namespaces: the client
// (up0, where lowlat applies), a provider that forwards its uplink through a
// 2 Mbit/s tbf with a 2 s deep FIFO, and a server running a reflector.
type gateWorld struct {
	*world
	provider, server *testnet.NS
	target           string // the reflector, HOST:PORT
}

const (
	gateServer = "10.78.0.2"
	gatePort   = "7431"
)

func newGateWorld(t *testing.T, shaped bool) *gateWorld {
	t.Helper()
	w := newGatePath(t, shaped)
	r := probe.NewReflector(probe.ReflectorConfig{MinInterval: time.Millisecond, MaxSessionsPerIP: -1, AllowLoad: true, LoadRate: -1, LoadDuration: -1})
	ctx, cancel := context.WithCancel(context.Background())
	if err := w.server.Do(func() error { return r.Listen(ctx, w.target) }); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = r.Serve(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// newGatePath is the gate's path with no reflector running yet.
func newGatePath(t *testing.T, shaped bool) *gateWorld {
	t.Helper()
	if _, err := lowlatBin(); err != nil {
		t.Fatal(err)
	}
	client, provider, server := testnet.New(t), testnet.New(t), testnet.New(t)
	client.Veth(t, "up0", "pc0", provider, 1)
	provider.Veth(t, "ps0", "srv0", server, 1)
	ip := func(ns *testnet.NS, args ...string) {
		t.Helper()
		if out, err := ns.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	ip(client, "addr", "add", "10.77.0.2/24", "dev", "up0")
	ip(client, "route", "add", "default", "via", "10.77.0.1")
	ip(provider, "addr", "add", "10.77.0.1/24", "dev", "pc0")
	ip(provider, "addr", "add", "10.78.0.1/24", "dev", "ps0")
	ip(server, "addr", "add", gateServer+"/24", "dev", "srv0")
	ip(server, "route", "add", "default", "via", "10.78.0.1")
	if err := provider.Do(func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0)
	}); err != nil {
		t.Fatal(err)
	}
	if shaped {
		// The provider's cap: 2 Mbit/s, and a FIFO that holds 2 s of it
		// without dropping.
		if out, err := provider.Command("tc", "qdisc", "add", "dev", "ps0", "root", "tbf", "rate", "2mbit", "burst", "4096", "latency", "2s").CombinedOutput(); err != nil {
			t.Fatalf("tc: %v\n%s", err, out)
		}
	}
	dir := t.TempDir()
	w := &world{t: t, ns: client, journal: filepath.Join(dir, "journal"), root: filepath.Join(dir, "root")}
	return &gateWorld{world: w, provider: provider, server: server, target: gateServer + ":" + gatePort}
}

// gateApplyJSON is the part of apply --json a gate adds.
type gateApplyJSON struct {
	Txn  string `json:"txn"`
	Gate struct {
		Keep    bool       `json:"keep"`
		Verdict string     `json:"verdict"`
		Reason  string     `json:"reason"`
		Rows    []gate.Row `json:"rows"`
		Before  struct {
			Type string `json:"type"`
		} `json:"before"`
		After struct {
			Type string `json:"type"`
		} `json:"after"`
	} `json:"gate"`
}

func decodeGate(t *testing.T, r result) gateApplyJSON {
	t.Helper()
	var g gateApplyJSON
	if err := json.Unmarshal([]byte(r.stdout), &g); err != nil {
		t.Fatalf("apply --json: %v\nstdout: %s\nstderr: %s", err, r.stdout, r.stderr)
	}
	return g
}

// The load probe the bufferbloat tests gate with: 1 s idle, 4 s under
// upload.
func (w *gateWorld) loadProbe() string {
	return "load " + w.target + " --upload --idle 1s --duration 4s"
}

// TestIntegrationGateKeepsTheFix: the capped-uplink profile on the
// bufferbloat path, gated on p99 ≤ 100 ms, is kept (exit 0), status shows
// the evidence, and a rollback afterwards still restores exactly. With an
// SLO that cannot hold, the same apply exits 4 and the namespace is
// byte-identical to before.
func TestIntegrationGateKeepsTheFix(t *testing.T) {
	w := newGateWorld(t, true)
	before := w.snapshot()
	args := []string{"apply", "--yes", "--json", "--profile", "capped-uplink", "--set", "rate=1.9mbit",
		"--prove", w.loadProbe(), "--settle", "3s"}

	r := w.run(nil, append(args, "--slo", "p99<=100ms")...)
	g := decodeGate(t, r)
	t.Logf("kept: %s", g.Gate.Reason)
	for _, row := range g.Gate.Rows {
		t.Logf("  %s: before %+v after %+v %s", row.Metric, row.Before, row.After, row.Verdict)
	}
	if r.code != 0 || !g.Gate.Keep || g.Gate.Verdict != "kept" || g.Gate.Before.Type != "load" || g.Gate.After.Type != "load" {
		t.Fatalf("gated apply: exit %d, gate %+v\nstderr: %s", r.code, g.Gate, r.stderr)
	}
	if w.snapshot() == before {
		t.Fatal("a kept change left the namespace as it was")
	}
	st := w.mustRun("status")
	if !strings.Contains(st.stdout, "capped-uplink: p99 ") || !strings.Contains(st.stdout, "kept by gate") {
		t.Errorf("status does not show the evidence:\n%s", st.stdout)
	}
	st = w.mustRun("status", "--json")
	var rep struct {
		Active []struct {
			Evidence *journal.Evidence `json:"evidence"`
		} `json:"active"`
	}
	if err := json.Unmarshal([]byte(st.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	var ev *journal.Evidence
	for _, a := range rep.Active {
		if a.Evidence != nil {
			ev = a.Evidence
		}
	}
	if ev == nil || !ev.Keep || ev.Before["p99"].Value <= ev.After["p99"].Value || ev.After["p99"].Value > 100 {
		t.Errorf("status --json evidence: %+v\n%s", ev, st.stdout)
	}
	if c := w.run(nil, "confirm"); c.code == 0 {
		t.Errorf("confirm after a kept gate: the gate should have confirmed it already: %s", c.stdout)
	}
	w.mustRun("rollback")
	if after := w.snapshot(); after != before {
		t.Fatalf("rollback after a kept gate:\n%s", testnet.DiffLines(before, after))
	}

	// An SLO that cannot hold: rolled back by the gate, exit 4.
	r = w.run(nil, append(args, "--slo", "p99<=1us")...)
	g = decodeGate(t, r)
	if r.code != cli.ExitGateRolledBack || g.Gate.Keep || g.Gate.Verdict != "rolled back" || !strings.Contains(g.Gate.Reason, "violates p99<=1us") {
		t.Fatalf("impossible SLO: exit %d, gate %+v\nstderr: %s", r.code, g.Gate, r.stderr)
	}
	if after := w.snapshot(); after != before {
		t.Fatalf("rolled back by the gate, but not byte-identical:\n%s", testnet.DiffLines(before, after))
	}
	st = w.mustRun("status")
	if !strings.Contains(st.stdout, "rolled back by gate") {
		t.Errorf("status does not show the last gate's rollback:\n%s", st.stdout)
	}
}

// TestIntegrationGateRollsBackWorse: without --slo, a shaper far below what
// the traffic needs makes p50, p99 and loss worse, and the gate rolls it
// back; the text report says so in its table.
func TestIntegrationGateRollsBackWorse(t *testing.T) {
	w := newGateWorld(t, false)
	before := w.snapshot()
	// 1000-byte probes every 5 ms: 1.6 Mbit/s through a 400 kbit/s shaper.
	r := w.run(nil, "apply", "--yes", "--profile", "capped-uplink", "--set", "rate=400kbit",
		"--prove", "udp "+w.target+" --interval 5ms --size 1000 --duration 2s", "--settle", "0s")
	if r.code != cli.ExitGateRolledBack {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, cli.ExitGateRolledBack, r.stdout, r.stderr)
	}
	for _, want := range []string{"METRIC", "BEFORE", "AFTER", "SLO", "VERDICT", "p99", "not worse", "worse", "Rolled back by the gate:"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, r.stdout)
		}
	}
	if after := w.snapshot(); after != before {
		t.Fatalf("not byte-identical after the gate's rollback:\n%s", testnet.DiffLines(before, after))
	}
}

// TestIntegrationGateNoise: back-to-back runs of one unchanged veth path,
// each judged by the gate as the after-run of the one before it, are
// almost never "worse": at most 1 of 100 pairs. (101 runs give 100
// back-to-back pairs; neighbouring pairs share a run.)
func TestIntegrationGateNoise(t *testing.T) {
	testnet.Heavy(t, "101 UDP probe runs")
	w := newGateWorld(t, false)
	const pairs = 100
	dir := t.TempDir()
	measure := func(name string) *gate.Summary {
		out := filepath.Join(dir, name)
		w.mustRun("probe", "udp", w.target, "--interval", "2ms", "--duration", "600ms", "-o", out)
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var res probe.UDPResult
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatal(err)
		}
		s, err := gate.Summarize(&res)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	worse := 0
	prev := measure("run0.json")
	for i := range pairs {
		next := measure(fmt.Sprintf("run%d.json", i+1))
		v := gate.Decide(prev, next, gate.Policy{})
		if !v.Keep {
			worse++
			t.Logf("pair %d: %s", i, v.Reason)
		}
		prev = next
	}
	t.Logf("false \"worse\" on an unchanged path: %d of %d", worse, pairs)
	if worse > pairs/100 {
		t.Errorf("the gate judged an unchanged path worse in %d of %d back-to-back pairs; want at most %d", worse, pairs, pairs/100)
	}
}

// TestIntegrationGateKilled: lowlat killed with SIGKILL while it measures
// after the change; the dead-man switch restores the namespace.
func TestIntegrationGateKilled(t *testing.T) {
	w := newGateWorld(t, false)
	before := w.snapshot()
	bin, _ := lowlatBin()
	cmd := w.ns.Command(bin, "apply", "--yes", "--profile", "capped-uplink", "--set", "rate=10mbit",
		"--prove", "udp "+w.target+" --interval 10ms --duration 6s", "--settle", "0s", "--confirm", "37s")
	cmd.Env = append(cmd.Env, "LOWLAT_JOURNAL="+w.journal)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	// The change is in force once the transaction awaits confirmation; the
	// after measurement runs from then for 6 s.
	watchdog := w.waitApplied(t, 30*time.Second).Meta.WatchdogPID
	applied := time.Now()
	// The watchdog lives in a copy of this mount namespace (testnet.Command),
	// which pins the namespaces' /run/netns mounts: it must be gone before
	// they are deleted, also when the test fails.
	t.Cleanup(func() {
		if watchdog > 0 && !waitFor(20*time.Second, func() bool { return syscall.Kill(watchdog, 0) != nil }) {
			t.Errorf("the watchdog (pid %d) outlived its rollback by 20 s", watchdog)
			syscall.Kill(watchdog, syscall.SIGKILL)
		}
	})
	if watchdog == 0 {
		t.Error("the gated apply journaled no watchdog")
	}
	time.Sleep(3 * time.Second)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("apply was not killed: %v", err)
	}
	done <- nil
	if w.snapshot() == before {
		t.Fatal("killed during the after measurement, yet nothing was in force")
	}
	// The deadline is 37 s after the apply; give the watchdog 20 s more.
	if !waitFor(time.Until(applied.Add(57*time.Second)), func() bool { return w.snapshot() == before }) {
		t.Fatalf("the watchdog did not restore the namespace:\n%s", testnet.DiffLines(before, w.snapshot()))
	}
}

// TestIntegrationGateBadInput: each bad input is one line, the right exit
// code, and nothing measured against or changed.
func TestIntegrationGateBadInput(t *testing.T) {
	testnet.HostOnly(t, "nothing is changed: no kernel to test but the host's")
	w := newGateWorld(t, false)
	before := w.snapshot()
	base := []string{"apply", "--yes", "--profile", "capped-uplink", "--set", "rate=10mbit"}
	udp := "udp " + w.target + " --duration 1s"
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown metric", []string{"--prove", udp, "--slo", "p98<=8ms"}, 2, `apply: --slo "p98<=8ms": term "p98<=8ms": unknown metric "p98"`},
		{"malformed SLO", []string{"--prove", udp, "--slo", "p99=<8ms"}, 2, `operator must be <=, <, >= or >`},
		{"metric the probe lacks", []string{"--prove", udp, "--slo", "rpm>=100"}, 2, "a udp probe does not report rpm"},
		{"SLO without a probe", []string{"--slo", "p99<=8ms"}, 2, "--slo needs --prove"},
		{"slo-only without an SLO", []string{"--prove", udp, "--slo-only"}, 2, "--slo-only needs --slo"},
		{"unknown probe", []string{"--prove", "smtp " + w.target}, 2, `unknown probe "smtp"`},
		{"icmp toward a port", []string{"--prove", "icmp " + w.target}, 2, `"` + w.target + `": a HOST, not HOST:PORT: ICMP echo has no port`},
		{"bad probe flag", []string{"--prove", udp + " --intervall 5ms"}, 2, "unknown flag: --intervall"},
		{"confirm too short", []string{"--prove", udp, "--confirm", "5s"}, 2, "--confirm 5s is shorter than the gate needs"},
		{"unreachable target", []string{"--prove", "udp 10.78.0.99:7431 --duration 1s"}, 1, "baseline: probe udp: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := w.run(nil, append(base, tt.args...)...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", r.code, r.stderr, tt.code, tt.want)
			}
			if lines := strings.Count(strings.TrimSpace(r.stderr), "\n"); lines > 0 {
				t.Errorf("error is %d lines, want one:\n%s", lines+1, r.stderr)
			}
			if after := w.snapshot(); after != before {
				t.Fatalf("host changed:\n%s", testnet.DiffLines(before, after))
			}
			if st, err := journal.ReadState(w.journal); err == nil && len(st.Txns) > 0 {
				t.Fatalf("a transaction was journaled: %+v", st.Txns[0])
			}
		})
	}
}

// TestIntegrationProve: lowlat prove gates a transaction applied with
// --confirm: against a baseline file and an SLO it confirms it; with an SLO
// that cannot hold it rolls it back (exit 4).
func TestIntegrationProve(t *testing.T) {
	w := newGateWorld(t, false)
	before := w.snapshot()
	dir := t.TempDir()
	baseline := filepath.Join(dir, "before.json")
	w.mustRun("probe", "udp", w.target, "--duration", "1s", "-o", baseline)
	apply := []string{"apply", "--yes", "--profile", "capped-uplink", "--set", "rate=10mbit", "--confirm", "2m", "--json"}
	var a applyJSON
	json.Unmarshal([]byte(w.mustRun(apply...).stdout), &a)
	probeLine := "udp " + w.target + " --duration 1s"
	r := w.run(nil, "prove", "--txn", a.Txn, "--prove", probeLine, "--baseline", baseline, "--slo", "loss<=50%")
	if r.code != 0 || !strings.Contains(r.stdout, "Kept by the gate:") {
		t.Fatalf("prove: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if st := journalState(t, w.journal); st.Txns[len(st.Txns)-1].PendingConfirm() {
		t.Fatal("prove kept the transaction but did not confirm it")
	}
	w.mustRun("rollback")

	json.Unmarshal([]byte(w.mustRun(apply...).stdout), &a)
	r = w.run(nil, "prove", "--txn", a.Txn, "--prove", probeLine, "--slo", "p99<=1us", "--json")
	if r.code != cli.ExitGateRolledBack {
		t.Fatalf("prove with an impossible SLO: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if after := w.snapshot(); after != before {
		t.Fatalf("prove rolled back, but not byte-identical:\n%s", testnet.DiffLines(before, after))
	}
	for _, bad := range [][]string{
		{"prove", "--txn", a.Txn, "--prove", probeLine},                                                // nothing to judge by
		{"prove", "--txn", a.Txn, "--prove", probeLine, "--baseline", filepath.Join(dir, "none.json")}, // no such file
	} {
		if r := w.run(nil, bad...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2: %s", bad, r.code, r.stderr)
		}
	}
}
