package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestCanaryJudgeBadInput: each bad command line is one line naming what
// is wrong, exit 2, and not one request reaches Prometheus.
func TestCanaryJudgeBadInput(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "no", 500)
	}))
	defer srv.Close()
	ok := []string{"--prometheus", srv.URL, "--canary", `group="canary"`, "--control", `group="control"`, "--window", "1h"}
	with := func(flag, value string) []string {
		args := append([]string{}, ok...)
		for i := 0; i < len(args); i += 2 {
			if args[i] == flag {
				args[i+1] = value
				return args
			}
		}
		return append(args, flag, value)
	}
	future := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"malformed selector", with("--canary", `group="canary`), "--canary"},
		{"selector without quotes", with("--canary", `group=canary`), "must be quoted"},
		{"bad regex", with("--control", `instance=~"(a"`), "--control"},
		{"not a label", with("--canary", `9x="a"`), "not a label name"},
		{"empty group", with("--canary", ""), "--canary is required"},
		{"empty braces", with("--control", "{}"), "empty selector"},
		{"matches everything", with("--canary", `group=~".*"`), "every matcher matches the empty string"},
		{"the same group twice", with("--control", `{group="canary"}`), "select the same series"},
		{"unknown metric", with("--metric", "p99,latency"), `unknown metric "latency"`},
		{"unknown histogram", with("--metric", "lowlat_nosuch_seconds"), "not one of lowlat's histograms"},
		{"bad quantile", with("--metric", "p0"), "not a quantile"},
		{"metric twice", with("--metric", "p99,p99"), "named twice"},
		{"bad URL", with("--prometheus", "prom:9090"), "--prometheus"},
		{"URL with a query", with("--prometheus", srv.URL+"?x=1"), "--prometheus"},
		{"no URL", with("--prometheus", ""), "--prometheus is required"},
		{"no window", with("--window", "0s"), "--window is required"},
		{"too few steps", with("--step", "20m"), "at least 6"},
		{"fractional step", with("--step", "1500ms"), "whole seconds"},
		// The default step of a window that 24 does not divide is whole
		// seconds: the error is the metric's, not the step's.
		{"unknown metric, odd window", append(with("--window", "70s"), "--scrape-interval", "1s", "--metric", "latency"), `unknown metric "latency"`},
		// Prometheus would answer 400 after the request.
		{"a selector that names the metric", with("--canary", `__name__="lowlat_probe_rtt_seconds", group="canary"`), "__name__"},
		{"end in the future", with("--end", future), "in the future"},
		// rate() needs two scrapes in a step: shorter steps are empty.
		{"step under two scrape intervals", with("--step", "20s"), "under two scrape intervals"},
		{"the playbook's 90 s window at 15 s scrapes", with("--window", "90s"), "at least 6"},
		{"step under two scrape intervals given", append(with("--step", "3s"), "--scrape-interval", "2s"), "under two scrape intervals"},
		{"no scrape interval", with("--scrape-interval", "0s"), "--scrape-interval"},
		{"the API's URL", with("--prometheus", srv.URL+"/api/v1"), "base URL (" + srv.URL + ")"},
		{"the API's URL with a slash", with("--prometheus", srv.URL+"/prom/api/v1/"), "base URL (" + srv.URL + "/prom)"},
		{"a query's URL", with("--prometheus", srv.URL+"/api/v1/query"), "base URL"},
		{"credentials in a bad URL", with("--prometheus", "http://judge:s3cret@"+strings.TrimPrefix(srv.URL, "http://")+"/api/v1"), "judge:xxxxx@"},
		{"credentials in an unparsable URL", with("--prometheus", "http://judge:s3cret@[::1/x"), "http://xxxxx@[::1/x"},
		{"credentials without a scheme", with("--prometheus", "judge:s3cret@prom:9090"), "--prometheus"},
		{"credentials and a query", with("--prometheus", "http://judge:s3cret@prom:9090/?token=t0ken"), "--prometheus"},
		{"html a directory", with("--html", dir), "a directory"},
		{"validate and list", append(with("--window", "1h"), "--validate", "--list-hosts"), "give one of them"},
		{"bad SLO", with("--slo", "p99<=8"), "--slo"},
		{"SLO on a metric the judge lacks", with("--slo", "goodput_mbps>=5mbit"), "--slo term"},
		{"bad end", with("--end", "yesterday"), "--end"},
		{"bad host label", with("--host-label", "a-b"), "--host-label"},
		{"html in no directory", with("--html", "/nonexistent/dir/x.html"), "--html"},
	} {
		// A judgement, --validate and --list-hosts check alike.
		for _, mode := range [][]string{nil, {"--validate"}, {"--list-hosts", "--json"}} {
			t.Run(strings.TrimSpace(c.name+" "+strings.Join(mode, " ")), func(t *testing.T) {
				var out, errb bytes.Buffer
				err := Main(context.Background(), append(append([]string{"canary", "judge"}, c.args...), mode...), &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
				if code := exitCode(err); code != ExitUsage {
					t.Fatalf("exit %d (%v), want %d", code, err, ExitUsage)
				}
				msg := err.Error()
				if strings.Contains(msg, "\n") || !strings.Contains(msg, c.want) {
					t.Errorf("error %q: want one line containing %q", msg, c.want)
				}
				// A URL's password and query are never echoed.
				for _, secret := range []string{"s3cret", "t0ken"} {
					if strings.Contains(msg+out.String()+errb.String(), secret) {
						t.Errorf("error %q: shows %q", msg, secret)
					}
				}
				if out.Len() > 0 {
					t.Errorf("printed %q on a usage error", out.String())
				}
			})
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("bad command lines sent %d requests to Prometheus", n)
	}
	// The good command line does query (so the count above can fail), and
	// Prometheus answering errors is inconclusive, not a usage error.
	var out bytes.Buffer
	err := Main(context.Background(), append([]string{"canary", "judge", "--json"}, ok...), &Env{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }})
	if code := exitCode(err); code != ExitCanaryInconclusive || hits.Load() == 0 || !strings.Contains(out.String(), `"verdict": "inconclusive"`) {
		t.Errorf("a Prometheus that answers 500: exit %d, %d requests:\n%s", code, hits.Load(), out.String())
	}
	// A Prometheus that is not there (its port closed): inconclusive too,
	// saying so.
	l, lerr := net.Listen("tcp", "127.0.0.1:0")
	if lerr != nil {
		t.Fatal(lerr)
	}
	gone := "http://" + l.Addr().String()
	l.Close()
	out.Reset()
	err = Main(context.Background(), append([]string{"canary", "judge"}, with("--prometheus", gone)...), &Env{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }})
	if code := exitCode(err); code != ExitCanaryInconclusive || !strings.Contains(out.String(), "connection refused") || !strings.Contains(out.String(), "INCONCLUSIVE") {
		t.Errorf("an unreachable Prometheus: exit %d:\n%s", code, out.String())
	}
}

// runJudge runs canary judge with args, and returns its exit code, stdout
// and the error's line.
func runJudge(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	err := Main(context.Background(), append([]string{"canary", "judge"}, args...), &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if errb.Len() > 0 {
		t.Errorf("canary judge %v wrote on stderr: %q", args, errb.String())
	}
	return exitCode(err), out.String(), msg
}

// fakeEnd is a window's end on the fakes' grain, a few minutes ago.
func fakeEnd() time.Time { return time.Now().Truncate(time.Minute).Add(-2 * time.Minute) }

// onePart is a fleet's part function: one target, each host its own RTT.
func onePart(canary bool, i int) []fakePart {
	return []fakePart{{target: "edge", rtt: 0.010 * (1 + float64(i%3)/2)}}
}

// TestCanaryJudgeValidate: --validate checks the command line as a
// judgement would, and that --html can be written, queries nothing and
// prints nothing (the playbook runs it before changing any host).
func TestCanaryJudgeValidate(t *testing.T) {
	f := newFakeProm(t, &fakeProm{fleet: fakeFleet(2, 3, onePart)})
	dir := t.TempDir()
	for _, extra := range [][]string{nil, {"--html", dir + "/page.html", "--json", "--slo", "p99<=8ms"}} {
		code, out, msg := runJudge(t, append([]string{"--validate", "--prometheus", f.url(), "--canary", `group="canary"`, "--control", `group="control"`, "--window", "24m"}, extra...)...)
		if code != 0 || out != "" || msg != "" {
			t.Errorf("--validate %v: exit %d, printed %q, error %q; want exit 0 and nothing", extra, code, out, msg)
		}
	}
	if n := f.requests.Load(); n != 0 {
		t.Errorf("--validate sent %d requests", n)
	}
	if left, err := os.ReadDir(dir); err != nil || len(left) > 0 {
		t.Errorf("--validate left %v in the page's directory (%v)", left, err)
	}
}

// TestCanaryJudgeListHosts: --list-hosts prints the hosts each selector
// selects (with a judged metric's series in the window) after one
// read-only query; exit 5 with one line when Prometheus cannot answer or
// answers in part.
func TestCanaryJudgeListHosts(t *testing.T) {
	end := fakeEnd()
	fleet := fakeFleet(2, 3, onePart)
	fleet = append(fleet,
		fakeNode{name: "other:9431", labels: map[string]string{"group": "other"}, parts: onePart(false, 0)},
		// Its series stopped before the window: not a host of it.
		fakeNode{name: "gone:9431", labels: map[string]string{"group": "control"}, parts: onePart(false, 0), silentAfter: end.Add(-time.Hour)})
	f := newFakeProm(t, &fakeProm{fleet: fleet})
	args := []string{"--list-hosts", "--prometheus", f.url(), "--canary", `group="canary"`, "--control", `{group="control"}`, "--window", "24m", "--end", strconv.FormatInt(end.Unix(), 10)}
	code, out, msg := runJudge(t, append(args, "--json")...)
	want := `{
  "canary": {
    "selector": "group=\"canary\"",
    "hosts": [
      "c0:9431",
      "c1:9431"
    ]
  },
  "control": {
    "selector": "group=\"control\"",
    "hosts": [
      "k0:9431",
      "k1:9431",
      "k2:9431"
    ]
  }
}
`
	if code != 0 || out != want || msg != "" {
		t.Errorf("--list-hosts --json: exit %d, error %q:\n%s\nwant:\n%s", code, msg, out, want)
	}
	qs := f.answered()
	if len(qs) != 1 || qs[0].Path != "/api/v1/query" || !qs[0].End.Equal(end) {
		t.Errorf("--list-hosts sent %+v, want one instant query at %v", qs, end)
	}
	code, out, _ = runJudge(t, args...)
	if code != 0 || out != "canary {group=\"canary\"}: 2 hosts\n  c0:9431\n  c1:9431\ncontrol {group=\"control\"}: 3 hosts\n  k0:9431\n  k1:9431\n  k2:9431\n" {
		t.Errorf("--list-hosts: exit %d:\n%s", code, out)
	}

	for _, c := range []struct {
		name string
		f    *fakeProm
		want string
	}{
		{"an error", &fakeProm{fleet: fleet, status: 503}, "list the hosts"},
		{"a partial answer", &fakeProm{fleet: fleet, warnings: []string{"store gateway 10.0.0.7 down"}}, "store gateway 10.0.0.7 down"},
	} {
		f := newFakeProm(t, c.f)
		args[2] = f.url()
		code, out, msg := runJudge(t, append(args, "--json")...)
		if code != ExitCanaryInconclusive || out != "" || strings.Contains(msg, "\n") || !strings.Contains(msg, c.want) {
			t.Errorf("--list-hosts, %s: exit %d, printed %q, error %q; want exit %d, one line with %q", c.name, code, out, msg, ExitCanaryInconclusive, c.want)
		}
	}
}

// fakeArgs is the command line of a judgement of a fake fleet's groups
// from url over a 24 min window of minute steps ending at end.
func fakeArgs(url string, end time.Time, extra ...string) []string {
	return append([]string{"--prometheus", url, "--canary", `group="canary"`, "--control", `group="control"`,
		"--window", "24m", "--end", strconv.FormatInt(end.Unix(), 10)}, extra...)
}

// judgeFake runs a judgement of the fake's fleet (fakeArgs; the canary
// changed at the window's start), as JSON.
func judgeFake(t *testing.T, f *fakeProm, end time.Time, extra ...string) (int, judged, string) {
	t.Helper()
	f.change = end.Add(-24 * time.Minute)
	args := fakeArgs(f.url(), end, append([]string{"--json"}, extra...)...)
	code, out, msg := runJudge(t, args...)
	var j judged
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("canary judge %v: exit %d (%s), not JSON: %v\n%s", args, code, msg, err, out)
	}
	t.Logf("%v: %s (exit %d): %s", extra, j.Verdict, code, j.Why)
	return code, j, out
}

// TestCanaryJudgeParts: each host's targets are read apart. A canary whose
// near target doubles beside a steady far one fails; in one histogram
// summed over both (main's reading) the far target's tail hid it.
func TestCanaryJudgeParts(t *testing.T) {
	fleet := fakeFleet(3, 5, func(canary bool, i int) []fakePart {
		near := fakePart{target: "near", rtt: 0.005 * (1 + float64(i%3)/2)}
		if canary {
			near.factor = 2
		}
		return []fakePart{near, {target: "far", rtt: 0.060 * (1 + float64(i%2)/4)}}
	})
	f := newFakeProm(t, &fakeProm{fleet: fleet})
	code, j, _ := judgeFake(t, f, fakeEnd(), "--metric", "p99")
	if code != ExitCanaryFail || j.Verdict != "fail" || len(j.Metrics) != 1 || j.Metrics[0].Effect == nil || *j.Metrics[0].Effect < 0.2 {
		t.Errorf("a canary whose near target doubled: %s (exit %d) %+v, want fail with an effect over +20 %%", j.Verdict, code, j.Metrics)
	}
	for _, q := range f.answered() {
		if strings.Contains(q.Query, "lowlat_probe_rtt_seconds") && !strings.Contains(q.Query, "by (instance, target, kind") {
			t.Errorf("a query that sums the targets: %s", q.Query)
		}
	}
}

// TestCanaryJudgeLossCounts: loss is lost over sent probes over the whole
// window, read as counts: a canary that lost 30 % in 2 of its 24 steps
// fails against a control that lost none (a trimmed mean of the steps'
// ratios dropped exactly those steps; without counts, a control all at 0
// had no spread to judge against).
func TestCanaryJudgeLossCounts(t *testing.T) {
	end := fakeEnd()
	first := end.Add(-24*time.Minute).Unix() / 60 // the window's first grain
	fleet := fakeFleet(3, 5, func(canary bool, i int) []fakePart {
		p := fakePart{target: "edge", rtt: 0.010}
		if canary {
			p.lost = func(g int64, changed bool) int {
				if changed && (g-first == 7 || g-first == 16) {
					return 30 * fakeProbes / 100
				}
				return 0
			}
		}
		return []fakePart{p}
	})
	f := newFakeProm(t, &fakeProm{fleet: fleet})
	code, j, _ := judgeFake(t, f, end, "--metric", "loss")
	if code != ExitCanaryFail || j.Verdict != "fail" || len(j.Metrics) != 1 || j.Metrics[0].Effect == nil || math.Abs(*j.Metrics[0].Effect-2*0.3/24) > 0.002 {
		t.Errorf("a canary losing 30 %% in 2 of 24 steps: %s (exit %d) %+v, want fail at +2.5 points", j.Verdict, code, j.Metrics)
	}
}

// TestCanaryJudgeClassicBuckets: a canary host whose p99 stayed inside one
// of the classic buckets (12.8 to 25.6 ms) in both windows could have moved
// inside it unseen: inconclusive, saying so. The same fleet read from
// native histograms passes.
func TestCanaryJudgeClassicBuckets(t *testing.T) {
	fleet := fakeFleet(2, 4, func(canary bool, i int) []fakePart {
		rtt := []float64{0.007, 0.014, 0.028}[i%3]
		if canary {
			rtt = 0.014 // p99 ≈ 17.7 ms
		}
		return []fakePart{{target: "edge", rtt: rtt}}
	})
	end := fakeEnd()
	for _, classic := range []bool{true, false} {
		f := newFakeProm(t, &fakeProm{fleet: fleet, classic: classic})
		code, j, _ := judgeFake(t, f, end, "--metric", "p99")
		switch {
		case len(j.Metrics) != 1:
			t.Errorf("classic %v: %d metrics", classic, len(j.Metrics))
		case classic && (code != ExitCanaryInconclusive || !strings.Contains(j.Metrics[0].Why, "classic histogram buckets, which hide a move inside a bucket")):
			t.Errorf("classic buckets: %s (exit %d): %s; want inconclusive: inside one bucket", j.Verdict, code, j.Metrics[0].Why)
		case !classic && code != 0:
			t.Errorf("native histograms: %s (exit %d): %s; want pass", j.Verdict, code, j.Metrics[0].Why)
		}
		var bounds int
		for _, q := range f.answered() {
			if strings.Contains(q.Query, "group by (instance, le)") {
				bounds++
			}
		}
		if want := map[bool]int{true: 2, false: 0}[classic]; bounds != want {
			t.Errorf("classic %v: %d queries of the buckets' bounds, want %d (one a group where a host's quantile is classic)", classic, bounds, want)
		}
	}
}

// nearDoubled is a fleet's parts: a near target that doubles on the
// canary hosts beside a steady far one.
func nearDoubled(canary bool, i int) []fakePart {
	near := fakePart{target: "near", rtt: 0.005 * (1 + float64(i%3)/2)}
	if canary {
		near.factor = 2
	}
	return []fakePart{near, {target: "far", rtt: 0.060 * (1 + float64(i%2)/4)}}
}

// TestCanaryJudgeWarnings: Prometheus's warnings (a partial answer, a
// store down) make a fleet that passes inconclusive, and are shown in the
// JSON, the text and the page.
func TestCanaryJudgeWarnings(t *testing.T) {
	end := fakeEnd()
	warning := "store gateway 10.0.0.7:10901 down: partial response"
	code, j, _ := judgeFake(t, newFakeProm(t, &fakeProm{fleet: fakeFleet(2, 4, onePart)}), end, "--metric", "p99")
	if code != 0 {
		t.Fatalf("without warnings: %s (exit %d), want pass", j.Verdict, code)
	}
	f := newFakeProm(t, &fakeProm{fleet: fakeFleet(2, 4, onePart), warnings: []string{warning}})
	page := filepath.Join(t.TempDir(), "judge.html")
	code, j, _ = judgeFake(t, f, end, "--metric", "p99", "--html", page)
	if code != ExitCanaryInconclusive || j.Decided != "prometheus" || !strings.Contains(j.Why, warning) || len(j.Warnings) != 1 || j.Warnings[0] != warning {
		t.Errorf("with a warning: %s (exit %d), decided %q, why %q, warnings %q; want inconclusive, decided by it", j.Verdict, code, j.Decided, j.Why, j.Warnings)
	}
	html, err := os.ReadFile(page)
	if err != nil || !strings.Contains(string(html), warning) {
		t.Errorf("the page (%v) does not show the warning", err)
	}
	_, out, _ := runJudge(t, fakeArgs(f.url(), end, "--metric", "p99")...)
	if !strings.Contains(out, "warning: prometheus "+f.url()+": "+warning) {
		t.Errorf("the text does not show the warning:\n%s", out)
	}
}

// TestCanaryJudgeVerdict: the verdict is canary.Combine's, with the SLO
// terms and the warnings: a broken term fails the canary even where a
// metric is inconclusive; a term with no value is inconclusive; the why
// line names what decided; the JSON carries each metric's hosts, notes,
// resolution and level, the text the real interval.
func TestCanaryJudgeVerdict(t *testing.T) {
	end := fakeEnd()
	silent := fakeFleet(2, 4, onePart)
	silent[0].silentAfter = end.Add(-3 * time.Minute) // silent in the window's last steps
	for _, c := range []struct {
		name    string
		fleet   []fakeNode
		args    []string
		code    int
		decided string
		why     string
	}{
		{"a broken slo", fakeFleet(2, 4, onePart), []string{"--metric", "p99", "--slo", "p99<=5ms"}, ExitCanaryFail, "slo p99<=5ms", "slo p99<=5ms broken: the canary group's value is "},
		{"a silent canary host", silent, []string{"--metric", "p99"}, ExitCanaryInconclusive, "p99", "p99: canary host c0:9431: part {target=\"edge\", kind=\"udp\"}: no value in some of the window's last"},
		{"a broken slo beside a silent canary host", silent, []string{"--metric", "p99", "--slo", "p99<=5ms"}, ExitCanaryFail, "slo p99<=5ms", "slo p99<=5ms broken"},
		{"an slo without a value", fakeFleet(2, 4, onePart), []string{"--metric", "p99", "--slo", "first_byte_p99<=100ms"}, ExitCanaryInconclusive, "slo first_byte_p99<=100ms", "slo first_byte_p99<=100ms: the canary group has no value"},
		{"every metric passes", fakeFleet(2, 4, onePart), []string{"--metric", "p99,loss"}, 0, "", "every metric rules out harm past its bound: p99 "},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, j, _ := judgeFake(t, newFakeProm(t, &fakeProm{fleet: c.fleet}), end, c.args...)
			if code != c.code || j.Decided != c.decided || !strings.HasPrefix(j.Why, c.why) {
				t.Errorf("%s (exit %d), decided %q: %s\nwant exit %d, decided %q, why starting %q", j.Verdict, code, j.Decided, j.Why, c.code, c.decided, c.why)
			}
		})
	}

	// Three metrics, a near target doubled on the canary hosts, a control
	// host silent half the window.
	fleet := fakeFleet(3, 5, nearDoubled)
	fleet[7].silentAfter = end.Add(-12 * time.Minute)
	f := newFakeProm(t, &fakeProm{fleet: fleet})
	code, j, out := judgeFake(t, f, end)
	if code != ExitCanaryFail || j.Decided == "" || !strings.HasPrefix(j.Why, j.Decided+": canary worse beyond the tolerance") || strings.Contains(j.Why, "not worse") {
		t.Errorf("near target doubled: %s (exit %d), decided %q: %s; want fail, its why the deciding metric's", j.Verdict, code, j.Decided, j.Why)
	}
	for _, m := range j.Metrics {
		if m.Level != 0.05/3 {
			t.Errorf("%s: level %v, want %v", m.Metric, m.Level, 0.05/3)
		}
		if m.Metric != "p99" {
			continue
		}
		if len(m.Hosts) != 8 || len(m.Notes) == 0 || !strings.Contains(m.Notes[0], "control host k4:9431") {
			t.Errorf("p99: hosts %+v, notes %q; want every host, a note on k4", m.Hosts, m.Notes)
		}
		for _, h := range m.Hosts {
			switch {
			case h.Host == "k4:9431":
				if h.Left == "" || h.Effect != nil || h.Group != "control" {
					t.Errorf("p99: the silent control host: %+v, want left out, no effect", h)
				}
			case h.Parts != 2 || h.Effect == nil || h.Histogram != "native" || h.Group != map[bool]string{true: "canary", false: "control"}[h.Host[0] == 'c']:
				t.Errorf("p99: host %+v, want 2 parts, an effect, native", h)
			case h.Group == "canary" && *h.Effect < 0.2:
				t.Errorf("p99: canary host %s's effect %+.3f, want over +20 %%", h.Host, *h.Effect)
			}
		}
	}
	if !strings.Contains(out, `"decided": "`) || !strings.Contains(out, `"level": 0.0166`) || !strings.Contains(out, `"left_out": "`) {
		t.Errorf("the JSON lacks decided, level or left_out:\n%s", out)
	}
	_, text, _ := runJudge(t, fakeArgs(f.url(), end)...)
	for _, want := range []string{"EFFECT [96.7 % INTERVAL]", "p99: note: control host k4:9431", "verdict: fail: " + j.Decided + ": "} {
		if !strings.Contains(text, want) {
			t.Errorf("the text lacks %q:\n%s", want, text)
		}
	}
}

// TestCanaryJudgeDefaultEnd: without --end the window ends two scrape
// intervals ago, so its last step is complete.
func TestCanaryJudgeDefaultEnd(t *testing.T) {
	f := newFakeProm(t, &fakeProm{fleet: fakeFleet(2, 4, onePart)})
	before := time.Now()
	runJudge(t, "--prometheus", f.url(), "--canary", `group="canary"`, "--control", `group="control"`, "--window", "24m", "--metric", "p99", "--scrape-interval", "20s") // no --end
	qs := f.answered()
	if len(qs) == 0 {
		t.Fatal("no query")
	}
	for _, q := range qs {
		if lag := before.Sub(q.End); lag < 39*time.Second || lag > 45*time.Second {
			t.Errorf("%s ends %v before now, want 40 s (two scrape intervals of 20 s)", q.Path, lag)
		}
	}
}

// TestCanaryJudgeCredentials: a URL's credentials authenticate the
// requests and are never shown: the JSON, the text and the page print the
// redacted URL, and so do the errors.
func TestCanaryJudgeCredentials(t *testing.T) {
	f := newFakeProm(t, &fakeProm{fleet: fakeFleet(2, 4, onePart), auth: "judge:s3cret"})
	withAuth := strings.Replace(f.url(), "http://", "http://judge:s3cret@", 1)
	shown := strings.Replace(f.url(), "http://", "http://judge:xxxxx@", 1)
	page := filepath.Join(t.TempDir(), "judge.html")
	args := fakeArgs(withAuth, fakeEnd(), "--metric", "p99", "--html", page)
	code, out, msg := runJudge(t, append(args, "--json")...)
	var j judged
	if err := json.Unmarshal([]byte(out), &j); err != nil || code != 0 || j.Prometheus != shown {
		t.Errorf("exit %d (%s), prometheus %q (%v), want a pass read with the credentials, shown as %s", code, msg, j.Prometheus, err, shown)
	}
	_, text, _ := runJudge(t, args...)
	html, _ := os.ReadFile(page)
	for what, s := range map[string]string{"JSON": out, "text": text, "page": string(html)} {
		if strings.Contains(s, "s3cret") || !strings.Contains(s, shown) {
			t.Errorf("the %s shows the password, or not the redacted URL:\n%s", what, s)
		}
	}
	// Unreachable: the error says so without the password.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://judge:s3cret@" + l.Addr().String()
	l.Close()
	args[1] = gone
	code, out, _ = runJudge(t, args...)
	if code != ExitCanaryInconclusive || strings.Contains(out, "s3cret") || !strings.Contains(out, "connection refused") {
		t.Errorf("unreachable with credentials: exit %d:\n%s", code, out)
	}
}

// TestCanaryJudgeHTMLFails: a page that cannot be written (its directory
// removed once the judgement began) keeps the verdict's exit code, says so
// in one line and in the JSON; a pass becomes exit 1 (no page).
func TestCanaryJudgeHTMLFails(t *testing.T) {
	for _, c := range []struct {
		name     string
		f        *fakeProm
		verdict  string
		code     int
		metricFl []string
	}{
		{"fail", &fakeProm{fleet: fakeFleet(3, 5, nearDoubled)}, "fail", ExitCanaryFail, nil},
		{"inconclusive", &fakeProm{fleet: fakeFleet(2, 4, onePart), warnings: []string{"a store is down"}}, "inconclusive", ExitCanaryInconclusive, nil},
		{"pass", &fakeProm{fleet: fakeFleet(2, 4, onePart)}, "pass", 1, []string{"--metric", "p99"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "pages")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			c.f.onRequest = func() { os.RemoveAll(dir) }
			f := newFakeProm(t, c.f)
			end := fakeEnd()
			f.change = end.Add(-24 * time.Minute)
			args := fakeArgs(f.url(), end, append([]string{"--html", filepath.Join(dir, "judge.html")}, c.metricFl...)...)
			code, out, msg := runJudge(t, append(args, "--json")...)
			var j judged
			if err := json.Unmarshal([]byte(out), &j); err != nil {
				t.Fatalf("not JSON (%v):\n%s", err, out)
			}
			if code != c.code || j.Verdict != c.verdict || !strings.Contains(j.HTMLError, "judge.html") || strings.Contains(msg, "\n") || !strings.Contains(msg, "judge.html") {
				t.Errorf("exit %d, verdict %s, html_error %q, error %q; want exit %d, %s, the page's error in the JSON and one line", code, j.Verdict, j.HTMLError, msg, c.code, c.verdict)
			}
			os.Mkdir(dir, 0o755)
			code, _, _ = runJudge(t, args...)
			if code != c.code {
				t.Errorf("text: exit %d, want %d", code, c.code)
			}
		})
	}
}

// TestCanaryJudgePage: the page shows what the judge judged: each host's
// number against the control with its group, the host left out and why,
// the notes, the resolution, the warnings, and a chart of each part's
// series per host; self-contained, no script.
func TestCanaryJudgePage(t *testing.T) {
	end := fakeEnd()
	fleet := fakeFleet(2, 4, func(canary bool, i int) []fakePart {
		if canary { // both parts' p99 inside one classic bucket
			return []fakePart{{target: "near", rtt: 0.0035}, {target: "far", rtt: 0.014}}
		}
		return []fakePart{{target: "near", rtt: 0.002 * (1 + float64(i%3))}, {target: "far", rtt: 0.010 * (1 + float64(i%3))}}
	})
	fleet[5].silentAfter = end.Add(-12 * time.Minute)
	f := newFakeProm(t, &fakeProm{fleet: fleet, classic: true, warnings: []string{"store 10.0.0.7 down"}})
	page := filepath.Join(t.TempDir(), "judge.html")
	if p := os.Getenv("LOWLAT_CANARY_HTML"); p != "" { // to look at it
		page = p
	}
	code, j, _ := judgeFake(t, f, end, "--html", page)
	if code != ExitCanaryInconclusive {
		t.Errorf("%s (exit %d), want inconclusive", j.Verdict, code)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	html := string(b)
	for _, want := range []string{
		"decided by", "a figure to read", "96.7 % interval", // three metrics
		"<td>k3:9431</td><td>control</td><td>-</td>", "no part with enough values", // the host left out, and why
		"<td class=\"s5\">c0:9431</td><td>canary</td><td>", "<td>classic</td>",
		"control host k3:9431 part {target=&#34;far&#34;, kind=&#34;udp&#34;} left out", // a note
		"comes from classic histogram buckets",                                          // the resolution
		"warning: prometheus " + f.url() + ": store 10.0.0.7 down",
		"p99 {target=&#34;far&#34;, kind=&#34;udp&#34;}: each host", "p99 {target=&#34;near&#34;, kind=&#34;udp&#34;}: each host", // a chart a part
		"canary near/udp (", "control far/udp (", // the CDFs' lines, a group and part each
		"<svg",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for _, not := range []string{"<script", "pass at", "http://cdn", "src=\"http"} {
		if strings.Contains(html, not) {
			t.Errorf("the page has %q", not)
		}
	}
}
