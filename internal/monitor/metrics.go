package monitor

import (
	"runtime"
	"strconv"
	"time"

	"github.com/lowlat/lowlat/internal/pathprobe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// RTTBuckets are the classic histogram buckets: doubling from 50 µs, as
// smokeping_prober's are, so dashboards built on its series read ours.
var RTTBuckets = prometheus.ExponentialBuckets(50e-6, 2, 20) // 50 µs .. 26.2 s, smokeping_prober's default

// Metric names (the contract with deploy/prometheus/lowlat.rules.yml and
// docs/monitor.md).
const (
	mRTT       = "lowlat_probe_rtt_seconds"
	mFirstByte = "lowlat_probe_first_byte_seconds"
	mSent      = "lowlat_probe_sent_total"
	mLost      = "lowlat_probe_lost_total"
	mJitter    = "lowlat_probe_jitter_seconds"
)

// metrics holds the registry and the per-probe series; everything else is
// collected from the monitor's state when scraped (stateCollector).
type metrics struct {
	reg       *prometheus.Registry
	rtt       *prometheus.HistogramVec
	firstByte *prometheus.HistogramVec
	sent      *prometheus.CounterVec
	lost      *prometheus.CounterVec
	jitter    *prometheus.GaugeVec
}

func histOpts(name, help string) prometheus.HistogramOpts {
	return prometheus.HistogramOpts{
		Name: name, Help: help,
		Buckets: RTTBuckets,
		// A native histogram beside the classic buckets: 8 buckets per
		// doubling (factor 2^(1/8) ≈ 1.09), so a quantile is within ~4.5 %
		// where the doubling buckets can be off by a third.
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  160,
		NativeHistogramMinResetDuration: time.Hour,
	}
}

func newMetrics(m *Monitor) *metrics {
	x := &metrics{
		reg:       prometheus.NewRegistry(),
		rtt:       prometheus.NewHistogramVec(histOpts(mRTT, "Round-trip time of answered probes (crr: connect to last response byte)."), []string{"target", "kind"}),
		firstByte: prometheus.NewHistogramVec(histOpts(mFirstByte, "crr: connect start to the first response byte."), []string{"target", "kind"}),
		sent:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: mSent, Help: "Probes sent (a tick whose probe could not leave counts, and is lost)."}, []string{"target", "kind"}),
		lost:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: mLost, Help: "Probes without a reply within the target's timeout, by direction: up (never reached the reflector), down (its reply never came back), unknown (icmp, tcp, or the reflector could not say)."}, []string{"target", "kind", "direction"}),
		jitter:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: mJitter, Help: "RFC 3550 interarrival jitter of the round-trip time."}, []string{"target", "kind"}),
	}
	x.reg.MustRegister(x.rtt, x.firstByte, x.sent, x.lost, x.jitter,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&stateCollector{m: m})
	return x
}

// forget removes a target's series (a reload dropped or changed it).
func (x *metrics) forget(name string) {
	l := prometheus.Labels{"target": name}
	x.rtt.DeletePartialMatch(l)
	x.firstByte.DeletePartialMatch(l)
	x.sent.DeletePartialMatch(l)
	x.lost.DeletePartialMatch(l)
	x.jitter.DeletePartialMatch(l)
}

// series are one target's handles, taken once so a probe's update is a
// few atomic operations and never a label lookup.
type series struct {
	rtt, firstByte prometheus.Observer
	sent           prometheus.Counter
	lost           map[string]prometheus.Counter
	jitter         prometheus.Gauge
}

func (x *metrics) series(t *Target) *series {
	s := &series{
		rtt:    x.rtt.WithLabelValues(t.Name, t.Kind),
		sent:   x.sent.WithLabelValues(t.Name, t.Kind),
		jitter: x.jitter.WithLabelValues(t.Name, t.Kind),
		lost:   map[string]prometheus.Counter{},
	}
	dirs := []string{"unknown"}
	if t.Kind == "udp" {
		dirs = []string{"up", "down", "unknown"}
	}
	for _, d := range dirs { // present from the start, so rate() sees the first loss
		s.lost[d] = x.lost.WithLabelValues(t.Name, t.Kind, d)
	}
	if t.Kind == "crr" {
		s.firstByte = x.firstByte.WithLabelValues(t.Name, t.Kind)
	}
	return s
}

// stateCollector turns the monitor's state into series at scrape time:
// target info and objectives, the doctor's findings, drift, transactions,
// reloads, the build, and the autorate daemons' state files
// (autorate.go). It is unchecked (Describe sends nothing) because
// target_info's label names follow the config's labels.
type stateCollector struct{ m *Monitor }

func (stateCollector) Describe(chan<- *prometheus.Desc) {}

var (
	dFinding    = prometheus.NewDesc("lowlat_finding", "1 while a doctor finding holds.", []string{"id", "severity"}, nil)
	dDoctorLast = prometheus.NewDesc("lowlat_doctor_last_run_timestamp_seconds", "When the doctor last ran to the end.", nil, nil)
	dDoctorOK   = prometheus.NewDesc("lowlat_doctor_last_run_successful", "1 if the doctor's last run could read the host.", nil, nil)
	dDrift      = prometheus.NewDesc("lowlat_drift_knobs", "Knobs whose live value left the value lowlat applied.", nil, nil)
	dTxn        = prometheus.NewDesc("lowlat_transaction_info", "1 per lowlat transaction in force.", []string{"txn", "profile", "state"}, nil)
	dConfirm    = prometheus.NewDesc("lowlat_confirm_deadline_timestamp_seconds", "Deadline of an apply awaiting 'lowlat confirm'; its watchdog rolls it back then.", []string{"txn"}, nil)
	dJournalOK  = prometheus.NewDesc("lowlat_journal_read_successful", "1 if the last read of the journal (drift, transactions) worked.", nil, nil)
	dReloadOK   = prometheus.NewDesc("lowlat_config_last_reload_successful", "1 if the last config load worked (0: the previous config still runs).", nil, nil)
	dReloadTime = prometheus.NewDesc("lowlat_config_last_reload_success_timestamp_seconds", "When a config was last loaded.", nil, nil)
	// Not a "quantile" label: Prometheus keeps that for summaries.
	dSLO   = prometheus.NewDesc("lowlat_probe_slo_p99_seconds", "The target's p99 round-trip objective (slo_p99).", []string{"target", "kind"}, nil)
	dBuild = prometheus.NewDesc("lowlat_build_info", "lowlat's version, 1.", []string{"version", "goversion", "revision"}, nil)
	// Path targets, from their last run: per hop, then the verdict.
	dHopRTT     = prometheus.NewDesc("lowlat_path_hop_rtt_seconds", "A path target's round-trip time to each hop in its last run, by statistic (p50, p99).", []string{"target", "hop", "address", "stat"}, nil)
	dHopLoss    = prometheus.NewDesc("lowlat_path_hop_loss_ratio", "Share of a path target's probes to each hop that got no reply in its last run.", []string{"target", "hop", "address"}, nil)
	dHopLimited = prometheus.NewDesc("lowlat_path_hop_rate_limited", "1 when a hop's loss or delay did not carry on to later hops (ICMP rate limit or slow-path reply).", []string{"target", "hop", "address"}, nil)
	dVerdict    = prometheus.NewDesc("lowlat_path_verdict_hop", "The first hop whose added delay or loss carries on to the destination (0: none), with its kind.", []string{"target", "kind"}, nil)
	dReached    = prometheus.NewDesc("lowlat_path_reached", "1 when the path target's destination answered in its last run.", []string{"target"}, nil)
	dPathLast   = prometheus.NewDesc("lowlat_path_last_run_timestamp_seconds", "When a path target's last run began.", []string{"target"}, nil)
)

// dDoctorEvery is the doctor's schedule, which LowlatMonitorDoctorStale
// reads: a run is late against this monitor's own interval, not a fixed
// guess.
var dDoctorEvery = prometheus.NewDesc("lowlat_doctor_interval_seconds", "How often the monitor runs the doctor (doctor_interval); 0: never.", nil, nil)

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	m.mu.Lock()
	cfg, st := m.cfg, m.state
	// Path targets' last runs, by target name.
	paths := map[string]*pathprobe.Result{}
	for name, t := range m.targets {
		t.mu.Lock()
		if t.path != nil {
			paths[name] = t.path
		}
		t.mu.Unlock()
	}
	m.mu.Unlock()
	// Files, read without the lock.
	collectAutorate(ch, m.readAutorate(cfg.autorateDir()))
	m.passive.collect(ch)

	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(dBuild, 1, m.opts.Version, runtime.Version(), m.opts.Revision)
	gauge(dReloadOK, b2f(st.reloadErr == ""))
	gauge(dReloadTime, float64(st.reloadedAt.Unix()))
	every := cfg.DoctorInterval
	if m.opts.Doctor == nil {
		every = 0
	}
	gauge(dDoctorEvery, every.Seconds())

	names := cfg.LabelNames()
	infoLabels := append([]string{"target", "kind", "address"}, names...)
	info := prometheus.NewDesc("lowlat_target_info", "A probed target and its configured labels, 1.", infoLabels, nil)
	for i := range cfg.Targets {
		t := &cfg.Targets[i]
		vals := []string{t.Name, t.Kind, t.Address}
		for _, n := range names {
			vals = append(vals, t.Labels[n])
		}
		gauge(info, 1, vals...)
		if t.SLO > 0 {
			gauge(dSLO, t.SLO.Seconds(), t.Name, t.Kind)
		}
	}

	for name, r := range paths {
		for _, h := range r.Hops {
			hop := strconv.Itoa(h.Index)
			if h.Received > 0 {
				gauge(dHopRTT, h.RTT.P50/1e6, name, hop, h.Address, "p50")
				gauge(dHopRTT, h.RTT.P99/1e6, name, hop, h.Address, "p99")
			}
			gauge(dHopLoss, h.LossPct/100, name, hop, h.Address)
			gauge(dHopLimited, b2f(h.RateLimited), name, hop, h.Address)
		}
		gauge(dVerdict, float64(r.Verdict.Hop), name, r.Verdict.Kind)
		gauge(dReached, b2f(r.Reached), name)
		gauge(dPathLast, float64(r.Started.Unix()), name)
	}

	if !st.doctorAt.IsZero() {
		gauge(dDoctorLast, float64(st.doctorAt.Unix()))
		gauge(dDoctorOK, b2f(st.doctorErr == ""))
		seen := map[[2]string]bool{}
		for _, f := range st.findings {
			k := [2]string{f.ID, f.Severity}
			if !seen[k] { // one check may report several rows
				seen[k] = true
				gauge(dFinding, 1, f.ID, f.Severity)
			}
		}
	}
	if !st.journalAt.IsZero() {
		gauge(dJournalOK, b2f(st.journalErr == ""))
		if st.journalErr == "" {
			gauge(dDrift, float64(len(st.drift)))
			for _, t := range st.txns {
				gauge(dTxn, 1, t.ID, t.Profile, t.State)
				if !t.ConfirmBy.IsZero() {
					gauge(dConfirm, float64(t.ConfirmBy.Unix()), t.ID)
				}
			}
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
