package gate

import (
	"math"
	"slices"
	"sort"
)

// unitClass is what a metric measures, and so which units its SLO value
// takes.
type unitClass int

const (
	classTime  unitClass = iota // ms; us, ms, s
	classPct                    // %
	classRate                   // Mbit/s; kbit, mbit, gbit
	classCount                  // a bare number (rpm, per second)
)

// metricDef is one metric the gate knows: the probes that report it, its
// unit and which direction is better. docs/gate.md describes each.
type metricDef struct {
	class  unitClass
	unit   string // the unit values are held and shown in
	higher bool   // higher is better (goodput, rpm); else lower
	// signed is a difference that may be negative (increase_ms); every
	// other figure is at least 0, and a percentage at most 100.
	signed bool
	kinds  []string
}

// clip keeps x inside the metric's range: an interval never reaches below
// 0 % or above 100 % loss, nor below 0 ms.
func (d metricDef) clip(x float64) float64 {
	switch {
	case math.IsNaN(x):
		return x
	case d.class == classPct:
		return min(100, max(0, x))
	case !d.signed:
		return max(0, x)
	}
	return x
}

var allKinds = []string{"udp", "tcp", "crr", "load", "icmp", "passive"}

// metrics is every metric a gate can judge, by SLO name.
var metrics = map[string]metricDef{}

func init() {
	for _, p := range []string{"p50", "p90", "p99", "p999", "max", "mean"} {
		metrics[p] = metricDef{class: classTime, unit: "ms", kinds: allKinds}
		metrics["idle_"+p] = metricDef{class: classTime, unit: "ms", kinds: []string{"load"}}
	}
	for _, p := range []string{"p50", "p99"} {
		metrics["first_byte_"+p] = metricDef{class: classTime, unit: "ms", kinds: []string{"crr"}}
		metrics["connect_"+p] = metricDef{class: classTime, unit: "ms", kinds: []string{"crr"}}
	}
	metrics["jitter"] = metricDef{class: classTime, unit: "ms", kinds: []string{"udp", "icmp"}}
	// icmp's loss has no direction (docs/gate.md).
	metrics["loss"] = metricDef{class: classPct, unit: "%", kinds: []string{"udp", "load", "icmp"}}
	for _, l := range []string{"loss_up", "loss_down"} {
		metrics[l] = metricDef{class: classPct, unit: "%", kinds: []string{"udp", "load"}}
	}
	metrics["idle_loss"] = metricDef{class: classPct, unit: "%", kinds: []string{"load"}}
	metrics["increase_ms"] = metricDef{class: classTime, unit: "ms", signed: true, kinds: []string{"load"}}
	metrics["errors"] = metricDef{class: classPct, unit: "%", kinds: []string{"tcp", "crr"}}
	metrics["rpm"] = metricDef{class: classCount, unit: "rpm", higher: true, kinds: []string{"load"}}
	metrics["goodput_mbps"] = metricDef{class: classRate, unit: "Mbit/s", higher: true, kinds: []string{"load"}}
	metrics["goodput_up_mbps"] = metricDef{class: classRate, unit: "Mbit/s", higher: true, kinds: []string{"load"}}
	metrics["goodput_down_mbps"] = metricDef{class: classRate, unit: "Mbit/s", higher: true, kinds: []string{"load"}}
	metrics["transactions_per_sec"] = metricDef{class: classCount, unit: "/s", higher: true, kinds: []string{"crr"}}
}

// Metrics lists the metrics a probe kind reports, sorted.
func Metrics(kind string) []string {
	var out []string
	for name, d := range metrics {
		if slices.Contains(d.kinds, kind) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// defaultTerms are always judged against a baseline, an SLO's terms added
// to them: "not worse on p50, p99, loss and errors" (loss and errors where
// the probe measures them).
var defaultTerms = []string{"p50", "p99", "loss", "errors"}
