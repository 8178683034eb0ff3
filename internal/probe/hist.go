package probe

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histograms record nanoseconds from 1 ns to one hour with three significant
// digits (0.1 % resolution: 13.01 µs, 40.0 ms), which is finer than the
// microseconds the results are reported in.
const (
	histLowest  = 1
	histHighest = int64(time.Hour)
	histDigits  = 3
)

func newHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(histLowest, histHighest, histDigits)
}

// record adds one duration in ns, clamped into the histogram's range so an
// absurd sample (a clock step) is counted rather than dropped.
func record(h *hdrhistogram.Histogram, ns int64) {
	ns = min(max(ns, histLowest), histHighest)
	_ = h.RecordValue(ns)
}

// Percentiles summarises a latency distribution in microseconds.
type Percentiles struct {
	Count int64   `json:"count"`
	Min   float64 `json:"min"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
	Mean  float64 `json:"mean"`
}

func us(ns int64) float64 { return round3(float64(ns) / 1e3) }

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// summarize reads the percentiles of a histogram of nanoseconds.
func summarize(h *hdrhistogram.Histogram) Percentiles {
	if h == nil || h.TotalCount() == 0 {
		return Percentiles{}
	}
	return Percentiles{
		Count: h.TotalCount(),
		Min:   us(h.Min()),
		P50:   us(h.ValueAtQuantile(50)),
		P90:   us(h.ValueAtQuantile(90)),
		P99:   us(h.ValueAtQuantile(99)),
		P999:  us(h.ValueAtQuantile(99.9)),
		Max:   us(h.Max()),
		Mean:  round3(h.Mean() / 1e3),
	}
}

// encodeHist returns the histogram in HdrHistogram's standard compressed V2
// encoding, base64: the same text a HdrHistogram log line carries, so any HDR
// implementation can decode it. Values are nanoseconds.
func encodeHist(h *hdrhistogram.Histogram) string {
	if h == nil {
		return ""
	}
	b, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		return ""
	}
	return base64.StdEncoding.EncodeToString(b)
}

// DecodeHistogram decodes a histogram from a result's "histograms" map.
func DecodeHistogram(s string) (*hdrhistogram.Histogram, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("decode histogram: %w", err)
	}
	h, err := hdrhistogram.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("decode histogram: %w", err)
	}
	return h, nil
}

// trimmedMean is the mean of the values at or below the given percentile (the
// responsiveness draft's trimmed mean drops the slowest 5 %), in ns.
func trimmedMean(h *hdrhistogram.Histogram, pct float64) float64 {
	if h.TotalCount() == 0 {
		return 0
	}
	limit := h.ValueAtQuantile(pct)
	var sum, n float64
	for _, b := range h.Distribution() {
		if b.Count == 0 || b.From > limit {
			continue
		}
		mid := float64(b.From+b.To) / 2
		sum += mid * float64(b.Count)
		n += float64(b.Count)
	}
	if n == 0 {
		return 0
	}
	return sum / n
}

func fmtDur(ns int64) string { return time.Duration(ns).String() }

// fmtBytes renders a size in bytes, in KiB or MiB when it is a whole number of them.
func fmtBytes(n uint64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// fmtRate renders bits per second in the largest decimal unit that keeps
// three significant digits.
func fmtRate(bps uint64) string {
	f := float64(bps)
	switch {
	case f >= 1e9:
		return strconv.FormatFloat(f/1e9, 'g', 3, 64) + " Gbit/s"
	case f >= 1e6:
		return strconv.FormatFloat(f/1e6, 'g', 3, 64) + " Mbit/s"
	case f >= 1e3:
		return strconv.FormatFloat(f/1e3, 'g', 3, 64) + " kbit/s"
	}
	return strconv.FormatUint(bps, 10) + " bit/s"
}

// fmtDurShort is d without the zero units a round duration ends with
// ("24h", "2m", "1m30s").
func fmtDurShort(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// fmtPPS is the packet rate a minimum interval allows.
func fmtPPS(minInterval time.Duration) string {
	pps := float64(time.Second) / float64(minInterval)
	if pps >= 1 {
		return strconv.FormatFloat(math.Round(pps), 'f', -1, 64)
	}
	return strconv.FormatFloat(pps, 'g', 2, 64)
}
