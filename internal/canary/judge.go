// Package canary judges a canary the way runbook 000 judged its 5 % of
// players: canary hosts against control hosts, on the fleet's own metrics,
// over hours. This file is the statistics, on per-host, per-step values;
// reading them from Prometheus is the caller's.
//
// Hosts are the unit. Kayenta (Spinnaker's judge) pools every interval of
// every host into one sample per group and runs a Mann-Whitney U test on
// the two; with 4 canary hosts and 24 hourly steps that is 96 "independent"
// values, most of which are the same few hosts again, so the noise between
// hosts (one host's path is longer than another's) reads as an effect. Here
// each host is reduced to one number, the median of its steps, and the
// groups of those numbers are compared:
//
//   - a host's number is the trimmed mean of its steps (on the log scale
//     for latencies);
//   - where every host has the same steps before the change, each host is
//     compared with itself first (its window's number less its own
//     before-window's: a difference in differences), which takes the
//     between-host spread out of the comparison;
//   - the groups are compared with Student's two-sample t on those host
//     numbers, one sided (canary worse, by more than a tolerance to fail),
//     on the log scale for latencies, so the effect reads as a ratio
//     ("+20 %"). A rank test on hosts cannot do with small
//     groups: 2 canary and 4 control hosts have 15 possible rankings, so its
//     smallest p is 1/15 and it could never fail a canary, however bad.
//
// Data too thin to judge (a host with gaps, a group under MinHosts, a
// missing series) is inconclusive, never pass.
package canary

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/stat/distuv"
)

// Scale says how a metric's values compare.
type Scale int

const (
	// Ratio: positive values (latency, jitter), compared on the log scale;
	// the effect is canary/control − 1.
	Ratio Scale = iota
	// Points: fractions that may be 0 (loss), compared as they are; the
	// effect is canary − control.
	Points
)

// Metric is one metric to judge. Higher is worse for every lowlat metric
// (latency, jitter, loss).
type Metric struct {
	Name  string
	Scale Scale
	// Tolerance is the effect below which a canary that is surely worse
	// is still only marginal: 0.05 for Ratio is +5 %, 0.005 for Points is
	// half a percentage point.
	Tolerance float64
	// Weight in the score (0: 1).
	Weight float64
}

// Host is one host's values of one metric: one per step of the window,
// NaN where it has none.
type Host struct {
	Name  string
	After []float64
	// Before is the same steps before the change (nil: not known).
	Before []float64
}

// Rules say when data is enough and a difference counts.
type Rules struct {
	// Alpha is the one-sided significance level (0.05).
	Alpha float64
	// MinHosts is the fewest hosts a group may have (2): one host is not
	// a population.
	MinHosts int
	// MinCoverage is the least share of a host's steps that must have a
	// value (0.8): a host whose series stopped may be the one that broke.
	MinCoverage float64
	// MinSteps is the fewest steps with a value a host needs (6).
	MinSteps int
	// Bound is how far above the tolerance, as a multiple of it, the
	// effect's interval may reach for a pass (10: +50 % for times, +5
	// points for loss). A canary not surely worse, but whose interval
	// reaches past it, is inconclusive: the data cannot rule out that
	// much harm, and "not worse" would be a guess.
	Bound float64
}

// DefaultRules are the judge's defaults.
var DefaultRules = Rules{Alpha: 0.05, MinHosts: 2, MinCoverage: 0.8, MinSteps: 6, Bound: 10}

// Class is a metric's or a whole judgement's classification.
type Class string

const (
	Pass         Class = "pass"
	Marginal     Class = "marginal"
	Fail         Class = "fail"
	Inconclusive Class = "inconclusive"
)

// MetricResult is one metric's judgement.
type MetricResult struct {
	Metric string `json:"metric"`
	Class  Class  `json:"class"`
	// Why says what decided the class, in a line.
	Why string `json:"why"`
	// Canary and Control are the hosts judged.
	Canary  int `json:"canary_hosts"`
	Control int `json:"control_hosts"`
	// Baseline: each host was compared with its own before-window first.
	Baseline bool `json:"baseline"`
	// Effect is canary against control (a ratio − 1, or a difference of
	// fractions), with its (1 − 2·Alpha) interval, the interval of the
	// one-sided test.
	Effect float64 `json:"effect"`
	Lo     float64 `json:"effect_lo"`
	Hi     float64 `json:"effect_hi"`
	// P is the one-sided p-value of "the canary is worse", PBeyond that of
	// "the canary is worse by more than the tolerance".
	P       float64 `json:"p"`
	PBeyond float64 `json:"p_beyond_tolerance"`
	// CanaryMedian and ControlMedian are the medians of the groups' host
	// medians over the window, in the metric's units (for the table; the
	// test uses trimmed means).
	CanaryMedian  float64 `json:"canary_median"`
	ControlMedian float64 `json:"control_median"`
}

// JudgeMetric compares the canary hosts with the control hosts on m.
func JudgeMetric(m Metric, canary, control []Host, r Rules) MetricResult {
	res := MetricResult{Metric: m.Name, Canary: len(canary), Control: len(control), Effect: math.NaN(), Lo: math.NaN(), Hi: math.NaN(), P: math.NaN(), PBeyond: math.NaN()}
	for _, g := range []struct {
		name  string
		hosts []Host
	}{{"canary", canary}, {"control", control}} {
		if len(g.hosts) < r.MinHosts {
			res.Class, res.Why = Inconclusive, fmt.Sprintf("%s group: %d hosts, at least %d needed (one host is not a population)", g.name, len(g.hosts), r.MinHosts)
			return res
		}
	}
	baseline := true
	for _, h := range append(append([]Host{}, canary...), control...) {
		if why := thin(h.After, r); why != "" {
			res.Class, res.Why = Inconclusive, fmt.Sprintf("host %s: %s", h.Name, why)
			return res
		}
		if h.Before == nil || thin(h.Before, r) != "" {
			baseline = false
		}
	}
	res.Baseline = baseline
	stats := func(hosts []Host) (xs, levels []float64) {
		for _, h := range hosts {
			levels = append(levels, median(finite(h.After)))
			x := trimmedMean(m.Scale, h.After)
			if baseline {
				x -= trimmedMean(m.Scale, h.Before)
			}
			xs = append(xs, x)
		}
		return xs, levels
	}
	cx, cl := stats(canary)
	kx, kl := stats(control)
	res.CanaryMedian, res.ControlMedian = median(cl), median(kl)
	d, se, df := pooledT(cx, kx)
	tdist := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}
	// pWorse is the one-sided p-value of "the difference is above by".
	pWorse := func(by float64) float64 {
		switch {
		case se > 0:
			return 1 - tdist.CDF((d-by)/se)
		case d > by:
			return 0
		}
		return 1
	}
	res.P, res.PBeyond = pWorse(0), pWorse(scaled(m.Scale, 1+m.Tolerance)-scaled(m.Scale, 1))
	if m.Scale == Points {
		res.PBeyond = pWorse(m.Tolerance)
	}
	half := 0.0
	if se > 0 {
		half = tdist.Quantile(1-r.Alpha) * se
	}
	res.Effect, res.Lo, res.Hi = unscaled(m.Scale, d), unscaled(m.Scale, d-half), unscaled(m.Scale, d+half)
	effect := describe(m.Scale, res.Effect, res.Lo, res.Hi)
	// A fail is a canary surely worse by more than the tolerance (tested
	// against the tolerance, not against 0: a canary surely 2 % worse
	// with a tolerance of 5 % is marginal, never a fail).
	switch {
	case res.PBeyond < r.Alpha:
		res.Class, res.Why = Fail, fmt.Sprintf("canary worse beyond the tolerance %s: %s, p %.3g", describe(m.Scale, m.Tolerance, m.Tolerance, m.Tolerance), effect, res.PBeyond)
	case res.P < r.Alpha:
		res.Class, res.Why = Marginal, fmt.Sprintf("canary worse within the tolerance %s: %s, p %.3g", describe(m.Scale, m.Tolerance, m.Tolerance, m.Tolerance), effect, res.P)
	case r.Bound > 0 && res.Hi > r.Bound*m.Tolerance:
		bound := r.Bound * m.Tolerance
		res.Class, res.Why = Inconclusive, fmt.Sprintf("too noisy to rule out harm: %s reaches past %s (more hosts, a longer window or each host's window before would narrow it)", effect, describe(m.Scale, bound, bound, bound))
	default:
		res.Class, res.Why = Pass, fmt.Sprintf("not worse beyond the noise between hosts: %s, p %.3g", effect, res.P)
	}
	return res
}

// Verdict is the whole judgement.
type Verdict struct {
	Class Class `json:"verdict"`
	// Score is 100 times the weighted share of the metrics that passed,
	// a marginal one counting half (Kayenta's score, with its marginal).
	Score   float64        `json:"score"`
	Metrics []MetricResult `json:"metrics"`
}

// Thresholds of the score: at least PassScore passes, below MarginalScore
// fails, between is marginal (Kayenta's defaults are 95 and 75).
const (
	PassScore     = 95.0
	MarginalScore = 75.0
)

// Combine scores the metrics' results. Any inconclusive metric makes the
// verdict inconclusive: a metric that cannot be judged cannot be passed.
func Combine(metrics []Metric, results []MetricResult) Verdict {
	v := Verdict{Metrics: results}
	var total, got float64
	for i, r := range results {
		w := 1.0
		if i < len(metrics) && metrics[i].Weight > 0 {
			w = metrics[i].Weight
		}
		total += w
		switch r.Class {
		case Pass:
			got += w
		case Marginal:
			got += w / 2
		case Inconclusive:
			v.Class = Inconclusive
		}
	}
	if total == 0 {
		v.Class = Inconclusive
		return v
	}
	v.Score = math.Round(1000*got/total) / 10
	switch {
	case v.Class == Inconclusive:
	case v.Score >= PassScore:
		v.Class = Pass
	case v.Score < MarginalScore:
		v.Class = Fail
	default:
		v.Class = Marginal
	}
	return v
}

// thin says why values are too few to judge a host by, or "".
func thin(vs []float64, r Rules) string {
	n := len(finite(vs))
	switch {
	case len(vs) == 0 || n == 0:
		return "no values in the window"
	case n < r.MinSteps:
		return fmt.Sprintf("%d steps with values, at least %d needed", n, r.MinSteps)
	case float64(n) < r.MinCoverage*float64(len(vs)):
		return fmt.Sprintf("values in %d of %d steps (%.0f %%), at least %.0f %% needed", n, len(vs), 100*float64(n)/float64(len(vs)), 100*r.MinCoverage)
	}
	return ""
}

// trimmedMean is a host's number: the mean of its steps' values on the
// compared scale, the highest and lowest 10 % left out. Nearly as sharp as
// the mean (a median of 24 steps needs half again as many hosts for the
// same power), and an hour's spike or gap does not move it.
func trimmedMean(s Scale, vs []float64) float64 {
	xs := finite(vs)
	for i := range xs {
		xs[i] = scaled(s, xs[i])
	}
	sort.Float64s(xs)
	k := len(xs) / 10
	xs = xs[k : len(xs)-k]
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// pooledT is the difference of the means of a and b, its standard error
// from the two groups' pooled variance, and its degrees of freedom
// (Student's two-sample t). Pooled, not Welch's: what is tested is "the
// canary hosts are like the control hosts", under which their spreads are
// the same, and the canary's few hosts (3 degrees of freedom of 4 hosts)
// then borrow the control group's to estimate it. Welch's test lost 3
// points of power at 4 against 8 hosts (93.2 % against 96.1 %, +20 %, the
// test window of judge_test.go). A canary that
// only spreads its hosts wider reads as somewhat more likely worse, which
// a canary judge may.
func pooledT(a, b []float64) (d, se, df float64) {
	ma, va := meanVar(a)
	mb, vb := meanVar(b)
	na, nb := float64(len(a)), float64(len(b))
	df = na + nb - 2
	pooled := ((na-1)*va + (nb-1)*vb) / df
	return ma - mb, math.Sqrt(pooled * (1/na + 1/nb)), df
}

func meanVar(xs []float64) (m, v float64) {
	for _, x := range xs {
		m += x
	}
	m /= float64(len(xs))
	for _, x := range xs {
		v += (x - m) * (x - m)
	}
	return m, v / float64(len(xs)-1)
}

// scaled puts a value on the scale its metric is compared on.
func scaled(s Scale, v float64) float64 {
	if s == Ratio {
		return math.Log(max(v, 1e-12))
	}
	return v
}

// unscaled turns a difference on the compared scale into the effect.
func unscaled(s Scale, d float64) float64 {
	if s == Ratio {
		return math.Exp(d) - 1
	}
	return d
}

func describe(s Scale, e, lo, hi float64) string {
	if s == Ratio {
		if lo == hi {
			return fmt.Sprintf("%+.1f %%", 100*e)
		}
		return fmt.Sprintf("%+.1f %% [%+.1f, %+.1f]", 100*e, 100*lo, 100*hi)
	}
	if lo == hi {
		return fmt.Sprintf("%+.2f points", 100*e)
	}
	return fmt.Sprintf("%+.2f points [%+.2f, %+.2f]", 100*e, 100*lo, 100*hi)
}

func finite(vs []float64) []float64 {
	var out []float64
	for _, v := range vs {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			out = append(out, v)
		}
	}
	return out
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}
