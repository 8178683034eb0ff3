package canary

import (
	"math"
	"sort"
)

// classicBounds are lowlat's classic buckets, doubling from 50 µs.
func classicBounds() []float64 {
	b := make([]float64, 20)
	for i := range b {
		b[i] = 50e-6 * math.Pow(2, float64(i))
	}
	return b
}

// readClassic is what histogram_quantile reads of a step whose p99 is v,
// all its samples in v's bucket: the interpolation inside it, the same
// whatever v is inside the bucket (+Inf past the last).
func readClassic(v float64) float64 {
	bs := classicBounds()
	i := sort.SearchFloat64s(bs, v)
	switch {
	case i == len(bs):
		return math.Inf(1)
	case i == 0:
		return 0.99 * bs[0]
	}
	return bs[i-1] + 0.99*(bs[i]-bs[i-1])
}
