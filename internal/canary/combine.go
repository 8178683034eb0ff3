package canary

import (
	"fmt"
	"math"
	"strings"
)

// Combine makes the verdict of the metrics' results, the SLO terms checked
// on the canary group, and any warnings the data came with (a partial
// answer of a Prometheus whose store was down). The most severe finding
// decides (Class.Severity): a metric surely worse beyond its tolerance or
// a broken SLO term fails the canary whatever the others say; harm surely
// within the tolerance is marginal; a metric, term or reading that cannot
// rule out harm is inconclusive; a pass needs every metric to pass. The
// why line names what decided.
func Combine(metrics []Metric, results []MetricResult, slo []SLOResult, warnings []string) Verdict {
	v := Verdict{Class: Pass, Metrics: results}
	var total, got float64
	var passed []string
	decide := func(c Class, what, why string) {
		if c.Severity() > v.Class.Severity() {
			v.Class, v.Decided, v.Why = c, what, why
		}
	}
	for i, r := range results {
		w := 1.0
		if i < len(metrics) && metrics[i].Weight > 0 {
			w = metrics[i].Weight
		}
		total += w
		switch r.Class {
		case Pass:
			got += w
			s := Ratio
			if i < len(metrics) {
				s = metrics[i].Scale
			}
			passed = append(passed, r.Metric+" "+describe(s, r.Effect, r.Lo, r.Hi))
		case Marginal:
			got += w / 2
		}
		decide(r.Class, r.Metric, r.Metric+": "+r.Why)
	}
	for _, s := range slo {
		switch {
		case !s.Known:
			decide(Inconclusive, "slo "+s.Term, fmt.Sprintf("slo %s: the canary group has no value in the window", s.Term))
		case !s.OK:
			decide(Fail, "slo "+s.Term, fmt.Sprintf("slo %s broken: the canary group's value is %s", s.Term, s.Value))
		}
	}
	if len(warnings) > 0 {
		decide(Inconclusive, "prometheus", "prometheus warned, so its answer may lack data: "+strings.Join(warnings, "; "))
	}
	if total == 0 {
		decide(Inconclusive, "", "no metric was judged")
		return v
	}
	v.Score = math.Round(1000*got/total) / 10
	if v.Class == Pass {
		v.Why = "every metric rules out harm past its bound: " + strings.Join(passed, ", ")
	}
	return v
}

// Unjudged is the result of a metric that could not be judged at all (its
// data could not be read): inconclusive, saying why, its numbers unknown.
func Unjudged(m Metric, why string) MetricResult {
	r := nanResult(m, 0, 0)
	r.Class, r.Why = Inconclusive, why
	return r
}
