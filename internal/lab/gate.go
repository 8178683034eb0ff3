package lab

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/lowlat/lowlat/internal/gate"
	"github.com/lowlat/lowlat/internal/probe"
)

// GateResult is the production gate's verdict on a fix variant: what
// 'lowlat apply --prove' without --slo would have decided, measured by the
// variant's main probe against the baseline's. The lab and a real apply
// judge "better" with the same code (gate.Decide).
type GateResult struct {
	// Measurement names the probe result in Metrics that was judged.
	Measurement string `json:"measurement"`
	gate.Verdict
}

// judge gives every fix variant that ran the gate's verdict against the
// baseline, and records it as the derived metric gate_keep (1 kept, 0
// rolled back) so a scenario can expect it like any other figure.
func judge(r *Result) {
	if len(r.Variants) == 0 || r.Variants[0].Status != StatusRan {
		return
	}
	base := &r.Variants[0]
	for i := 1; i < len(r.Variants); i++ {
		v := &r.Variants[i]
		// A variant that changes nothing (another way to measure the same
		// network) has nothing for the gate to keep.
		if v.Status != StatusRan || v.Fix == "none" {
			continue
		}
		name, _, _ := strings.Cut(v.CDF, ".")
		before, err := summaryOf(base.Metrics[name])
		if err == nil {
			var after *gate.Summary
			if after, err = summaryOf(v.Metrics[name]); err == nil {
				g := &GateResult{Measurement: name, Verdict: gate.Decide(before, after, gate.Policy{})}
				v.Gate = g
				keep := 0.0
				if g.Keep {
					keep = 1
				}
				d, _ := v.Metrics["derived"].(map[string]float64)
				if d == nil {
					d = map[string]float64{}
					v.Metrics["derived"] = d
				}
				d["gate_keep"] = keep
				continue
			}
		}
		v.Notes = append(v.Notes, fmt.Sprintf("gate: no verdict on %q: %v", name, err))
	}
}

// summaryOf reads a probe result as the gate does: a typed result from this
// run, or its JSON form (a result read back from a file or the VM).
func summaryOf(m any) (*gate.Summary, error) {
	switch m.(type) {
	case nil:
		return nil, fmt.Errorf("not measured")
	case *probe.UDPResult, *probe.TCPResult, *probe.CRRResult, *probe.LoadResult:
		return gate.Summarize(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	res, err := probe.DecodeResult(b)
	if err != nil {
		return nil, err
	}
	return gate.Summarize(res)
}

// gateLine is a variant's gate verdict in one line, for the text report.
func gateLine(v *VariantResult) string {
	if v.Gate == nil {
		return ""
	}
	what := "rolled it back"
	if v.Gate.Keep {
		what = "kept it"
	}
	return fmt.Sprintf("%s: the gate (apply --prove without --slo, on the %q probe) would have %s: %s", v.Name, v.Gate.Measurement, what, v.Gate.Reason)
}
