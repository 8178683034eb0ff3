package canary

import (
	"fmt"
	"math"
	"sort"
)

// partStats is one part of a host, reduced.
type partStats struct {
	key string
	// after and before are the windows' values on the compared scale;
	// afterLo, afterHi (beforeLo, beforeHi) the same with each step at
	// its classic bucket's lower and upper edge, where the values came
	// from classic buckets (else equal to after, before).
	after, afterLo, afterHi    float64
	before, beforeLo, beforeHi float64
	hasBefore                  bool
	counts                     bool
	pAfter                     float64 // the window's ratio (counts)
	numAfter, denAfter         float64 // the window's sums (counts)
	denBefore                  float64
	bucketed                   bool
}

// hostStats is one host, reduced.
type hostStats struct {
	name   string
	canary bool
	parts  []partStats
	// after and before are the means of its parts' window values, with
	// their bucket edges (afterLo ... beforeHi).
	after, afterLo, afterHi    float64
	before, beforeLo, beforeHi float64
	baseline                   bool // every part has a window before
	// x is the host's number; xLo and xHi the same at its buckets' edges,
	// the least and the most it can be.
	x, xLo, xHi float64
	// imputed: a canary host without a window before, compared with the
	// fleet's typical window before.
	imputed bool
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
	return HostNumber{Host: h.name, Group: g, Effect: effect, Baseline: h.baseline && !h.imputed, Parts: len(h.parts), Left: left}
}

// counted says whether the host's parts are loss read as counts.
func (h *hostStats) counted() bool { return len(h.parts) > 0 && h.parts[0].counts }

// binomial is the variance its counts alone give the host's number: each
// part's p(1−p)/n, at the control's rate pbar or (own, for a canary host's
// upper bound) its own where higher, up to one half where it peaks;
// averaged over its parts as its number is.
func (h *hostStats) binomial(pbar float64, own, baseline bool) float64 {
	var v float64
	n := 0
	pointVar := func(r, den float64) float64 { return r * (1 - r) / den }
	for _, p := range h.parts {
		if !p.counts || !(p.denAfter > 0) {
			continue
		}
		r := pbar
		if own {
			r = max(pbar, min(0.5, p.pAfter))
		}
		pv := pointVar(r, p.denAfter)
		if baseline && h.baseline && !h.imputed && p.denBefore > 0 {
			pv += pointVar(pbar, p.denBefore)
		}
		v += pv
		n++
	}
	if n == 0 {
		return 0
	}
	return v / float64(len(h.parts)*len(h.parts))
}

// binomialLog is binomial on the log scale of (k + ½)/n at the rate pbar:
// each part's p(1−p)/n / (p + ½/n)² (the delta method).
func (h *hostStats) binomialLog(pbar float64) float64 {
	var v float64
	for _, p := range h.parts {
		if p.counts && p.denAfter > 0 {
			c := 0.5 / p.denAfter
			v += pbar * (1 - pbar) / p.denAfter / ((pbar + c) * (pbar + c))
		}
	}
	return v / float64(max(len(h.parts)*len(h.parts), 1))
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
		// part names the part in a note (" part {...}") and in a fatal
		// reason ("part {...}: "), or nothing for a host of one unnamed part.
		part, lead := fmt.Sprintf(" part {%s}", p.Key), fmt.Sprintf("part {%s}: ", p.Key)
		if p.Key == "" {
			part, lead = "", ""
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
			hs.fatal = lead + thinA + " (it had values in the window before: its series stopped)"
			return hs
		case thinA != "" && hasBefore == nil:
			hs.fatal = lead + thinA
			return hs
		case thinA != "":
			// Thin in both windows: a target or queue this host hardly
			// uses, not one that stopped.
			hs.notes = append(hs.notes, who+part+" left out: thin in both windows ("+thinA+")")
			continue
		}
		if canary {
			if last := r.lastSteps(len(hasAfter)); !allTrue(hasAfter[len(hasAfter)-last:]) {
				hs.fatal = lead + fmt.Sprintf("no value in some of the window's last %d steps: it would be judged on old data", last)
				return hs
			}
		}
		ps := partStats{key: p.Key, hasBefore: thinB == "", bucketed: p.Buckets != nil && m.Scale == Ratio}
		ps.after, ps.afterLo, ps.afterHi = reduceWindow(m, p, false, after, hasAfter)
		if ps.hasBefore {
			ps.before, ps.beforeLo, ps.beforeHi = reduceWindow(m, p, true, before, hasBefore)
		}
		if m.Scale == Points && p.AfterDen != nil {
			ps.counts = true
			ps.numAfter, ps.denAfter = sums(p.AfterNum, p.AfterDen, hasAfter)
			ps.numAfter = min(ps.numAfter, ps.denAfter)
			ps.pAfter = ps.numAfter / ps.denAfter
			if ps.hasBefore && p.BeforeDen != nil {
				_, ps.denBefore = sums(p.BeforeNum, p.BeforeDen, hasBefore)
			}
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
	var a, aLo, aHi, b, bLo, bHi []float64
	for _, p := range hs.parts {
		a, aLo, aHi = append(a, p.after), append(aLo, p.afterLo), append(aHi, p.afterHi)
		b, bLo, bHi = append(b, p.before), append(bLo, p.beforeLo), append(bHi, p.beforeHi)
		hs.baseline = hs.baseline && p.hasBefore
	}
	hs.after, hs.afterLo, hs.afterHi = mean(a), mean(aLo), mean(aHi)
	if hs.baseline {
		hs.before, hs.beforeLo, hs.beforeHi = mean(b), mean(bLo), mean(bHi)
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
			// lost may exceed sent in a step: the monitor counts a probe
			// lost once its timeout passed, a udp session's losses
			// together, so a step's lost runs a session ahead of or behind
			// its sent. The window's sums set it right (capped at all).
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
// before) on the compared scale, and the same with every step at its
// classic bucket's lower and upper edge: the mean of its steps' logs for
// times, every step counted (harm is never trimmed); lost / sent over the
// window for counts.
//
// A time is floored at a tenth of its window's median (and 1 ns): a
// quantile read 0 (a native histogram's zero bucket, an idle queue) or a
// gauge just reset would otherwise weigh as a billionfold improvement on
// the log scale. The floor only rises with the values, so it keeps the
// judge monotonic in harm.
func reduceWindow(m Metric, p Part, before bool, vs []float64, has []bool) (v, lo, hi float64) {
	if m.Scale == Points {
		num, den := p.AfterNum, p.AfterDen
		if before {
			num, den = p.BeforeNum, p.BeforeDen
		}
		if den != nil {
			n, d := sums(num, den, has)
			r := min(n/d, 1)
			return r, r, r
		}
		var xs []float64
		for i, ok := range has {
			if ok {
				xs = append(xs, vs[i])
			}
		}
		return mean(xs), mean(xs), mean(xs)
	}
	var present []float64
	for i, ok := range has {
		if ok {
			present = append(present, max(vs[i], 0))
		}
	}
	floor := max(median(present)/10, 1e-9)
	var xs, los, his []float64
	for _, x := range present {
		x = max(x, floor)
		xs = append(xs, math.Log(x))
		if p.Buckets == nil {
			continue
		}
		// histogram_quantile interpolates inside the bucket its rank
		// falls in: the true quantile is anywhere in it.
		i := sort.SearchFloat64s(p.Buckets, x)
		l, u := 0.0, math.Inf(1)
		if i > 0 {
			l = p.Buckets[i-1]
		}
		if i < len(p.Buckets) {
			u = p.Buckets[i]
		}
		los, his = append(los, math.Log(max(l, floor))), append(his, math.Log(u))
	}
	if p.Buckets == nil {
		return mean(xs), mean(xs), mean(xs)
	}
	return mean(xs), mean(los), mean(his)
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

// medianLevel is the median of the hosts' window levels, in the metric's
// units.
func medianLevel(m Metric, hs []*hostStats) float64 {
	var ls []float64
	for _, h := range hs {
		switch {
		case m.Scale == Ratio:
			ls = append(ls, math.Exp(h.after))
		case h.counted():
			var r []float64
			for _, p := range h.parts {
				r = append(r, p.pAfter)
			}
			ls = append(ls, mean(r))
		default:
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
