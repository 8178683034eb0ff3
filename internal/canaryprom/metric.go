package canaryprom

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/lowlat/lowlat/internal/canary"
)

// kind is how a metric's value is read from its series.
type kind int

const (
	quantile  kind = iota // a histogram's quantile
	average               // a gauge's mean over the step
	lossRatio             // lowlat_probe_lost_total over lowlat_probe_sent_total
)

// Histograms are lowlat's histograms (the monitor's metrics,
// docs/monitor.md): a quantile of any of them can be judged.
var Histograms = []string{
	"lowlat_probe_rtt_seconds",
	"lowlat_probe_first_byte_seconds",
	"lowlat_host_egress_queue_seconds",
	"lowlat_host_receive_seconds",
	"lowlat_tcp_rtt_seconds",
	"lowlat_tcp_first_bytes_seconds",
}

const (
	jitterGauge = "lowlat_probe_jitter_seconds"
	lostTotal   = "lowlat_probe_lost_total"
	sentTotal   = "lowlat_probe_sent_total"
)

// Tolerances: a canary surely worse by less is marginal, not failed.
const (
	latencyTolerance = 0.05  // +5 %
	lossTolerance    = 0.005 // half a percentage point
)

// Metric is one judged metric: how to read it and how to compare it.
type Metric struct {
	// Judge is the comparison's side: name, scale, tolerance.
	Judge canary.Metric
	// Unit is "s" for times, "" for ratios (loss).
	Unit   string
	kind   kind
	series string  // the histogram or gauge
	q      float64 // the quantile
}

// Name is the metric's name as the command line gave it.
func (m Metric) Name() string { return m.Judge.Name }

// ParseMetric reads a metric name: p50, p90, p99, p999 (the probes'
// round-trip time), first_byte_p99, jitter, loss, or any of Histograms as
// NAME (its p99) or NAME:pNN. The error lists the names known.
func ParseMetric(name string) (Metric, error) {
	n := strings.TrimSpace(name)
	hist, q := "", ""
	switch {
	case n == "jitter" || n == jitterGauge:
		return Metric{Judge: canary.Metric{Name: n, Scale: canary.Ratio, Tolerance: latencyTolerance}, Unit: "s", kind: average, series: jitterGauge}, nil
	case n == "loss":
		return Metric{Judge: canary.Metric{Name: n, Scale: canary.Points, Tolerance: lossTolerance}, kind: lossRatio}, nil
	case strings.HasPrefix(n, "first_byte_p"):
		hist, q = "lowlat_probe_first_byte_seconds", strings.TrimPrefix(n, "first_byte_")
	case strings.HasPrefix(n, "p") && !strings.Contains(n, "_"):
		hist, q = "lowlat_probe_rtt_seconds", n
	case strings.HasPrefix(n, "lowlat_"):
		hist, q, _ = strings.Cut(n, ":")
		if q == "" {
			q = "p99"
		}
		if !knownHistogram(hist) {
			return Metric{}, fmt.Errorf("unknown metric %q: not one of lowlat's histograms (%s)", name, strings.Join(Histograms, ", "))
		}
	default:
		return Metric{}, fmt.Errorf("unknown metric %q (known: p50, p90, p99, p999, first_byte_p99, jitter, loss, or a histogram as NAME[:pNN]: %s)", name, strings.Join(Histograms, ", "))
	}
	qv, err := parseQuantile(q)
	if err != nil {
		return Metric{}, fmt.Errorf("metric %q: %v", name, err)
	}
	return Metric{Judge: canary.Metric{Name: n, Scale: canary.Ratio, Tolerance: latencyTolerance}, Unit: "s", kind: quantile, series: hist, q: qv}, nil
}

// seriesNames are the names of the series m is read from, one series a
// part: a histogram's native series and its classic _count, the gauge, or
// the loss counters.
func (m Metric) seriesNames() []string {
	switch m.kind {
	case average:
		return []string{m.series}
	case lossRatio:
		return []string{sentTotal, lostTotal}
	}
	return []string{m.series, m.series + "_count"}
}

func knownHistogram(name string) bool {
	i := sort.SearchStrings(sortedHistograms, name)
	return i < len(sortedHistograms) && sortedHistograms[i] == name
}

var sortedHistograms = func() []string {
	s := append([]string(nil), Histograms...)
	sort.Strings(s)
	return s
}()

// parseQuantile reads pNN: p50 is 0.50, p99 0.99, p999 0.999.
func parseQuantile(q string) (float64, error) {
	digits, ok := strings.CutPrefix(q, "p")
	if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" || digits[0] == '0' {
		return 0, fmt.Errorf("%q is not a quantile (want p50, p90, p99, p999...)", q)
	}
	v, err := strconv.ParseFloat("0."+digits, 64)
	if err != nil || v <= 0 || v >= 1 {
		return 0, fmt.Errorf("%q is not a quantile", q)
	}
	return v, nil
}

// expr is the PromQL of m over the series sel selects, aggregated by the
// labels by (none: the whole group), each point over the range rng (a
// PromQL duration).
//
// A quantile reads the native histogram first and the classic buckets
// where there is none: a server with native histograms enabled stores
// only the native one, any other only the buckets, and "or" keeps the
// left side's series where both answer for a host.
func (m Metric) expr(sel Selector, by []string, rng string) string {
	s := sel.String()
	group := "sum"
	if len(by) > 0 {
		group = "sum by (" + strings.Join(by, ", ") + ")"
	}
	switch m.kind {
	case average:
		avg := "avg"
		if len(by) > 0 {
			avg = "avg by (" + strings.Join(by, ", ") + ")"
		}
		return fmt.Sprintf("%s (avg_over_time(%s{%s}[%s]))", avg, m.series, s, rng)
	case lossRatio:
		return fmt.Sprintf("%s (increase(%s{%s}[%s])) / %s (increase(%s{%s}[%s]))", group, lostTotal, s, rng, group, sentTotal, s, rng)
	}
	q := strconv.FormatFloat(m.q, 'g', -1, 64)
	bucketBy := "sum by (le)"
	if len(by) > 0 {
		bucketBy = "sum by (" + strings.Join(by, ", ") + ", le)"
	}
	return fmt.Sprintf("histogram_quantile(%s, %s (rate(%s{%s}[%s]))) or histogram_quantile(%s, %s (rate(%s_bucket{%s}[%s])))",
		q, group, m.series, s, rng, q, bucketBy, m.series, s, rng)
}
