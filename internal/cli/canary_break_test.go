package cli

// Adversarial review of issue 39's canary judge (branch break2). Each test
// here fails on the code as it was reviewed, and its comment says what it
// shows and how to reproduce it. Run them with
//
//	go test -run 'Break' ./internal/cli
//
// They use stubProm, an httptest stand-in for Prometheus's query API
// that answers each of the judge's queries from a function of the metric,
// the group, the host and the step, so that an answer can be exactly what
// a real Prometheus would give in the case shown.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stubProm answers the judge's range queries (p99 from native histograms,
// jitter, loss as lost and sent) and its instant queries (the SLO's group
// values, the host list) from value(metric, group, host, i), i the step's
// index over both windows (0 .. 2n−1, the window before first); NaN: no
// point.
type stubProm struct {
	srv   *httptest.Server
	hosts map[string][]string // group → hosts
	// value of metric ("p99", "jitter", "lost", "sent") for host of group
	// at step i of n a window.
	value func(metric, group, host string, i, n int) float64
	// group is the SLO's instant value of metric for group (NaN: none).
	group func(metric, group string) float64
	// window is the judged window's step count (n).
	n int
	// txns, where set, are the lowlat transactions host's journal had in
	// force at step i (its monitor read the journal at every step).
	txns func(group, host string, i, n int) []string
}

var stubGroup = regexp.MustCompile(`group="(\w+)"`)

func newStubProm(t *testing.T, s *stubProm) *stubProm {
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *stubProm) serve(w http.ResponseWriter, r *http.Request) {
	q := r.FormValue("query")
	g := ""
	if m := stubGroup.FindStringSubmatch(q); m != nil {
		g = m[1]
	}
	var result []map[string]any
	kind := "vector"
	switch r.URL.Path {
	case "/api/v1/query_range":
		kind = "matrix"
		start, _ := strconv.ParseFloat(r.FormValue("start"), 64)
		end, _ := strconv.ParseFloat(r.FormValue("end"), 64)
		step, _ := strconv.ParseFloat(r.FormValue("step"), 64)
		type side struct{ metric, label string }
		var sides []side
		if s.txns != nil && (strings.Contains(q, "lowlat_journal_read_successful") || strings.Contains(q, "lowlat_transaction_info")) {
			series := map[string][][2]any{} // "host txn" → points
			for _, h := range s.hosts[g] {
				for i := 0; start+float64(i)*step <= end+1e-9; i++ {
					at := start + float64(i)*step
					if strings.Contains(q, "lowlat_journal_read_successful") {
						series[h+" "] = append(series[h+" "], [2]any{at, "1"})
						continue
					}
					for _, txn := range s.txns(g, h, i, s.n) {
						series[h+" "+txn] = append(series[h+" "+txn], [2]any{at, "1"})
					}
				}
			}
			for k, pts := range series {
				h, txn, _ := strings.Cut(k, " ")
				labels := map[string]string{"instance": h}
				if txn != "" {
					labels["txn"] = txn
				}
				result = append(result, map[string]any{"metric": labels, "values": pts})
			}
			break
		}
		switch {
		case strings.Contains(q, "histogram_quantile"):
			sides = []side{{"p99", "native"}}
		case strings.Contains(q, "avg_over_time(lowlat_probe_jitter_seconds"):
			sides = []side{{"jitter", ""}}
		case strings.Contains(q, "increase(lowlat_probe_lost_total"):
			sides = []side{{"lost", "lost"}, {"sent", "sent"}}
		}
		for _, sd := range sides {
			for _, h := range s.hosts[g] {
				var pts [][2]any
				for i := 0; start+float64(i)*step <= end+1e-9; i++ {
					v := s.value(sd.metric, g, h, i, s.n)
					if !math.IsNaN(v) {
						pts = append(pts, [2]any{start + float64(i)*step, strconv.FormatFloat(v, 'g', -1, 64)})
					}
				}
				if len(pts) == 0 {
					continue
				}
				labels := map[string]string{"instance": h, "target": "edge", "kind": "udp"}
				if sd.label != "" {
					labels["lowlat_judge_side"] = sd.label
				}
				result = append(result, map[string]any{"metric": labels, "values": pts})
			}
		}
	case "/api/v1/query":
		at, _ := strconv.ParseFloat(r.FormValue("time"), 64)
		switch {
		case strings.Contains(q, "count_over_time"): // --list-hosts
			for i, grp := range []string{"canary", "control"} {
				for _, h := range s.hosts[grp] {
					result = append(result, map[string]any{"metric": map[string]string{"instance": h, "lowlat_judge_side": strconv.Itoa(i)}, "value": [2]any{at, "1"}})
				}
			}
		case s.group != nil:
			metric := "p99"
			switch {
			case strings.Contains(q, "lowlat_probe_lost_total"):
				metric = "loss"
			case strings.Contains(q, "jitter"):
				metric = "jitter"
			}
			if v := s.group(metric, g); !math.IsNaN(v) {
				result = append(result, map[string]any{"metric": map[string]string{}, "value": [2]any{at, strconv.FormatFloat(v, 'g', -1, 64)}})
			}
		}
	}
	if result == nil {
		result = []map[string]any{}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": kind, "result": result}})
}

func stubHosts(canary, control int) map[string][]string {
	out := map[string][]string{}
	for i := range canary {
		out["canary"] = append(out["canary"], fmt.Sprintf("c%d:9431", i))
	}
	for i := range control {
		out["control"] = append(out["control"], fmt.Sprintf("k%d:9431", i))
	}
	return out
}

// stubArgs is a judgement of stub's groups over n steps of a minute.
func stubArgs(s *stubProm, extra ...string) []string {
	end := time.Now().Truncate(time.Minute).Add(-2 * time.Minute)
	return append([]string{"--prometheus", s.srv.URL, "--canary", `group="canary"`, "--control", `group="control"`,
		"--window", fmt.Sprintf("%dm", s.n), "--step", "1m", "--end", strconv.FormatInt(end.Unix(), 10), "--json"}, extra...)
}

// scaledFleet is a stub's values of a steady fleet whose p99 and jitter
// are factor(group, host, i, n) times their levels, its loss steady.
func scaledFleet(factor func(group, host string, i, n int) float64) func(metric, group, host string, i, n int) float64 {
	return func(metric, group, host string, i, n int) float64 {
		switch metric {
		case "p99":
			return steady(0.010*factor(group, host, i, n), host, i)
		case "jitter":
			return steady(0.001*factor(group, host, i, n), host, i)
		case "sent":
			return 1200
		case "lost":
			return math.Round(steady(2, host, i))
		}
		return math.NaN()
	}
}

// steady is a host's steady level with a little noise that differs by host
// and step (a few percent), so that no group is degenerate.
func steady(level float64, host string, i int) float64 {
	h := 0
	for _, c := range host {
		h = h*31 + int(c)
	}
	return level * (1 + 0.03*math.Sin(float64(h%97)+1.7*float64(i)))
}

// TestBreakCredentialsInMalformedURLs: a password in a --prometheus URL
// that url.Parse reads without a host (a typo: one slash too few, a colon
// left out, a scheme-relative URL) is printed as given in the usage error,
// which the Ansible module puts in its task's msg (and so in the play's
// output and logs). docs/canary.md: "Credentials in it ... are never
// shown: ... every error print[s] the URL redacted". redactUnparsed only
// looks for user:pass@ in what follows "://", up to the first slash.
//
// Reproduction: lowlat canary judge --prometheus 'http:/judge:s3cret@prom:9090'
// --canary 'g="a"' --control 'g="b"' --window 1h
// → "--prometheus http:/judge:s3cret@prom:9090: want http://host:port ..."
func TestBreakCredentialsInMalformedURLs(t *testing.T) {
	for _, u := range []string{
		"http:/judge:s3cret@prom:9090",   // one slash
		"https//judge:s3cret@prom:9090",  // no colon
		"//judge:s3cret@prom:9090",       // scheme-relative
		"http:///judge:s3cret@prom:9090", // three slashes
	} {
		code, out, msg := runJudge(t, "--prometheus", u, "--canary", `g="a"`, "--control", `g="b"`, "--window", "1h", "--validate")
		if code != ExitUsage {
			t.Errorf("%s: exit %d, want 2", u, code)
		}
		if strings.Contains(msg+out, "s3cret") {
			t.Errorf("--prometheus %s: the error shows the password: %q", u, msg)
		}
	}
}

// TestBreakTotalLossIsNotAFail: a canary whose change cuts its path (every
// probe lost, from the change on) is judged inconclusive, exit 5, not a
// fail. The monitor counts a lost probe once its timeout passed, a udp
// session's losses together (docs/canary.md, Steps), so a step's lost
// count runs a session ahead of or behind its sent count: at 100 % loss
// some steps read lost > sent (here +5 % and −5 % in turn, one 5 s
// session of 100 probes against 1,200 a minute). The judge drops every
// step whose lost exceeds its sent (internal/canary windowValues: num ≤
// den) as having no value, so the canary host "has no value in some of
// the window's last steps" or too few steps, and loss is inconclusive; p99
// has no value at all (no replies) and is inconclusive too: the verdict
// is inconclusive although the canary lost every probe. docs/canary.md:
// exit 4 is "a metric surely worse beyond its tolerance". A script or
// runbook that retries or extends an inconclusive canary (a judge "that
// could not see") keeps a canary that lost everything.
func TestBreakTotalLossIsNotAFail(t *testing.T) {
	s := newStubProm(t, &stubProm{hosts: stubHosts(2, 4), n: 24})
	s.value = func(metric, group, host string, i, n int) float64 {
		cut := group == "canary" && i >= n
		switch metric {
		case "p99":
			if cut {
				return math.NaN() // no replies: histogram_quantile of nothing
			}
			return steady(0.010, host, i)
		case "jitter":
			return steady(0.001, host, i) // the gauge keeps its last value
		case "sent":
			return 1200
		case "lost":
			if cut {
				return 1200 + 60*float64(1-2*(i%2)) // a session ahead, then behind
			}
			return math.Round(steady(2, host, i))
		}
		return math.NaN()
	}
	code, out, _ := runJudge(t, stubArgs(s)...)
	var j struct {
		Verdict string `json:"verdict"`
		Why     string `json:"why"`
		Metrics []struct {
			Metric, Class, Why string
		} `json:"metrics"`
	}
	json.Unmarshal([]byte(out), &j)
	if code != ExitCanaryFail || j.Verdict != "fail" {
		t.Errorf("a canary that lost every probe: exit %d, verdict %s (%s), want 4 fail; metrics %+v", code, j.Verdict, j.Why, j.Metrics)
	}
}

// TestBreakHarmInTheWindowBeforePasses: a canary re-run on the hosts of a
// canary rolled back less than a window ago is compared with a "window
// before" in which the earlier change was in force, and a harmful change
// passes. The playbook picks the same batch every run (the first
// lowlat_canary_percent of the hosts in inventory order), so "fail, fix,
// run again" is exactly this: run 1's change (p99 2x) failed after 24 h
// and was rolled back; run 2, started at once with a milder setting (p99
// 1.4x the untuned host's), is judged against run 1's 24 h, reads p99
// −30 % and passes, and the playbook rolls a 40 % slower p99 out to the
// whole fleet. Nothing checks that a canary host's window before was
// untouched (the monitor exports lowlat_transaction_info, which says so);
// docs/canary.md only asks it of the control group.
func TestBreakHarmInTheWindowBeforePasses(t *testing.T) {
	s := newStubProm(t, &stubProm{hosts: stubHosts(4, 8), n: 24})
	s.value = scaledFleet(func(group, host string, i, n int) float64 {
		switch {
		case group != "canary":
			return 1
		case i < n:
			return 2.0 // run 1's change, the window before
		}
		return 1.4 // run 2's, the window
	})
	// What the canary hosts' journals say: run 1's transaction in force
	// through the window before, rolled back; run 2's applied at the
	// window before's last step, in force since.
	s.txns = func(group, host string, i, n int) []string {
		switch {
		case group != "canary":
			return nil
		case i < n-1:
			return []string{"T1"}
		}
		return []string{"T2"}
	}
	code, out, _ := runJudge(t, stubArgs(s)...)
	var j struct {
		Verdict string `json:"verdict"`
		Why     string `json:"why"`
		Metrics []struct {
			Notes []string `json:"notes"`
		} `json:"metrics"`
	}
	json.Unmarshal([]byte(out), &j)
	if len(j.Metrics) == 0 || !strings.Contains(strings.Join(j.Metrics[0].Notes, "; "), "lowlat transaction T1 was in force in its window before") {
		t.Errorf("the canary hosts' earlier transaction is not named: %s", out)
	}
	if code == 0 || j.Verdict == "pass" {
		t.Errorf("canary hosts 40 %% slower than the control hosts they had matched, judged against a window before that held an earlier change: exit %d, %s: %s", code, j.Verdict, j.Why)
	}
}

// TestBreakHTMLValidateMissesUnreplaceablePage: --validate checks that a
// file can be created in --html's directory, not that the page itself can
// be written there. The page is written by rename over the path
// (atomicfile), which a sticky directory (/tmp) refuses when the existing
// page belongs to another user: a page left by an earlier run under
// another account (root, a colleague, a CI user). --validate says exit 0;
// the judgement, a day later, cannot write its page, a pass becomes exit
// 1 with html_error, and the playbook's rescue rolls back a canary that
// passed ("a page that cannot be written rolls the canary back"), after
// the whole window. docs/canary.md: --validate checks "that --html can be
// written".
//
// Reproduction, as a non-root user on a control node whose /tmp holds
// root's /tmp/canary.html: lowlat canary judge ... --html /tmp/canary.html
// --validate exits 0; the judgement exits 1, "write /tmp/canary.html: ...
// permission denied".
func TestBreakHTMLValidateMissesUnreplaceablePage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run lowlat as another user")
	}
	base, err := os.MkdirTemp("", "break-html-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	bin := filepath.Join(base, "lowlat")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/lowlat/lowlat/cmd/lowlat").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	sticky := filepath.Join(base, "tmp")
	os.Mkdir(sticky, 0o755)
	os.Chmod(base, 0o755)
	if err := os.Chmod(sticky, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(sticky, "canary.html")
	if err := os.WriteFile(page, []byte("an earlier run's page, root's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newStubProm(t, &stubProm{hosts: stubHosts(4, 8), n: 24})
	s.value = scaledFleet(func(string, string, int, int) float64 { return 1 })
	asNobody := func(args ...string) (int, string) {
		cmd := exec.Command("setpriv", append([]string{"--reuid", "65534", "--regid", "65534", "--clear-groups", bin, "canary", "judge"}, args...)...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	args := stubArgs(s, "--html", page)
	vcode, vout := asNobody(append(args, "--validate")...)
	jcode, jout := asNobody(args...)
	t.Logf("--validate: exit %d %s\njudgement: exit %d\n%s", vcode, vout, jcode, jout)
	if vcode == 0 && jcode != 0 {
		t.Errorf("--validate accepted --html %s (exit 0), the judgement could not write it (exit %d): a canary's page refused a window too late", page, jcode)
	}
}

// TestBreakHTMLInfiniteValueExhaustsMemory: one step that Prometheus
// answers +Inf (a gauge's avg_over_time of +Inf; any ±Inf in a range
// query's values) is left out by the judge, as it should be, but kept in
// the series drawn on the page (canaryprom's steps keep ±Inf, only NaN is
// dropped), and the page's chart then computes its axis up to +Inf: its
// tick loop (internal/report scale.ticks) appends ticks without end until
// the process runs out of memory. The page is written before the verdict
// is printed, so the judge dies with no verdict at all, after taking the
// control node's memory (where the Ansible controller runs: the OOM
// killer may pick it instead). Run here under a 2 GB address-space limit
// and a 60 s timeout; without them it grew past 1.5 GB in seconds.
//
// Reproduction: a stand-in Prometheus answering "+Inf" for one step of
// lowlat_probe_jitter_seconds; lowlat canary judge ... --html page.html.
func TestBreakHTMLInfiniteValueExhaustsMemory(t *testing.T) {
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("no prlimit")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "lowlat")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/lowlat/lowlat/cmd/lowlat").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	s := newStubProm(t, &stubProm{hosts: stubHosts(2, 4), n: 12})
	s.value = func(metric, group, host string, i, n int) float64 {
		switch metric {
		case "p99":
			return steady(0.010, host, i)
		case "jitter":
			if host == "k0:9431" && i == 3 {
				return math.Inf(1)
			}
			return steady(0.001, host, i)
		case "sent":
			return 1200
		case "lost":
			return math.Round(steady(2, host, i))
		}
		return math.NaN()
	}
	cmd := exec.Command("prlimit", append([]string{"--as=2000000000", bin, "canary", "judge"}, stubArgs(s, "--html", filepath.Join(dir, "page.html"))...)...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	err := cmd.Wait()
	timer.Stop()
	text := out.String()
	if i := strings.Index(text, "goroutine "); i > 0 {
		text = text[:i]
	}
	if !strings.Contains(out.String(), `"verdict"`) {
		t.Errorf("one +Inf step and --html: no verdict (%v):\n%.600s", err, text)
	}
}

// A control host whose journal says a change came or went during the
// windows (a batch of an earlier rollout, a hand-made apply) is no
// control: it is left out, named, and the judgement stands on the rest.
// Here two control hosts were tuned half-way through the window before,
// the way that made them 30 % faster: kept, they would make a steady
// canary read 30 % worse than a control that improved.
func TestControlHostsChangedInTheWindowsAreLeftOut(t *testing.T) {
	s := newStubProm(t, &stubProm{hosts: stubHosts(4, 8), n: 24})
	touched := func(host string) bool { return host == "k0:9431" || host == "k1:9431" }
	s.value = scaledFleet(func(group, host string, i, n int) float64 {
		if touched(host) && i >= n/2 {
			return 0.5
		}
		return 1
	})
	s.txns = func(group, host string, i, n int) []string {
		if touched(host) && i >= n/2 {
			return []string{"T9"}
		}
		return nil
	}
	code, out, _ := runJudge(t, stubArgs(s)...)
	var j struct {
		Verdict string `json:"verdict"`
		Metrics []struct {
			Metric       string   `json:"metric"`
			Class        string   `json:"class"`
			ControlHosts int      `json:"control_hosts"`
			Notes        []string `json:"notes"`
		} `json:"metrics"`
	}
	json.Unmarshal([]byte(out), &j)
	for _, m := range j.Metrics {
		if m.ControlHosts != 6 || !strings.Contains(strings.Join(m.Notes, "; "), "control host k0:9431 left out: lowlat transaction T9 came or went during the windows") {
			t.Errorf("%s: %d control hosts judged, notes %q: want 6, k0 and k1 left out for T9", m.Metric, m.ControlHosts, m.Notes)
		}
		if m.Metric != "loss" && m.Class == "fail" {
			t.Errorf("%s: %s: a steady canary failed against controls that improved", m.Metric, m.Class)
		}
	}
	if code == ExitCanaryFail {
		t.Errorf("exit %d: %s", code, out)
	}
}
