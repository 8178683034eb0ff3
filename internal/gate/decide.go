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
	// Band is the range the baseline expects a later run of the same path
	// in (Summary.Band): After's interval is compared with it.
	Band  *[2]float64 `json:"band,omitempty"`
	After *Metric     `json:"after,omitempty"`
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

// Policy is what a gate judges by: the SLO's terms, and, against a
// baseline, "not worse" on the default metrics (p50, p99, loss and errors,
// those the probe reports), which an SLO adds to rather than replaces.
type Policy struct {
	SLO SLO
	// SLOOnly judges by the SLO's terms alone (apply --slo-only): the
	// default metrics are not compared with the baseline. For a change
	// that trades one figure for another on purpose.
	SLOOnly bool
}

// judged lists the metrics a verdict compares, in order: the default
// terms either summary reports (against a baseline, unless SLOOnly), then
// the SLO's others; and the SLO's terms by metric.
func (p Policy) judged(before, after *Summary) (names []string, terms map[string][]Term) {
	terms = map[string][]Term{}
	for _, t := range p.SLO {
		terms[t.Metric] = append(terms[t.Metric], t)
	}
	if before != nil && !(p.SLOOnly && len(p.SLO) > 0) {
		for _, m := range defaultTerms {
			if after.Has(m) || before.Has(m) || len(terms[m]) > 0 {
				names = append(names, m)
			}
		}
	}
	for _, t := range p.SLO {
		if !slices.Contains(names, t.Metric) {
			names = append(names, t.Metric)
		}
	}
	return names, terms
}

// Decide judges a change: after is the measurement with it, before the
// baseline (nil: none, the SLO alone decides). The change is kept only when
// every SLO term holds after it and no judged metric (the default terms and
// the SLO's) got worse than the baseline beyond the noise.
func Decide(before, after *Summary, p Policy) Verdict {
	names, terms := p.judged(before, after)
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
			lo, hi := before.Band(name)
			r.Band = &[2]float64{lo, hi}
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
			r.Verdict = compare(name, *r.Band, m)
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
	case len(p.SLO) > 0 && before != nil && p.SLOOnly:
		v.Reason = strings.Join(good, ", ") + ": every SLO term holds and no SLO metric got worse"
	case len(p.SLO) > 0 && before != nil:
		v.Reason = strings.Join(good, ", ") + ": every SLO term holds and nothing got worse"
	case len(p.SLO) > 0:
		v.Reason = strings.Join(good, ", ") + ": every SLO term holds"
	default:
		v.Reason = strings.Join(good, ", ") + ": not worse on " + strings.Join(names, ", ")
	}
	return v
}

// compare says whether after is worse, better or the same as the
// baseline: worse only when after's own interval lies wholly on the bad side
// of band, the range the baseline expects a later run of the same path in.
func compare(name string, band [2]float64, after Metric) string {
	lo, hi := band[0], band[1]
	if metrics[name].higher {
		after = negate(after)
		lo, hi = -hi, -lo
	}
	switch {
	case after.Lo > hi:
		return Worse
	case after.Hi < lo:
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
		before := cell(r.Before)
		if r.Before != nil && r.Band != nil {
			before = fmt.Sprintf("%s [%s, %s]", Format(r.Before.Value, r.Before.Unit), num(r.Band[0]), num(r.Band[1]))
		}
		out = append(out, []string{r.Metric, before, cell(r.After), slo, r.Verdict})
	}
	return out
}
