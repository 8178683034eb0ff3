package canary

import (
	"fmt"
	"math"
	"sort"
	"sync"

	"gonum.org/v1/gonum/stat/distuv"
)

// JudgeMetric compares the canary hosts with the control hosts on m.
//
// Each kept host is one number x (its window's level, less its own
// window before's where the comparison has baselines). The difference d
// of the groups' means is judged by two one-sided bounds at
// r.Alpha/r.Family:
//
//   - Lo, Student's pooled two-sample bound, at its largest over the
//     canary's numbers capped at any level: a canary host that is much
//     worse than the others widens the pooled error, and would lower the
//     bound though the canary got worse; capped back to the level where
//     the bound is highest, the others' harm still counts. The largest
//     over every canary data at most as bad as the observed is reached by
//     such a cap, so Lo only rises with harm; and the pooled error holds
//     the canary's own spread, so a rare burst in one canary host (an
//     outage, a spike) is not read as certainty. Lo above the tolerance
//     is a fail; above 0, marginal.
//   - Hi = d + t·se', se' the control's spread beside the canary's own on
//     the harmful side (its hosts' excess over the control's mean; Welch's
//     degrees of freedom per component). Hi at or past Bound times the
//     tolerance is inconclusive, and so is a canary host past the control
//     group's range (its prediction bound): a pass rules out harm to the
//     group and to each host.
//
// Where a canary's values came from classic buckets, Lo is taken with
// every canary step at its bucket's lower edge and Hi at its upper edge:
// histogram_quantile interpolates inside a bucket, and the true quantile
// is anywhere in it.
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
		if h.BeforeVoid != "" {
			parts := make([]Part, len(h.Parts))
			for i, p := range h.Parts {
				p.Before, p.BeforeNum, p.BeforeDen = nil, nil, nil
				parts[i] = p
			}
			h.Parts = parts
			res.Notes = append(res.Notes, "canary host "+h.Name+": "+h.BeforeVoid+": its window before is not its baseline")
		}
		hs := reduce(h, true, m, r)
		if hs.fatal != "" {
			res.Hosts = append(res.Hosts, hs.number(math.NaN()))
			return inconclusive("canary host " + h.Name + ": " + hs.fatal)
		}
		res.Notes = append(res.Notes, hs.notes...)
		cs = append(cs, hs)
	}
	for _, h := range control {
		if h.Touched != "" {
			hs := &hostStats{name: h.Name, left: h.Touched}
			res.Notes = append(res.Notes, "control host "+h.Name+" left out: "+h.Touched)
			ks = append(ks, hs)
			continue
		}
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
	if m.Scale == Points {
		// Loss as counts beside loss as plain values compares a log or a
		// window's sum with a mean of steps: not one quantity.
		counted := 0
		all := append(kept(cs), kept(ks)...)
		for _, h := range all {
			for _, p := range h.parts {
				if p.counts {
					counted++
				}
			}
		}
		parts := 0
		for _, h := range all {
			parts += len(h.parts)
		}
		if counted != 0 && counted != parts {
			return inconclusive(fmt.Sprintf("%d of the hosts' %d parts are counts (lost, sent) and the rest plain values: they cannot be compared", counted, parts))
		}
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
	// the fleet's typical window before (it may be the one that broke), its
	// number then carrying the spread between hosts (sB, below).
	res.Baseline = withBaseline(cs) >= r.MinHosts && withBaseline(ks) >= r.MinHosts
	imputed := 0
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
				h.x, h.xLo, h.xHi = h.after-h.before, h.afterLo-h.beforeHi, h.afterHi-h.beforeLo
			}
		}
		for _, h := range cs {
			if h.baseline {
				h.x, h.xLo, h.xHi = h.after-h.before, h.afterLo-h.beforeHi, h.afterHi-h.beforeLo
			} else {
				h.imputed = true
				imputed++
				h.x, h.xLo, h.xHi = h.after-typical, h.afterLo-typical, h.afterHi-typical
				res.Notes = append(res.Notes, "canary host "+h.name+" has no window before: compared with the fleet's typical window before")
			}
		}
	} else {
		for _, h := range append(kept(cs), kept(ks)...) {
			h.x, h.xLo, h.xHi = h.after, h.afterLo, h.afterHi
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
	cmp := compareOf(m, kk, res.Baseline)
	res.cmp = cmp
	cx, kx := xs(kc), xs(kk)
	nc, nk := float64(len(cx)), float64(len(kx))
	mc, _ := meanVar(cx)
	mk, vk := meanVar(kx)
	d := mc - mk
	res.controlMean = mk

	// The binomial floor of a host's variance, for loss read as counts:
	// with every host at 0 lost the spread between hosts is 0, and what
	// the counts rule out is all there is. At the control's pooled rate
	// (Laplace's, never 0), and for Hi a canary host's own where higher.
	pbar := pooledRate(kk)
	floorK := meanOf(kk, func(h *hostStats) float64 { return h.binomial(pbar, false, res.Baseline) })
	floorAll := meanOf(append(kk[:len(kk):len(kk)], kc...), func(h *hostStats) float64 { return h.binomial(pbar, false, res.Baseline) })
	floorC := meanOf(kc, func(h *hostStats) float64 { return h.binomial(pbar, true, res.Baseline) })
	sk2 := max(vk, floorK)
	if !(sk2 > 1e-24) {
		level := medianLevel(m, kk)
		return inconclusive(fmt.Sprintf("every control host's number is the same (level %s): no spread between hosts to judge against, and none is not certainty", cmp.level(level)))
	}
	// sB2: what an imputed canary host's number carries beyond a
	// host's own noise, the spread of the control's levels: each adds
	// sB2/nc² to d's variance.
	var extra, sB2 float64
	if imputed > 0 {
		_, sB2 = meanVar(xsAfter(kk))
		extra = float64(imputed) * sB2 / (nc * nc)
	}
	alpha := r.alpha()
	res.Level = alpha
	tol := cmp.diff(m.Tolerance)

	// Lo, P, PBeyond: pooled, at the best cap of the canary's numbers;
	// with classic buckets, the canary's at their buckets' lower edges
	// against the control's at their upper edges. With the control's
	// degrees of freedom, not the pooled ones: the sup over caps, and loss
	// skewed across hosts (one losing 1 % among hosts losing 0.1 %), made
	// the pooled ones' A/A alarms 2.2 % at a nominal 1.67 % (loss without
	// windows before, hosts' rates spread by e^0.5); with these, 1.7 %.
	mkHi, vkHi := meanVar(xsHi(kk))
	pooled := pooledBound{nc: nc, nk: nk, mk: mkHi, ssk: vkHi * (nk - 1), floor: floorAll, extra: extra}
	tq := studentsT(nk - 1)
	cxLo := xsLo(kc)
	q := tQuantile(1-alpha, nk-1)
	loTol := tol
	toEffect := cmp.effect
	if !res.Baseline && kk[0].counted() {
		// Loss levels without windows before: tested on the log scale of
		// (lost + ½)/sent. Levels are skewed across hosts, and in points
		// two canary hosts against eight read a false alarm in 2.6 % of
		// A/A fleets at a nominal 1.67 % (a canary of two that happens to
		// hold the fleet's lossiest host); on the log scale, 1.3 %. A
		// log difference d reads as ref·(e^d − 1) points, ref the
		// control's typical level; the effect and Hi stay in points (a
		// log would pool one host's loss away in the others' level).
		lk := xsLog(kk)
		mkL, vkL := meanVar(lk)
		ref := math.Exp(mkL)
		logFloor := meanOf(append(kk[:len(kk):len(kk)], kc...), func(h *hostStats) float64 { return h.binomialLog(pbar) })
		pooled = pooledBound{nc: nc, nk: nk, mk: mkL, ssk: vkL * (nk - 1), floor: logFloor}
		cxLo, loTol = xsLog(kc), math.Log1p(m.Tolerance/ref)
		toEffect = func(d float64) float64 { return ref * math.Expm1(d) }
	}
	lo := pooled.sup(cxLo, func(d, se float64) float64 { return d - q*se })
	res.P = 1 - tq.CDF(pooled.sup(cxLo, func(d, se float64) float64 { return d / se }))
	res.PBeyond = 1 - tq.CDF(pooled.sup(cxLo, func(d, se float64) float64 { return (d - loTol) / se }))

	// Hi: Welch's upper bound, with the canary's own spread beside the
	// control's, at its least over the canary's numbers floored at any
	// level (a canary host much better than the others widens Welch's
	// error, and would raise the bound though the canary got better:
	// better is not spread on the harmful side). The least over every
	// canary at least as bad as the observed is reached by such a floor,
	// so Hi only rises with harm. The canary's spread is never taken
	// under the control's (or the counts' floor): a canary too few to
	// show its own borrows the control's, with its degrees of freedom.
	dfK := nk - 1
	if vk < floorK {
		dfK = math.Inf(1)
	}
	// With classic buckets, the canary's at their buckets' upper edges
	// against the control's at their lower edges.
	mkLo, vkLo := meanVar(xsLo(kk))
	sk2Lo := max(vkLo, floorK)
	welch := welchBound{nc: nc, nk: nk, mk: mkLo, a: sk2Lo / nk, dfK: dfK, control: sk2Lo, floor: floorC, extra: extra, alpha: alpha}
	hi := welch.inf(xsHi(kc))
	// Each canary host within the control's range: its prediction bound
	// for one more host, at alpha over the canary's hosts.
	var outside *hostStats
	reachT := tQuantile(1-alpha/nc, dfK)
	for _, h := range kc {
		limit := mkLo + tol + reachT*math.Sqrt(sk2Lo*(1+1/nk))
		if h.imputed {
			limit = mkLo + tol + reachT*math.Sqrt(sk2Lo*(1+1/nk)+sB2)
		}
		if h.xHi > limit && (outside == nil || h.xHi > outside.xHi) {
			outside = h
		}
	}

	res.Effect, res.Lo, res.Hi = cmp.effect(d), toEffect(lo), cmp.effect(hi)
	effect := describe(m.Scale, res.Effect, res.Lo, res.Hi)
	bound := r.Bound * m.Tolerance
	bucketed := false
	for _, h := range append(kc[:len(kc):len(kc)], kk...) {
		for _, p := range h.parts {
			bucketed = bucketed || p.bucketed
		}
	}
	asRead := welch
	asRead.mk, asRead.a, asRead.control = mk, sk2/nk, sk2
	// The buckets decide where the values as read would pass.
	blind := ""
	if bucketed {
		res.Resolution = fmt.Sprintf("%s comes from classic histogram buckets, which hide a move inside a bucket (2x for lowlat's): the bounds take every canary step at its bucket's edge and every control step at the other edge (native histograms resolve it)", m.Name)
		if asRead.inf(cx) < cmp.diff(bound) && !(hi < cmp.diff(bound)) {
			blind = fmt.Sprintf("%s comes from classic histogram buckets, which hide a move inside a bucket (2x for lowlat's): with the canary's steps at their buckets' upper edges and the control's at their lower edges the upper end is %s, past %s (native histograms resolve it)", m.Name, describe(m.Scale, res.Hi, res.Hi, res.Hi), describe(m.Scale, bound, bound, bound))
		}
	}
	switch {
	case lo > loTol:
		res.Class, res.Why = Fail, fmt.Sprintf("canary worse beyond the tolerance %s: %s, p %.3g", describe(m.Scale, m.Tolerance, m.Tolerance, m.Tolerance), effect, res.PBeyond)
	case lo > 0:
		res.Class, res.Why = Marginal, fmt.Sprintf("canary worse, maybe within the tolerance %s: %s, p %.3g", describe(m.Scale, m.Tolerance, m.Tolerance, m.Tolerance), effect, res.P)
	case blind != "":
		res.Class, res.Why = Inconclusive, blind
	case r.Bound > 0 && !(hi < cmp.diff(bound)):
		res.Class, res.Why = Inconclusive, fmt.Sprintf("too noisy to rule out harm: %s reaches past %s (more hosts, a longer window or each host's window before would narrow it)", effect, describe(m.Scale, bound, bound, bound))
	case outside != nil:
		e := cmp.effect(outside.xHi - mk)
		res.Class, res.Why = Inconclusive, fmt.Sprintf("canary host %s is %s against the control's mean, past the control group's range: harm to it is not ruled out (%s for the group)", outside.name, describe(m.Scale, e, e, e), effect)
	default:
		res.Class, res.Why = Pass, fmt.Sprintf("not worse: %s, its upper end under %s, every canary host within the control's range", effect, describe(m.Scale, bound, bound, bound))
	}
	return res
}

// pooledBound is what Student's pooled bound needs of the control group
// and the floors, for any canary numbers.
type pooledBound struct {
	nc, nk  float64
	mk, ssk float64 // the control's mean and sum of squared deviations
	floor   float64 // the counts' floor of a host's variance
	extra   float64 // variance the imputed canary hosts add to d's
}

// at is the difference and its pooled standard error for canary numbers y.
func (b pooledBound) at(y []float64) (d, se float64) {
	my, vy := meanVar(y)
	pooled := max((vy*(b.nc-1)+b.ssk)/(b.nc+b.nk-2), b.floor)
	return my - b.mk, math.Sqrt(pooled*(1/b.nc+1/b.nk) + b.extra)
}

// sup is the largest f(d, se) over the canary numbers x capped at any
// level, min(x, c). For a given mean, the canary numbers at most x that
// spread least are such a cap (water-filling), so this is the largest
// over every canary vector at most x: it only rises as x does. On each
// piece between two sorted values f is concave in c (d linear, se the
// root of a convex quadratic) or, as a ratio, quasi-concave where
// positive, so a golden-section search finds its top.
func (b pooledBound) sup(x []float64, f func(d, se float64) float64) float64 {
	for _, v := range x {
		if math.IsInf(v, -1) || math.IsNaN(v) {
			return math.Inf(-1)
		}
		if math.IsInf(v, 1) {
			return math.Inf(1)
		}
	}
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	best := f(b.at(s))
	y := make([]float64, len(s))
	for k := 0; k+1 < len(s); k++ {
		// c in [s[k], s[k+1]]: s[k+1:] capped at c. Each evaluation
		// two-pass over the capped numbers: the running sums' difference
		// loses the variance of numbers that agree to many digits.
		g := func(c float64) float64 {
			for i, v := range s {
				y[i] = min(v, c)
			}
			return f(b.at(y))
		}
		best = max(best, -goldenMin(func(c float64) float64 { return -g(c) }, s[k], s[k+1]))
	}
	return best
}

// welchBound is the upper bound of the difference for any canary
// numbers: the control's error a = s²/nk beside the canary's own s²/nc,
// never under the control's (control) nor its counts' floor (floor), at
// the control's degrees of freedom (dfK; infinite where the counts' floor
// set them). The canary's own degrees of freedom are not taken: with them
// the bound would fall where a canary's spread grows past the control's
// (Welch's t falls as its df grow), and the least over floors below is
// what keeps a canary of few, disagreeing hosts from passing: they are
// floored up to the worst of them.
type welchBound struct {
	nc, nk, mk float64
	a, dfK     float64
	control    float64
	floor      float64
	extra      float64
	alpha      float64
}

// at is the bound for canary numbers of mean my and variance vy: it rises
// with my, vy and the floor.
func (w welchBound) at(my, vy float64) float64 {
	b := max(vy, w.control, w.floor)/w.nc + w.extra
	return my - w.mk + tQuantile(1-w.alpha, w.dfK)*math.Sqrt(w.a+b)
}

// inf is the least bound over the canary numbers x floored at any level,
// max(x, c): for a given mean, the numbers at least x that spread least
// are such a floor, and the bound rises with the spread at a given mean,
// so this is the least over every canary vector at least x: it only
// rises as x does. On each piece between two sorted values the bound is
// convex in c (the mean linear, the error the root of the larger of a
// convex quadratic and a constant), and a golden-section search finds its
// least.
func (w welchBound) inf(x []float64) float64 {
	for _, v := range x {
		if math.IsInf(v, 1) || math.IsNaN(v) {
			return math.Inf(1)
		}
		if math.IsInf(v, -1) {
			return math.Inf(-1)
		}
	}
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	best := w.at(meanVar(s))
	y := make([]float64, len(s))
	for k := len(s) - 1; k > 0; k-- {
		// c in [s[k-1], s[k]]: s[:k] floored at c, two-pass (see sup).
		g := func(c float64) float64 {
			for i, v := range s {
				y[i] = max(v, c)
			}
			return w.at(meanVar(y))
		}
		best = min(best, goldenMin(g, s[k-1], s[k]))
	}
	return best
}

// goldenMin is the least of g on [lo, hi], g unimodal there, with the
// ends (sup takes the most of a function as the least of its negative).
func goldenMin(g func(float64) float64, lo, hi float64) float64 {
	best := min(g(lo), g(hi))
	if hi <= lo {
		return best
	}
	const phi = 0.6180339887498949
	a, z := lo, hi
	c1, c2 := z-phi*(z-a), a+phi*(z-a)
	f1, f2 := g(c1), g(c2)
	for range 60 {
		if f1 > f2 {
			a, c1, f1 = c1, c2, f2
			c2 = a + phi*(z-a)
			f2 = g(c2)
		} else {
			z, c2, f2 = c2, c1, f1
			c1 = z - phi*(z-a)
			f1 = g(c1)
		}
	}
	return min(best, f1, f2)
}

// tQuantiles caches Student's t quantiles by level, at whole degrees of
// freedom up to 400 (the search evaluates thousands a judgement, and
// gonum's inverse incomplete beta costs microseconds each); tQuantile
// interpolates between them in 1/df, exact at whole ones and monotonic.
var tQuantiles sync.Map // float64 → []float64

func tQuantile(p, df float64) float64 {
	if math.IsInf(df, 1) || df > 400 {
		return distuv.UnitNormal.Quantile(p)
	}
	tab, ok := tQuantiles.Load(p)
	if !ok {
		t := make([]float64, 402)
		for i := 1; i <= 400; i++ {
			t[i] = distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(i)}.Quantile(p)
		}
		t[401] = distuv.UnitNormal.Quantile(p)
		tab, _ = tQuantiles.LoadOrStore(p, t)
	}
	t := tab.([]float64)
	df = max(df, 1)
	i := int(math.Floor(df))
	if float64(i) == df {
		return t[i]
	}
	// Between i and i+1 (401 is infinity), linear in 1/df.
	hi := t[i+1]
	x0, x1 := 1/float64(i), 1/float64(i+1)
	if i+1 == 401 {
		x1 = 0
	}
	f := (1/df - x0) / (x1 - x0)
	return t[i] + f*(hi-t[i])
}

// xsLog are the hosts' loss levels on the log scale of (lost + ½)/sent,
// the mean over their parts.
func xsLog(hs []*hostStats) []float64 {
	out := make([]float64, len(hs))
	for i, h := range hs {
		var ls []float64
		for _, p := range h.parts {
			ls = append(ls, math.Log((p.numAfter+0.5)/p.denAfter))
		}
		out[i] = mean(ls)
	}
	return out
}

func xsLo(hs []*hostStats) []float64 {
	out := make([]float64, len(hs))
	for i, h := range hs {
		out[i] = h.xLo
	}
	return out
}

func xsHi(hs []*hostStats) []float64 {
	out := make([]float64, len(hs))
	for i, h := range hs {
		out[i] = h.xHi
	}
	return out
}

// studentsT is Student's t with df degrees of freedom, the normal where
// they are infinite (a variance known, not estimated).
func studentsT(df float64) interface {
	CDF(float64) float64
	Quantile(float64) float64
} {
	if math.IsInf(df, 1) || df > 1e7 {
		return distuv.UnitNormal
	}
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}
}

// welchDF is the Welch-Satterthwaite degrees of freedom of a + b, each a
// variance estimated with its own degrees of freedom (infinite: known).
func welchDF(a, dfA, b, dfB float64) float64 {
	term := func(v, df float64) float64 {
		if math.IsInf(df, 1) {
			return 0
		}
		return v * v / df
	}
	den := term(a, dfA) + term(b, dfB)
	if den == 0 {
		return math.Inf(1)
	}
	return (a + b) * (a + b) / den
}

// hostEffect is a kept host's number against the control's mean, as an
// effect; NaN for a host left out or before the means are known.
func (res *MetricResult) hostEffect(m Metric, h *hostStats) float64 {
	if h.left != "" || math.IsNaN(res.Effect) {
		return math.NaN()
	}
	return res.cmp.effect(h.x - res.controlMean)
}

// compare is how a metric's numbers are compared, and how a difference
// there reads as an effect: times on the log scale of their values (a
// difference d is the ratio e^d − 1), loss in points (harm to loss adds
// points, and a host losing all its probes weighs all of them: a ratio or
// a log of loss would pool one host's loss away in the others' typical
// level).
type compare struct {
	scale Scale
}

func compareOf(m Metric, _ []*hostStats, _ bool) compare { return compare{scale: m.Scale} }

// effect reads a difference on the compared scale as an effect.
func (c compare) effect(d float64) float64 {
	if c.scale == Ratio {
		return math.Expm1(d)
	}
	return d
}

// diff puts an effect on the compared scale.
func (c compare) diff(e float64) float64 {
	if c.scale == Ratio {
		return math.Log1p(e)
	}
	return e
}

// level says a group's level in the metric's units.
func (c compare) level(v float64) string {
	if c.scale == Ratio {
		return formatBound(v)
	}
	return fmt.Sprintf("%.2f %%", 100*v)
}

func xsAfter(hs []*hostStats) []float64 {
	out := make([]float64, len(hs))
	for i, h := range hs {
		out[i] = h.after
	}
	return out
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
