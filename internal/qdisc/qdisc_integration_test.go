//go:build linux

package qdisc_test

import (
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/lowlat/lowlat/internal/qdisc"
	"github.com/lowlat/lowlat/internal/testnet"
	"github.com/vishvananda/netlink"
)

func TestMain(m *testing.M) { testnet.Main(m) }

// TestIntegrationApplyRestore applies each managed shape to a veth in a fresh
// namespace, reads it back, then restores the kernel default and checks the
// device is exactly as before — cross-checked with tc where it is installed.
func TestIntegrationApplyRestore(t *testing.T) {
	tests := []struct {
		name  string
		spec  string
		txq   int
		needs []string
	}{
		{"tbf runbook 003", "tbf rate 1950kbit burst 4096 latency 300ms", 1, []string{"tbf"}},
		{"htb shaper with pfifo leaf", "htb rate 1900kbit leaf { pfifo limit 100 }", 1, []string{"htb"}},
		{"htb shaper with fq_codel leaf", "htb rate 1900kbit burst 3000 leaf { fq_codel target 8ms interval 100ms limit 1000 }", 1, []string{"htb", "fq_codel"}},
		{"pfifo_fast explicit", "pfifo_fast", 1, nil},
		{"fq_codel runbook 000", "fq_codel limit 1000 target 5ms interval 100ms flows 2048 quantum 1514", 1, []string{"fq_codel"}},
		{"fq", "fq limit 10000 flow_limit 100 quantum 3028 initial_quantum 15140 maxrate 100mbit", 1, []string{"fq"}},
		{"cake capped uplink", "cake bandwidth 1900kbit rtt 100ms besteffort nat split-gso", 1, []string{"cake"}},
		{"netem lab", "netem delay 50ms jitter 10ms loss 1% limit 1000", 1, []string{"netem"}},
		{"mq with pfifo_fast children", "mq children { pfifo_fast }", 4, nil},
		{"mq with fq_codel children", "mq children { fq_codel target 5ms }", 4, []string{"fq_codel"}},
		{"sfq", "sfq perturb 10 quantum 1514", 1, []string{"sfq"}},
		{"prio", "prio bands 3 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1", 1, []string{"prio"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := testnet.New(t)
			ns.Veth(t, "v0", "v1", nil, tt.txq)
			want, err := qdisc.Parse(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			var before, after, restored qdisc.Tree
			var applyErr error
			probes := map[string]error{}
			if err := ns.Do(func() error {
				l, err := netlink.LinkByName("v0")
				if err != nil {
					return err
				}
				for _, k := range tt.needs {
					probes[k] = qdisc.Probe(l.Attrs().Index, k)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			for _, k := range tt.needs {
				testnet.NeedFeature(t, k, probes[k])
			}
			err = ns.Do(func() error {
				l, err := netlink.LinkByName("v0")
				if err != nil {
					return err
				}
				idx := l.Attrs().Index
				if before, err = qdisc.Read(idx); err != nil {
					return err
				}
				if applyErr = qdisc.Apply(idx, want, tt.txq); applyErr != nil {
					return nil
				}
				if after, err = qdisc.Read(idx); err != nil {
					return err
				}
				if err := qdisc.Apply(idx, before.Root, tt.txq); err != nil {
					return err
				}
				restored, err = qdisc.Read(idx)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if applyErr != nil {
				t.Fatalf("Apply(%q): %v", tt.spec, applyErr)
			}
			t.Logf("before %q; after %q; restored %q", before.Root, after.Root, restored.Root)
			if !qdisc.Satisfies(after.Root, want) {
				t.Errorf("after Apply(%q) the device has %q", want, after.Root)
			}
			if reparsed, err := qdisc.Parse(after.Root.String()); err != nil || !qdisc.Equal(reparsed, after.Root) {
				t.Errorf("live spec %q does not round-trip: %v", after.Root, err)
			}
			if !qdisc.Equal(restored.Root, before.Root) {
				t.Errorf("restore: got %q, want %q", restored.Root, before.Root)
			}
			if tc, err := exec.LookPath("tc"); err == nil {
				out, err := ns.Command(tc, "-j", "qdisc", "show", "dev", "v0").Output()
				if err != nil {
					t.Fatalf("tc: %v", err)
				}
				var qs []struct {
					Kind   string `json:"kind"`
					Handle string `json:"handle"`
					Root   bool   `json:"root"`
				}
				if err := json.Unmarshal(out, &qs); err != nil {
					t.Fatalf("tc -j: %v (%s)", err, out)
				}
				for _, q := range qs {
					if q.Root && q.Kind != before.Root.Kind {
						t.Errorf("tc sees root %s %s after restore, want %s", q.Kind, q.Handle, before.Root.Kind)
					}
				}
			}
		})
	}
}
