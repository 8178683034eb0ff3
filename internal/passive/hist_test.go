package passive

import (
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

// Every value falls in the bucket whose bounds hold it, buckets are in
// order, and none is wider than 1/16 of its lower bound.
func TestBucketBounds(t *testing.T) {
	vals := []uint64{0, 1, 15, 16, 17, 31, 32, 33, 1000, 1023, 1024, 1 << 20, 123456789, 1<<36 - 1}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		vals = append(vals, r.Uint64N(1<<36))
	}
	for _, v := range vals {
		b := Bucket(v)
		lo, hi := BucketBounds(b)
		if v < lo || v >= hi {
			t.Fatalf("Bucket(%d) = %d, whose bounds are [%d, %d)", v, b, lo, hi)
		}
	}
	for b := 32; b < NumBuckets; b++ {
		lo, hi := BucketBounds(b)
		plo, phi := BucketBounds(b - 1)
		if plo >= lo || phi != lo {
			t.Fatalf("bucket %d [%d,%d) does not follow bucket %d [%d,%d)", b, lo, hi, b-1, plo, phi)
		}
		if 16*(hi-lo) > lo {
			t.Fatalf("bucket %d [%d,%d) is wider than 1/16 of its lower bound", b, lo, hi)
		}
	}
	if got := Bucket(1 << 40); got != NumBuckets-1 {
		t.Fatalf("Bucket(2^40) = %d, want the last bucket %d", got, NumBuckets-1)
	}
}

// Quantiles from the histogram are within 1/32 of the exact ones on a
// smooth distribution.
func TestQuantileAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var h Hist
	var exact []float64
	for range 50000 {
		v := uint64(r.ExpFloat64() * 2e6) // exponential, mean 2 ms
		h.Counts[Bucket(v)]++
		h.SumNs += v
		exact = append(exact, float64(v))
	}
	sort.Float64s(exact)
	for _, q := range []float64{0.5, 0.9, 0.99} {
		want := exact[int(q*float64(len(exact)))-1]
		got := float64(h.Quantile(q))
		if d := (got - want) / want; d > 1.0/32 || d < -1.0/32 {
			t.Errorf("p%g = %v, exact %v: off by %.1f%%", q*100, time.Duration(got), time.Duration(want), d*100)
		}
	}
	if got := h.Values(1000); len(got) != 1000 || !sort.SliceIsSorted(got, func(i, j int) bool { return got[i] < got[j] }) {
		t.Errorf("Values(1000) gave %d values (sorted: %v), want 1000 sorted", len(got), sort.SliceIsSorted(got, func(i, j int) bool { return got[i] < got[j] }))
	}
	var empty Hist
	if empty.Quantile(0.99) != 0 || empty.Values(10) != nil {
		t.Error("an empty histogram has a quantile or values")
	}
	d := h.Sub(&empty)
	if d.Count() != h.Count() {
		t.Errorf("h - empty holds %d values, want %d", d.Count(), h.Count())
	}
}

// A row's buckets rebuild the histogram it was summarized from.
func TestSummarizeRoundTrip(t *testing.T) {
	var h Hist
	for _, v := range []uint64{5, 900, 1500, 1500, 2e6, 3e9} {
		h.Counts[Bucket(v)]++
		h.SumNs += v
	}
	rows := Summarize(Snapshot{Series: []Series{{Measure: RTT, Proto: "tcp", Port: 443, Hist: h, Conns: 4}}}, 2*time.Second)
	r := rows[0]
	if r.Key != "rtt tcp/443" || r.Count != 6 || r.PerSecond != 3 || r.ConnsPerSecond != 2 {
		t.Errorf("row %+v: want key rtt tcp/443, 6 values, 3/s, 2 connections/s", r)
	}
	back := HistOf(r)
	if back.Counts != h.Counts {
		t.Errorf("HistOf(row) has other counts than the histogram summarized")
	}
	if got, want := r.P50, float64(h.Quantile(0.5))/1e3; got != want {
		t.Errorf("p50 %v µs, want %v", got, want)
	}
}
