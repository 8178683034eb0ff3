//go:build linux

package cli_test

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/cli"
	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/testnet"
)

// quietProfile is a change the path does not notice: whatever the gate
// sees after it comes from the path, not from the change.
const quietProfile = `name = "gate-quiet"
summary = "a change the path does not notice"
[sysctl."net.core.somaxconn"]
value = "1234"
why = "nothing on the path depends on it"
`

// blackholeProfile cuts the path: packets leave with a TTL of 1 and die at
// the first router.
const blackholeProfile = `name = "gate-blackhole"
summary = "a change that cuts the path"
[sysctl."net.ipv4.ip_default_ttl"]
value = "1"
why = "every packet dies at the first router"
`

func writeProfile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "profile.toml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// startReflectorProcess runs 'lowlat reflector' in the server's namespace,
// as a process the test can kill, and waits until it answers on TCP.
func (w *gateWorld) startReflectorProcess(t *testing.T) *exec.Cmd {
	t.Helper()
	bin, _ := lowlatBin()
	cmd := w.server.Command(bin, "reflector", "--listen", w.target, "--min-interval", "1ms", "--max-sessions-per-ip", "0",
		"--allow-load", "--load-rate", "1gbit", "--quiet")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	if !waitFor(10*time.Second, func() bool {
		return w.server.Do(func() error {
			c, err := net.DialTimeout("tcp", w.target, time.Second)
			if err == nil {
				c.Close()
			}
			return err
		}) == nil
	}) {
		t.Fatal("the reflector did not listen within 10 s")
	}
	return cmd
}

// startApply starts lowlat with args (a gated apply) in the background; wait returns
// its result.
func (w *gateWorld) startApply(t *testing.T, args ...string) (wait func() result) {
	t.Helper()
	bin, _ := lowlatBin()
	cmd := w.ns.Command(bin, args...)
	cmd.Env = append(cmd.Env, "LOWLAT_JOURNAL="+w.journal)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
	})
	return func() result {
		err := <-done
		done <- err
		r := result{stdout: out.String(), stderr: errb.String()}
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("apply: %v", err)
		}
		return r
	}
}

// waitApplied waits up to limit until the gated apply's change is in force
// (its transaction awaits the gate's confirmation: the after-run starts
// then) and returns that transaction.
func (w *world) waitApplied(t *testing.T, limit time.Duration) *journal.Txn {
	t.Helper()
	var pending *journal.Txn
	if !waitFor(limit, func() bool {
		st, err := journal.ReadState(w.journal)
		if err != nil {
			return false
		}
		for _, tx := range st.Txns {
			if tx.PendingConfirm() {
				pending = tx
				return true
			}
		}
		return false
	}) {
		t.Fatalf("the gated apply did not apply within %v", limit)
	}
	return pending
}

// TestIntegrationGateReflectorDies: for each probe, the reflector is killed
// part-way through the run after the change. The change (one sysctl the
// path does not notice) is then rolled back, exit 4, the namespace
// byte-identical, and the report says what the rollback did. On main the
// udp run was kept at 50 % loss (its own blocks' spread was taken for
// noise, and the blocks with no reply were dropped) and the tcp and crr
// runs never saw their failed requests.
func TestIntegrationGateReflectorDies(t *testing.T) {
	testnet.HostOnly(t, "it changes one sysctl and depends on nothing the VM's kernel adds")
	tests := []struct {
		kind, probe string
		killAfter   time.Duration // into the after-run
		metric      string        // the verdict's worse metric
	}{
		{"udp", "udp %s --interval 5ms --duration 3s", 1500 * time.Millisecond, "loss"},
		{"tcp", "tcp %s --rate 100 --duration 3s", 1500 * time.Millisecond, "errors"},
		{"crr", "crr %s --rate 20 --response 10000 --duration 3s", 1500 * time.Millisecond, "errors"},
		// load: 1 s idle, 0.5 s of ramp, then 3 s under load.
		{"load", "load %s --upload --flows 2 --idle 1s --duration 3s", 3 * time.Second, "loss"},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			w := newGatePath(t, false)
			refl := w.startReflectorProcess(t)
			before := w.snapshot()
			args := []string{"apply", "--yes", "--profile", writeProfile(t, quietProfile), "--settle", "0s",
				"--prove", strings.ReplaceAll(tt.probe, "%s", w.target)}
			if tt.kind != "udp" {
				args = append(args, "--json")
			} else {
				// An SLO the run meets adds to the default terms: on main
				// it replaced them, and this run was kept at 50 % loss.
				args = append(args, "--slo", "p99<=50ms")
			}
			wait := w.startApply(t, args...)
			w.waitApplied(t, 60*time.Second)
			time.Sleep(tt.killAfter)
			if err := refl.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			r := wait()
			if tt.kind == "udp" {
				t.Logf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			if r.code != cli.ExitGateRolledBack {
				t.Fatalf("the reflector died during the after-run: exit %d, want %d", r.code, cli.ExitGateRolledBack)
			}
			if after := w.snapshot(); after != before {
				t.Fatalf("rolled back by the gate, but not byte-identical:\n%s", testnet.DiffLines(before, after))
			}
			if tt.kind == "udp" {
				for _, want := range []string{"Gate (udp", ", SLO p99<=50ms", "Rolled back by the gate: loss ", "worse beyond the noise", "Rollback: 1 knob(s) restored exactly"} {
					if !strings.Contains(r.stdout, want) {
						t.Errorf("report lacks %q", want)
					}
				}
				return
			}
			var g struct {
				Gate struct {
					Keep     bool   `json:"keep"`
					Verdict  string `json:"verdict"`
					Reason   string `json:"reason"`
					Rollback *struct {
						Exact   int   `json:"exact"`
						Inexact []any `json:"inexact"`
						Gone    []any `json:"gone"`
						Failed  []any `json:"failed"`
					} `json:"rollback"`
				} `json:"gate"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &g); err != nil {
				t.Fatal(err)
			}
			t.Logf("exit %d: %s", r.code, g.Gate.Reason)
			rb := g.Gate.Rollback
			if g.Gate.Keep || g.Gate.Verdict != "rolled back" || rb == nil || rb.Exact != 1 || len(rb.Inexact)+len(rb.Gone)+len(rb.Failed) != 0 {
				t.Errorf("gate %+v, rollback %+v: want rolled back, one knob restored exactly", g.Gate, rb)
			}
			if !strings.Contains(g.Gate.Reason, tt.metric+" ") && !strings.Contains(g.Gate.Reason, "probe failed") {
				t.Errorf("reason %q: want %s worse (or the probe failed)", g.Gate.Reason, tt.metric)
			}
		})
	}
}

// TestIntegrationGateBlackhole: a change that cuts the path (the probe
// fails once it is in force) is a verdict against it: rolled back, exit 4,
// the namespace byte-identical. On main a probe that failed after the
// change was a gate failure, exit 1.
func TestIntegrationGateBlackhole(t *testing.T) {
	testnet.HostOnly(t, "it changes one sysctl and depends on nothing the VM's kernel adds")
	w := newGateWorld(t, false)
	before := w.snapshot()
	r := w.run(nil, "apply", "--yes", "--profile", writeProfile(t, blackholeProfile), "--settle", "0s",
		"--prove", "tcp "+w.target+" --rate 50 --duration 2s --timeout 2s")
	t.Logf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	if r.code != cli.ExitGateRolledBack {
		t.Fatalf("a change that cuts the path: exit %d, want %d", r.code, cli.ExitGateRolledBack)
	}
	for _, want := range []string{"Rolled back by the gate: the probe failed with the change in force", "Rollback: 1 knob(s) restored exactly"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if after := w.snapshot(); after != before {
		t.Fatalf("not byte-identical after the gate's rollback:\n%s", testnet.DiffLines(before, after))
	}
}

// TestIntegrationGateICMP: --prove "icmp HOST" gates toward a host that
// runs no reflector. A change the path does not notice is kept, and the
// report says what ICMP cannot tell (loss without a direction, routers
// that answer ping last). When the far end stops answering ping part-way
// through the run after the change, the change is rolled back (exit 4) and
// the namespace is byte-identical.
func TestIntegrationGateICMP(t *testing.T) {
	testnet.HostOnly(t, "it changes one sysctl and depends on nothing the VM's kernel adds")
	probe := "icmp " + gateServer + " --interval 10ms --duration 2s"
	t.Run("kept", func(t *testing.T) {
		w := newGatePath(t, false)
		before := w.snapshot()
		r := w.run(nil, "apply", "--yes", "--json", "--profile", writeProfile(t, quietProfile), "--settle", "0s", "--prove", probe)
		var g struct {
			Gate struct {
				Keep  bool     `json:"keep"`
				Notes []string `json:"notes"`
				Rows  []struct {
					Metric string `json:"metric"`
				} `json:"rows"`
				Before struct {
					Type string `json:"type"`
					Sent int64  `json:"sent"`
				} `json:"before"`
			} `json:"gate"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &g); err != nil {
			t.Fatalf("exit %d: %v\n%s%s", r.code, err, r.stdout, r.stderr)
		}
		if r.code != 0 || !g.Gate.Keep {
			t.Fatalf("a change the path does not notice: exit %d, keep %v\n%s", r.code, g.Gate.Keep, r.stderr)
		}
		var metrics []string
		for _, row := range g.Gate.Rows {
			metrics = append(metrics, row.Metric)
		}
		for _, want := range []string{"p50", "p99", "loss"} {
			if !slices.Contains(metrics, want) {
				t.Errorf("rows %v lack %s", metrics, want)
			}
		}
		if slices.Contains(metrics, "loss_up") || slices.Contains(metrics, "errors") {
			t.Errorf("rows %v: ICMP has neither a direction of loss nor failed requests", metrics)
		}
		if g.Gate.Before.Type != "icmp" || g.Gate.Before.Sent < 150 {
			t.Errorf("baseline %+v: want an icmp result of ~200 echoes", g.Gate.Before)
		}
		if len(g.Gate.Notes) != 2 || !strings.Contains(g.Gate.Notes[0], "no direction") || !strings.Contains(g.Gate.Notes[1], "low priority") {
			t.Errorf("notes %q: want ICMP's two caveats", g.Gate.Notes)
		}
		w.mustRun("rollback")
		if after := w.snapshot(); after != before {
			t.Fatalf("not byte-identical after rollback:\n%s", testnet.DiffLines(before, after))
		}
	})
	t.Run("far end stops answering", func(t *testing.T) {
		w := newGatePath(t, false)
		ignore := func(v string) {
			t.Helper()
			if err := w.server.Do(func() error {
				return os.WriteFile("/proc/sys/net/ipv4/icmp_echo_ignore_all", []byte(v), 0)
			}); err != nil {
				t.Fatal(err)
			}
		}
		before := w.snapshot()
		wait := w.startApply(t, "apply", "--yes", "--profile", writeProfile(t, quietProfile), "--settle", "0s", "--prove", probe)
		w.waitApplied(t, 60*time.Second)
		time.Sleep(time.Second)
		ignore("1")
		r := wait()
		ignore("0")
		t.Logf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		if r.code != cli.ExitGateRolledBack {
			t.Fatalf("the far end stopped answering during the after-run: exit %d, want %d", r.code, cli.ExitGateRolledBack)
		}
		for _, want := range []string{"Gate (icmp ", "Rolled back by the gate: loss ", "note: ICMP loss has no direction", "Rollback: 1 knob(s) restored exactly"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("report lacks %q", want)
			}
		}
		if after := w.snapshot(); after != before {
			t.Fatalf("rolled back by the gate, but not byte-identical:\n%s", testnet.DiffLines(before, after))
		}
	})
}
