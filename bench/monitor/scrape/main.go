// Command scrape reads one histogram from a Prometheus endpoint and prints
// its count and median, for the monitor benchmark: the median from the
// classic buckets (linear interpolation, as PromQL's histogram_quantile),
// and from the native histogram when the endpoint has one (asked for in the
// protobuf format, as Prometheus does with native histograms on).
//
//	go run ./bench/monitor/scrape http://127.0.0.1:9431/metrics lowlat_probe_rtt_seconds target=x
//
// Output: count=N classic_p50_ms=X native_p50_ms=Y (native_p50_ms=NaN without one).
package main

import (
	"fmt"
	"math"
	"net/http"
	"os"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: scrape URL METRIC [label=value...]")
		os.Exit(2)
	}
	url, name, want := os.Args[1], os.Args[2], os.Args[3:]
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Accept", `application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited`)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scrape:", err)
		os.Exit(1)
	}
	defer resp.Body.Close()
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			fmt.Fprintf(os.Stderr, "scrape: %s not found (%v)\n", name, err)
			os.Exit(1)
		}
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			if !matches(m, want) || m.Histogram == nil {
				continue
			}
			h := m.Histogram
			fmt.Printf("count=%d classic_p50_ms=%.3f native_p50_ms=%.3f\n", h.GetSampleCount(), 1e3*classic(h, 0.5), 1e3*native(h, 0.5))
			return
		}
	}
}

func matches(m *dto.Metric, want []string) bool {
	have := map[string]string{}
	for _, l := range m.Label {
		have[l.GetName()] = l.GetValue()
	}
	for _, kv := range want {
		k, v, _ := strings.Cut(kv, "=")
		if have[k] != v {
			return false
		}
	}
	return true
}

// classic is histogram_quantile over cumulative buckets.
func classic(h *dto.Histogram, q float64) float64 {
	b := h.Bucket
	if len(b) == 0 || h.GetSampleCount() == 0 {
		return math.NaN()
	}
	rank := q * float64(h.GetSampleCount())
	i := sort.Search(len(b), func(i int) bool { return float64(b[i].GetCumulativeCount()) >= rank })
	if i == len(b) {
		return b[len(b)-1].GetUpperBound()
	}
	lo, below := 0.0, 0.0
	if i > 0 {
		lo, below = b[i-1].GetUpperBound(), float64(b[i-1].GetCumulativeCount())
	}
	n := float64(b[i].GetCumulativeCount()) - below
	return lo + (b[i].GetUpperBound()-lo)*(rank-below)/n
}

// native is the quantile of a native histogram: the bucket holding the
// rank, interpolated exponentially within it (as Prometheus does).
func native(h *dto.Histogram, q float64) float64 {
	if h.Schema == nil || len(h.PositiveSpan) == 0 {
		return math.NaN()
	}
	base := math.Exp2(math.Exp2(-float64(h.GetSchema())))
	type bkt struct {
		lo, hi float64
		n      float64
	}
	var bs []bkt
	idx, count := int32(0), int64(0)
	d := 0
	for _, s := range h.PositiveSpan {
		idx += s.GetOffset()
		for j := uint32(0); j < s.GetLength(); j++ {
			count += h.PositiveDelta[d]
			d++
			if count > 0 {
				bs = append(bs, bkt{math.Pow(base, float64(idx-1)), math.Pow(base, float64(idx)), float64(count)})
			}
			idx++
		}
	}
	total := float64(h.GetZeroCount())
	for _, b := range bs {
		total += b.n
	}
	rank := q * total
	acc := float64(h.GetZeroCount())
	if rank <= acc {
		return 0
	}
	for _, b := range bs {
		if acc+b.n >= rank {
			f := (rank - acc) / b.n
			return b.lo * math.Pow(b.hi/b.lo, f)
		}
		acc += b.n
	}
	return math.NaN()
}
