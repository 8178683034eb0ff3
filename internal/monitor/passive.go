package monitor

import (
	"math"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/lowlat/lowlat/internal/passive"
)

// The passive section's metric names (docs/monitor.md, the rules).
var (
	dEgress = prometheus.NewDesc("lowlat_host_egress_queue_seconds",
		"Time a packet spent in a device's egress queueing layer, from entering it to the driver (a shaper's queue and fq's pacing included), from the kernel; per DSCP class where [passive] dscp splits it.",
		[]string{"device", "queue", "dscp"}, nil)
	dReceive = prometheus.NewDesc("lowlat_host_receive_seconds",
		"Time from the kernel's receive timestamp of a packet to a stage: stack (the protocol stack takes it), socket (TCP processes it on its socket), read (the application reads it).",
		[]string{"proto", "port", "stage"}, nil)
	dTCPRTT = prometheus.NewDesc("lowlat_tcp_rtt_seconds",
		"The kernel's RTT samples of the ACKs of a TCP port's connections (the port local, else remote).",
		[]string{"port"}, nil)
	dFirstBytes = prometheus.NewDesc("lowlat_tcp_first_bytes_seconds",
		"Time from a connection's SYN reaching this host to the ACK of its first N bytes, per listening port.",
		[]string{"port", "bytes"}, nil)
	dRetrans = prometheus.NewDesc("lowlat_tcp_retransmits_total",
		"TCP segments a port's connections retransmitted.", []string{"port"}, nil)
	dConns = prometheus.NewDesc("lowlat_tcp_connections_total",
		"Connections of a TCP port that reached ESTABLISHED.", []string{"port"}, nil)
	dPassiveUp = prometheus.NewDesc("lowlat_passive_up",
		"1 while the [passive] measurements are attached; 0 when the kernel refused them (the monitor's log says why).", nil, nil)
	dPassiveGone = prometheus.NewDesc("lowlat_passive_unavailable",
		"1 per hook this kernel refused; its series are not measured (unknown, not zero).", []string{"hook"}, nil)
)

// PassiveBuckets are the classic buckets of the passive histograms: powers
// of two of nanoseconds from 1.024 µs, edges of the kernel histogram's own
// buckets, so each classic count is exact.
var PassiveBuckets = func() []float64 {
	var b []float64
	for e := 10; e <= 35; e++ {
		b = append(b, float64(uint64(1)<<e)/1e9)
	}
	return b
}()

// nativeSchema: 8 native buckets per doubling (the probes' factor 1.09).
const nativeSchema = 3

// passiveState is the monitor's passive session, kept across reloads that
// do not change the section.
type passiveState struct {
	mu      sync.Mutex
	cfg     *PassiveConfig
	s       *passive.Session
	err     string
	created time.Time
}

// open (re)starts the session for cfg; a nil cfg stops it. The monitor
// keeps running without it: probes and the doctor do not need BPF.
func (p *passiveState) open(cfg *PassiveConfig, logf func(string, ...any)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cfg.same(cfg) && (p.s != nil || p.err != "") {
		return
	}
	if p.s != nil {
		p.s.Close()
		p.s = nil
	}
	p.cfg, p.err = cfg, ""
	if cfg == nil {
		return
	}
	s, err := passive.Open(cfg.Session())
	if err != nil {
		p.err = err.Error()
		logf("[passive]: not measured: %v", err)
		return
	}
	p.s, p.created = s, time.Now()
	for _, why := range s.Unavailable {
		logf("[passive]: %s", why)
	}
}

func (p *passiveState) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.s != nil {
		p.s.Close()
		p.s = nil
	}
}

// collect emits the session's series.
func (p *passiveState) collect(ch chan<- prometheus.Metric) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cfg == nil {
		return
	}
	if p.s == nil {
		ch <- prometheus.MustNewConstMetric(dPassiveUp, prometheus.GaugeValue, 0)
		return
	}
	snap, err := p.s.Snapshot()
	if err != nil {
		ch <- prometheus.MustNewConstMetric(dPassiveUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(dPassiveUp, prometheus.GaugeValue, 1)
	for hook := range p.s.Unavailable {
		ch <- prometheus.MustNewConstMetric(dPassiveGone, prometheus.GaugeValue, 1, hook)
	}
	for i := range snap.Series {
		ser := &snap.Series[i]
		if ser.Unavailable != "" {
			continue
		}
		port := strconv.Itoa(int(ser.Port))
		switch ser.Measure {
		case passive.Egress:
			q := strconv.Itoa(ser.Queue)
			if ser.Queue < 0 {
				q = "other"
			}
			ch <- p.hist(dEgress, &ser.Hist, ser.Device, q, ser.DSCP) // "": no split, no label
		case passive.Receive:
			ch <- p.hist(dReceive, &ser.Hist, ser.Proto, port, ser.Stage)
		case passive.RTT:
			ch <- p.hist(dTCPRTT, &ser.Hist, port)
			ch <- prometheus.MustNewConstMetricWithCreatedTimestamp(dRetrans, prometheus.CounterValue, float64(ser.Retransmits), p.created, port)
			ch <- prometheus.MustNewConstMetricWithCreatedTimestamp(dConns, prometheus.CounterValue, float64(ser.Conns), p.created, port)
		case passive.FirstBytes:
			ch <- p.hist(dFirstBytes, &ser.Hist, port, strconv.FormatUint(ser.Bytes, 10))
		}
	}
}

// hist is one kernel histogram as a Prometheus histogram with both the
// classic buckets (PassiveBuckets) and native ones (schema 3), as the
// probes' are.
func (p *passiveState) hist(d *prometheus.Desc, h *passive.Hist, labels ...string) prometheus.Metric {
	return &histMetric{desc: d, h: *h, created: p.created, labels: prometheus.MakeLabelPairs(d, labels)}
}

// histMetric writes a kernel histogram in Prometheus's data model.
type histMetric struct {
	desc    *prometheus.Desc
	h       passive.Hist
	created time.Time
	labels  []*dto.LabelPair
}

func (m *histMetric) Desc() *prometheus.Desc { return m.desc }

func (m *histMetric) Write(out *dto.Metric) error {
	h := &m.h
	var classic []*dto.Bucket
	var cum uint64
	b := 0
	for _, ub := range PassiveBuckets {
		for ; b < passive.NumBuckets; b++ {
			if _, hi := passive.BucketBounds(b); float64(hi)/1e9 > ub+1e-15 {
				break
			}
			cum += h.Counts[b]
		}
		classic = append(classic, &dto.Bucket{CumulativeCount: proto.Uint64(cum), UpperBound: proto.Float64(ub)})
	}
	// Native buckets: each kernel bucket lands in the native bucket that
	// holds its midpoint (the kernel's buckets are linear inside a
	// doubling, the native ones geometric: the error is within one).
	native := map[int32]int64{}
	var zero uint64
	for b, c := range h.Counts {
		if c == 0 {
			continue
		}
		lo, hi := passive.BucketBounds(b)
		mid := float64(lo+hi) / 2 / 1e9
		if lo == 0 {
			zero += c
			continue
		}
		native[int32(math.Ceil(math.Log2(mid)*(1<<nativeSchema)))] += int64(c)
	}
	spans, deltas := encodeNative(native)
	out.Label = m.labels
	out.Histogram = &dto.Histogram{
		SampleCount:      proto.Uint64(h.Count()),
		SampleSum:        proto.Float64(float64(h.SumNs) / 1e9),
		Bucket:           classic,
		Schema:           proto.Int32(nativeSchema),
		ZeroThreshold:    proto.Float64(1e-9),
		ZeroCount:        proto.Uint64(zero),
		PositiveSpan:     spans,
		PositiveDelta:    deltas,
		CreatedTimestamp: timestamppb.New(m.created),
	}
	return nil
}

// encodeNative writes native buckets as Prometheus's spans and deltas.
func encodeNative(b map[int32]int64) ([]*dto.BucketSpan, []int64) {
	var idx []int32
	for i := range b {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(i, j int) bool { return idx[i] < idx[j] })
	var spans []*dto.BucketSpan
	var deltas []int64
	var prevCount int64
	var next int32 // the index after the last span's end
	for k, i := range idx {
		if k == 0 || i != next {
			off := i
			if k > 0 {
				off = i - next
			}
			spans = append(spans, &dto.BucketSpan{Offset: proto.Int32(off), Length: proto.Uint32(0)})
		}
		sp := spans[len(spans)-1]
		*sp.Length++
		deltas = append(deltas, b[i]-prevCount)
		prevCount = b[i]
		next = i + 1
	}
	if len(spans) == 0 {
		// An empty native histogram still needs a span for the scrape to
		// read it as native.
		spans = []*dto.BucketSpan{{Offset: proto.Int32(0), Length: proto.Uint32(0)}}
	}
	return spans, deltas
}
