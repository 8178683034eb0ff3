package doctor

import (
	"github.com/lowlat/lowlat/internal/runbooks"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/plan"
	"github.com/lowlat/lowlat/internal/profile"
)

// Every finding names the section of docs/runbooks.md that tells its
// runbook, and that section exists: the checks' own findings on every fixture
// host (sampled and not), the socket checks, and the plan rows of every
// built-in profile.
func TestFindingSourcesAreRunbookSections(t *testing.T) {
	sections := runbookSections(t)
	busy := &fakeSampler{s: &Sample{Window: time.Second,
		NICDeltas: map[string]map[string]uint64{"eth0": {"port.rx_dropped": 40, "rx_packets": 100000}},
		Ksoftirqd: map[int]float64{0: 0.9, 1: 0.01},
		Threads:   []ThreadLoad{{PID: 900, TID: 901, Comm: "gateway", Share: 0.95, CPU: 12}},
	}}
	var reports []*Report
	for _, name := range []string{"dual-i40e-nvme", "centos7-3.10", "epyc-25g", "virtio-vm"} {
		f := fixture(t, name)
		reports = append(reports, Run(f, Options{}))
		live := fixture(t, name)
		live.Source = "live"
		reports = append(reports, Run(live, sampled(busy)))
		for _, pn := range profile.BuiltinNames() {
			p, err := profile.Builtin(pn)
			if err != nil {
				t.Fatal(err)
			}
			sets := map[string]string{}
			if _, ok := p.Params["rate"]; ok {
				sets["rate"] = "2mbit"
			}
			r, err := profile.Resolve(p, sets)
			if err != nil {
				t.Fatal(err)
			}
			pl, err := plan.Make(f, r, plan.Options{})
			if err != nil {
				t.Fatalf("%s on %s: %v", pn, name, err)
			}
			reports = append(reports, Run(f, Options{Plan: pl}))
		}
	}
	reports = append(reports, Run(socketFacts(), Options{}))
	seen := map[string]bool{}
	for _, rep := range reports {
		for _, f := range rep.Findings {
			if f.NotChecked {
				continue
			}
			seen[f.ID] = true
			if !sections[f.Source] {
				t.Errorf("%s: source %q is not a section of docs/runbooks.md (%s)", f.ID, f.Source, f.Summary)
			}
		}
	}
	if len(seen) < 15 {
		t.Errorf("only %d kinds of finding seen: the test no longer exercises the checks", len(seen))
	}
}

// runbookSections lists the sections of docs/runbooks.md a source may name.
func runbookSections(t *testing.T) map[string]bool {
	t.Helper()
	out, err := runbooks.Sections("../../docs/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 5 {
		t.Fatalf("docs/runbooks.md has %d sections, want one per runbook", len(out))
	}
	return out
}
