//go:build linux

package knob_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/qdisc"
	"github.com/lowlat/lowlat/internal/testnet"
	"github.com/vishvananda/netlink"
)

// exactCases are root qdiscs configured with tc the way an operator would,
// each with options lowlat's schema does not (or did not) model, or models in
// units the kernel rounds. Every case must come back identical after an apply
// and a rollback.
var exactCases = []struct {
	name string
	tc   [][]string // tc commands (after "tc") that build the configuration on v0
	// apply are values written over it, as an apply would: a different kind
	// (the old root is replaced) and one of the same kind (changed in place,
	// so a restore that only sent options would keep what it did not mention).
	apply []string
	needs []string // kernel features (qdisc kinds), checked by trying them
	txq   int
}{
	{name: "fq orphan_mask timer_slack", tc: root("fq orphan_mask 511 timer_slack 20us"), apply: []string{"pfifo limit 50", "fq limit 5000 flow_limit 50"}, needs: []string{"fq"}},
	{name: "fq horizon_cap ce_threshold maxrate", tc: root("fq horizon 2s horizon_cap ce_threshold 3ms maxrate 100mbit refill_delay 20ms nopacing"), apply: []string{"fq limit 5000"}, needs: []string{"fq"}},
	{name: "fq defaults", tc: root("fq"), apply: []string{"fq limit 5000"}, needs: []string{"fq"}},
	{name: "fq_codel ce_threshold", tc: root("fq_codel ce_threshold 2ms"), apply: []string{"pfifo limit 50", "fq_codel target 8ms"}, needs: []string{"fq_codel"}},
	{name: "fq_codel ce_threshold_selector", tc: root("fq_codel ce_threshold 2ms ce_threshold_selector 0x1/0x3 target 7ms interval 150ms"), apply: []string{"fq_codel target 8ms"}, needs: []string{"fq_codel"}},
	{name: "fq_codel defaults", tc: root("fq_codel"), apply: []string{"fq_codel ce_threshold 1ms"}, needs: []string{"fq_codel"}},
	{name: "fq_codel drop_batch memory_limit", tc: root("fq_codel drop_batch 32 memory_limit 16mb flows 512 quantum 300 noecn"), apply: []string{"pfifo limit 50"}, needs: []string{"fq_codel"}},
	{name: "codel ce_threshold", tc: root("codel ce_threshold 1ms target 3ms"), apply: []string{"codel target 8ms"}, needs: []string{"codel"}},
	{name: "cake raw ack-filter nat wash", tc: root("cake raw ack-filter nat wash"), apply: []string{"pfifo limit 50", "cake bandwidth 10mbit"}, needs: []string{"cake"}},
	{name: "cake defaults", tc: root("cake"), apply: []string{"cake bandwidth 10mbit overhead 18"}, needs: []string{"cake"}},
	{name: "cake shaped", tc: root("cake bandwidth 20mbit rtt 50ms diffserv4 dual-srchost overhead 18 mpu 64 ptm ack-filter-aggressive memlimit 4mb fwmark 0xff ingress"), apply: []string{"cake bandwidth 10mbit"}, needs: []string{"cake"}},
	{name: "tbf peakrate", tc: root("tbf rate 1mbit burst 10k latency 50ms peakrate 2mbit mtu 1514"), apply: []string{"pfifo limit 50", "tbf rate 3mbit burst 20k latency 20ms"}, needs: []string{"tbf"}},
	{name: "tbf linklayer atm overhead mpu", tc: root("tbf rate 1mbit burst 10k latency 50ms overhead 20 mpu 64 linklayer atm"), apply: []string{"tbf rate 3mbit burst 20k latency 20ms"}, needs: []string{"tbf"}},
	{name: "tbf runbook 003", tc: root("tbf rate 1950kbit burst 4096 latency 300ms"), apply: []string{"tbf rate 3mbit burst 20k latency 20ms"}, needs: []string{"tbf"}},
	{name: "netem everything", tc: root("netem delay 10ms 2ms 25% loss 1% 10% duplicate 2% corrupt 0.1% reorder 25% 50% gap 5 rate 10mbit 20 ecn slot 1ms 2ms"), apply: []string{"pfifo limit 50", "netem delay 1ms"}, needs: []string{"netem"}},
	{name: "netem loss model", tc: root("netem delay 5ms loss gemodel 1% 10% 70% 0.1%"), apply: []string{"netem delay 1ms"}, needs: []string{"netem"}},
	{name: "sfq depth headdrop flows", tc: root("sfq perturb 10 quantum 1514 limit 100 depth 50 headdrop flows 64 divisor 512"), apply: []string{"pfifo limit 50", "sfq perturb 5"}, needs: []string{"sfq"}},
	{name: "sfq defaults", tc: root("sfq"), apply: []string{"sfq perturb 5"}, needs: []string{"sfq"}},
	{name: "sfq red", tc: root("sfq redflowlimit 100000 min 8000 max 60000 probability 0.2 ecn headdrop"), apply: []string{"sfq perturb 5"}, needs: []string{"sfq"}},
	{name: "prio priomap", tc: root("prio bands 5 priomap 0 1 2 3 4 0 1 2 3 4 0 1 2 3 4 0"), apply: []string{"prio bands 3"}, needs: []string{"prio"}},
	{name: "pfifo_fast explicit", tc: root("pfifo_fast"), apply: []string{"pfifo_fast", "pfifo limit 50"}},
	{name: "pfifo limit", tc: root("pfifo limit 77"), apply: []string{"pfifo limit 50", "bfifo limit 9000"}},
	{name: "bfifo limit", tc: root("bfifo limit 7777"), apply: []string{"bfifo limit 9000"}},
	{name: "stab atm", tc: [][]string{{"qdisc", "add", "dev", "v0", "root", "handle", "5:", "stab", "overhead", "20", "mpu", "64", "linklayer", "atm", "pfifo", "limit", "99"}}, apply: []string{"pfifo limit 50"}},
	{name: "stab overhead", tc: [][]string{{"qdisc", "add", "dev", "v0", "root", "handle", "5:", "stab", "overhead", "24", "pfifo"}}, apply: []string{"bfifo limit 9000"}},
	{name: "htb shaper by hand", tc: [][]string{
		{"qdisc", "add", "dev", "v0", "root", "handle", "5:", "htb", "default", "1", "r2q", "20", "direct_qlen", "33"},
		{"class", "add", "dev", "v0", "parent", "5:", "classid", "5:1", "htb", "rate", "1mbit", "ceil", "2mbit", "burst", "15k", "cburst", "3k", "prio", "3", "quantum", "3000", "overhead", "20", "mpu", "64"},
		{"qdisc", "add", "dev", "v0", "parent", "5:1", "handle", "15:", "pfifo", "limit", "30"},
	}, apply: []string{"pfifo limit 50", "htb rate 5mbit leaf { pfifo limit 10 }"}, needs: []string{"htb"}},
	{name: "tbf with bfifo leaf", tc: [][]string{
		{"qdisc", "add", "dev", "v0", "root", "handle", "5:", "tbf", "rate", "2mbit", "burst", "8k", "limit", "20000"},
		{"qdisc", "add", "dev", "v0", "parent", "5:1", "handle", "15:", "bfifo", "limit", "12345"},
	}, apply: []string{"pfifo limit 50"}, needs: []string{"tbf"}},
	{name: "mq with explicit children", txq: 4, tc: [][]string{
		{"qdisc", "add", "dev", "v0", "root", "handle", "7:", "mq"},
		{"qdisc", "replace", "dev", "v0", "parent", "7:1", "handle", "71:", "pfifo", "limit", "11"},
		{"qdisc", "replace", "dev", "v0", "parent", "7:3", "handle", "73:", "bfifo", "limit", "3333"},
	}, apply: []string{"mq children { pfifo limit 50 }", "pfifo limit 50"}},
}

// root is one "tc qdisc add dev v0 root handle 5: ARGS" command.
func root(args string) [][]string {
	return [][]string{append([]string{"qdisc", "add", "dev", "v0", "root", "handle", "5:"}, strings.Fields(args)...)}
}

// TestIntegrationQdiscExactRollback configures a root qdisc with tc, applies
// another value through the qdisc knob as an apply does (Read before, Write,
// Verify), restores the recorded before value as a rollback does (Write, then
// knob.Same against the record), and requires tc's own detailed JSON view of
// the device to be identical before and after. Kinds this kernel lacks run in
// the stock-kernel VM, where a missing one fails:
//
//	go run ./test/vmtest -pkg ./internal/knob -run TestIntegrationQdiscExactRollback
func TestIntegrationQdiscExactRollback(t *testing.T) {
	if _, err := exec.LookPath("tc"); err != nil {
		t.Fatalf("tc (iproute2) is needed to build and cross-check the qdiscs: %v", err)
	}
	ctx := context.Background()
	for _, tt := range exactCases {
		for _, value := range tt.apply {
			t.Run(tt.name+"/apply "+value, func(t *testing.T) {
				txq := max(tt.txq, 1)
				ns := testnet.New(t)
				ns.Veth(t, "v0", "v1", nil, txq)
				needFeatures(t, ns, tt.needs)
				for _, args := range tt.tc {
					if out, err := ns.Command("tc", args...).CombinedOutput(); err != nil {
						t.Fatalf("tc %s: %v\n%s", strings.Join(args, " "), err, out)
					}
				}
				want := tcShow(t, ns)
				var before, restored string
				err := ns.Do(func() error {
					k, err := knob.New(knob.Live, "qdisc/v0/root")
					if err != nil {
						return err
					}
					if before, err = k.Read(ctx); err != nil {
						return err
					}
					if err := k.Write(ctx, value); err != nil {
						return err
					}
					if err := knob.Verify(ctx, k, value); err != nil {
						return err
					}
					if err := k.Write(ctx, before); err != nil {
						return err
					}
					if restored, err = k.Read(ctx); err != nil {
						return err
					}
					if !knob.Same(k, restored, before) {
						t.Errorf("knob.Same(restored, before) = false:\nbefore   %q\nrestored %q", before, restored)
					}
					return nil
				})
				if err != nil {
					t.Fatalf("before %q: %v", before, err)
				}
				t.Logf("before %q", before)
				if got := tcShow(t, ns); !reflect.DeepEqual(got, want) {
					t.Errorf("tc -d -j qdisc show differs after the rollback (-want +got):\n- %s\n+ %s\nrecorded before value %q, read after %q", mustJSON(want), mustJSON(got), before, restored)
				}
			})
		}
	}
}

// TestIntegrationQdiscRefusesInexactRestore: a root lowlat cannot recreate
// exactly (a rate estimator, whose parameters the kernel never reports; a
// filter attached to the qdisc, which replacing it destroys) reads as
// @unmanaged, and writing that value back is refused in one line instead of
// being reported as restored.
func TestIntegrationQdiscRefusesInexactRestore(t *testing.T) {
	tests := []struct {
		name string
		tc   [][]string
	}{
		{"rate estimator", [][]string{{"qdisc", "add", "dev", "v0", "root", "handle", "5:", "estimator", "1s", "8s", "pfifo", "limit", "77"}}},
		{"filter on the root", [][]string{
			{"qdisc", "add", "dev", "v0", "root", "handle", "5:", "htb", "default", "1"},
			{"class", "add", "dev", "v0", "parent", "5:", "classid", "5:1", "htb", "rate", "1mbit"},
			{"filter", "add", "dev", "v0", "parent", "5:", "protocol", "all", "prio", "1", "u32", "match", "u32", "0", "0", "flowid", "5:1"},
		}},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := testnet.New(t)
			ns.Veth(t, "v0", "v1", nil, 1)
			for _, args := range tt.tc {
				if out, err := ns.Command("tc", args...).CombinedOutput(); err != nil {
					t.Fatalf("tc %s: %v\n%s", strings.Join(args, " "), err, out)
				}
			}
			want := tcShow(t, ns)
			err := ns.Do(func() error {
				k, err := knob.New(knob.Live, "qdisc/v0/root")
				if err != nil {
					return err
				}
				before, err := k.Read(ctx)
				if err != nil {
					return err
				}
				if !strings.Contains(before, "@unmanaged") {
					t.Errorf("Read = %q, want it marked @unmanaged", before)
				}
				werr := k.Write(ctx, before)
				if werr == nil || strings.Contains(werr.Error(), "\n") || !strings.Contains(werr.Error(), "cannot recreate") {
					t.Errorf("Write(%q) = %v, want a one-line refusal saying lowlat cannot recreate it", before, werr)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := tcShow(t, ns); !reflect.DeepEqual(got, want) {
				t.Errorf("the refused write changed the device (-want +got):\n- %s\n+ %s", mustJSON(want), mustJSON(got))
			}
		})
	}
}

// needFeatures tries each qdisc kind on a scratch device: missing kinds fail
// the test in the VM (LOWLAT_REQUIRE_QDISCS) and skip it elsewhere.
func needFeatures(t *testing.T, ns *testnet.NS, kinds []string) {
	t.Helper()
	probes := map[string]error{}
	if err := ns.Do(func() error {
		l, err := netlink.LinkByName("v1")
		if err != nil {
			return err
		}
		for _, k := range kinds {
			probes[k] = qdisc.Probe(l.Attrs().Index, k)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds {
		// In the stock-kernel VM every kind exists: missing is a failure
		// there, whether or not LOWLAT_REQUIRE_QDISCS names it (codel).
		if testnet.InVM() && probes[k] != nil {
			t.Fatalf("qdisc %s is missing in the stock-kernel VM: %v", k, probes[k])
		}
		testnet.NeedFeature(t, k, probes[k])
	}
}

// tcView is iproute2's detailed view of v0 without statistics: its qdiscs as
// JSON and its classes as text (tc 6.1 prints htb, tbf and mq classes as text
// even with -j). Nothing is dropped from the qdiscs: every field tc prints
// without -s is configuration, so a rollback must restore all of them,
// handles included.
type tcView struct {
	Qdiscs  []map[string]any
	Classes []string
}

func tcShow(t *testing.T, ns *testnet.NS) tcView {
	t.Helper()
	out, err := ns.Command("tc", "-d", "-j", "qdisc", "show", "dev", "v0").Output()
	if err != nil {
		t.Fatalf("tc -d -j qdisc show: %v", err)
	}
	var v tcView
	if err := json.Unmarshal(out, &v.Qdiscs); err != nil {
		t.Fatalf("tc -j: %v (%s)", err, out)
	}
	classes, err := ns.Command("tc", "-d", "class", "show", "dev", "v0").Output()
	if err != nil {
		t.Fatalf("tc -d class show: %v", err)
	}
	for _, l := range strings.Split(string(classes), "\n") {
		f := strings.Fields(l)
		// The classes of flow-queueing qdiscs are their active flows, which
		// come and go with traffic (a neighbour solicitation): traffic state,
		// not configuration.
		if len(f) < 2 || f[1] == "fq_codel" || f[1] == "sfq" || f[1] == "cake" || f[1] == "fq" {
			continue
		}
		v.Classes = append(v.Classes, strings.Join(f, " "))
	}
	return v
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestIntegrationQdiscLegacyRestore: before values journaled by an older
// lowlat (no handle, no preserved attributes, times and bursts as it printed
// them) still restore, and compare equal to what they recorded.
func TestIntegrationQdiscLegacyRestore(t *testing.T) {
	tests := []struct {
		name, tc, before string
		needs            []string
	}{
		{"kernel default", "", "noqueue @default", nil},
		{"pfifo", "pfifo limit 77", "pfifo limit 77", nil},
		{"tbf runbook 003", "tbf rate 1950kbit burst 4096 latency 300ms", "tbf rate 1950kbit burst 4095 limit 77221", []string{"tbf"}},
		{"fq_codel", "fq_codel", "fq_codel limit 10240 flows 1024 target 4999us interval 99999us quantum 1514 ecn memory_limit 33554432 drop_batch 64", []string{"fq_codel"}},
		{"fq", "fq", "fq limit 10000 flow_limit 100 quantum 3028 initial_quantum 15140 buckets 1024 pacing refill_delay 40ms low_rate_threshold 550kbit horizon 10s", []string{"fq"}},
	}
	ctx := context.Background()
	for _, tt := range tests {
		for _, value := range []string{"bfifo limit 9000", "pfifo limit 50"} {
			t.Run(tt.name+"/apply "+value, func(t *testing.T) {
				ns := testnet.New(t)
				ns.Veth(t, "v0", "v1", nil, 1)
				needFeatures(t, ns, tt.needs)
				if tt.tc != "" {
					for _, args := range root(tt.tc) {
						if out, err := ns.Command("tc", args...).CombinedOutput(); err != nil {
							t.Fatalf("tc %s: %v\n%s", strings.Join(args, " "), err, out)
						}
					}
				}
				err := ns.Do(func() error {
					k, err := knob.New(knob.Live, "qdisc/v0/root")
					if err != nil {
						return err
					}
					if live, err := k.Read(ctx); err != nil || !knob.Same(k, live, tt.before) {
						t.Errorf("live %q (%v) is not the same as the legacy record %q", live, err, tt.before)
					}
					if err := k.Write(ctx, value); err != nil {
						return err
					}
					if err := k.Write(ctx, tt.before); err != nil {
						return err
					}
					restored, err := k.Read(ctx)
					if err != nil {
						return err
					}
					if !knob.Same(k, restored, tt.before) {
						t.Errorf("restored %q, not the same as the legacy record %q", restored, tt.before)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}
