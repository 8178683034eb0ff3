package gate

import (
	"math"
	"slices"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// z is the normal quantile of a two-sided 95 % interval.
const z = 1.959964

// bars are a histogram's non-empty buckets, in order.
func bars(h *hdrhistogram.Histogram) []hdrhistogram.Bar {
	var out []hdrhistogram.Bar
	for _, b := range h.Distribution() {
		if b.Count > 0 {
			out = append(out, b)
		}
	}
	return out
}

// quantileCI is the q-quantile (0 < q ≤ 1) of h and its distribution-free
// 95 % interval: the order statistics of rank n·q ∓ z·√(n·q·(1−q)), widened
// to their HDR buckets' edges (the histogram cannot tell values inside a
// bucket apart). bs are h's bars. Values are h's units.
func quantileCI(h *hdrhistogram.Histogram, bs []hdrhistogram.Bar, q float64) (v, lo, hi float64) {
	n := float64(h.TotalCount())
	if n == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	return barsQuantileCI(n, float64(h.ValueAtQuantile(q*100)), bs, q)
}

// barsQuantileCI is quantileCI for any histogram: n values in the buckets
// bs, whose q-quantile is v.
func barsQuantileCI(n, v float64, bs []hdrhistogram.Bar, q float64) (_, lo, hi float64) {
	half := z * math.Sqrt(n*q*(1-q))
	rlo := int64(max(1, math.Floor(n*q-half)))
	rhi := int64(min(n, math.Ceil(n*q+half)+1))
	lo, hi = v, v
	var seen int64
	for _, b := range bs {
		prev := seen
		seen += b.Count
		if prev < rlo && seen >= rlo {
			lo = min(lo, float64(b.From))
		}
		if seen >= rhi {
			hi = max(hi, float64(b.To))
			break
		}
	}
	return v, lo, hi
}

// meanCI is h's mean and its normal 95 % interval.
func meanCI(h *hdrhistogram.Histogram) (v, lo, hi float64) {
	n := float64(h.TotalCount())
	if n == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	v = h.Mean()
	se := h.StdDev() / math.Sqrt(n)
	return v, max(0, v-z*se), v + z*se
}

// trimmedCI is the mean of h's values at or below its pct percentile, and
// that mean's 95 % interval.
func trimmedCI(h *hdrhistogram.Histogram, pct float64) (v, lo, hi float64) {
	limit := h.ValueAtQuantile(pct)
	var sum, sum2, n float64
	for _, b := range h.Distribution() {
		if b.Count == 0 || b.From > limit {
			continue
		}
		mid := float64(b.From+b.To) / 2
		c := float64(b.Count)
		sum += mid * c
		sum2 += mid * mid * c
		n += c
	}
	if n == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	v = sum / n
	sd := math.Sqrt(max(0, sum2/n-v*v))
	se := sd / math.Sqrt(n)
	return v, max(0, v-z*se), v + z*se
}

// wilson is the Wilson score 95 % interval of k successes out of n, as
// fractions. It stays inside [0, 1] and is sane at k = 0, where the normal
// interval collapses to a point.
func wilson(k, n float64) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	p := k / n
	d := 1 + z*z/n
	c := (p + z*z/(2*n)) / d
	h := z * math.Sqrt(p*(1-p)/n+z*z/(4*n*n)) / d
	if k <= 0 {
		return 0, min(1, c+h)
	}
	return max(0, min(p, c-h)), min(1, max(p, c+h))
}

// tQuantile is Student's t 97.5 % quantile for df degrees of freedom (df ≥
// 1): the few small-sample values exactly, then the normal's z.
func tQuantile(df int) float64 {
	table := []float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
		2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}
	switch {
	case df < 1:
		return math.Inf(1)
	case df <= len(table):
		return table[df-1]
	case df <= 60:
		return 2.000
	case df <= 120:
		return 1.980
	}
	return z
}

// spreadInterval is the half-width within which one more block of xs would
// fall, about: Student's t for len(xs)−1 degrees of freedom times the
// blocks' standard deviation. (Not divided by √k: a path's state can last a
// whole run, so a later run may sit anywhere the baseline's blocks did.)
func spreadInterval(xs []float64) float64 {
	k := len(xs)
	if k < 2 {
		return 0
	}
	var mean float64
	for _, x := range xs {
		mean += x
	}
	mean /= float64(k)
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return tQuantile(k-1) * math.Sqrt(ss/float64(k-1))
}

// blockSpread is spreadInterval for a percentile's blocks, less the one
// block farthest from their median when there are five or more: one block of
// a baseline may be a stall of the host (a scheduling hiccup on a busy
// machine lifts every probe of a fifth of the run), and such a block is not
// where a whole later run lands. Counted in, it made the noise of it the
// band: on a 2-core host a fast path's baseline with one stalled fifth kept
// a shaper that raised p50 from 0.054 to 1.88 ms and p99 from 0.82 to
// 13.7 ms ("not worse"). The rest are read with one degree of freedom less.
func blockSpread(xs []float64) float64 {
	if len(xs) < 5 {
		return spreadInterval(xs)
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	far := 0
	for i, x := range xs {
		if math.Abs(x-med) > math.Abs(xs[far]-med) {
			far = i
		}
	}
	return spreadInterval(slices.Delete(slices.Clone(xs), far, far+1))
}
