package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lowlat/lowlat/internal/testnet"
)

// fakeHost exports a host's lowlat probe series as the monitor does (the
// same names, labels and buckets, native beside classic), from values the
// test draws: a round-trip time around base, times factor once changed,
// and loss once changed. Down makes its endpoint fail, as a host whose
// monitor stopped.
type fakeHost struct {
	srv     *httptest.Server
	addr    string
	base    float64
	factor  float64
	loss    float64
	changed atomic.Bool
	down    atomic.Bool
}

func newFakeHost(t *testing.T, base, factor, loss float64, seed uint64) *fakeHost {
	h := &fakeHost{base: base, factor: factor, loss: loss}
	reg := prometheus.NewRegistry()
	rtt := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lowlat_probe_rtt_seconds", Help: "rtt",
		Buckets: prometheus.ExponentialBuckets(50e-6, 2, 20), NativeHistogramBucketFactor: 1.1, NativeHistogramMaxBucketNumber: 160}, []string{"target", "kind"})
	sent := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lowlat_probe_sent_total", Help: "sent"}, []string{"target", "kind"})
	lost := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lowlat_probe_lost_total", Help: "lost"}, []string{"target", "kind", "direction"})
	jitter := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lowlat_probe_jitter_seconds", Help: "jitter"}, []string{"target", "kind"})
	reg.MustRegister(rtt, sent, lost, jitter)
	o, s, l, j := rtt.WithLabelValues("r", "udp"), sent.WithLabelValues("r", "udp"), lost.WithLabelValues("r", "udp", "unknown"), jitter.WithLabelValues("r", "udp")
	rng := rand.New(rand.NewPCG(seed, 7))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // 100 probes a second until the test ends
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			f, p := 1.0, 0.0
			if h.changed.Load() {
				f, p = h.factor, h.loss
			}
			s.Inc()
			if rng.Float64() < p {
				l.Inc()
				continue
			}
			v := h.base * f * math.Exp(0.3*rng.NormFloat64())
			o.Observe(v)
			j.Set(v / 10)
		}
	}()
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		metrics.ServeHTTP(w, r)
	}))
	h.addr = strings.TrimPrefix(h.srv.URL, "http://")
	t.Cleanup(func() { cancel(); <-done; h.srv.Close() })
	return h
}

// startPrometheus runs Debian's Prometheus on loopback, scraping each
// group's hosts every second with their labels; it returns its URL.
func startPrometheus(t *testing.T, native bool, groups map[string][]*fakeHost) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus not found (make deps installs Debian's prometheus)")
	}
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: lowlat\n    static_configs:\n")
	for labels, hosts := range groups {
		var targets []string
		for _, h := range hosts {
			targets = append(targets, strconv.Quote(h.addr))
		}
		fmt.Fprintf(&b, "      - targets: [%s]\n        labels: {%s}\n", strings.Join(targets, ", "), labels)
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	args := []string{"--config.file=" + cfg, "--storage.tsdb.path=" + filepath.Join(dir, "data"), "--web.listen-address=" + addr, "--log.level=warn"}
	if native {
		args = append(args, "--enable-feature=native-histograms")
	}
	cmd := exec.Command(bin, args...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", log.String())
		}
	})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if r, err := http.Get("http://" + addr + "/-/ready"); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after 20 s:\n%s", log.String())
		}
	}
	return "http://" + addr
}

// sameHosts says whether hosts are the fake hosts' addresses.
func sameHosts(hosts []string, want []*fakeHost) bool {
	if len(hosts) != len(want) {
		return false
	}
	for _, h := range want {
		if !slices.Contains(hosts, h.addr) {
			return false
		}
	}
	return true
}

// judged is what the tests read of canary judge's JSON.
type judged struct {
	Verdict    string   `json:"verdict"`
	Score      float64  `json:"score"`
	Why        string   `json:"why"`
	Decided    string   `json:"decided"`
	Prometheus string   `json:"prometheus"`
	Warnings   []string `json:"warnings"`
	HTMLError  string   `json:"html_error"`
	Canary     struct {
		Hosts []string `json:"hosts"`
	} `json:"canary"`
	Control struct {
		Hosts []string `json:"hosts"`
	} `json:"control"`
	Metrics []struct {
		Metric     string   `json:"metric"`
		Class      string   `json:"class"`
		Why        string   `json:"why"`
		Baseline   bool     `json:"baseline"`
		Effect     *float64 `json:"effect"`
		Level      float64  `json:"level"`
		Resolution string   `json:"resolution"`
		Notes      []string `json:"notes"`
		Hosts      []struct {
			Host      string   `json:"host"`
			Group     string   `json:"group"`
			Effect    *float64 `json:"effect"`
			Baseline  bool     `json:"baseline"`
			Parts     int      `json:"parts"`
			Left      string   `json:"left_out"`
			Histogram string   `json:"histogram"`
		} `json:"hosts"`
	} `json:"metrics"`
	SLO []struct {
		Term  string   `json:"term"`
		Value *float64 `json:"value"`
		OK    bool     `json:"ok"`
	} `json:"slo"`
}

// TestIntegrationCanaryJudgePrometheus runs canary judge against Debian's
// real Prometheus (classic histograms, and a second server storing native
// ones) scraping fleets of exporters of lowlat's probe series: each host
// its own base RTT (hosts differ by up to 2x), a before-window, then the
// canary hosts changed. A canary 2.5x slower with 4 % loss fails; one 30 %
// faster passes; a group of one host, a selector that matches nothing and
// a canary host whose series stop mid-window are inconclusive, never pass;
// each verdict has its exit code, and the HTML page draws both groups.
func TestIntegrationCanaryJudgePrometheus(t *testing.T) {
	if testnet.InVM() {
		t.Skip("Prometheus and the judge do not depend on the kernel; the host run covers them")
	}
	testnet.Heavy(t, "two Prometheus servers scraping 14 exporters for ~40 s")
	const phase = 16 * time.Second // the before-window, then the window
	type fleet struct {
		name            string
		factor, loss    float64
		canary, control []*fakeHost
	}
	fleets := []*fleet{{name: "worse", factor: 2.5, loss: 0.04}, {name: "better", factor: 0.7}, {name: "gap", factor: 1}}
	groups := map[string][]*fakeHost{}
	seed := uint64(1)
	for _, f := range fleets {
		nc, nk := 2, 3
		if f.name == "gap" {
			nk = 2
		}
		for i := range nc + nk {
			seed++
			h := newFakeHost(t, 0.010*(1+float64(i%3)/2), f.factor, f.loss, seed)
			if i < nc {
				f.canary = append(f.canary, h)
			} else {
				f.control = append(f.control, h)
			}
		}
		groups[fmt.Sprintf("fleet: %s, group: canary", f.name)] = f.canary
		groups[fmt.Sprintf("fleet: %s, group: control", f.name)] = f.control
	}
	classic := startPrometheus(t, false, groups)
	native := startPrometheus(t, true, groups)
	// The before-window's first step needs two scrapes before it (rate),
	// and the window must start after the change: wait past both.
	time.Sleep(phase + 5*time.Second)
	for _, f := range fleets {
		for _, h := range f.canary {
			h.changed.Store(true)
		}
	}
	time.Sleep(phase / 2)
	fleets[2].canary[0].down.Store(true) // its series stop half way through the window
	time.Sleep(phase/2 + time.Second)
	end := strconv.FormatInt(time.Now().Unix()-1, 10) // the last scrape is in

	dir := t.TempDir()
	run := func(t *testing.T, prom, canarySel, controlSel string, extra ...string) (judged, int, string) {
		t.Helper()
		args := append([]string{"canary", "judge", "--prometheus", prom, "--canary", canarySel, "--control", controlSel,
			"--window", phase.String(), "--step", "2s", "--scrape-interval", "1s", "--end", end, "--json", "--metric", "p99,loss"}, extra...)
		var out, errb bytes.Buffer
		err := Main(context.Background(), args, &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
		code := exitCode(err)
		var j judged
		if jerr := json.Unmarshal(out.Bytes(), &j); jerr != nil {
			t.Fatalf("canary judge %v: exit %d, %v, not JSON: %v\n%s", args, code, err, jerr, out.String())
		}
		t.Logf("%s: %s, score %.1f, exit %d: %s", strings.Join(args[5:8:8], " "), j.Verdict, j.Score, code, j.Why)
		return j, code, out.String()
	}
	sel := func(fleet, group string) string { return fmt.Sprintf(`fleet=%q, group=%q`, fleet, group) }
	for _, prom := range []struct{ name, url string }{{"classic", classic}, {"native", native}} {
		t.Run(prom.name, func(t *testing.T) {
			// The hosts each selector selects, as the playbook checks them.
			var out bytes.Buffer
			err := Main(context.Background(), []string{"canary", "judge", "--list-hosts", "--json", "--prometheus", prom.url, "--canary", sel("worse", "canary"), "--control", sel("worse", "control"),
				"--window", phase.String(), "--step", "2s", "--scrape-interval", "1s", "--end", end, "--metric", "p99,jitter,loss"}, &Env{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }})
			var l struct{ Canary, Control struct{ Hosts []string } }
			if jerr := json.Unmarshal(out.Bytes(), &l); err != nil || jerr != nil || !sameHosts(l.Canary.Hosts, fleets[0].canary) || !sameHosts(l.Control.Hosts, fleets[0].control) {
				t.Errorf("--list-hosts: %v, %v:\n%s", err, jerr, out.String())
			}
			j, code, _ := run(t, prom.url, sel("worse", "canary"), sel("worse", "control"), "--slo", "p99<=100ms")
			if j.Verdict != "fail" || code != ExitCanaryFail {
				t.Errorf("a canary 2.5x slower with 4 %% loss: %s (exit %d), want fail (exit %d)", j.Verdict, code, ExitCanaryFail)
			}
			for _, m := range j.Metrics {
				if m.Class != "fail" || !m.Baseline || m.Effect == nil || *m.Effect <= 0 {
					t.Errorf("worse %s: %+v, want fail with each host's baseline and a positive effect", m.Metric, m)
				}
			}
			if len(j.Canary.Hosts) != 2 || len(j.Control.Hosts) != 3 {
				t.Errorf("worse: hosts %v / %v, want 2 canary, 3 control", j.Canary.Hosts, j.Control.Hosts)
			}
			if len(j.SLO) != 1 || !j.SLO[0].OK || j.SLO[0].Value == nil || *j.SLO[0].Value < 0.02 {
				t.Errorf("worse: slo %+v: want p99 (~25-50 ms) under 100 ms", j.SLO)
			}

			j, code, _ = run(t, prom.url, sel("better", "canary"), sel("better", "control"))
			if j.Verdict != "pass" || code != 0 || j.Score != 100 {
				t.Errorf("a canary 30 %% faster: %s score %.1f (exit %d), want pass 100 (exit 0)", j.Verdict, j.Score, code)
			}
			for _, m := range j.Metrics {
				if m.Metric == "p99" && (m.Effect == nil || *m.Effect > -0.1) {
					t.Errorf("better p99 effect %v, want about -30 %%", m.Effect)
				}
			}
			// The same fleet, with an SLO the canary does not meet: fail.
			j, code, _ = run(t, prom.url, sel("better", "canary"), sel("better", "control"), "--slo", "p99<=5ms")
			if j.Verdict != "fail" || code != ExitCanaryFail || len(j.SLO) != 1 || j.SLO[0].OK {
				t.Errorf("slo p99<=5ms on a canary at ~10-20 ms: %s (exit %d) %+v, want fail", j.Verdict, code, j.SLO)
			}

			// Thin or missing data: inconclusive, never pass.
			for _, c := range []struct{ what, canary, control string }{
				{"one canary host", fmt.Sprintf(`instance=%q`, fleets[1].canary[0].addr), sel("better", "control")},
				{"a selector that matches nothing", sel("nosuch", "canary"), sel("better", "control")},
				{"a canary host whose series stopped", sel("gap", "canary"), sel("gap", "control")},
			} {
				j, code, _ := run(t, prom.url, c.canary, c.control)
				if j.Verdict != "inconclusive" || code != ExitCanaryInconclusive {
					t.Errorf("%s: %s (exit %d), want inconclusive (exit %d)", c.what, j.Verdict, code, ExitCanaryInconclusive)
				}
			}
		})
	}

	// The page: both groups' CDFs and every host's series, for the worse
	// fleet; the text table without --json.
	page := filepath.Join(dir, "judge.html")
	if p := os.Getenv("LOWLAT_CANARY_HTML"); p != "" { // to look at it
		page = p
	}
	var out bytes.Buffer
	err := Main(context.Background(), []string{"canary", "judge", "--prometheus", classic, "--canary", sel("worse", "canary"), "--control", sel("worse", "control"),
		"--window", phase.String(), "--step", "2s", "--scrape-interval", "1s", "--end", end, "--html", page}, &Env{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }})
	if exitCode(err) != ExitCanaryFail || !strings.Contains(out.String(), "canary judge: FAIL") || !strings.Contains(out.String(), "p99") {
		t.Errorf("text output (exit %d):\n%s", exitCode(err), out.String())
	}
	html, rerr := os.ReadFile(page)
	if rerr != nil {
		t.Fatal(rerr)
	}
	for _, want := range []string{"<svg", "canary (2 hosts", "control (3 hosts", "canary " + fleets[0].canary[0].addr, "control " + fleets[0].control[2].addr, "FAIL"} {
		if !bytes.Contains(html, []byte(want)) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if bytes.Contains(html, []byte("<script")) || bytes.Contains(html, []byte("http://cdn")) {
		t.Error("the page is not self-contained")
	}
}
