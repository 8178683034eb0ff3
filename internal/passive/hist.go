package passive

import (
	"math"
	"math/bits"
	"time"
)

// NumBuckets is the number of buckets of a Hist: values 0-31 ns one per
// bucket, then 16 buckets per power of two up to 2^36 ns (69 s), each at
// most 1/16 of its lower bound wide; larger values land in the last.
// bucket() in bpf/passive.c computes the same index.
const NumBuckets = 528

// Bucket returns the bucket of a value in nanoseconds.
func Bucket(ns uint64) int {
	if ns < 32 {
		return int(ns)
	}
	msb := bits.Len64(ns) - 1
	if msb > 35 {
		return NumBuckets - 1
	}
	return 32 + (msb-5)*16 + int((ns>>(msb-4))&15)
}

// BucketBounds returns the values a bucket holds, in nanoseconds: [lo, hi).
func BucketBounds(b int) (lo, hi uint64) {
	if b < 32 {
		return uint64(b), uint64(b) + 1
	}
	msb := (b-32)/16 + 5
	sub := uint64((b - 32) % 16)
	w := uint64(1) << (msb - 4)
	lo = (16 + sub) * w
	return lo, lo + w
}

// Hist is one key's histogram of durations.
type Hist struct {
	Counts [NumBuckets]uint64 `json:"-"`
	// SumNs is the sum of the values, for a mean and Prometheus's _sum.
	SumNs uint64 `json:"sum_ns"`
}

// Count is the number of values.
func (h *Hist) Count() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// Add adds o's values to h.
func (h *Hist) Add(o *Hist) {
	for i, c := range o.Counts {
		h.Counts[i] += c
	}
	h.SumNs += o.SumNs
}

// Sub returns h minus an earlier reading of the same histogram: the values
// recorded between the two.
func (h *Hist) Sub(earlier *Hist) Hist {
	var d Hist
	for i := range h.Counts {
		if h.Counts[i] >= earlier.Counts[i] {
			d.Counts[i] = h.Counts[i] - earlier.Counts[i]
		}
	}
	if h.SumNs >= earlier.SumNs {
		d.SumNs = h.SumNs - earlier.SumNs
	}
	return d
}

// Quantile returns the q-quantile (0 < q <= 1), interpolated linearly
// inside its bucket; 0 for an empty histogram. Its error is at most a
// bucket's width: 1/16 of the value.
func (h *Hist) Quantile(q float64) time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	rank := q * float64(n)
	var seen float64
	for b, c := range h.Counts {
		if c == 0 {
			continue
		}
		if seen+float64(c) >= rank {
			lo, hi := BucketBounds(b)
			frac := (rank - seen) / float64(c)
			return time.Duration(math.Round(float64(lo) + frac*float64(hi-lo)))
		}
		seen += float64(c)
	}
	return h.Max()
}

// Max returns the upper bound of the highest bucket with a value.
func (h *Hist) Max() time.Duration {
	for b := NumBuckets - 1; b >= 0; b-- {
		if h.Counts[b] > 0 {
			_, hi := BucketBounds(b)
			return time.Duration(hi)
		}
	}
	return 0
}

// Mean returns the mean value; 0 for an empty histogram.
func (h *Hist) Mean() time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	return time.Duration(h.SumNs / n)
}

// Values expands the histogram into one value per count, each at its
// bucket's midpoint, in ascending order: the form the gate's statistics
// take. At most limit values (spread evenly over the ranks) when the
// histogram holds more; limit <= 0 means all.
func (h *Hist) Values(limit int) []time.Duration {
	n := h.Count()
	if n == 0 {
		return nil
	}
	step := 1.0
	if limit > 0 && n > uint64(limit) {
		step = float64(n) / float64(limit)
	}
	var out []time.Duration
	next := 0.0
	var seen uint64
	for b, c := range h.Counts {
		if c == 0 {
			continue
		}
		lo, hi := BucketBounds(b)
		mid := time.Duration((lo + hi) / 2)
		for float64(seen+c) > next {
			out = append(out, mid)
			next += step
		}
		seen += c
	}
	return out
}
