// Package monitor is lowlat's continuous proof: it probes targets without
// end (udp, tcp and crr against lowlat reflectors, icmp against any host),
// runs the doctor and reads the journal on a schedule, and serves what it
// sees as Prometheus metrics (/metrics) and a self-contained status page (/).
//
// Probing, scraping and the page never wait on one another: probes update
// client_golang's lock-free series and a per-target ring under a short lock;
// the doctor and the journal read run on their own goroutines and publish a
// finished state. Memory is bounded by the config: every target owns a
// fixed-size ring (history.go) and its series.
package monitor

import (
	"context"
	"fmt"
	"github.com/lowlat/lowlat/internal/pathprobe"
	"math"
	"net"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lowlat/lowlat/internal/doctor"
	"github.com/lowlat/lowlat/internal/probe"
	"github.com/lowlat/lowlat/internal/txn"
)

// Options are the monitor's seams and identity.
type Options struct {
	// Doctor runs the doctor on this host; nil: never.
	Doctor func(ctx context.Context) (*doctor.Report, error)
	// Status reads the journal and compares knobs with their live values;
	// nil: never. journal is the config's journal path ("": the default).
	Status func(ctx context.Context, journal string) (*txn.StatusReport, error)
	// StatusInterval is how often Status runs (default 1m).
	StatusInterval time.Duration
	// Logf receives the monitor's log lines (reloads, target state changes).
	Logf              func(format string, args ...any)
	Version, Revision string
	Hostname          string
	// Watch overrides the probe per kind (tests); nil: the probe package's.
	Watch map[string]WatchFunc
	// Path measures a path target once; nil: pathprobe.Run.
	Path func(ctx context.Context, cfg pathprobe.Config) (*pathprobe.Result, error)
	// Resolver looks up icmp targets' names; nil: the system's.
	Resolver *net.Resolver
}

// WatchFunc probes one target until ctx ends.
type WatchFunc func(ctx context.Context, cfg probe.WatchConfig, sink probe.Sink) error

var watchers = map[string]WatchFunc{
	"udp":  probe.WatchUDP,
	"tcp":  probe.WatchTCP,
	"crr":  probe.WatchCRR,
	"icmp": probe.WatchICMP,
}

// Monitor is a running monitor.
type Monitor struct {
	opts    Options
	metrics *metrics

	mu      sync.Mutex
	cfg     *Config
	state   state
	targets map[string]*target // by name
	ctx     context.Context    // Run's, for targets started by Reload
	wg      sync.WaitGroup
	doctorC chan struct{} // tells the doctor loop the interval changed

	// arBad are the autorate state files (or the dir) that last failed
	// to read, so each is logged once (readAutorate).
	arMu  sync.Mutex
	arBad map[string]bool

	// passive is the [passive] section's session.
	passive passiveState
}

// state is what the doctor and journal loops last published.
type state struct {
	reloadErr  string
	reloadedAt time.Time

	doctorAt  time.Time
	doctorErr string
	findings  []doctor.Finding

	journalAt  time.Time
	journalErr string
	drift      []DriftView
	txns       []TxnView
}

// New makes a monitor for cfg; Run starts it.
func New(cfg *Config, o Options) *Monitor {
	if o.StatusInterval <= 0 {
		o.StatusInterval = time.Minute
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	m := &Monitor{opts: o, cfg: cfg, targets: map[string]*target{}, doctorC: make(chan struct{}, 1)}
	m.state.reloadedAt = time.Now()
	m.metrics = newMetrics(m)
	return m
}

// Listen opens the config's listen address (so a taken port fails before
// anything starts).
func (m *Monitor) Listen() (net.Listener, error) {
	l, err := net.Listen("tcp", m.cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("monitor: listen %s: %w", m.cfg.Listen, err)
	}
	return l, nil
}

// Run probes, runs the doctor and serves l until ctx ends.
func (m *Monitor) Run(ctx context.Context, l net.Listener) error {
	m.mu.Lock()
	m.ctx = ctx
	for i := range m.cfg.Targets {
		m.start(&m.cfg.Targets[i], nil)
	}
	m.passive.open(m.cfg.Passive, m.opts.Logf)
	m.mu.Unlock()
	defer m.passive.close()

	srv := &http.Server{Handler: m.Handler(), ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(l) }()
	m.wg.Add(2)
	go m.doctorLoop(ctx)
	go m.statusLoop(ctx)

	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
		err = fmt.Errorf("monitor: serve %s: %w", l.Addr(), err)
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shut)
	m.mu.Lock()
	for _, t := range m.targets {
		t.cancel()
	}
	m.mu.Unlock()
	m.wg.Wait()
	return err
}

// Reload switches to cfg: targets that probe the same way keep running
// (and their history); changed ones restart; removed ones stop and their
// series go. The listen address is kept until a restart.
func (m *Monitor) Reload(cfg *Config) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cfg.Listen != m.cfg.Listen {
		m.opts.Logf("config %s: listen %s -> %s takes effect at restart; still serving %s", cfg.File, m.cfg.Listen, cfg.Listen, m.cfg.Listen)
		cfg.Listen = m.cfg.Listen
	}
	keep := map[string]bool{}
	for i := range cfg.Targets {
		nt := &cfg.Targets[i]
		keep[nt.Name] = true
		if old := m.targets[nt.Name]; old != nil && old.cfg.same(nt) {
			old.setConfig(nt)
			continue
		}
		m.start(nt, m.targets[nt.Name])
	}
	for name, t := range m.targets {
		if !keep[name] {
			t.cancel()
			delete(m.targets, name)
			m.metrics.forget(name)
		}
	}
	if cfg.DoctorInterval != m.cfg.DoctorInterval {
		select {
		case m.doctorC <- struct{}{}:
		default:
		}
	}
	if m.ctx != nil {
		m.passive.open(cfg.Passive, m.opts.Logf)
	}
	m.cfg = cfg
	m.state.reloadErr = ""
	m.state.reloadedAt = time.Now()
	m.opts.Logf("config %s: loaded, %d target(s)", cfg.File, len(cfg.Targets))
}

// Rejected records a config that failed to load; the running one stays.
func (m *Monitor) Rejected(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state.reloadErr = err.Error()
	m.opts.Logf("config rejected, still running the previous one: %v", err)
}

// start runs a target, replacing old (told to stop, its series dropped).
// m.mu is held, so it never waits for a watch to end: a crr watch can take
// its timeout to finish a transaction, and scrapes and the page wait for
// m.mu. A stopping watch's last samples land in its own, orphaned series.
func (m *Monitor) start(tc *Target, old *target) {
	if old != nil {
		old.cancel()
		m.metrics.forget(old.cfg.Name)
	}
	ctx, cancel := context.WithCancel(m.ctx)
	t := &target{cfg: *tc, cancel: cancel}
	m.targets[tc.Name] = t
	if tc.Kind == "path" {
		// No probe series: a path run's figures are per hop, collected
		// from its last result at scrape time.
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.pathLoop(ctx, t)
		}()
		return
	}
	t.series = m.metrics.series(tc)
	watch := watchers[tc.Kind]
	if f := m.opts.Watch[tc.Kind]; f != nil {
		watch = f
	}
	wc := tc.Watch()
	wc.Resolver = m.opts.Resolver
	name := tc.Name
	wc.State = func(failing bool, line string) {
		t.setState(failing, line)
		m.opts.Logf("target %s: %s", name, line)
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if err := watch(ctx, wc, t.sink); err != nil {
			// The config was checked; a watch refusing it is a bug
			// or a host without the socket kind: say so on the page.
			t.setState(true, err.Error())
			m.opts.Logf("target %s: stopped: %v", name, err)
		}
	}()
}

// pathLoop measures a path target every interval, keeping the last result
// for the scrape and the page; a failed run keeps the previous one and says
// why on the page.
func (m *Monitor) pathLoop(ctx context.Context, t *target) {
	run := m.opts.Path
	if run == nil {
		run = pathprobe.Run
	}
	t.mu.Lock()
	cfg := t.cfg
	t.mu.Unlock()
	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	failing := false
	for {
		res, err := run(ctx, cfg.PathConfig())
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil:
			t.setState(true, err.Error())
			if !failing {
				m.opts.Logf("target %s: path: %v", cfg.Name, err)
			}
			failing = true
		default:
			t.mu.Lock()
			t.path = res
			t.mu.Unlock()
			t.setState(false, "")
			if failing {
				m.opts.Logf("target %s: path measured again", cfg.Name)
			}
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// target is one running watch with its ring and series.
type target struct {
	cfg    Target
	cancel context.CancelFunc
	series *series

	mu        sync.Mutex
	hist      history
	jitter    float64 // seconds, RFC 3550
	lastRTT   float64
	haveRTT   bool
	lastError string
	// path is a path target's last measurement.
	path *pathprobe.Result
}

func (t *target) setConfig(c *Target) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cfg = *c
}

func (t *target) setState(failing bool, line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if failing {
		t.lastError = time.Now().Format(time.TimeOnly) + " " + line
	} else {
		t.lastError = ""
	}
}

// sink records one probe's fate: series first (lock-free), then the ring.
func (t *target) sink(s probe.Sample) {
	t.series.sent.Inc()
	if s.Lost {
		dir := string(s.Dir)
		c := t.series.lost[dir]
		if c == nil {
			c = t.series.lost["unknown"]
		}
		c.Inc()
	} else {
		t.series.rtt.Observe(s.RTT.Seconds())
		if t.series.firstByte != nil && s.FirstByte > 0 {
			t.series.firstByte.Observe(s.FirstByte.Seconds())
		}
	}
	t.mu.Lock()
	t.hist.add(s.Sent, s.RTT, s.Lost)
	var jitter float64
	if !s.Lost {
		r := s.RTT.Seconds()
		if t.haveRTT {
			t.jitter += (math.Abs(r-t.lastRTT) - t.jitter) / 16
		}
		t.lastRTT, t.haveRTT = r, true
		jitter = t.jitter
	}
	t.mu.Unlock()
	if !s.Lost {
		t.series.jitter.Set(jitter)
	}
}

func (t *target) view(now time.Time) TargetView {
	t.mu.Lock()
	defer t.mu.Unlock()
	v := TargetView{Name: t.cfg.Name, Kind: t.cfg.Kind, Address: t.cfg.Address, Interval: t.cfg.Interval, SLO: t.cfg.SLO, Labels: t.cfg.Labels, LastError: t.lastError, Path: t.path}
	v.Slots, v.CDF, v.Sent, v.Lost = t.hist.view(now)
	return v
}

// Snapshot copies what the status page shows.
func (m *Monitor) Snapshot() *Snapshot {
	now := time.Now()
	m.mu.Lock()
	cfg, st := m.cfg, m.state
	ts := make([]*target, 0, len(cfg.Targets))
	for _, tc := range cfg.Targets {
		if t := m.targets[tc.Name]; t != nil {
			ts = append(ts, t)
		}
	}
	m.mu.Unlock()
	ar := m.readAutorate(cfg.autorateDir())
	s := &Snapshot{Now: now, Version: m.opts.Version, Hostname: m.opts.Hostname, ConfigPath: cfg.File, ReloadError: st.reloadErr,
		DoctorAt: st.doctorAt, DoctorError: st.doctorErr, Drift: st.drift, Transactions: st.txns, JournalError: st.journalErr, Autorate: ar}
	for _, t := range ts {
		s.Targets = append(s.Targets, t.view(now))
	}
	for _, f := range st.findings {
		s.Findings = append(s.Findings, FindingView{ID: f.ID, Severity: f.Severity, Summary: f.Summary, Fix: f.Fix})
	}
	return s
}

// Handler serves /metrics and the status page.
func (m *Monitor) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.metrics.reg, promhttp.HandlerOpts{
		ErrorLog:            logger{m.opts.Logf},
		MaxRequestsInFlight: 4,
		Timeout:             30 * time.Second,
	}))
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", PageCSP)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if err := WritePage(w, m.Snapshot()); err != nil {
			m.opts.Logf("status page: %v", err)
		}
	})
	return mux
}

type logger struct{ logf func(string, ...any) }

func (l logger) Println(v ...any) { l.logf("%s", fmt.Sprintln(v...)) }

// doctorLoop runs the doctor now and every DoctorInterval. It runs for
// the monitor's life: one timer, reset each round (a timer made and its
// Stop deferred per round would be kept until the loop returns).
func (m *Monitor) doctorLoop(ctx context.Context) {
	defer m.wg.Done()
	if m.opts.Doctor == nil {
		return
	}
	tm := time.NewTimer(time.Hour)
	tm.Stop()
	defer tm.Stop()
	for {
		m.mu.Lock()
		every := m.cfg.DoctorInterval
		m.mu.Unlock()
		var wait <-chan time.Time
		if every > 0 {
			m.runDoctor(ctx)
			tm.Reset(every) // since Go 1.23 a Reset timer never delivers a stale tick
			wait = tm.C
		} else {
			tm.Stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-m.doctorC:
		case <-wait:
		}
	}
}

func (m *Monitor) runDoctor(ctx context.Context) {
	rep, err := m.opts.Doctor(ctx)
	if ctx.Err() != nil {
		return
	}
	var fs []doctor.Finding
	if rep != nil {
		for _, f := range rep.Findings {
			if !f.NotChecked {
				fs = append(fs, f)
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state.doctorAt = time.Now()
	m.state.doctorErr = ""
	if err != nil {
		m.state.doctorErr = err.Error()
		m.opts.Logf("doctor: %v", err)
		return
	}
	m.state.findings = fs
}

// statusLoop reads the journal now and every StatusInterval.
func (m *Monitor) statusLoop(ctx context.Context) {
	defer m.wg.Done()
	if m.opts.Status == nil {
		return
	}
	tk := time.NewTicker(m.opts.StatusInterval)
	defer tk.Stop()
	for {
		m.readStatus(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
	}
}

func (m *Monitor) readStatus(ctx context.Context) {
	m.mu.Lock()
	path := m.cfg.Journal
	m.mu.Unlock()
	rep, err := m.opts.Status(ctx, path)
	if ctx.Err() != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state.journalAt = time.Now()
	if err != nil {
		if m.state.journalErr == "" {
			m.opts.Logf("journal: %v", err)
		}
		m.state.journalErr = err.Error()
		return
	}
	m.state.journalErr = ""
	m.state.drift, m.state.txns = views(rep)
}

// views turns a status report into the page's rows.
func views(rep *txn.StatusReport) ([]DriftView, []TxnView) {
	var drift []DriftView
	for _, d := range rep.Drift {
		drift = append(drift, DriftView{Knob: d.Knob, Applied: d.Applied, Live: d.Live})
	}
	var txns []TxnView
	for _, a := range rep.Active {
		v := TxnView{ID: a.ID, Profile: a.Profile, State: "applied", Began: a.Began}
		if a.ConfirmBy != nil && !a.Confirmed {
			v.State, v.ConfirmBy = "awaiting-confirm", *a.ConfirmBy
		}
		if a.Persist {
			v.State += ",persisted"
		}
		txns = append(txns, v)
	}
	sort.SliceStable(txns, func(i, j int) bool { return txns[i].Began.Before(txns[j].Began) })
	return drift, txns
}

// Hostname is os.Hostname, or "" when it fails.
func Hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return h
}
