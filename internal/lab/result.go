package lab

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// Result is one scenario run. Its JSON layout is a contract with scripts and
// CI checks: scenario, kernel {version, missing}, variants [{name, fix,
// metrics, expectations [{metric, op, value, observed, pass}]}], pass; the
// other fields add context.
type Result struct {
	Scenario string          `json:"scenario"`
	Runbook  string          `json:"runbook"`
	Title    string          `json:"title"`
	Kernel   KernelInfo      `json:"kernel"`
	Variants []VariantResult `json:"variants"`
	// Pass: every expectation of every variant held. A variant that could
	// not run fails its expectations; a degraded network (Kernel.Missing)
	// is named in Notes, never silently passed over.
	Pass bool `json:"pass"`

	// Where it ran: "host" or "qemu-tcg" (lab vm), and the tool version.
	Environment string   `json:"environment"`
	Tool        string   `json:"tool"`
	Topology    TopoSpec `json:"topology"`
	// Congestion is the congestion control the namespaces started with.
	Congestion string    `json:"congestion"`
	Notes      []string  `json:"notes,omitempty"`
	Started    time.Time `json:"started"`
	Seconds    float64   `json:"seconds"`
}

// KernelInfo names the kernel and the features a scenario wanted that it
// lacks (netem, fq_codel, cake, …).
type KernelInfo struct {
	Version string   `json:"version"`
	Missing []string `json:"missing"`
}

// Variant statuses.
const (
	StatusRan    = "ran"
	StatusNotRun = "not-run"
)

// VariantResult is one variant's measurement.
type VariantResult struct {
	Name string `json:"name"`
	// Fix says what the variant changed: "none" for the baseline, otherwise
	// the profile (and flags) applied with lowlat's engine and/or the
	// application-side change.
	Fix    string `json:"fix"`
	Status string `json:"status"`
	// Why explains a not-run status.
	Why string `json:"why,omitempty"`
	// Metrics holds the probe results by measurement name (each the probe's
	// own JSON) and "derived": figures computed from them (ms, ratios).
	Metrics      map[string]any `json:"metrics"`
	Expectations []ExpectResult `json:"expectations"`
	// Changes are the knobs the engine set (and rolled back afterwards);
	// Skipped the plan rows it did not apply, with the reason.
	Changes []KnobChange `json:"changes,omitempty"`
	Skipped []KnobChange `json:"skipped,omitempty"`
	Notes   []string     `json:"notes,omitempty"`
	// Timeline is the RTT over time seen by the lab's sampler during the
	// measurement (for the HTML plots).
	Timeline *Timeline `json:"timeline,omitempty"`
	// Rates is the client shaper's rate over time against the provider's
	// cap (capped-uplink-varying).
	Rates *RateTimeline `json:"rates,omitempty"`
	// CDF names the histogram in Metrics the report draws as the RTT CDF.
	CDF string `json:"cdf,omitempty"`
	// Gate is the production gate's verdict on a fix against the baseline,
	// from the probe the CDF comes from.
	Gate *GateResult `json:"gate,omitempty"`
}

// KnobChange is one plan row as the lab used it.
type KnobChange struct {
	Knob   string `json:"knob"`
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Timeline is a sampler's RTT series: Points are [seconds since the start
// of the measurement, RTT ms]; Lost are the send times of probes that got no
// reply.
type Timeline struct {
	Source string       `json:"source"`
	Points [][2]float64 `json:"points"`
	Lost   []float64    `json:"lost,omitempty"`
	// Phases mark when the measurement's phases began (e.g. "load" at 3 s).
	Phases map[string]float64 `json:"phases,omitempty"`
}

// RateTimeline is a shaper's rate over time (s, Mbit/s) and the provider's
// cap as a staircase.
type RateTimeline struct {
	Source string       `json:"source"`
	Points [][2]float64 `json:"points"`
	Cap    [][2]float64 `json:"cap"`
}

// ExpectResult is one checked expectation.
type ExpectResult struct {
	Metric string `json:"metric"`
	Op     string `json:"op"`
	// Value is a number, or [low, high] for op "between".
	Value    any      `json:"value"`
	Observed *float64 `json:"observed"`
	Pass     bool     `json:"pass"`
	// Versus: the observed figure is the Versus variant's metric minus this
	// variant's (e.g. round trips saved).
	Versus string `json:"versus,omitempty"`
	Unit   string `json:"unit,omitempty"`
	Desc   string `json:"desc"`
	// Before is the same metric in the baseline (or Versus) variant, for the
	// text table.
	Before *float64 `json:"before,omitempty"`
}

// Expect is an expectation a variant checks.
type Expect struct {
	// Metric is a dotted path into the variant's metrics JSON
	// ("derived.loaded_p99_ms", "load.goodput_mbps.up").
	Metric string
	Op     string // "<", "<=", ">", ">=", "between"
	Value  float64
	Max    float64 // upper bound for "between"
	Versus string
	Unit   string
	Desc   string
}

func (e Expect) holds(x float64) bool {
	switch e.Op {
	case "<":
		return x < e.Value
	case "<=":
		return x <= e.Value
	case ">":
		return x > e.Value
	case ">=":
		return x >= e.Value
	case "between":
		return x >= e.Value && x <= e.Max
	}
	return false
}

// String renders the expectation for the table: "> 1000 ms".
func (e Expect) String() string {
	if e.Op == "between" {
		return fmt.Sprintf("%s..%s %s", fnum(e.Value), fnum(e.Max), e.Unit)
	}
	return strings.TrimSpace(fmt.Sprintf("%s %s %s", e.Op, fnum(e.Value), e.Unit))
}

func fnum(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "-"
	}
	a := math.Abs(x)
	switch {
	case a >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	case a >= 0.1 || a == 0:
		return strconv.FormatFloat(x, 'f', 2, 64)
	}
	return strconv.FormatFloat(x, 'g', 2, 64)
}

// flatten turns metrics into generic JSON values for path lookups.
func flatten(metrics map[string]any) map[string]any {
	b, err := json.Marshal(metrics)
	if err != nil {
		return nil
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// lookup finds a dotted path in flattened metrics.
func lookup(m map[string]any, path string) (float64, bool) {
	var cur any = m
	for _, p := range strings.Split(path, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return 0, false
		}
		cur, ok = mm[p]
		if !ok {
			return 0, false
		}
	}
	x, ok := cur.(float64)
	return x, ok && !math.IsNaN(x)
}

// evaluate checks every expectation of every variant against the metrics
// and sets Pass. Expectations of variants that did not run fail.
func evaluate(r *Result, expects map[string][]Expect) {
	judge(r)
	flat := map[string]map[string]any{}
	for _, v := range r.Variants {
		if v.Status == StatusRan {
			flat[v.Name] = flatten(v.Metrics)
		}
	}
	baseline := ""
	if len(r.Variants) > 0 {
		baseline = r.Variants[0].Name
	}
	r.Pass = len(r.Variants) > 0
	ran := 0
	for i := range r.Variants {
		v := &r.Variants[i]
		if v.Status == StatusRan {
			ran++
		}
		v.Expectations = []ExpectResult{}
		for _, e := range expects[v.Name] {
			er := ExpectResult{Metric: e.Metric, Op: e.Op, Value: e.Value, Versus: e.Versus, Unit: e.Unit, Desc: e.Desc}
			if e.Op == "between" {
				er.Value = []float64{e.Value, e.Max}
			}
			m := flat[v.Name]
			x, ok := lookup(m, e.Metric)
			ref := baseline
			if e.Versus != "" {
				ref = e.Versus
				y, ok2 := lookup(flat[e.Versus], e.Metric)
				if ok && ok2 {
					er.Before = ptr(y)
					x = y - x
				} else {
					ok = false
				}
			} else if ref != v.Name {
				if y, ok2 := lookup(flat[ref], e.Metric); ok2 {
					er.Before = ptr(y)
				}
			}
			if ok {
				er.Observed = ptr(x)
				er.Pass = e.holds(x)
			}
			if !er.Pass {
				r.Pass = false
			}
			v.Expectations = append(v.Expectations, er)
		}
	}
	if ran == 0 {
		r.Pass = false
	}
}

func ptr(x float64) *float64 { return &x }

// ReadResult reads a result written by "lab run -o FILE" (or lab vm).
func ReadResult(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("lab result: %w", err)
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("lab result %s: %w", path, err)
	}
	if r.Scenario == "" {
		return nil, fmt.Errorf("lab result %s: not a lab result (no scenario)", path)
	}
	return &r, nil
}
