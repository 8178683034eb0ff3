//go:build linux

package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/testnet"
)

// monitorWorld is a client namespace (the monitor, Prometheus, the probe)
// and a server namespace (the reflector) joined by a veth, the client's
// side optionally shaped.
type monitorWorld struct {
	t              *testing.T
	client, server *testnet.NS
	dir            string
	bin            string
}

const (
	monClient = "10.79.0.1"
	monServer = "10.79.0.2"
)

func newMonitorWorld(t *testing.T) *monitorWorld {
	t.Helper()
	bin, err := lowlatBin()
	if err != nil {
		t.Fatal(err)
	}
	client, server := testnet.New(t), testnet.New(t)
	client.Veth(t, "mc0", "ms0", server, 1)
	for _, c := range []*exec.Cmd{
		client.Command("ip", "addr", "add", monClient+"/24", "dev", "mc0"),
		server.Command("ip", "addr", "add", monServer+"/24", "dev", "ms0"),
	} {
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", c.Args, err, out)
		}
	}
	return &monitorWorld{t: t, client: client, server: server, dir: t.TempDir(), bin: bin}
}

// daemon starts a long-running program in ns; it is killed at cleanup.
func (w *monitorWorld) daemon(ns *testnet.NS, log string, name string, args ...string) *exec.Cmd {
	w.t.Helper()
	cmd := ns.Command(name, args...)
	f, err := os.Create(filepath.Join(w.dir, log))
	if err != nil {
		w.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		w.t.Fatalf("start %s: %v", name, err)
	}
	w.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		f.Close()
	})
	return cmd
}

func (w *monitorWorld) logOf(name string) string {
	b, _ := os.ReadFile(filepath.Join(w.dir, name))
	return string(b)
}

// reflector starts 'lowlat reflector' in the server namespace.
// It returns once the reflector says it is listening, so a monitor started
// next does not count its own start as loss.
func (w *monitorWorld) reflector() *exec.Cmd {
	w.t.Helper()
	_ = os.Remove(filepath.Join(w.dir, "reflector.log"))
	cmd := w.daemon(w.server, "reflector.log", w.bin, "reflector", "--listen", monServer+":7431", "--quiet")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(w.logOf("reflector.log"), "listening on") {
		if time.Now().After(deadline) {
			w.t.Fatalf("reflector not listening after 10 s:\n%s", w.logOf("reflector.log"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cmd
}

// monitor writes a config and starts 'lowlat monitor' in the client
// namespace; it returns the metrics address.
func (w *monitorWorld) monitor(targets string) (*exec.Cmd, string) {
	w.t.Helper()
	return w.monitorNamed("monitor", targets)
}

// monitorNamed is monitor with its config and log named name.toml and
// name.log, for a test that runs several.
func (w *monitorWorld) monitorNamed(name, targets string) (*exec.Cmd, string) {
	w.t.Helper()
	port := freePort(w.t, w.client)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cfg := filepath.Join(w.dir, name+".toml")
	text := fmt.Sprintf("listen = %q\ndoctor_interval = \"0s\"\njournal = %q\n%s", addr, filepath.Join(w.dir, "journal"), targets)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		w.t.Fatal(err)
	}
	cmd := w.daemon(w.client, name+".log", w.bin, "monitor", "--config", cfg)
	w.waitHTTP(addr, "/metrics")
	return cmd, addr
}

// freePort finds a free TCP port on the namespace's loopback.
func freePort(t *testing.T, ns *testnet.NS) int {
	t.Helper()
	var port int
	if err := ns.Do(func() error {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		port = l.Addr().(*net.TCPAddr).Port
		return l.Close()
	}); err != nil {
		t.Fatal(err)
	}
	return port
}

// get fetches http://addr+path inside the client namespace: the socket is
// made on a thread in the namespace, and the request is plain HTTP/1.0.
func (w *monitorWorld) get(addr, path string) (int, string, error) {
	var code int
	var body string
	err := w.client.Do(func() error {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(c, "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, addr); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		code, body = resp.StatusCode, string(b)
		return err
	})
	return code, body, err
}

func (w *monitorWorld) waitHTTP(addr, path string) {
	w.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, _, err := w.get(addr, path)
		if err == nil && code == 200 {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("%s%s not up after 15 s: %d %v\nmonitor log:\n%s", addr, path, code, err, w.logOf("monitor.log"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// prometheus starts Debian's Prometheus in the client namespace scraping
// the monitors at metrics every second, with lowlat's rules loaded when
// rules is set; it returns its address.
func (w *monitorWorld) prometheus(name string, native, rules bool, metrics ...string) string {
	w.t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		w.t.Fatal("prometheus not found (apt-get install prometheus; make deps installs it)")
	}
	text := "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
	if rules {
		file, err := filepath.Abs("../../deploy/prometheus/lowlat.rules.yml")
		if err != nil {
			w.t.Fatal(err)
		}
		text += fmt.Sprintf("rule_files: [%q]\n", file)
	}
	quoted := make([]string, len(metrics))
	for i, m := range metrics {
		quoted[i] = strconv.Quote(m)
	}
	text += fmt.Sprintf("scrape_configs:\n  - job_name: lowlat\n    static_configs:\n      - targets: [%s]\n", strings.Join(quoted, ", "))
	cfg := filepath.Join(w.dir, name+".yml")
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		w.t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePort(w.t, w.client))
	args := []string{"--config.file=" + cfg, "--storage.tsdb.path=" + filepath.Join(w.dir, name+"-data"), "--web.listen-address=" + addr, "--log.level=warn"}
	if native {
		args = append(args, "--enable-feature=native-histograms")
	}
	w.daemon(w.client, name+".log", bin, args...)
	w.waitHTTP(addr, "/-/ready")
	return addr
}

// query runs an instant query through Prometheus's HTTP API and returns
// its single value (NaN when the result is empty).
func (w *monitorWorld) query(prom, expr string, at time.Time) float64 {
	w.t.Helper()
	q := "/api/v1/query?query=" + urlEscape(expr) + "&time=" + strconv.FormatFloat(float64(at.UnixMilli())/1e3, 'f', 3, 64)
	code, body, err := w.get(prom, q)
	if err != nil || code != 200 {
		w.t.Fatalf("query %s: %d %v\n%s", expr, code, err, body)
	}
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || r.Status != "success" {
		w.t.Fatalf("query %s: %v\n%s", expr, err, body)
	}
	if len(r.Data.Result) == 0 {
		return math.NaN()
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		w.t.Fatalf("query %s: value %q", expr, s)
	}
	return v
}

// sample is one series of an instant vector: its labels and value.
type sample struct {
	labels map[string]string
	value  float64
}

// api GETs a Prometheus API path and decodes its data into v; a status
// other than success fails the test with Prometheus's error.
func (w *monitorWorld) api(prom, path string, v any) {
	w.t.Helper()
	code, body, err := w.get(prom, path)
	if err != nil {
		w.t.Fatalf("GET %s: %v", path, err)
	}
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || r.Status != "success" || code != 200 {
		w.t.Fatalf("GET %s: %d %s %v\n%.500s", path, code, r.Error, err, body)
	}
	if err := json.Unmarshal(r.Data, v); err != nil {
		w.t.Fatalf("GET %s: %v\n%.500s", path, err, body)
	}
}

// vector runs an instant query now and returns every series of its result.
func (w *monitorWorld) vector(prom, expr string) []sample {
	w.t.Helper()
	var d struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	w.api(prom, "/api/v1/query?query="+urlEscape(expr), &d)
	if d.ResultType != "vector" {
		w.t.Fatalf("query %s: a %s, want a vector", expr, d.ResultType)
	}
	var out []sample
	for _, r := range d.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			w.t.Fatalf("query %s: value %q", expr, s)
		}
		out = append(out, sample{labels: r.Metric, value: v})
	}
	return out
}

func urlEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || strings.IndexByte("-_.~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// blast sends UDP datagrams of size bytes from the client namespace to the
// server's discard port at rate bit/s until ctx ends (at most limit): a
// load above a tbf's rate keeps its queue full.
func (w *monitorWorld) blast(ctx context.Context, rate float64, size int, limit time.Duration) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- w.client.Do(func() error {
			c, err := net.Dial("udp", monServer+":9")
			if err != nil {
				return err
			}
			defer c.Close()
			buf := make([]byte, size)
			start := time.Now()
			sent := 0
			for time.Since(start) < limit && ctx.Err() == nil {
				due := int(time.Since(start).Seconds() * rate / 8 / float64(size))
				for ; sent < due; sent++ {
					_, _ = c.Write(buf) // ECONNREFUSED from the discard port's ICMP: expected
				}
				time.Sleep(2 * time.Millisecond)
			}
			return nil
		})
	}()
	return done
}

// TestIntegrationMonitorPrometheus: Debian's Prometheus scrapes a monitor
// that probes a reflector across a path with a known added delay, while
// 'lowlat probe udp' measures the same path at the same time. On this host
// the delay is a standing queue: a 4 Mbit/s tbf kept full by a 5 Mbit/s
// load (~30 ms); in the stock-kernel VM it is netem's 20 ms. Prometheus's
// histogram_quantile(0.5) over the native histogram agrees with the probe's
// median within 20 %; the classic doubling buckets can only place it in its
// bucket. On the host, lowlat's rules load in the real server and the
// recording rules evaluate (the VM has no repository to read them from).
func TestIntegrationMonitorPrometheus(t *testing.T) {
	vm := testnet.InVM()
	if !vm {
		testnet.Heavy(t, "Prometheus scraping a monitor across a shaped path (~40 s)")
	}
	w := newMonitorWorld(t)
	shape := []string{"qdisc", "add", "dev", "mc0", "root", "tbf", "rate", "4mbit", "burst", "4096", "latency", "30ms"}
	lowP50, highP50 := 0.015, 0.060
	if vm {
		shape = []string{"qdisc", "add", "dev", "mc0", "root", "netem", "delay", "20ms"}
		lowP50, highP50 = 0.019, 0.030
	}
	if out, err := w.client.Command("tc", shape...).CombinedOutput(); err != nil {
		t.Fatalf("tc: %v\n%s", err, out)
	}
	w.reflector()
	_, metrics := w.monitor(fmt.Sprintf("[[target]]\nname = \"shaped\"\nkind = \"udp\"\naddress = %q\ninterval = \"20ms\"\ntimeout = \"1s\"\nslo_p99 = \"10ms\"\n", monServer+":7431"))
	native := w.prometheus("prom-native", true, !vm, metrics)
	classic := w.prometheus("prom-classic", false, !vm, metrics)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loadDone := make(<-chan error)
	if !vm {
		loadDone = w.blast(ctx, 5e6, 1000, 40*time.Second)
	}
	time.Sleep(3 * time.Second) // the queue fills; Prometheus takes its first scrapes
	from := time.Now()
	out, err := w.client.Command(w.bin, "probe", "udp", monServer+":7431", "--interval", "20ms", "--duration", "15s", "--json").Output()
	to := time.Now()
	if err != nil {
		t.Fatalf("probe udp: %v\n%s", err, out)
	}
	time.Sleep(2500 * time.Millisecond) // the last scrapes of the window
	cancel()
	if !vm {
		if err := <-loadDone; err != nil {
			t.Fatalf("load: %v", err)
		}
	}
	var res struct {
		RTT struct {
			P50 float64 `json:"p50"`
		} `json:"rtt_us"`
		Sent     int `json:"sent"`
		Received int `json:"received"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	probeP50 := res.RTT.P50 / 1e6
	window := fmt.Sprintf("%ds", int(to.Sub(from).Seconds()))
	nat := w.query(native, fmt.Sprintf(`histogram_quantile(0.5, sum(increase(lowlat_probe_rtt_seconds{target="shaped"}[%s])))`, window), to)
	cls := w.query(classic, fmt.Sprintf(`histogram_quantile(0.5, sum by (le) (increase(lowlat_probe_rtt_seconds_bucket{target="shaped"}[%s])))`, window), to)
	t.Logf("median RTT over the same %s: probe udp %.2f ms (%d/%d replies); Prometheus native histogram %.2f ms (%+.1f %%), classic buckets %.2f ms (%+.1f %%)",
		window, probeP50*1e3, res.Received, res.Sent, nat*1e3, 100*(nat/probeP50-1), cls*1e3, 100*(cls/probeP50-1))
	if probeP50 < lowP50 || probeP50 > highP50 {
		t.Fatalf("probe udp median %.2f ms: the added delay should give %.0f..%.0f ms", probeP50*1e3, lowP50*1e3, highP50*1e3)
	}
	if math.IsNaN(nat) || math.Abs(nat/probeP50-1) > 0.20 {
		t.Errorf("Prometheus (native histogram) median %.2f ms vs probe udp %.2f ms: more than 20 %% apart", nat*1e3, probeP50*1e3)
	}
	// Classic buckets double: the estimate must lie in the probe median's bucket.
	lo := 50e-6 * math.Exp2(math.Floor(math.Log2(probeP50/50e-6)))
	if math.IsNaN(cls) || cls < lo || cls > 2*lo {
		t.Errorf("Prometheus (classic buckets) median %.2f ms outside the probe median's bucket %.1f..%.1f ms", cls*1e3, lo*1e3, 2*lo*1e3)
	}
	if vm {
		return
	}
	// The rules loaded in the real server and the recording rules evaluate.
	for _, rule := range []string{"target:lowlat_probe_rtt_seconds:p50_5m", "target:lowlat_probe_rtt_seconds:p99_5m", "target:lowlat_probe_loss:ratio_5m"} {
		if v := w.query(classic, rule+`{target="shaped"}`, to); math.IsNaN(v) || v < 0 {
			t.Errorf("%s: %v (rules did not evaluate)", rule, v)
		}
	}
	if p99 := w.query(classic, `target:lowlat_probe_rtt_seconds:p99_5m{target="shaped"}`, to); p99 < 0.010 {
		t.Errorf("p99 %.1f ms across a 30 ms queue", p99*1e3)
	}
}

// TestIntegrationMonitorPrometheusFleet: Debian's Prometheus, with lowlat's
// rules loaded, scrapes two monitors (two instances) that probe targets of
// the same names: "r", a live reflector, held to an objective (1 µs) that
// neither meets; and "edge", alive from monitor a and dead from monitor b.
// Every rule evaluates without an error (a rule Prometheus cannot evaluate
// shows as an error on its rules page, never as a missing alert, so this is
// where it must fail); the recording rules keep a series per monitor;
// LowlatLatencySLOBreached is pending for both monitors' "r" and
// LowlatProbeLoss for b's "edge" alone; and every query docs/monitor.md
// gives evaluates and keeps both monitors apart. A second server with native
// histograms answers the native-histogram query.
func TestIntegrationMonitorPrometheusFleet(t *testing.T) {
	if testnet.InVM() {
		t.Skip("reads the rules and docs/monitor.md from the repository, which the VM does not have; the server and rules do not depend on the kernel")
	}
	testnet.Heavy(t, "two monitors and two Prometheus servers evaluating lowlat's rules (~15 s)")
	rulesFile, err := os.ReadFile("../../deploy/prometheus/lowlat.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/monitor.md")
	if err != nil {
		t.Fatal(err)
	}
	w := newMonitorWorld(t)
	w.reflector()
	live, dead := monServer+":7431", monServer+":7439" // nothing listens on 7439
	target := func(name, addr, extra string) string {
		return fmt.Sprintf("[[target]]\nname = %q\nkind = \"udp\"\naddress = %q\ninterval = \"50ms\"\ntimeout = \"200ms\"\n%s", name, addr, extra)
	}
	slo := "slo_p99 = \"1us\"\n"
	_, a := w.monitorNamed("monitor-a", target("r", live, slo)+target("edge", live, ""))
	_, b := w.monitorNamed("monitor-b", target("r", live, slo)+target("edge", dead, ""))
	prom := w.prometheus("prom-fleet", false, true, a, b)
	native := w.prometheus("prom-fleet-native", true, false, a, b)

	// Both monitors' replies from r and probes to edge have a rate (two
	// scrapes), then every rule runs twice more on them.
	deadline := time.Now().Add(30 * time.Second)
	for len(w.vector(prom, `rate(lowlat_probe_rtt_seconds_count{target="r"}[5m]) > 0`)) < 2 ||
		len(w.vector(prom, `rate(lowlat_probe_sent_total{target="edge"}[5m]) > 0`)) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus has no rates of both monitors' probes after 30 s: %v", w.vector(prom, `rate(lowlat_probe_sent_total[5m])`))
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(2500 * time.Millisecond)

	// Every rule of the file, evaluated, without an error.
	var rules struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Name, Health, LastError, Type string
			}
		}
	}
	w.api(prom, "/api/v1/rules", &rules)
	want := strings.Count(string(rulesFile), "- record:") + strings.Count(string(rulesFile), "- alert:")
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			if r.Health != "ok" || r.LastError != "" {
				t.Errorf("rule %s (%s): health %q: %s", r.Name, r.Type, r.Health, r.LastError)
			}
		}
	}
	if n != want {
		t.Errorf("Prometheus loaded %d rules; the file has %d", n, want)
	}

	// One series per monitor: b's dead edge at 100 % loss, a's at none.
	byInstance := func(ss []sample) map[string]float64 {
		m := map[string]float64{}
		for _, s := range ss {
			if s.labels["job"] != "lowlat" {
				t.Errorf("%v: job %q, want lowlat", s.labels, s.labels["job"])
			}
			m[s.labels["instance"]] = s.value
		}
		return m
	}
	loss := byInstance(w.vector(prom, `target:lowlat_probe_loss:ratio_5m{target="edge"}`))
	if len(loss) != 2 || loss[a] != 0 || loss[b] < 0.9 {
		t.Errorf("edge's loss ratio by monitor %v: want %s 0 and %s ~1", loss, a, b)
	}
	p99 := byInstance(w.vector(prom, `target:lowlat_probe_rtt_seconds:p99_5m{target="r"}`))
	if len(p99) != 2 || !(p99[a] > 0 && p99[a] < 0.1) || !(p99[b] > 0 && p99[b] < 0.1) {
		t.Errorf("r's p99 by monitor %v: want a round trip on a veth from each", p99)
	}

	// The alerts, pending (their 'for' is minutes), per monitor.
	var alerts struct {
		Alerts []struct {
			Labels map[string]string
			State  string
		}
	}
	w.api(prom, "/api/v1/alerts", &alerts)
	got := map[string]bool{}
	for _, al := range alerts.Alerts {
		got[al.Labels["alertname"]+" "+al.Labels["instance"]+" "+al.Labels["target"]+" "+al.State] = true
	}
	for _, k := range []string{
		"LowlatLatencySLOBreached " + a + " r pending",
		"LowlatLatencySLOBreached " + b + " r pending",
		"LowlatProbeLoss " + b + " edge pending",
	} {
		if !got[k] {
			t.Errorf("no alert %s; the alerts: %v", k, got)
		}
	}
	if got["LowlatProbeLoss "+a+" edge pending"] {
		t.Errorf("LowlatProbeLoss for %s's edge, which answers", a)
	}

	// The queries docs/monitor.md gives evaluate and keep the monitors apart.
	_, block, ok := strings.Cut(string(doc), "```promql\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("docs/monitor.md has no promql block")
	}
	queries := 0
	for _, q := range strings.Split(block, "\n") {
		if q = strings.TrimSpace(q); q == "" || strings.HasPrefix(q, "#") {
			continue
		}
		queries++
		server := prom
		if strings.Contains(q, "lowlat_probe_rtt_seconds[") { // the native histogram
			server = native
		}
		if m := byInstance(w.vector(server, q)); len(m) != 2 {
			t.Errorf("docs/monitor.md's %s: series of monitors %v, want %s and %s apart", q, m, a, b)
		}
	}
	if queries < 4 {
		t.Errorf("docs/monitor.md's promql block: %d queries", queries)
	}
}

// TestIntegrationMonitorTargetDies: the reflector is killed under a running
// monitor. Probes keep leaving on schedule and every one of them counts as
// lost; the monitor keeps serving, and when a reflector returns on the same
// address the replies come back. Its threads, descriptors and memory do
// not grow across the outage.
func TestIntegrationMonitorTargetDies(t *testing.T) {
	testnet.HostOnly(t, "no qdisc; on the VM's slow emulated CPU only its timing changes")
	w := newMonitorWorld(t)
	refl := w.reflector()
	mon, metrics := w.monitor(fmt.Sprintf("[[target]]\nname = \"dies\"\nkind = \"udp\"\naddress = %q\ninterval = \"20ms\"\ntimeout = \"500ms\"\n[[target]]\nname = \"dies-tcp\"\nkind = \"tcp\"\naddress = %[1]q\ninterval = \"20ms\"\ntimeout = \"500ms\"\n", monServer+":7431"))
	type counts struct{ sent, lost, replies float64 }
	// read scrapes once and counts each target's probes: one moment for
	// both.
	read := func() map[string]counts {
		t.Helper()
		code, body, err := w.get(metrics, "/metrics")
		if err != nil || code != 200 {
			t.Fatalf("scrape: %d %v\nmonitor log:\n%s", code, err, w.logOf("monitor.log"))
		}
		all := map[string]counts{}
		for _, l := range strings.Split(body, "\n") {
			f := strings.Fields(l)
			if len(f) != 2 {
				continue
			}
			_, rest, ok := strings.Cut(f[0], `target="`)
			target, _, ok2 := strings.Cut(rest, `"`)
			if !ok || !ok2 {
				continue
			}
			v, _ := strconv.ParseFloat(f[1], 64)
			c := all[target]
			switch {
			case strings.HasPrefix(f[0], "lowlat_probe_sent_total{"):
				c.sent += v
			case strings.HasPrefix(f[0], "lowlat_probe_lost_total{"):
				c.lost += v
			case strings.HasPrefix(f[0], "lowlat_probe_rtt_seconds_count{"):
				c.replies += v
			}
			all[target] = c
		}
		return all
	}
	usage := func() (threads, fds, rssKB int) {
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", mon.Process.Pid))
		for _, l := range strings.Split(string(st), "\n") {
			f := strings.Fields(l)
			if len(f) >= 2 && f[0] == "Threads:" {
				threads, _ = strconv.Atoi(f[1])
			}
			if len(f) >= 2 && f[0] == "VmRSS:" {
				rssKB, _ = strconv.Atoi(f[1])
			}
		}
		ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", mon.Process.Pid))
		return threads, len(ents), rssKB
	}

	// The first second may hold the targets' first tick (aligned on the
	// interval) and their session set-up: count from a baseline after it.
	time.Sleep(time.Second)
	base := read()
	time.Sleep(2 * time.Second)
	alive := read()
	th0, fd0, rss0 := usage()
	// The outage starts when the reflector is gone, not when it is sent
	// SIGKILL: it counts from a scrape taken after its exit, so replies it
	// sent between the last live scrape and its death (seven, once, on a slow
	// emulated CPU) and the TCP requests its reset failed at once are the
	// kill's, counted in neither window.
	_ = refl.Process.Kill()
	_ = refl.Wait()
	gone := read()
	time.Sleep(4 * time.Second)
	dead := read()
	w.reflector()
	time.Sleep(4 * time.Second)
	back := read()
	th1, fd1, rss1 := usage()
	t.Logf("monitor before the outage: %d threads, %d fds, %d KiB RSS; after it: %d, %d, %d", th0, fd0, rss0, th1, fd1, rss1)

	for _, name := range []string{"dies", "dies-tcp"} {
		a, g, d, b := alive[name], gone[name], dead[name], back[name]
		t.Logf("%s: alive %+v, gone %+v, dead %+v, back %+v", name, a, g, d, b)
		if r, l := a.replies-base[name].replies, a.lost-base[name].lost; r < 80 || l > 1 {
			t.Errorf("%s alive: %g replies, %g lost in 2 s; want ~100 and none", name, r, l)
		}
		// 4 s dead at 50/s: ~200 probes sent, all lost but those in flight.
		if sent, lost := d.sent-g.sent, d.lost-g.lost; sent < 150 || lost < sent-40 || d.replies-g.replies > 5 {
			t.Errorf("%s while dead: %g sent, %g lost, %g replies; want ~200 sent, all lost", name, sent, lost, d.replies-g.replies)
		}
		if r := b.replies - d.replies; r < 100 {
			t.Errorf("%s after the reflector returned: %g replies in 4 s", name, r)
		}
	}
	if err := mon.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("monitor died: %v\n%s", err, w.logOf("monitor.log"))
	}
	if th1 > th0+4 || fd1 > fd0+4 || rss1 > rss0+8192 {
		t.Errorf("monitor grew across the outage: threads %d -> %d, fds %d -> %d, RSS %d -> %d KiB", th0, th1, fd0, fd1, rss0, rss1)
	}
	if log := w.logOf("monitor.log"); !strings.Contains(log, "target dies: udp "+monServer+":7431: no replies since") || !strings.Contains(log, "replies again") {
		t.Errorf("monitor log does not say the target failed and recovered:\n%s", log)
	}
}

// TestIntegrationMonitorConfig: a bad config is one line naming its
// position and exit 2 at start; on SIGHUP the old config keeps running
// and the page and metrics say the reload failed; a good SIGHUP swaps
// targets.
func TestIntegrationMonitorConfig(t *testing.T) {
	w := newMonitorWorld(t)
	bad := filepath.Join(w.dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("listen = \"127.0.0.1:1\"\n[[target]]\nname = \"x\"\nkind = \"udp\"\naddress = \"10.79.0.2:7431\"\ninterval = \"1ms\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(w.bin, "monitor", "--config", bad)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("bad config: %v, want exit 2\n%s", err, stderr.String())
	}
	want := "lowlat: monitor: " + bad + ":6:12: target \"x\": interval 1ms: must be at least 10ms\n"
	if stderr.String() != want {
		t.Errorf("stderr %q\nwant   %q", stderr.String(), want)
	}
	if !testnet.InVM() { // the VM has the tests, not the repository
		if out, err := exec.Command(w.bin, "monitor", "--check", "--config", "../../deploy/monitor/monitor.toml").CombinedOutput(); err != nil || !strings.Contains(string(out), "ok, 2 target(s)") {
			t.Errorf("--check on the shipped example: %v\n%s", err, out)
		}
	}

	w.reflector()
	mon, metrics := w.monitor(fmt.Sprintf("[[target]]\nname = \"first\"\nkind = \"udp\"\naddress = %q\ninterval = \"50ms\"\n", monServer+":7431"))
	cfg := filepath.Join(w.dir, "monitor.toml")
	good, _ := os.ReadFile(cfg)
	// A broken edit: SIGHUP keeps "first" running.
	if err := os.WriteFile(cfg, append(append([]byte{}, good...), "[[target]]\nname = \"second\"\nkind = \"icmp\"\nadress = \"10.79.0.2\"\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = mon.Process.Signal(syscall.SIGHUP)
	time.Sleep(500 * time.Millisecond)
	_, body, _ := w.get(metrics, "/metrics")
	if !strings.Contains(body, "lowlat_config_last_reload_successful 0") || !strings.Contains(body, `lowlat_probe_sent_total{kind="udp",target="first"}`) || strings.Contains(body, `target="second"`) {
		t.Errorf("after a bad reload: want the old target and reload_successful 0:\n%s", grepLines(body, "lowlat_config|target="))
	}
	wantLog := cfg + ":12:1: unknown key \"adress\" in [[target]]"
	if log := w.logOf("monitor.log"); !strings.Contains(log, "config rejected, still running the previous one: "+wantLog) {
		t.Errorf("monitor log does not name the bad key's position (%s):\n%s", wantLog, log)
	}
	_, page, _ := w.get(metrics, "/")
	if !strings.Contains(page, "adress") {
		t.Errorf("status page does not show the rejected config")
	}
	// A good edit: "first" goes, "second" comes.
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(good), `name = "first"`, `name = "second"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = mon.Process.Signal(syscall.SIGHUP)
	time.Sleep(time.Second)
	_, body, _ = w.get(metrics, "/metrics")
	if !strings.Contains(body, "lowlat_config_last_reload_successful 1") || strings.Contains(body, `target="first"`) || !strings.Contains(body, `lowlat_probe_sent_total{kind="udp",target="second"}`) {
		t.Errorf("after a good reload:\n%s", grepLines(body, "lowlat_config|target="))
	}
}

func grepLines(s, alts string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, a := range strings.Split(alts, "|") {
			if strings.Contains(l, a) && !strings.HasPrefix(l, "#") {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// TestMonitorSurvivesEarlyHangups: SIGHUPs sent while the monitor starts
// (a 'systemctl reload' right after the start) neither end it nor are
// lost. Its config is a FIFO, so the test knows when the monitor is reading
// it: past the process's initialisation, before it listens, where the
// monitor asked for SIGHUP only after loading the config, listening and
// paging its binary out, and a HUP ended it ("signal: hangup", which
// systemd counts as a clean exit). Five HUPs then, then one every 5 ms
// while it starts and serves: it serves, and reloads the config once
// started. No privilege needed.
func TestMonitorSurvivesEarlyHangups(t *testing.T) {
	bin, err := lowlatBin()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "monitor.toml")
	if err := syscall.Mkfifo(cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	text := fmt.Sprintf("listen = %q\ndoctor_interval = \"0s\"\njournal = %q\n", addr, filepath.Join(dir, "journal"))

	var log testnet.Log
	cmd := exec.Command(bin, "monitor", "--config", cfg)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{}) // closed when the monitor ended; waitErr says how
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
		}
	})
	// died fails the test if the monitor ended, waiting up to wait for
	// its end to be seen.
	died := func(when string, wait time.Duration) {
		t.Helper()
		select {
		case <-exited:
			t.Fatalf("the monitor ended %s: %v\n%s", when, waitErr, log.String())
		case <-time.After(wait):
		}
	}

	// Opening the FIFO for writing succeeds once the monitor opened it to
	// read its config.
	var fifo *os.File
	for end := time.Now().Add(15 * time.Second); fifo == nil; {
		f, err := os.OpenFile(cfg, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		switch {
		case err == nil:
			fifo = f
		case !errors.Is(err, syscall.ENXIO): // ENXIO: no reader yet
			t.Fatal(err)
		case time.Now().After(end):
			t.Fatalf("the monitor did not open its config in 15 s:\n%s", log.String())
		default:
			died("before it read its config", 0)
			time.Sleep(time.Millisecond)
		}
	}
	for range 5 {
		_ = cmd.Process.Signal(syscall.SIGHUP)
		time.Sleep(2 * time.Millisecond)
	}
	died("on a SIGHUP while it read its config", 300*time.Millisecond)
	// Reloads read a plain file with the same text; the monitor's open
	// FIFO gets it too.
	if err := os.WriteFile(cfg+".new", []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(cfg+".new", cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := fifo.WriteString(text); err != nil {
		t.Fatal(err)
	}
	fifo.Close()
	serving := false
	for end := time.Now().Add(time.Second); time.Now().Before(end) || !serving; time.Sleep(5 * time.Millisecond) {
		_ = cmd.Process.Signal(syscall.SIGHUP)
		died("on a SIGHUP while it started", 0)
		if !serving {
			if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
				resp.Body.Close()
				serving = resp.StatusCode == 200
			}
		}
		if time.Now().After(end.Add(15 * time.Second)) {
			t.Fatalf("the monitor is not serving 16 s after its config came:\n%s", log.String())
		}
	}
	died("on a SIGHUP once serving", 300*time.Millisecond)
	if s := log.String(); !strings.Contains(s, "config "+cfg+": loaded") || strings.Contains(s, "rejected") {
		t.Errorf("the monitor's log does not show a reload after the start:\n%s", s)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		if waitErr != nil {
			t.Errorf("the monitor on SIGTERM: %v\n%s", waitErr, log.String())
		}
	case <-time.After(10 * time.Second):
		t.Error("the monitor did not end 10 s after SIGTERM")
	}
}

// TestIntegrationMonitorPassive: a monitor with a [passive] section exports
// the host's real-traffic histograms, native and classic, with bounded
// labels; Debian's Prometheus scrapes them, its quantile of the native
// histogram agrees with lowlat's own egress figure (a standing queue on
// mc0), lowlat's recording rules evaluate on them, and promtool finds
// nothing to say about the scrape.
func TestIntegrationMonitorPassive(t *testing.T) {
	testnet.HostOnly(t, "Prometheus and promtool are host tools; the VM runs the measurements themselves (internal/passive)")
	w := newMonitorWorld(t)
	if out, err := w.client.Command("tc", "qdisc", "add", "dev", "mc0", "root", "tbf", "rate", "4mbit", "burst", "4096", "latency", "30ms").CombinedOutput(); err != nil {
		t.Fatalf("tc: %v\n%s", err, out)
	}
	w.reflector()
	_, metrics := w.monitor(fmt.Sprintf("[[target]]\nname = \"r\"\nkind = \"tcp\"\naddress = %q\ninterval = \"50ms\"\ntimeout = \"2s\"\n"+
		"[passive]\ndevices = [\"mc0\"]\nports = [\"tcp/7431\"]\n", monServer+":7431"))
	// A Prometheus with native histograms takes them alone; one without
	// reads the classic buckets, and runs the rules.
	prom := w.prometheus("prom-passive-native", true, false, metrics)
	classic := w.prometheus("prom-passive-classic", false, true, metrics)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loadDone := w.blast(ctx, 5e6, 1000, 30*time.Second)
	time.Sleep(3 * time.Second)
	from := time.Now()
	time.Sleep(12 * time.Second)
	to := time.Now()
	time.Sleep(2500 * time.Millisecond)

	_, body, err := w.get(metrics, "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`lowlat_host_egress_queue_seconds_bucket{device="mc0",dscp="",queue="0",le=`, `lowlat_tcp_rtt_seconds_count{port="7431"}`,
		`lowlat_tcp_retransmits_total{port="7431"}`, `lowlat_tcp_connections_total{port="7431"}`, `lowlat_host_receive_seconds_bucket{port="7431",proto="tcp",stage="read"`, `lowlat_passive_up 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("the scrape lacks %s", want)
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found (make deps installs prometheus)")
	}
	lint := exec.Command(promtool, "check", "metrics")
	lint.Stdin = strings.NewReader(body)
	if out, err := lint.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
	cancel()
	if err := <-loadDone; err != nil {
		t.Fatalf("load: %v", err)
	}
	window := fmt.Sprintf("%ds", int(to.Sub(from).Seconds()))
	nat := w.query(prom, fmt.Sprintf(`histogram_quantile(0.5, sum(increase(lowlat_host_egress_queue_seconds{device="mc0"}[%s])))`, window), to)
	cls := w.query(classic, fmt.Sprintf(`histogram_quantile(0.5, sum by (le) (increase(lowlat_host_egress_queue_seconds_bucket{device="mc0"}[%s])))`, window), to)
	t.Logf("egress queueing median of mc0 over %s: native %.2f ms, classic %.2f ms", window, nat*1e3, cls*1e3)
	// The tbf holds 30 ms of queue plus its burst: 20-45 ms.
	if math.IsNaN(nat) || nat < 0.020 || nat > 0.045 {
		t.Errorf("native histogram median %.2f ms, want the standing queue's 20-45 ms", nat*1e3)
	}
	lo := math.Exp2(math.Floor(math.Log2(nat*1e9))) / 1e9
	if math.IsNaN(cls) || cls < lo || cls > 2*lo {
		t.Errorf("classic buckets' median %.2f ms outside the native median's doubling %.1f..%.1f ms", cls*1e3, lo*1e3, 2*lo*1e3)
	}
	for _, rule := range []string{`device:lowlat_host_egress_queue_seconds:p99_5m{device="mc0"}`, `port:lowlat_tcp_rtt_seconds:p50_5m{port="7431"}`} {
		if v := w.query(classic, rule, to); math.IsNaN(v) || v <= 0 {
			t.Errorf("%s: %v (rules did not evaluate on the passive series)", rule, v)
		}
	}
	if rtt := w.query(classic, `port:lowlat_tcp_rtt_seconds:p50_5m{port="7431"}`, to); rtt < 0.015 {
		t.Errorf("the TCP target's RTT p50 %.1f ms across a 30 ms queue", rtt*1e3)
	}
}
