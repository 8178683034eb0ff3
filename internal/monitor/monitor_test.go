package monitor

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/lowlat/lowlat/internal/doctor"
	"github.com/lowlat/lowlat/internal/probe"
	"github.com/lowlat/lowlat/internal/txn"
)

// reflector serves lowlat probes on loopback until the test ends.
func reflector(t *testing.T) string {
	t.Helper()
	r := probe.NewReflector(probe.ReflectorConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.Listen(ctx, "127.0.0.1:0"); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = r.Serve(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return r.Addr()
}

// running is a monitor serving on loopback.
type running struct {
	m    *Monitor
	addr string
	stop func()
}

func start(t *testing.T, cfg *Config, o Options) *running {
	t.Helper()
	cfg.Listen = "127.0.0.1:0"
	m := New(cfg, o)
	l, err := m.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, l) }()
	r := &running{m: m, addr: l.Addr().String()}
	r.stop = func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return 10 s after its context ended")
		}
	}
	return r
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// scrape parses /metrics (text format).
func scrape(t *testing.T, addr string) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	_, body := get(t, "http://"+addr+"/metrics")
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	return fams, body
}

// value finds the series of family name whose labels include want.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (*dto.Metric, bool) {
	f := fams[name]
	if f == nil {
		return nil, false
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m, true
	}
	return nil, false
}

func num(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return -1
}

func fakeDoctor(context.Context) (*doctor.Report, error) {
	return &doctor.Report{Findings: []doctor.Finding{
		{ID: "fifo-qdisc", Severity: doctor.Crit, Summary: "eth0 has pfifo_fast"},
		{ID: "fifo-qdisc", Severity: doctor.Crit, Summary: "eth1 has pfifo_fast"},
		{ID: "thp", Severity: doctor.Info, Summary: "THP always"},
		{ID: "softnet", Severity: doctor.Info, NotChecked: true, Summary: "not checked"},
	}}, nil
}

func fakeStatus(context.Context, string) (*txn.StatusReport, error) {
	by := time.Unix(1_900_000_000, 0)
	return &txn.StatusReport{
		Drift:  []txn.Drift{{Knob: "sysctl/net.core.default_qdisc", Applied: "fq", Live: "pfifo_fast"}},
		Active: []txn.TxnSummary{{ID: "20261124T010203Z-abcdef", Profile: "game-udp", Began: by.Add(-time.Minute), ConfirmBy: &by}},
	}, nil
}

// The monitor probes udp, tcp and crr targets, and /metrics carries every
// series of the contract, named and labelled as docs/monitor.md says.
func TestMonitorServesMetrics(t *testing.T) {
	addr := reflector(t)
	base := runtime.NumGoroutine()
	cfg, err := ParseConfig("t.toml", []byte(fmt.Sprintf(`
[[target]]
name = "r-udp"
kind = "udp"
address = %[1]q
interval = "20ms"
slo_p99 = "30ms"
labels = { region = "lo" }
[[target]]
name = "r-tcp"
kind = "tcp"
address = %[1]q
interval = "20ms"
labels = { role = "edge" }
[[target]]
name = "r-crr"
kind = "crr"
address = %[1]q
interval = "50ms"
response = 4096
`, addr)))
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, cfg, Options{Doctor: fakeDoctor, Status: fakeStatus, Version: "v-test", Hostname: "h"})
	time.Sleep(1500 * time.Millisecond)
	fams, body := scrape(t, r.addr)

	for _, tt := range []struct {
		name   string
		labels map[string]string
		min    float64
		max    float64
	}{
		{"lowlat_probe_sent_total", map[string]string{"target": "r-udp", "kind": "udp"}, 50, 100},
		{"lowlat_probe_sent_total", map[string]string{"target": "r-tcp", "kind": "tcp"}, 50, 100},
		{"lowlat_probe_sent_total", map[string]string{"target": "r-crr", "kind": "crr"}, 20, 40},
		{"lowlat_probe_rtt_seconds", map[string]string{"target": "r-udp"}, 45, 100},
		{"lowlat_probe_rtt_seconds", map[string]string{"target": "r-tcp"}, 45, 100},
		{"lowlat_probe_rtt_seconds", map[string]string{"target": "r-crr"}, 18, 40},
		{"lowlat_probe_first_byte_seconds", map[string]string{"target": "r-crr"}, 18, 40},
		{"lowlat_probe_lost_total", map[string]string{"target": "r-udp", "direction": "up"}, 0, 0},
		{"lowlat_probe_lost_total", map[string]string{"target": "r-udp", "direction": "down"}, 0, 0},
		{"lowlat_probe_lost_total", map[string]string{"target": "r-tcp", "direction": "unknown"}, 0, 0},
		{"lowlat_probe_jitter_seconds", map[string]string{"target": "r-udp"}, 1e-9, 0.01},
		{"lowlat_probe_slo_p99_seconds", map[string]string{"target": "r-udp", "kind": "udp"}, 0.03, 0.03},
		{"lowlat_target_info", map[string]string{"target": "r-udp", "kind": "udp", "address": addr, "region": "lo", "role": ""}, 1, 1},
		{"lowlat_target_info", map[string]string{"target": "r-tcp", "role": "edge", "region": ""}, 1, 1},
		{"lowlat_finding", map[string]string{"id": "fifo-qdisc", "severity": "crit"}, 1, 1},
		{"lowlat_finding", map[string]string{"id": "thp", "severity": "info"}, 1, 1},
		{"lowlat_doctor_last_run_timestamp_seconds", nil, float64(time.Now().Add(-time.Minute).Unix()), float64(time.Now().Unix())},
		{"lowlat_doctor_interval_seconds", nil, 600, 600}, // the default doctor_interval, 10m
		{"lowlat_drift_knobs", nil, 1, 1},
		{"lowlat_transaction_info", map[string]string{"txn": "20261124T010203Z-abcdef", "profile": "game-udp", "state": "awaiting-confirm"}, 1, 1},
		{"lowlat_confirm_deadline_timestamp_seconds", map[string]string{"txn": "20261124T010203Z-abcdef"}, 1_900_000_000, 1_900_000_000},
		{"lowlat_config_last_reload_successful", nil, 1, 1},
		{"lowlat_build_info", map[string]string{"version": "v-test", "goversion": runtime.Version()}, 1, 1},
	} {
		m, ok := value(fams, tt.name, tt.labels)
		if !ok {
			t.Errorf("no %s%v", tt.name, tt.labels)
			continue
		}
		if v := num(m); v < tt.min || v > tt.max {
			t.Errorf("%s%v = %g, want %g..%g", tt.name, tt.labels, v, tt.min, tt.max)
		}
	}
	if n := len(fams["lowlat_finding"].Metric); n != 2 {
		t.Errorf("%d lowlat_finding series, want 2 (one per id and severity; not-checked rows are not findings)", n)
	}
	if _, ok := value(fams, "lowlat_probe_first_byte_seconds", map[string]string{"target": "r-udp"}); ok {
		t.Error("first-byte series for a udp target")
	}
	// The classic buckets double from 50 µs, as smokeping_prober's do.
	h, _ := value(fams, "lowlat_probe_rtt_seconds", map[string]string{"target": "r-udp"})
	if b := h.Histogram.Bucket; len(b) != 21 || !math.IsInf(b[20].GetUpperBound(), 1) || b[0].GetUpperBound() != 50e-6 || b[1].GetUpperBound() != 100e-6 || b[19].GetUpperBound() != 50e-6*(1<<19) {
		t.Errorf("buckets %v", b)
	}
	if !strings.Contains(body, "# TYPE lowlat_probe_rtt_seconds histogram") {
		t.Error("rtt is not a histogram")
	}

	resp, page := get(t, "http://"+r.addr+"/")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Security-Policy") != PageCSP || !strings.Contains(page, "r-udp") {
		t.Errorf("status page: %d %q %.200s", resp.StatusCode, resp.Header.Get("Content-Security-Policy"), page)
	}
	if resp, _ := get(t, "http://"+r.addr+"/nothing"); resp.StatusCode != 404 {
		t.Errorf("/nothing: %d", resp.StatusCode)
	}

	// A reload keeps r-udp (and its counts), restarts r-crr with a new
	// interval, drops r-tcp and its series.
	udpBefore, _ := value(fams, "lowlat_probe_sent_total", map[string]string{"target": "r-udp"})
	next := *cfg
	next.Targets = []Target{cfg.Targets[0], cfg.Targets[2]}
	next.Targets[1].Interval = 100 * time.Millisecond
	r.m.Reload(&next)
	fams, _ = scrape(t, r.addr)
	if m, ok := value(fams, "lowlat_probe_sent_total", map[string]string{"target": "r-udp"}); !ok || num(m) < num(udpBefore) {
		t.Errorf("r-udp's counter after a reload that kept it: %v, before %v", m, num(udpBefore))
	}
	for _, name := range []string{"lowlat_probe_sent_total", "lowlat_probe_rtt_seconds", "lowlat_target_info", "lowlat_probe_lost_total"} {
		if _, ok := value(fams, name, map[string]string{"target": "r-tcp"}); ok {
			t.Errorf("%s{target=r-tcp} still exported after the reload dropped it", name)
		}
	}
	if s := r.m.Snapshot(); len(s.Targets) != 2 || s.Targets[0].Sent == 0 {
		t.Errorf("snapshot after reload: %+v", s.Targets)
	}
	r.m.Rejected(&ConfigError{Pos: Pos{File: "t.toml", Line: 3, Col: 1}, Msg: "bad"})
	fams, _ = scrape(t, r.addr)
	if m, _ := value(fams, "lowlat_config_last_reload_successful", nil); num(m) != 0 {
		t.Error("a rejected config left lowlat_config_last_reload_successful at 1")
	}
	if s := r.m.Snapshot(); s.ReloadError != "t.toml:3:1: bad" || len(s.Targets) != 2 {
		t.Errorf("after a rejected reload: %q, %d targets", s.ReloadError, len(s.Targets))
	}

	r.stop()
	http.DefaultClient.CloseIdleConnections()
	// Nothing of the monitor keeps running (probes, loops, the server).
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base+2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base+2 {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after stop, %d before:\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

// promtool, Prometheus's own linter, finds nothing to say about a scrape,
// autorate's series included.
func TestPromtoolCheckMetrics(t *testing.T) {
	promtool := needPromtool(t)
	addr := reflector(t)
	cfg, err := ParseConfig("t.toml", []byte(fmt.Sprintf("[[target]]\nname = \"a\"\nkind = \"crr\"\naddress = %q\ninterval = \"20ms\"\nslo_p99 = \"1s\"\nlabels = { region = \"x\" }\n", addr)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.AutorateDir = writeAutorateStates(t) // and the autorate daemons' series
	r := start(t, cfg, Options{Doctor: fakeDoctor, Status: fakeStatus, Version: "v"})
	defer r.stop()
	time.Sleep(500 * time.Millisecond)
	_, body := scrape(t, r.addr)
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

func needPromtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("LOWLAT_VM_REQUIRED") != "" {
			t.Fatal("promtool not found (apt-get install prometheus)")
		}
		t.Skip("promtool not found (apt-get install prometheus)")
	}
	return p
}

// A taken listen address fails at start, naming it.
func TestListenTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m := New(&Config{Listen: l.Addr().String()}, Options{})
	if _, err := m.Listen(); err == nil || !strings.Contains(err.Error(), "monitor: listen "+l.Addr().String()) {
		t.Errorf("got %v", err)
	}
}

// Probing never blocks scraping: a watch that is slow to stop (a crr
// transaction finishing its timeout) holds neither a reload nor a scrape
// nor the page, and a watch calling its sink flat out does not either.
func TestSlowWatchBlocksNothing(t *testing.T) {
	release := make(chan struct{})
	stopping := make(chan struct{}, 1)
	slow := func(ctx context.Context, cfg probe.WatchConfig, sink probe.Sink) error {
		<-ctx.Done()
		stopping <- struct{}{}
		<-release // still finishing when the reload and the scrapes run
		return nil
	}
	busy := func(ctx context.Context, cfg probe.WatchConfig, sink probe.Sink) error {
		for ctx.Err() == nil {
			sink(probe.Sample{Sent: time.Now(), RTT: time.Millisecond})
		}
		return nil
	}
	cfg, err := ParseConfig("t.toml", []byte("[[target]]\nname = \"slow\"\nkind = \"crr\"\naddress = \"127.0.0.1:9\"\ninterval = \"1s\"\n[[target]]\nname = \"busy\"\nkind = \"udp\"\naddress = \"127.0.0.1:9\"\ninterval = \"1s\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, cfg, Options{Watch: map[string]WatchFunc{"crr": slow, "udp": busy}})
	defer func() { close(release); r.stop() }()
	time.Sleep(100 * time.Millisecond)
	next := *cfg
	next.Targets = cfg.Targets[1:]
	reloaded := make(chan struct{})
	go func() { r.m.Reload(&next); close(reloaded) }()
	<-stopping
	select {
	case <-reloaded:
	case <-time.After(5 * time.Second):
		t.Fatal("Reload waits for a stopping watch")
	}
	fams, _ := scrape(t, r.addr)
	if m, ok := value(fams, "lowlat_probe_sent_total", map[string]string{"target": "busy"}); !ok || num(m) < 1000 {
		t.Errorf("busy target: %v", m)
	}
	if _, ok := value(fams, "lowlat_target_info", map[string]string{"target": "slow"}); ok {
		t.Error("the removed target is still listed")
	}
	if resp, _ := get(t, "http://"+r.addr+"/"); resp.StatusCode != 200 {
		t.Errorf("page: %d", resp.StatusCode)
	}
}

// A path target measures the path with lowlat's path probe (unprivileged
// UDP, here to loopback) and exports each hop and the verdict; promtool
// finds nothing to say about the series, and the page and its JSON show the
// hops.
func TestMonitorPathTarget(t *testing.T) {
	cfg, err := ParseConfig("t.toml", []byte("[[target]]\nname = \"lo\"\nkind = \"path\"\naddress = \"127.0.0.1\"\ninterval = \"10s\"\ntimeout = \"500ms\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, cfg, Options{Version: "v"})
	defer r.stop()
	var fams map[string]*dto.MetricFamily
	var body string
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if fams, body = scrape(t, r.addr); fams["lowlat_path_verdict_hop"] != nil {
			break
		}
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		ok     func(float64) bool
	}{
		{"lowlat_path_hop_rtt_seconds", map[string]string{"target": "lo", "hop": "1", "address": "127.0.0.1", "stat": "p50"}, func(v float64) bool { return v > 0 && v < 0.1 }},
		{"lowlat_path_hop_rtt_seconds", map[string]string{"target": "lo", "hop": "1", "stat": "p99"}, func(v float64) bool { return v > 0 }},
		{"lowlat_path_hop_loss_ratio", map[string]string{"target": "lo", "hop": "1"}, func(v float64) bool { return v == 0 }},
		{"lowlat_path_hop_rate_limited", map[string]string{"target": "lo", "hop": "1"}, func(v float64) bool { return v == 0 }},
		{"lowlat_path_verdict_hop", map[string]string{"target": "lo", "kind": "none"}, func(v float64) bool { return v == 0 }},
		{"lowlat_path_reached", map[string]string{"target": "lo"}, func(v float64) bool { return v == 1 }},
		{"lowlat_path_last_run_timestamp_seconds", map[string]string{"target": "lo"}, func(v float64) bool { return v > 1.7e9 }},
		// No doctor here (Options.Doctor nil): it never runs, whatever the
		// config's interval, and the stale alert must not wait for it.
		{"lowlat_doctor_interval_seconds", nil, func(v float64) bool { return v == 0 }},
	} {
		m, ok := value(fams, c.name, c.labels)
		if !ok || !c.ok(num(m)) {
			t.Errorf("%s%v: %v (found %v)\n%s", c.name, c.labels, m, ok, body)
		}
	}
	if p := needPromtoolOrEmpty(t); p != "" {
		cmd := exec.Command(p, "check", "metrics")
		cmd.Stdin = strings.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	}
	_, page := get(t, "http://"+r.addr+"/")
	if !strings.Contains(page, "hop 1") || !strings.Contains(page, "127.0.0.1 p50") || !strings.Contains(page, "no hop adds notable delay") {
		t.Errorf("the status page does not show the path's hops and verdict")
	}
	// The summary has the target's last run, as /metrics does.
	if !strings.Contains(page, "lo path: destination p99 ") || !strings.Contains(page, "— CLEAN") || strings.Contains(page, "NO DATA") {
		t.Errorf("the status page's summary does not show the path target's run: %q", regexp.MustCompile(`lo path[^<]*|NO DATA`).FindAllString(page, -1))
	}
}

// needPromtoolOrEmpty is promtool's path, or "" where it is missing and not
// required (the rest of the test still runs).
func needPromtoolOrEmpty(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil && os.Getenv("LOWLAT_VM_REQUIRED") != "" {
		t.Fatal("promtool not found (apt-get install prometheus)")
	}
	return p
}

// The doctor loop runs for months: each round leaves nothing behind. A
// doctor scheduled every nanosecond runs some 500000 rounds a second; the
// heap after 200000 of them is the heap after the first 1000, within 50
// bytes a round (a timer deferred per round, kept until the loop returns,
// cost 220-300; the heap read while the loop runs on varies by about 1 MB,
// 5 bytes a round).
func TestDoctorLoopKeepsNothingPerRound(t *testing.T) {
	var runs atomic.Int64
	doctor := func(context.Context) (*doctor.Report, error) {
		runs.Add(1)
		return &doctor.Report{}, nil
	}
	cfg := &Config{DoctorInterval: time.Nanosecond}
	r := start(t, cfg, Options{Doctor: doctor})
	defer r.stop()
	heapAfter := func(n int64) uint64 {
		t.Helper()
		for end := time.Now().Add(30 * time.Second); runs.Load() < n; time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("the doctor ran %d times in 30 s, want %d", runs.Load(), n)
			}
		}
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	const first, last = 1000, 201000
	h0 := heapAfter(first)
	h1 := heapAfter(last)
	n := runs.Load() - first // the loop ran on while the heap was read
	perRound := (float64(h1) - float64(h0)) / float64(n)
	t.Logf("heap %d -> %d bytes over %d doctor rounds: %.1f bytes a round", h0, h1, n, perRound)
	if perRound > 50 {
		t.Errorf("the doctor loop keeps %.0f bytes per round (heap %d -> %d over %d rounds)", perRound, h0, h1, n)
	}
}

// An icmp target whose name lookup hangs (a dead nameserver) holds
// nothing: the udp target beside it probes on, /metrics and the page
// answer at once, the slow target counts its probes lost at its rate (DOWN
// on the page, not NO DATA), and the monitor stops at once.
func TestSlowResolverBlocksNothing(t *testing.T) {
	addr := reflector(t)
	hang := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	cfg, err := ParseConfig("t.toml", []byte(fmt.Sprintf("[[target]]\nname = \"slow\"\nkind = \"icmp\"\naddress = \"slow.lowlat.test\"\ninterval = \"20ms\"\n[[target]]\nname = \"fast\"\nkind = \"udp\"\naddress = %q\ninterval = \"20ms\"\n", addr)))
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, cfg, Options{Resolver: hang})
	time.Sleep(time.Second)
	began := time.Now()
	fams, _ := scrape(t, r.addr)
	resp, page := get(t, "http://"+r.addr+"/")
	if d := time.Since(began); d > 500*time.Millisecond || resp.StatusCode != 200 {
		t.Errorf("a scrape and the page took %s (page %d)", d, resp.StatusCode)
	}
	fast, _ := value(fams, "lowlat_probe_rtt_seconds", map[string]string{"target": "fast"})
	sent, _ := value(fams, "lowlat_probe_sent_total", map[string]string{"target": "slow"})
	lost, _ := value(fams, "lowlat_probe_lost_total", map[string]string{"target": "slow"})
	if fast == nil || num(fast) < 35 {
		t.Errorf("the udp target beside it: %v replies in 1 s, want ~50", fast)
	}
	if sent == nil || lost == nil || num(sent) < 35 || num(lost) < num(sent)-1 {
		t.Errorf("the icmp target whose name does not resolve: sent %v, lost %v in 1 s; want ~50 sent, all lost", sent, lost)
	}
	if !strings.Contains(page, "slow icmp: p99 –, loss 100.00 % — DOWN") {
		t.Errorf("the page does not show the slow target down: %q", regexp.MustCompile(`slow icmp[^<]*`).FindAllString(page, -1))
	}
	stopped := time.Now()
	r.stop()
	if d := time.Since(stopped); d > time.Second {
		t.Errorf("the monitor took %s to stop", d)
	}
}
