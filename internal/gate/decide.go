package gate

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Row verdicts, worst first.
const (
	NotMeasured = "not measured" // the after run has no value for it
	Violated    = "violated"     // an SLO term does not hold after the change
	Worse       = "worse"        // worse than the baseline beyond the noise
	Better      = "better"       // better than the baseline beyond the noise
	Same        = "same"         // within the noise of the baseline
	Met         = "met"          // the SLO holds; no baseline to compare with
)

// Row is one judged metric.
type Row struct {
	Metric string  `json:"metric"`
	Before *Metric `json:"before,omitempty"`
	After  *Metric `json:"after,omitempty"`
	// SLO is the metric's terms, as written, comma-separated.
	SLO     string `json:"slo,omitempty"`
	Verdict string `json:"verdict"`
}

// Verdict is a gate's decision with the rows it rests on.
type Verdict struct {
	Keep   bool   `json:"keep"`
	Reason string `json:"reason"`
	Rows   []Row  `json:"rows"`
}

// Decide judges a change: after is the measurement with it, before the
// baseline (nil: none, the SLO alone decides). The change is kept only when
// every SLO term holds after it and no judged metric (the SLO's, or p50, p99
// and loss without one) got worse than the baseline beyond the noise.
func Decide(before, after *Summary, slo SLO) Verdict {
	var names []string
	terms := map[string][]Term{}
	for _, t := range slo {
		if !slices.Contains(names, t.Metric) {
			names = append(names, t.Metric)
		}
		terms[t.Metric] = append(terms[t.Metric], t)
	}
	if len(slo) == 0 && before != nil {
		for _, m := range defaultTerms {
			if after.Has(m) || (before != nil && before.Has(m)) {
				names = append(names, m)
			}
		}
	}
	v := Verdict{Keep: true}
	var bad, good []string
	for _, name := range names {
		r := Row{Metric: name}
		var texts []string
		for _, t := range terms[name] {
			texts = append(texts, t.Text)
		}
		r.SLO = strings.Join(texts, ",")
		if before != nil && before.Has(name) {
			m := before.Metrics[name]
			r.Before = &m
		}
		if !after.Has(name) {
			r.Verdict = NotMeasured
			v.Rows = append(v.Rows, r)
			bad = append(bad, name+" was not measured after the change")
			continue
		}
		m := after.Metrics[name]
		r.After = &m
		r.Verdict = Met
		if r.Before != nil {
			r.Verdict = compare(name, *r.Before, m)
		}
		for _, t := range terms[name] {
			if !t.holds(m.Value) {
				r.Verdict = Violated
				bad = append(bad, fmt.Sprintf("%s %s violates %s", name, Format(m.Value, m.Unit), t.Text))
			}
		}
		switch r.Verdict {
		case Worse:
			bad = append(bad, fmt.Sprintf("%s %s worse beyond the noise", name, change(*r.Before, m)))
		case Better, Same, Met:
			if r.Before != nil {
				good = append(good, name+" "+change(*r.Before, m))
			} else {
				good = append(good, name+" "+Format(m.Value, m.Unit))
			}
		}
		v.Rows = append(v.Rows, r)
	}
	switch {
	case len(names) == 0:
		v.Keep, v.Reason = false, "nothing to judge by: no SLO and no baseline"
	case len(bad) > 0:
		v.Keep, v.Reason = false, strings.Join(bad, "; ")
	case len(slo) > 0 && before != nil:
		v.Reason = strings.Join(good, ", ") + ": every SLO term holds and nothing got worse"
	case len(slo) > 0:
		v.Reason = strings.Join(good, ", ") + ": every SLO term holds"
	default:
		v.Reason = strings.Join(good, ", ") + ": not worse on " + strings.Join(names, ", ")
	}
	return v
}

// compare says whether after is worse, better or the same as before: worse
// only when the two intervals do not overlap on the bad side.
func compare(name string, before, after Metric) string {
	if metrics[name].higher {
		before, after = negate(before), negate(after)
	}
	switch {
	case after.Lo > before.Hi:
		return Worse
	case after.Hi < before.Lo:
		return Better
	}
	return Same
}

func negate(m Metric) Metric {
	m.Value, m.Lo, m.Hi = -m.Value, -m.Hi, -m.Lo
	return m
}

// change is "21.4 → 4.10 ms".
func change(before, after Metric) string { return FormatChange(before.Value, after.Value, after.Unit) }

// FormatChange renders a before and after value of one unit: "21.4 → 4.10 ms".
func FormatChange(before, after float64, unit string) string {
	return num(before) + " → " + Format(after, unit)
}

// Format renders a value with its unit, to about three significant digits.
func Format(v float64, unit string) string {
	s := num(v)
	switch unit {
	case "", "/s":
		return s + unit
	case "%":
		return s + " %"
	}
	return s + " " + unit
}

func num(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "-"
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1 || a == 0:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// cell is a figure with its interval: "4.10 ms [3.98, 4.25]".
func cell(m *Metric) string {
	if m == nil {
		return "-"
	}
	return fmt.Sprintf("%s [%s, %s]", Format(m.Value, m.Unit), num(m.Lo), num(m.Hi))
}

// Table is the verdict's rows as text: metric, before, after, SLO, verdict.
func (v Verdict) Table() [][]string {
	var out [][]string
	for _, r := range v.Rows {
		slo := r.SLO
		if slo == "" {
			slo = "not worse"
		}
		out = append(out, []string{r.Metric, cell(r.Before), cell(r.After), slo, r.Verdict})
	}
	return out
}
