package canary

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"gonum.org/v1/gonum/stat/distuv"
)

// JudgeMetric compares the canary hosts with the control hosts on m.
//
// Each kept host is one number x (its window's level, less its own
// window before's where the comparison has baselines). The difference d
// of the groups' means is judged by two one-sided bounds at
// r.Alpha/r.Family:
//
//   - Lo = d − t·se, with se from the control group's spread alone
//     (df = control hosts − 1): under "the canary is like the control"
//     that is Student's test exactly, and no canary host can lower Lo by
//     being worse. Lo above the tolerance is a fail; above 0, marginal.
//   - Hi = d + t·se', with se' adding the canary's own spread on the
//     harmful side (its hosts' excess over the control's mean; Welch's
//     degrees of freedom): a canary whose hosts split into much better and
//     much worse cannot pass on its mean. Hi at or past Bound times the
//     tolerance is inconclusive; under it, a pass.
//
// Both bounds only rise when a canary host's values rise, so worse data
// never moves a metric towards pass (Class.Severity).
func JudgeMetric(m Metric, canary, control []Host, r Rules) (res MetricResult) {
	res = nanResult(m, len(canary), len(control))
	inconclusive := func(why string) MetricResult {
		res.Class, res.Why = Inconclusive, why
		return res
	}
	if len(canary) < r.MinHosts {
		return inconclusive(fmt.Sprintf("canary group: %d hosts, at least %d needed (one host is not a population)", len(canary), r.MinHosts))
	}
	if len(control) < r.MinHosts {
		return inconclusive(fmt.Sprintf("control group: %d hosts, at least %d needed (one host is not a population)", len(control), r.MinHosts))
	}
	var cs, ks []*hostStats
	for _, h := range canary {
		hs := reduce(h, true, m, r)
		if hs.fatal != "" {
			res.Hosts = append(res.Hosts, hs.number(math.NaN()))
			return inconclusive("canary host " + h.Name + ": " + hs.fatal)
		}
		res.Notes = append(res.Notes, hs.notes...)
		cs = append(cs, hs)
	}
	for _, h := range control {
		hs := reduce(h, false, m, r)
		res.Notes = append(res.Notes, hs.notes...)
		ks = append(ks, hs)
	}
	kept := func(hs []*hostStats) (out []*hostStats) {
		for _, h := range hs {
			if h.left == "" {
				out = append(out, h)
			}
		}
		return out
	}
	withBaseline := func(hs []*hostStats) (n int) {
		for _, h := range kept(hs) {
			if h.baseline {
				n++
			}
		}
		return n
	}
	// Each host against its own window before, where enough hosts of
	// both groups have one: a control host without one is left out (the
	// group keeps its least), a canary host without one is compared with
	// the fleet's typical window before (it may be the one that broke).
	res.Baseline = withBaseline(cs) >= r.MinHosts && withBaseline(ks) >= r.MinHosts
	if res.Baseline {
		var befores []float64
		for _, h := range append(kept(cs), kept(ks)...) {
			if h.baseline {
				befores = append(befores, h.before)
			}
		}
		typical := mean(befores)
		for _, h := range kept(ks) {
			if !h.baseline {
				h.left = "no window before, where the other hosts have one"
				res.Notes = append(res.Notes, "control host "+h.name+" left out: "+h.left)
			} else {
				h.x = h.after - h.before
			}
		}
		for _, h := range cs {
			if h.baseline {
				h.x = h.after - h.before
			} else {
				h.x = h.after - typical
				res.Notes = append(res.Notes, "canary host "+h.name+" has no window before: compared with the fleet's typical window before")
			}
		}
	} else {
		for _, h := range append(kept(cs), kept(ks)...) {
			h.x = h.after
		}
		if n := withBaseline(cs) + withBaseline(ks); n > 0 {
			res.Notes = append(res.Notes, fmt.Sprintf("no difference in differences: %d of %d canary and %d of %d control hosts have a window before, at least %d each needed", withBaseline(cs), len(cs), withBaseline(ks), len(kept(ks)), r.MinHosts))
		}
	}
	kc, kk := kept(cs), kept(ks)
	defer func() {
		for _, h := range cs {
			res.Hosts = append(res.Hosts, h.number(res.hostEffect(m, h)))
		}
		for _, h := range ks {
			res.Hosts = append(res.Hosts, h.number(res.hostEffect(m, h)))
		}
	}()
	res.Canary, res.Control = len(kc), len(kk)
	if len(kk) < r.MinHosts {
		return inconclusive(fmt.Sprintf("control group: %d of %d hosts have enough values, at least %d needed", len(kk), len(ks), r.MinHosts))
	}
	res.CanaryMedian, res.ControlMedian = medianLevel(m, kc), medianLevel(m, kk)
	cx, kx := xs(kc), xs(kk)
	nc, nk := float64(len(cx)), float64(len(kx))
	mc, _ := meanVar(cx)
	mk, vk := meanVar(kx)
	d := mc - mk
	res.controlMean = mk

	// The binomial floor of a host's variance, for loss read as counts:
	// with every host at 0 lost the spread between hosts is 0, and what
	// the counts rule out is all there is. The control's pooled rate
	// (Laplace's, never 0) for Lo; each canary host's own, up to one
	// half, for Hi.
	pbar := pooledRate(kk)
	floorK := meanOf(kk, func(h *hostStats) float64 { return h.binomial(pbar, false, res.Baseline) })
	floorC := meanOf(kc, func(h *hostStats) float64 { return h.binomial(pbar, true, res.Baseline) })
	sk2 := max(vk, floorK)
	if !(sk2 > 1e-24) {
		return inconclusive(fmt.Sprintf("every control host's number is the same (%s): no spread between hosts to judge against, and none is not certainty", describe(m.Scale, unscaled(m.Scale, mk), unscaled(m.Scale, mk), unscaled(m.Scale, mk))))
	}
	alpha := r.alpha()
	res.Level = alpha

	// Lo, P, PBeyond: the control's spread alone.
	seF := math.Sqrt(sk2 * (1/nc + 1/nk))
	tF := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: nk - 1}
	tol := tolerance(m)
	res.P = 1 - tF.CDF(d/seF)
	res.PBeyond = 1 - tF.CDF((d-tol)/seF)
	lo := d - tF.Quantile(1-alpha)*seF

	// Hi: the canary's own spread on the harmful side, never under the
	// control's. Its excess over the control's mean: E[max(0, x−mk)²] is
	// half the variance under "like the control", so twice its mean
	// stands for a variance; it only grows as a canary host gets worse.
	var excess float64
	for _, x := range cx {
		if x > mk {
			excess += (x - mk) * (x - mk)
		}
	}
	a := sk2 / nk
	b := max(sk2, 2*excess/nc, floorC) / nc
	if nc > nk { // keep Welch's df falling as b grows (monotonic)
		b = max(b, a*(nc-1)/(nk-1))
	}
	df := (a + b) * (a + b) / (a*a/(nk-1) + b*b/(nc-1))
	tP := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}
	hi := d + tP.Quantile(1-alpha)*math.Sqrt(a+b)

	res.Effect, res.Lo, res.Hi = unscaled(m.Scale, d), unscaled(m.Scale, lo), unscaled(m.Scale, hi)
	effect := describe(m.Scale, res.Effect, res.Lo, res.Hi)
	res.Resolution = resolution(m, kc, res.Baseline)
	bound := r.Bound * m.Tolerance
	switch {
	case lo > tol:
		res.Class, res.Why = Fail, fmt.Sprintf("canary worse beyond the tolerance %s: %s, p %.3g", describe(m.Scale, m.Tolerance, m.Tolerance, m.Tolerance), effect, res.PBeyond)
	case lo > 0:
		res.Class, res.Why = Marginal, fmt.Sprintf("canary worse, maybe within the tolerance %s: %s, p %.3g", describe(m.Scale, m.Tolerance, m.Tolerance, m.Tolerance), effect, res.P)
	case res.Resolution != "":
		res.Class, res.Why = Inconclusive, res.Resolution
	case r.Bound > 0 && hi >= scaledEffect(m.Scale, bound):
		res.Class, res.Why = Inconclusive, fmt.Sprintf("too noisy to rule out harm: %s reaches past %s (more hosts, a longer window or each host's window before would narrow it)", effect, describe(m.Scale, bound, bound, bound))
	default:
		res.Class, res.Why = Pass, fmt.Sprintf("not worse: %s, its upper end under %s", effect, describe(m.Scale, bound, bound, bound))
	}
	return res
}

// hostEffect is a kept host's number against the control's mean, as an
// effect; NaN for a host left out or before the means are known.
func (res *MetricResult) hostEffect(m Metric, h *hostStats) float64 {
	if h.left != "" || math.IsNaN(res.Effect) {
		return math.NaN()
	}
	return unscaled(m.Scale, h.x-res.controlMean)
}

// tolerance is m's tolerance on the compared scale.
func tolerance(m Metric) float64 { return scaledEffect(m.Scale, m.Tolerance) }

// scaledEffect puts an effect (a ratio − 1, or points) on the compared
// scale.
func scaledEffect(s Scale, e float64) float64 {
	if s == Ratio {
		return math.Log1p(e)
	}
	return e
}

// partStats is one part of a host, reduced.
type partStats struct {
	key            string
	after, before  float64 // the windows' values on the compared scale
	hasBefore      bool
	counts         bool
	pAfter         float64 // the window's ratio (counts)
	denAfter       float64 // the window's denominators (counts)
	denBefore      float64
	numAfter       float64
	oneBucket      bool // every value of both windows inside one bucket
	bucketLo, upTo float64
}

// hostStats is one host, reduced.
type hostStats struct {
	name     string
	canary   bool
	parts    []partStats
	after    float64 // the mean of its parts' window values
	before   float64
	baseline bool // every part has a window before
	x        float64
	// fatal makes the metric inconclusive (a canary host that cannot be
	// judged); left leaves the host out (a control host).
	fatal, left string
	notes       []string
}

func (h *hostStats) number(effect float64) HostNumber {
	g := "control"
	if h.canary {
		g = "canary"
	}
	left := h.left
	if h.fatal != "" {
		left = h.fatal
	}
	return HostNumber{Host: h.name, Group: g, Effect: effect, Baseline: h.baseline, Parts: len(h.parts), Left: left}
}

// binomial is the variance its counts alone give the host's number: each
// part's p(1−p)/n, at the control's rate pbar, or for a canary host's
// upper bound at its own rate where higher (up to one half, where it
// peaks), averaged over its parts as its number is.
func (h *hostStats) binomial(pbar float64, own, baseline bool) float64 {
	var v float64
	n := 0
	for _, p := range h.parts {
		if !p.counts || !(p.denAfter > 0) {
			continue
		}
		r := pbar
		if own {
			r = max(pbar, min(0.5, p.pAfter))
		}
		pv := r * (1 - r) / p.denAfter
		if baseline && h.baseline && p.denBefore > 0 {
			pv += pbar * (1 - pbar) / p.denBefore
		}
		v += pv
		n++
	}
	if n == 0 {
		return 0
	}
	return v / float64(len(h.parts)*len(h.parts))
}

// reduce turns a host's parts into its window values, or says why it
// cannot be judged.
func reduce(h Host, canary bool, m Metric, r Rules) *hostStats {
	hs := &hostStats{name: h.Name, canary: canary}
	who := "control host " + h.Name
	if canary {
		who = "canary host " + h.Name
	}
	for _, p := range h.Parts {
		part := fmt.Sprintf(" part {%s}", p.Key)
		if p.Key == "" {
			part = ""
		}
		after, hasAfter := windowValues(m, p, false)
		before, hasBefore := windowValues(m, p, true)
		thinA := thin(hasAfter, r)
		thinB := "not read"
		if hasBefore != nil {
			thinB = thin(hasBefore, r)
		}
		switch {
		case thinA != "" && !canary:
			hs.notes = append(hs.notes, who+part+" left out: "+thinA)
			continue
		case thinA != "" && thinB == "":
			hs.fatal = strings.TrimPrefix(part+": ", " ") + thinA + " (it had values in the window before: its series stopped)"
			return hs
		case thinA != "" && hasBefore == nil:
			hs.fatal = strings.TrimPrefix(part+": ", " ") + thinA
			return hs
		case thinA != "":
			// Thin in both windows: a target or queue this host hardly
			// uses, not one that stopped.
			hs.notes = append(hs.notes, who+part+" left out: thin in both windows ("+thinA+")")
			continue
		}
		if canary {
			if last := r.lastSteps(len(hasAfter)); !allTrue(hasAfter[len(hasAfter)-last:]) {
				hs.fatal = strings.TrimPrefix(part+": ", " ") + fmt.Sprintf("no value in some of the window's last %d steps: it would be judged on old data", last)
				return hs
			}
		}
		ps := partStats{key: p.Key, after: reduceWindow(m, p, false, after, hasAfter), hasBefore: thinB == ""}
		if ps.hasBefore {
			ps.before = reduceWindow(m, p, true, before, hasBefore)
		}
		if m.Scale == Points && p.AfterDen != nil {
			ps.counts = true
			ps.numAfter, ps.denAfter = sums(p.AfterNum, p.AfterDen, hasAfter)
			ps.pAfter = ps.after
			if ps.hasBefore && p.BeforeDen != nil {
				_, ps.denBefore = sums(p.BeforeNum, p.BeforeDen, hasBefore)
			}
		}
		if p.Buckets != nil {
			ps.oneBucket, ps.bucketLo, ps.upTo = oneBucket(p.Buckets, after, before, ps.hasBefore)
		}
		hs.parts = append(hs.parts, ps)
	}
	if len(hs.parts) == 0 {
		if canary {
			hs.fatal = "no values in the window"
		} else {
			hs.left = "no part with enough values"
		}
		return hs
	}
	hs.baseline = true
	var as, bs []float64
	for _, p := range hs.parts {
		as = append(as, p.after)
		bs = append(bs, p.before)
		hs.baseline = hs.baseline && p.hasBefore
	}
	hs.after = mean(as)
	if hs.baseline {
		hs.before = mean(bs)
	}
	return hs
}

// windowValues are a part's values in one window and which steps have
// one (nil, nil: the window was not read).
func windowValues(m Metric, p Part, before bool) ([]float64, []bool) {
	vs, num, den := p.After, p.AfterNum, p.AfterDen
	if before {
		vs, num, den = p.Before, p.BeforeNum, p.BeforeDen
	}
	if m.Scale == Points && den != nil {
		has := make([]bool, len(den))
		for i := range den {
			has[i] = i < len(num) && finiteNum(num[i]) && finiteNum(den[i]) && den[i] > 0 && num[i] >= 0
		}
		return vs, has
	}
	if vs == nil {
		return nil, nil
	}
	has := make([]bool, len(vs))
	for i, v := range vs {
		has[i] = finiteNum(v)
	}
	return vs, has
}

// reduceWindow is a part's value over one window (before: the window
// before) on the compared scale: the mean of its steps' logs for times,
// every step counted (harm is never trimmed); lost / sent over the window
// for counts.
func reduceWindow(m Metric, p Part, before bool, vs []float64, has []bool) float64 {
	if m.Scale == Points {
		num, den := p.AfterNum, p.AfterDen
		if before {
			num, den = p.BeforeNum, p.BeforeDen
		}
		if den != nil {
			n, d := sums(num, den, has)
			return n / d
		}
	}
	var xs []float64
	for i, ok := range has {
		if ok {
			xs = append(xs, scaled(m.Scale, vs[i]))
		}
	}
	return mean(xs)
}

func sums(num, den []float64, has []bool) (n, d float64) {
	for i, ok := range has {
		if ok {
			n += num[i]
			d += den[i]
		}
	}
	return n, d
}

// oneBucket says whether every value of the window (and of the window
// before, when used) lies inside one of the classic buckets bounds, and
// which: histogram_quantile interpolates inside a bucket, so such a host
// reads the same whatever moved inside it.
func oneBucket(bounds, after, before []float64, withBefore bool) (bool, float64, float64) {
	idx := -1
	check := func(vs []float64) bool {
		for _, v := range vs {
			if !finiteNum(v) {
				continue
			}
			i := sort.SearchFloat64s(bounds, v)
			if idx >= 0 && i != idx {
				return false
			}
			idx = i
		}
		return true
	}
	if !check(after) || (withBefore && !check(before)) || idx < 0 {
		return false, 0, 0
	}
	lo, hi := 0.0, math.Inf(1)
	if idx > 0 {
		lo = bounds[idx-1]
	}
	if idx < len(bounds) {
		hi = bounds[idx]
	}
	return true, lo, hi
}

// resolution says which canary host the classic buckets blind, or "": a
// canary host all of whose parts stayed inside one bucket could have
// moved by up to the bucket's width (2x for lowlat's) and read 0 %.
func resolution(m Metric, canary []*hostStats, baseline bool) string {
	for _, h := range canary {
		blind := len(h.parts) > 0
		for _, p := range h.parts {
			blind = blind && p.oneBucket
		}
		if !blind {
			continue
		}
		p := h.parts[0]
		windows := "in the window"
		if baseline && h.baseline {
			windows = "in both windows"
		}
		return fmt.Sprintf("canary host %s's %s stayed inside one classic histogram bucket (%s to %s) %s: a move inside it does not show (native histograms resolve it)", h.name, m.Name, formatBound(p.bucketLo), formatBound(p.upTo), windows)
	}
	return ""
}

func formatBound(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case v < 1:
		return fmt.Sprintf("%.3g ms", v*1e3)
	}
	return fmt.Sprintf("%.3g s", v)
}

// pooledRate is the control's ratio over all its counts, Laplace's (never
// 0 or 1), or 0 where there are no counts.
func pooledRate(hs []*hostStats) float64 {
	var n, d float64
	for _, h := range hs {
		for _, p := range h.parts {
			if p.counts {
				n += p.numAfter
				d += p.denAfter
			}
		}
	}
	if d == 0 {
		return 0
	}
	return (n + 1) / (d + 2)
}

func meanOf(hs []*hostStats, f func(*hostStats) float64) float64 {
	var s float64
	for _, h := range hs {
		s += f(h)
	}
	return s / float64(max(len(hs), 1))
}

func xs(hs []*hostStats) []float64 {
	out := make([]float64, len(hs))
	for i, h := range hs {
		out[i] = h.x
	}
	return out
}

// medianLevel is the median of the hosts' window levels, in the metric's
// units.
func medianLevel(m Metric, hs []*hostStats) float64 {
	var ls []float64
	for _, h := range hs {
		if m.Scale == Ratio {
			ls = append(ls, math.Exp(h.after))
		} else {
			ls = append(ls, h.after)
		}
	}
	return median(ls)
}

// thin says why a window's steps are too few to judge a part by, or "".
func thin(has []bool, r Rules) string {
	n := 0
	for _, ok := range has {
		if ok {
			n++
		}
	}
	switch {
	case len(has) == 0 || n == 0:
		return "no values in the window"
	case n < r.MinSteps:
		return fmt.Sprintf("%d steps with values, at least %d needed", n, r.MinSteps)
	case float64(n) < r.MinCoverage*float64(len(has)):
		return fmt.Sprintf("values in %d of %d steps (%.0f %%), at least %.0f %% needed", n, len(has), 100*float64(n)/float64(len(has)), 100*r.MinCoverage)
	}
	return ""
}

func allTrue(bs []bool) bool {
	for _, b := range bs {
		if !b {
			return false
		}
	}
	return true
}

func meanVar(xs []float64) (m, v float64) {
	m = mean(xs)
	if len(xs) < 2 {
		return m, 0
	}
	for _, x := range xs {
		v += (x - m) * (x - m)
	}
	return m, v / float64(len(xs)-1)
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
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
		return math.Expm1(d)
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

func finiteNum(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

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
