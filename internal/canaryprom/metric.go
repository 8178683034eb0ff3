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

// partLabels are each series' own labels, as the monitor exports them
// (internal/monitor's metrics.go and passive.go): one value of them is one
// part of a host, read on its own and compared like with like (a near
// target's p99 doubling would not show in one histogram summed with a far
// one's). The loss counters' direction is summed: loss is a part's, in
// whichever direction it was lost.
var partLabels = map[string][]string{
	"lowlat_probe_rtt_seconds":         {"target", "kind"},
	"lowlat_probe_first_byte_seconds":  {"target", "kind"},
	"lowlat_host_egress_queue_seconds": {"device", "queue", "dscp"},
	"lowlat_host_receive_seconds":      {"proto", "port", "stage"},
	"lowlat_tcp_rtt_seconds":           {"port"},
	"lowlat_tcp_first_bytes_seconds":   {"port", "bytes"},
	jitterGauge:                        {"target", "kind"},
	lostTotal:                          {"target", "kind"},
}

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
	// parts are the labels of one part (partLabels).
	parts []string
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
		return Metric{Judge: canary.Metric{Name: n, Scale: canary.Ratio, Tolerance: latencyTolerance}, Unit: "s", kind: average, series: jitterGauge, parts: partLabels[jitterGauge]}, nil
	case n == "loss":
		return Metric{Judge: canary.Metric{Name: n, Scale: canary.Points, Tolerance: lossTolerance}, kind: lossRatio, parts: partLabels[lostTotal]}, nil
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
	return Metric{Judge: canary.Metric{Name: n, Scale: canary.Ratio, Tolerance: latencyTolerance}, Unit: "s", kind: quantile, series: hist, q: qv, parts: partLabels[hist]}, nil
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

// stepExpr is the PromQL of m's values over the series sel selects, one
// series per value of the labels by (a host and its part's labels), each
// point over the range rng (a PromQL duration).
//
// A quantile reads the native histogram and the classic buckets, each
// side labelled (sideLabel "native" or "classic") so that the reader keeps,
// per host, whichever answered and knows which it was: a server with
// native histograms enabled stores only the native one (or both, where it
// also scrapes the classic), any other only the buckets. Loss reads the
// lost and the sent probes, labelled "lost" and "sent": the judge sums
// them over the window, never averages a step's ratio.
func (m Metric) stepExpr(sel Selector, by []string, rng string) string {
	b := strings.Join(by, ", ")
	side := func(expr, name string) string {
		return fmt.Sprintf(`label_replace(%s, %q, %q, "", "")`, expr, sideLabel, name)
	}
	switch m.kind {
	case average:
		return fmt.Sprintf("avg by (%s) (avg_over_time(%s{%s}[%s]))", b, m.series, sel, rng)
	case lossRatio:
		count := func(name string) string { return fmt.Sprintf("sum by (%s) (increase(%s{%s}[%s]))", b, name, sel, rng) }
		return side(count(lostTotal), "lost") + " or " + side(count(sentTotal), "sent")
	}
	q := strconv.FormatFloat(m.q, 'g', -1, 64)
	return side(fmt.Sprintf("histogram_quantile(%s, sum by (%s) (rate(%s{%s}[%s])))", q, b, m.series, sel, rng), native) + " or " +
		side(fmt.Sprintf("histogram_quantile(%s, sum by (%s, le) (rate(%s_bucket{%s}[%s])))", q, b, m.series, sel, rng), classic)
}

// The sides of a quantile's query.
const (
	native  = "native"
	classic = "classic"
)

// groupExpr is the PromQL of m over the whole group sel selects, as one
// value over rng: a quantile of all its hosts' and parts' values
// together (native where the server has it, else the classic buckets), the
// loss of all their probes, the mean of their jitter.
func (m Metric) groupExpr(sel Selector, rng string) string {
	switch m.kind {
	case average:
		return fmt.Sprintf("avg (avg_over_time(%s{%s}[%s]))", m.series, sel, rng)
	case lossRatio:
		return fmt.Sprintf("sum (increase(%s{%s}[%s])) / sum (increase(%s{%s}[%s]))", lostTotal, sel, rng, sentTotal, sel, rng)
	}
	q := strconv.FormatFloat(m.q, 'g', -1, 64)
	return fmt.Sprintf("histogram_quantile(%s, sum (rate(%s{%s}[%s]))) or histogram_quantile(%s, sum by (le) (rate(%s_bucket{%s}[%s])))",
		q, m.series, sel, rng, q, m.series, sel, rng)
}

// bucketsExpr is the PromQL of the classic buckets' bounds of m's
// histogram for each host (by) sel selects, over rng: the bounds are read
// from the server, as the monitor that exported them set them.
func (m Metric) bucketsExpr(sel Selector, host, rng string) string {
	return fmt.Sprintf("group by (%s, le) (last_over_time(%s_bucket{%s}[%s]))", host, m.series, sel, rng)
}
