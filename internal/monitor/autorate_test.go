package monitor

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/lowlat/lowlat/internal/autorate"
)

// arTime is when the fixture daemons last ticked.
var arTime = time.Date(2026, 11, 25, 17, 0, 0, 500_000_000, time.UTC)

// arPolicy is eth0's policy: 1 .. 3 Mbit/s, a reflector and passive.
var arPolicy = autorate.Policy{Iface: "eth0", Min: 1_000_000, Base: 1_800_000, Max: 3_000_000, Reflectors: []string{"10.0.0.2:7431"}, Passive: true}

// writeAutorateStates publishes, in a fresh dir, what autorate daemons
// would: eth0 (cake, this process's pid: running), wan0 (tbf, a dry run
// that has adjusted nothing yet, running) and eth1 (its daemon's pid is
// gone); a corrupt file and a file whose device is not its name.
func writeAutorateStates(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	wan := arPolicy
	wan.Iface, wan.Min, wan.Base, wan.Max, wan.Reflectors = "wan0", 200_000, 400_000, 800_000, nil
	for _, s := range []*autorate.State{
		{Device: "eth0", PID: os.Getpid(), Kind: "cake", Policy: arPolicy.String(), Time: arTime, RateBps: 1_600_000,
			Adjustments: map[string]uint64{"down/bloat": 3, "up/load": 7},
			Signals: []autorate.SignalState{
				{Name: "owd:10.0.0.2:7431", DelaySeconds: 0.0042, BaselineSeconds: 0.011, Healthy: true},
				{Name: "passive", DelaySeconds: 0, Healthy: false},
			},
			Load: 0.8, Backlog: 1500, Drops: 2},
		{Device: "wan0", PID: os.Getpid(), Kind: "tbf", Policy: wan.String(), DryRun: true, Time: arTime, RateBps: 200_000,
			Signals: []autorate.SignalState{{Name: "passive", DelaySeconds: 0.031, Healthy: true}}, Load: 0.05},
		{Device: "eth1", PID: dead.Process.Pid, Kind: "tbf", Policy: arPolicy.String(), Time: arTime, RateBps: 2_000_000,
			Adjustments: map[string]uint64{"down/bloat": 1}, Signals: []autorate.SignalState{{Name: "passive", Healthy: true}}},
	} {
		if err := autorate.WriteState(dir, s); err != nil {
			t.Fatal(err)
		}
	}
	for name, text := range map[string]string{
		"bad.json":    "{\"device\": \"bad\", \"rate_bps\": ",
		"other.json":  fmt.Sprintf(`{"device": "eth0", "pid": %d, "kind": "cake", "rate_bps": 1}`, os.Getpid()),
		"eth0.pid":    "1\n",
		"notes.txt":   "not a state",
		"wan0.json.x": "{}",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// logs collects a monitor's log lines; scrapes log from their own
// goroutines.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logs) matching(sub string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			out = append(out, s)
		}
	}
	return out
}

// autorateSeries lists the autorate and shaper series of a scrape as
// `name{label="value",...} value`, labels and lines sorted.
func autorateSeries(fams map[string]*dto.MetricFamily) []string {
	var out []string
	for name, f := range fams {
		if !strings.HasPrefix(name, "lowlat_autorate_") && !strings.HasPrefix(name, "lowlat_shaper_") {
			continue
		}
		for _, m := range f.Metric {
			var ls []string
			for _, l := range m.Label {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(ls)
			out = append(out, fmt.Sprintf("%s{%s} %g", name, strings.Join(ls, ","), num(m)))
		}
	}
	sort.Strings(out)
	return out
}

// The monitor exports the running autorate daemons' state at scrape time:
// exactly these series, nothing of a daemon that is gone, nothing of the
// shaper's backlog or drops (node_exporter's), counters as counters; a
// corrupt or foreign file is skipped and logged once; promtool has nothing
// to say; the page shows a row per daemon.
func TestAutorateMetrics(t *testing.T) {
	dir := writeAutorateStates(t)
	cfg, err := ParseConfig("t.toml", []byte(fmt.Sprintf("doctor_interval = \"0s\"\nautorate_dir = %q\n", dir)))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AutorateDir != dir {
		t.Fatalf("autorate_dir: %q", cfg.AutorateDir)
	}
	var l logs
	r := start(t, cfg, Options{Logf: l.logf, Version: "v"})
	defer r.stop()
	fams, body := scrape(t, r.addr)

	want := []string{
		`lowlat_autorate_info{device="eth0",dry_run="false",kind="cake",policy="` + arPolicy.String() + `"} 1`,
		`lowlat_autorate_info{device="wan0",dry_run="true",kind="tbf",policy="iface=wan0 min=200000 base=400000 max=800000 reflectors= icmp= passive=on threshold=15ms"} 1`,
		`lowlat_autorate_last_tick_timestamp_seconds{device="eth0"} 1.7956260005e+09`,
		`lowlat_autorate_last_tick_timestamp_seconds{device="wan0"} 1.7956260005e+09`,
		`lowlat_autorate_rate_max_bytes_per_second{device="eth0"} 375000`,
		`lowlat_autorate_rate_max_bytes_per_second{device="wan0"} 100000`,
		`lowlat_autorate_rate_min_bytes_per_second{device="eth0"} 125000`,
		`lowlat_autorate_rate_min_bytes_per_second{device="wan0"} 25000`,
		`lowlat_autorate_signal_delay_seconds{device="eth0",signal="owd:10.0.0.2:7431"} 0.0042`,
		`lowlat_autorate_signal_delay_seconds{device="eth0",signal="passive"} 0`,
		`lowlat_autorate_signal_delay_seconds{device="wan0",signal="passive"} 0.031`,
		`lowlat_autorate_signal_healthy{device="eth0",signal="owd:10.0.0.2:7431"} 1`,
		`lowlat_autorate_signal_healthy{device="eth0",signal="passive"} 0`,
		`lowlat_autorate_signal_healthy{device="wan0",signal="passive"} 1`,
		`lowlat_shaper_adjustments_total{device="eth0",direction="base",reason="idle"} 0`,
		`lowlat_shaper_adjustments_total{device="eth0",direction="base",reason="stop"} 0`,
		`lowlat_shaper_adjustments_total{device="eth0",direction="down",reason="bloat"} 3`,
		`lowlat_shaper_adjustments_total{device="eth0",direction="up",reason="load"} 7`,
		`lowlat_shaper_adjustments_total{device="wan0",direction="base",reason="idle"} 0`,
		`lowlat_shaper_adjustments_total{device="wan0",direction="base",reason="stop"} 0`,
		`lowlat_shaper_adjustments_total{device="wan0",direction="down",reason="bloat"} 0`,
		`lowlat_shaper_adjustments_total{device="wan0",direction="up",reason="load"} 0`,
		`lowlat_shaper_load_ratio{device="eth0"} 0.8`,
		`lowlat_shaper_load_ratio{device="wan0"} 0.05`,
		`lowlat_shaper_rate_bytes_per_second{device="eth0"} 200000`,
		`lowlat_shaper_rate_bytes_per_second{device="wan0"} 25000`,
	}
	if diff := lineDiff(want, autorateSeries(fams)); diff != "" {
		t.Errorf("autorate series (-want +got):\n%s", diff)
	}
	for name, f := range fams {
		if strings.HasPrefix(name, "lowlat_") && (strings.Contains(name, "backlog") || strings.Contains(name, "drop")) {
			t.Errorf("%s: the shaper's backlog and drops are node_exporter's node_qdisc_*", name)
		}
		if (f.GetType() == dto.MetricType_COUNTER) != strings.HasSuffix(name, "_total") {
			t.Errorf("%s is a %s", name, f.GetType())
		}
	}
	if !strings.Contains(body, "# TYPE lowlat_shaper_adjustments_total counter") {
		t.Error("adjustments are not a counter")
	}
	if p := needPromtoolOrEmpty(t); p != "" {
		cmd := exec.Command(p, "check", "metrics")
		cmd.Stdin = strings.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	}

	// The page reads the same files; each bad one is logged once however
	// often it is read, and again once it has been fixed and broken.
	_, page := get(t, "http://"+r.addr+"/")
	for _, want := range []string{`<section id="autorate">`, "eth0", "cake", "1.60 Mbit/s", "1.00 Mbit/s … 3.00 Mbit/s", "80 %", "down/bloat 3 · up/load 7",
		"owd:10.0.0.2:7431 4.20 ms", "passive – (no fresh samples)", "tbf (dry run)", "200 kbit/s", "CHECK"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(page, "eth1") {
		t.Error("the page shows eth1, whose daemon is gone")
	}
	scrape(t, r.addr)
	for _, f := range []string{"bad.json", "other.json"} {
		if got := l.matching(f); len(got) != 1 {
			t.Errorf("%s logged %d times, want once: %q", f, len(got), got)
		}
	}
	if got := l.matching("eth1"); len(got) != 0 {
		t.Errorf("eth1, whose daemon is gone, is logged: %q", got)
	}
	other := filepath.Join(dir, "other.json")
	if err := os.Remove(other); err != nil {
		t.Fatal(err)
	}
	scrape(t, r.addr)
	if err := os.WriteFile(other, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	scrape(t, r.addr)
	if got := l.matching("other.json"); len(got) != 2 {
		t.Errorf("other.json, removed and written again broken, logged %d times, want twice: %q", len(got), got)
	}

	// The daemon of eth0 stops: its file goes, and so do its series.
	if err := os.Remove(filepath.Join(dir, "eth0.json")); err != nil {
		t.Fatal(err)
	}
	fams, _ = scrape(t, r.addr)
	for _, s := range autorateSeries(fams) {
		if strings.Contains(s, `"eth0"`) {
			t.Errorf("after eth0's state went: %s", s)
		}
	}
}

// Without autorate (no dir, or an empty one) nothing of it is exported,
// nothing is logged and the page has no Autorate section.
func TestAutorateAbsent(t *testing.T) {
	for _, dir := range []string{filepath.Join(t.TempDir(), "none"), t.TempDir()} {
		var l logs
		r := start(t, &Config{AutorateDir: dir}, Options{Logf: l.logf})
		fams, _ := scrape(t, r.addr)
		if s := autorateSeries(fams); len(s) != 0 {
			t.Errorf("%s: %q", dir, s)
		}
		if fams["lowlat_build_info"] == nil {
			t.Errorf("%s: the scrape lacks the monitor's own series", dir)
		}
		if _, page := get(t, "http://"+r.addr+"/"); strings.Contains(page, `<section id="autorate">`) {
			t.Errorf("%s: an Autorate section without autorate", dir)
		}
		r.stop()
		if got := l.matching("autorate"); len(got) != 0 {
			t.Errorf("%s: logged %q", dir, got)
		}
	}
	if c := (&Config{}); c.autorateDir() != autorate.RunDir {
		t.Errorf("default autorate dir %q", c.autorateDir())
	}
}

// The page's Autorate section: a daemon held at its policy's minimum with
// every signal silent is autorate's known failure, and says so.
func TestAutoratePage(t *testing.T) {
	s := &Snapshot{Now: arTime, Autorate: []autorate.State{
		{Device: "eth0", Kind: "cake", Policy: arPolicy.String(), Time: arTime, RateBps: arPolicy.Min, Load: 0.1,
			Signals: []autorate.SignalState{{Name: "owd:10.0.0.2:7431"}, {Name: "passive"}}},
	}}
	page := render(t, s)
	for _, want := range []string{`<section id="autorate">`, "BLIND", "1.00 Mbit/s", "owd:10.0.0.2:7431 – (no fresh samples)", "node_qdisc_*"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// lineDiff is "-line" for each line only in want and "+line" for each only
// in got; "" when they hold the same lines.
func lineDiff(want, got []string) string {
	in := func(list []string) map[string]int {
		m := map[string]int{}
		for _, s := range list {
			m[s]++
		}
		return m
	}
	w, g := in(want), in(got)
	var b strings.Builder
	for _, s := range want {
		if g[s] < w[s] {
			fmt.Fprintf(&b, "-%s\n", s)
		}
	}
	for _, s := range got {
		if w[s] < g[s] {
			fmt.Fprintf(&b, "+%s\n", s)
		}
	}
	return b.String()
}
