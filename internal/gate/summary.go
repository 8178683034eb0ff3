package gate

import (
	"fmt"
	"math"
	"strings"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/lowlat/lowlat/internal/passive"
	"github.com/lowlat/lowlat/internal/probe"
)

// Metric is one figure of a measurement: its value and the 95 % interval
// its own samples give it (Lo, Hi), in Unit, and the run-to-run noise its
// blocks and send lag show (Noise).
//
// The two are kept apart because they play different parts in a verdict.
// A baseline's Noise says how far a later run of the same path may land:
// the gate judges the run after a change against the baseline's Band. The
// run after a change is judged by its own sampling interval only: a run
// that degrades while it runs (loss that grows, a reflector that dies) has
// a wide spread of its own, and taking that spread as noise would excuse
// exactly the change the gate must catch.
type Metric struct {
	Value float64 `json:"value"`
	Lo    float64 `json:"lo"`
	Hi    float64 `json:"hi"`
	Unit  string  `json:"unit"`
	// N is how many samples the figure rests on.
	N int64 `json:"n"`
	// Noise is the half-width within which a later run of the same path
	// is expected, from this run's blocks and its send lag (0: none
	// measured).
	Noise float64 `json:"noise,omitempty"`
}

// Summary is every metric a probe result reports, by SLO name.
type Summary struct {
	Kind    string            `json:"kind"`
	Target  string            `json:"target"`
	Metrics map[string]Metric `json:"metrics"`
}

// Summarize reads a probe result (*probe.UDPResult, ICMPResult, TCPResult,
// CRRResult or LoadResult) into a Summary, computing each metric's interval from the
// result's own histograms and counts.
func Summarize(result any) (*Summary, error) {
	s := &Summary{Metrics: map[string]Metric{}}
	var err error
	switch r := result.(type) {
	case *probe.UDPResult:
		s.Kind, s.Target = "udp", r.Target
		if err = s.latency("", r.Histograms["rtt_ns"]); err != nil {
			break
		}
		err = s.jitter(r.Jitter, r.Histograms["ipdv_ns"])
		s.loss("", r.Sent-r.Loss.Throttled, r.Loss)
		s.batches("", r.Batches)
		s.hostNoise(r.SendLag)
	case *probe.ICMPResult:
		// As udp, but one loss: an echo lost on the way out and its reply
		// lost on the way back look the same from here.
		s.Kind, s.Target = "icmp", r.Target
		if err = s.latency("", r.Histograms["rtt_ns"]); err != nil {
			break
		}
		err = s.jitter(r.Jitter, r.Histograms["ipdv_ns"])
		s.share("loss", r.Loss.Lost, r.Sent)
		s.batches("", r.Batches)
		s.hostNoise(r.SendLag)
	case *probe.TCPResult:
		s.Kind, s.Target = "tcp", r.Target
		err = s.latency("", r.Histograms["rtt_ns"])
		s.errors(r.Failed, r.Requests)
		s.batches("", r.Batches)
		s.hostNoise(r.SendLag)
	case *probe.CRRResult:
		s.Kind, s.Target = "crr", r.Target
		if err = s.latency("", r.Histograms["last_byte_ns"]); err != nil {
			break
		}
		if err = s.latency("first_byte_", r.Histograms["first_byte_ns"]); err != nil {
			break
		}
		if err = s.latency("connect_", r.Histograms["connect_ns"]); err != nil {
			break
		}
		s.rate(r.Transactions, r.TransactionsPerSec)
		s.errors(r.Errors, r.Transactions)
	case *probe.LoadResult:
		s.Kind, s.Target = "load", r.Target
		if err = s.latency("", r.Histograms["loaded_rtt_ns"]); err != nil {
			break
		}
		if err = s.latency("idle_", r.Histograms["idle_rtt_ns"]); err != nil {
			break
		}
		s.loss("", r.LoadedRTT.Count+r.LoadedLoss.Up+r.LoadedLoss.Down, r.LoadedLoss)
		s.loss("idle_", r.IdleRTT.Count+r.IdleLoss.Up+r.IdleLoss.Down, r.IdleLoss)
		delete(s.Metrics, "idle_loss_up")
		delete(s.Metrics, "idle_loss_down")
		s.batches("", r.LoadedBatches)
		s.batches("idle_", r.IdleBatches)
		s.hostNoise(r.SendLag)
		s.increase()
		err = s.rpm(r.Histograms["loaded_rtt_ns"], r.RPM)
		s.goodput(r.Goodput, r.GoodputSamples)
	case *passive.GateResult:
		// The host's real traffic, from the kernel's histograms: latency
		// only, and the noise of its fifths.
		s.Kind, s.Target = "passive", r.Target
		s.passiveLatency(passive.HistOf(r.Hist))
		s.passiveBlocks(r.Blocks)
	default:
		return nil, fmt.Errorf("gate: cannot judge a %T", result)
	}
	if err != nil {
		return nil, fmt.Errorf("gate: %s result: %w", s.Kind, err)
	}
	return s, nil
}

// Has says whether the summary has a value for metric.
func (s *Summary) Has(metric string) bool {
	m, ok := s.Metrics[metric]
	return ok && !math.IsNaN(m.Value)
}

func (s *Summary) put(name string, v, lo, hi float64, n int64) {
	lo, hi = metrics[name].clip(lo), metrics[name].clip(hi)
	s.Metrics[name] = Metric{Value: round(v), Lo: round(min(lo, v)), Hi: round(max(hi, v)), Unit: metrics[name].unit, N: n}
}

// Band is the range in which a later run of the same path is expected to
// land when this summary is the baseline: metric name's sampling interval,
// widened to its value ± its noise, and kept inside the metric's range.
func (s *Summary) Band(name string) (lo, hi float64) {
	m := s.Metrics[name]
	d := metrics[name]
	return round(d.clip(min(m.Lo, m.Value-m.Noise))), round(d.clip(max(m.Hi, m.Value+m.Noise)))
}

// round keeps six significant digits: enough for every unit, and stable in
// JSON.
func round(x float64) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	p := math.Pow(10, 5-math.Floor(math.Log10(math.Abs(x))))
	return math.Round(x*p) / p
}

func decode(enc string) (*hdrhistogram.Histogram, error) {
	if enc == "" {
		return nil, nil
	}
	return probe.DecodeHistogram(enc)
}

// latency adds the percentiles and mean of a histogram of ns, in ms, named
// prefix+p50 and so on. An empty or missing histogram adds nothing: a run
// with no replies has no latency, and an SLO on it fails.
func (s *Summary) latency(prefix, enc string) error {
	h, err := decode(enc)
	if err != nil || h == nil || h.TotalCount() == 0 {
		return err
	}
	bs := bars(h)
	n := h.TotalCount()
	for _, p := range []struct {
		name string
		q    float64
	}{{"p50", .50}, {"p90", .90}, {"p99", .99}, {"p999", .999}, {"max", 1 - 1/float64(n)}} {
		name := prefix + p.name
		if _, ok := metrics[name]; !ok {
			continue
		}
		v, lo, hi := quantileCI(h, bs, p.q)
		if p.name == "max" {
			v = float64(h.Max())
			hi = max(hi, v)
		}
		s.put(name, v/1e6, lo/1e6, hi/1e6, n)
	}
	if _, ok := metrics[prefix+"mean"]; ok {
		v, lo, hi := meanCI(h)
		s.put(prefix+"mean", v/1e6, lo/1e6, hi/1e6, n)
	}
	return nil
}

// passiveLatency adds the percentiles and mean of a passive histogram, in
// ms. Its intervals come from order statistics as the probes' do, widened
// to the edges of the histogram's buckets (1/16 of the value wide), so a
// difference inside one bucket is never "worse".
func (s *Summary) passiveLatency(h passive.Hist) {
	n := h.Count()
	if n == 0 {
		return
	}
	var bs []hdrhistogram.Bar
	var sum2 float64
	for b, c := range h.Counts {
		if c == 0 {
			continue
		}
		lo, hi := passive.BucketBounds(b)
		bs = append(bs, hdrhistogram.Bar{From: int64(lo), To: int64(hi), Count: int64(c)})
		mid := float64(lo+hi) / 2
		sum2 += float64(c) * mid * mid
	}
	for _, p := range []struct {
		name string
		q    float64
	}{{"p50", .50}, {"p90", .90}, {"p99", .99}, {"p999", .999}, {"max", 1 - 1/float64(n)}} {
		v, lo, hi := barsQuantileCI(float64(n), float64(h.Quantile(p.q)), bs, p.q)
		if p.name == "max" {
			v = float64(h.Max())
			hi = max(hi, v)
		}
		s.put(p.name, v/1e6, lo/1e6, hi/1e6, int64(n))
	}
	mean := float64(h.SumNs) / float64(n)
	se := math.Sqrt(max(0, sum2/float64(n)-mean*mean)) / math.Sqrt(float64(n))
	s.put("mean", mean/1e6, max(0, mean-z*se)/1e6, (mean+z*se)/1e6, int64(n))
}

// passiveBlocks records the noise of a passive window's fifths, as batches
// does for a probe's.
func (s *Summary) passiveBlocks(rows []passive.Row) {
	b := &probe.Batches{}
	for _, r := range rows {
		b.Count = append(b.Count, int64(r.Count))
		b.P50 = append(b.P50, r.P50)
		b.P90 = append(b.P90, r.P90)
		b.P99 = append(b.P99, r.P99)
		b.Mean = append(b.Mean, r.Mean)
	}
	s.batches("", b)
}

// batches records the run-to-run noise of the percentiles, the mean, the
// loss and the errors from the run's blocks (the probes split into
// consecutive fifths). Sampling alone misses the drift of a path (or a host)
// from one moment to the next, which a later run sees too:
//   - the mean, the loss and the errors are the means of their blocks'
//     figures, so their noise is the batch-means one: t · sd / √k;
//   - a percentile is not, and it moves with the path's state, which can
//     last a whole run: a later run may sit anywhere one block of the
//     baseline could, so the half-width is t · sd of the blocks.
//
// Latencies come from the blocks with replies; the loss and the errors
// from every block, a block without a reply at 100 %.
func (s *Summary) batches(prefix string, b *probe.Batches) {
	if b == nil {
		return
	}
	for name, xs := range map[string][]float64{"p50": b.Latencies(b.P50), "p90": b.Latencies(b.P90), "p99": b.Latencies(b.P99),
		"p999": b.Latencies(b.P999), "mean": b.Latencies(b.Mean), "loss": b.Loss, "errors": b.Errors} {
		if _, ok := s.Metrics[prefix+name]; !ok || len(xs) < 3 {
			continue
		}
		half := blockSpread(xs)
		scale := 1e-3 // µs to ms
		switch name {
		case "loss", "errors":
			scale = 1
			fallthrough
		case "mean":
			// Batch means: every block counts, a stall's too (it is
			// part of the mean a later run would see).
			half = spreadInterval(xs) / math.Sqrt(float64(len(xs)))
		}
		s.noise(prefix+name, half*scale)
	}
}

// noise raises metric name's noise to at least half.
func (s *Summary) noise(name string, half float64) {
	m := s.Metrics[name]
	m.Noise = round(max(m.Noise, half))
	s.Metrics[name] = m
}

// hostNoise raises every latency's noise to at least how late this host
// woke the prober against its schedule, measured in the same run (send
// lag): two runs whose latencies differ by less than that differ by the
// host's own timer and scheduling noise (Linux's default timer slack alone
// is 50 µs), which no change to the network explains. The median and the
// mean take the median lag; the tail (p90 and above, max) takes the lag's
// p90, the host's ordinary bad moment, because a tail percentile is made of
// exactly such moments. (Not the lag's p99: one stall of a busy host would
// then excuse any tail.)
//
// On a path of milliseconds this is negligible; on a 20–60 µs veth path on a
// busy 2-core host it is what keeps an unchanged path from looking worse:
// 200 back-to-back pairs there judged 2 worse on p99 with the median lag
// for every percentile, none with the p90 lag for the tail (docs/gate.md).
// It counts once, on the baseline's side: before the noise was split from
// the sampling interval, half the median lag widened each side.
func (s *Summary) hostNoise(lag probe.Percentiles) {
	if lag.Count == 0 {
		return
	}
	for name := range s.Metrics {
		if metrics[name].class != classTime || name == "increase_ms" {
			continue
		}
		half := lag.P50
		if tail(name) {
			half = max(lag.P50, lag.P90)
		}
		if half > 0 {
			s.noise(name, half/1e3) // µs to ms
		}
	}
}

// tail says whether a latency metric is a tail percentile (p90 and above).
func tail(name string) bool {
	for _, p := range []string{"p90", "p99", "p999", "max"} {
		if strings.HasSuffix(name, p) {
			return true
		}
	}
	return false
}

// jitter adds RFC 3550's jitter (µs in the result) in ms. The estimator is
// J += (|D| − J)/16, an exponentially weighted mean of |D| whose variance is
// var(|D|)·(1/16)/(2 − 1/16) = var(|D|)/31; |D|'s spread is the IPDV
// histogram's.
func (s *Summary) jitter(jitterUS float64, ipdv string) error {
	h, err := decode(ipdv)
	if err != nil {
		return err
	}
	if h == nil || h.TotalCount() < 2 {
		return nil
	}
	v := jitterUS / 1e3
	se := h.StdDev() / 1e6 / math.Sqrt(31)
	s.put("jitter", v, max(0, v-z*se), v+z*se, h.TotalCount())
	return nil
}

// loss adds the loss in % of sent probes, total and per direction, with
// Wilson intervals.
func (s *Summary) loss(prefix string, sent int64, l probe.Loss) {
	s.share(prefix+"loss", l.Up+l.Down, sent)
	s.share(prefix+"loss_up", l.Up, sent)
	s.share(prefix+"loss_down", l.Down, sent)
}

// errors adds the share of requests (tcp) or transactions (crr) that
// failed, in %: failed of attempted.
func (s *Summary) errors(failed, ok int64) {
	s.share("errors", failed, failed+ok)
}

// share adds k of n as a percentage, with its Wilson interval; nothing
// when n is 0.
func (s *Summary) share(name string, k, n int64) {
	if n <= 0 {
		return
	}
	lo, hi := wilson(float64(k), float64(n))
	s.put(name, 100*float64(k)/float64(n), 100*lo, 100*hi, n)
}

// increase adds loaded p50 − idle p50, its interval the two intervals'
// extremes.
func (s *Summary) increase() {
	l, okl := s.Metrics["p50"]
	i, oki := s.Metrics["idle_p50"]
	if !okl || !oki {
		return
	}
	s.put("increase_ms", l.Value-i.Value, l.Lo-i.Hi, l.Hi-i.Lo, min(l.N, i.N))
	s.noise("increase_ms", l.Noise+i.Noise)
}

// rpm adds round trips per minute under load: 60000 over the loaded RTT's
// trimmed mean in ms (the slowest 5 % dropped), as the probe computes it.
func (s *Summary) rpm(enc string, rpm float64) error {
	h, err := decode(enc)
	if err != nil || h == nil || h.TotalCount() == 0 || rpm <= 0 {
		return err
	}
	_, lo, hi := trimmedCI(h, 95)
	rlo, rhi := 0.0, math.Inf(1)
	if hi > 0 {
		rlo = 60000 / (hi / 1e6)
	}
	if lo > 0 {
		rhi = 60000 / (lo / 1e6)
	}
	s.put("rpm", rpm, min(rlo, rpm), max(rhi, rpm), h.TotalCount())
	return nil
}

// rate adds transactions per second; a count of N events has the Poisson
// interval N ± z·√N.
func (s *Summary) rate(n int64, perSec float64) {
	if n <= 0 || perSec <= 0 {
		return
	}
	secs := float64(n) / perSec
	half := z * math.Sqrt(float64(n))
	s.put("transactions_per_sec", perSec, max(0, float64(n)-half)/secs, (float64(n)+half)/secs, n)
}

// goodput adds the load flows' goodput in Mbit/s. The interval comes from
// the per-interval samples when the result has them.
func (s *Summary) goodput(g probe.Goodput, samples probe.GoodputSamples) {
	add := func(name string, v float64, xs []float64) {
		lo, hi := v, v
		if len(xs) >= 2 {
			// The samples' t interval of their mean, around the whole
			// run's figure.
			half := spreadInterval(xs) / math.Sqrt(float64(len(xs)))
			lo, hi = max(0, v-half), v+half
		}
		s.put(name, v, lo, hi, int64(len(xs)))
	}
	both := make([]float64, max(len(samples.Up), len(samples.Down)))
	for i := range both {
		if i < len(samples.Up) {
			both[i] += samples.Up[i]
		}
		if i < len(samples.Down) {
			both[i] += samples.Down[i]
		}
	}
	add("goodput_mbps", g.Up+g.Down, both)
	add("goodput_up_mbps", g.Up, samples.Up)
	add("goodput_down_mbps", g.Down, samples.Down)
}
