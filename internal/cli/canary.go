package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	promapi "github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/lowlat/lowlat/internal/canary"
	"github.com/lowlat/lowlat/internal/canaryprom"
	"github.com/lowlat/lowlat/internal/gate"
	"github.com/lowlat/lowlat/internal/report"
)

// The canary judge's exit codes (docs/canary.md): a script or playbook
// tells the verdicts apart without reading the output.
const (
	ExitCanaryMarginal     = 3
	ExitCanaryFail         = 4
	ExitCanaryInconclusive = 5
)

func newCanaryCmd(env *Env) *cobra.Command {
	return newGroupCmd("canary <command>",
		"judge canary hosts against control hosts on the fleet's own metrics in Prometheus",
		`canary judges a rollout's canary hosts against hosts left alone, over hours
of the fleet's own metrics in Prometheus (docs/canary.md).`,
		"command", newCanaryJudgeCmd(env))
}

// canaryJudgeOptions are canary judge's flags.
type canaryJudgeOptions struct {
	prometheus string
	canarySel  string
	controlSel string
	window     time.Duration
	step       time.Duration
	end        string
	metrics    listFlag
	slo        string
	hostLabel  string
	json       bool
	html       string
	timeout    time.Duration
	// scrapeInterval is how often Prometheus scrapes the monitors: a step
	// needs two scrapes (rate), and the default --end leaves the last
	// scrapes time to land.
	scrapeInterval time.Duration
	validate       bool
	listHosts      bool
}

func newCanaryJudgeCmd(env *Env) *cobra.Command {
	var o canaryJudgeOptions
	cmd := &cobra.Command{
		Use:   "judge",
		Short: "compare canary hosts with control hosts from Prometheus: pass, marginal, fail or inconclusive",
		Long: `judge reads each host's value of each metric at each step of the window
from Prometheus (lowlat monitor's series: probe RTT quantiles, jitter, loss,
and the real-traffic histograms of the passive measurements), per part (a
probe target and kind, a stage and port, a device and queue: like with
like), and of the same window before it, and compares the canary hosts
with the control hosts.

Hosts are the unit: each host is one number a metric (its parts' steps,
never trimmed, on the log scale for times; loss as lost over sent probes
over the window), compared with its own window before; the groups are
compared one-sided against a tolerance (+5 % for times, +0.5 points for
loss), each metric at 5 % divided by the number of metrics. A metric fails
when the canary is surely worse by more than the tolerance, is marginal
when surely worse but maybe within it, passes when its interval also rules
out more than 3 times the tolerance and every canary host is within the
control's range, and is inconclusive otherwise; a quantile from classic
buckets is known only within its bucket (use native histograms). The
most severe metric, --slo term or reading decides the verdict; the score
(the weighted share of passes) is a figure to read. Thin data (under 2
hosts a group, a canary host with gaps or silent in the window's last
steps, every control host's number the same), a missing series,
a Prometheus that does not answer or warns that its answer is partial:
inconclusive, never pass. --slo terms are checked on the canary group over
the whole window; a term broken fails the canary.

--validate checks the command line and queries nothing (exit 0 or 2);
--list-hosts lists the hosts each selector selects (exit 0, 2, or 5 when
Prometheus cannot answer).

Exit codes: 0 pass, 3 marginal, 4 fail, 5 inconclusive, 2 usage (nothing
was queried), 1 any other error.`,
		Example: `  lowlat canary judge --prometheus http://prom:9090 --canary 'group="canary"' --control 'group="control"' --window 24h
  lowlat canary judge --prometheus http://prom:9090 --canary '{instance=~"web-0[12]:9431"}' \
      --control '{role="web",instance!~"web-0[12]:9431"}' --window 6h --step 15m \
      --metric p99,jitter,loss --slo 'p99<=8ms,loss<=1%' --html canary.html`,
		Args: noArgs,
		RunE: runWith(env, &o, runCanaryJudge),
	}
	f := cmd.Flags()
	f.StringVar(&o.prometheus, "prometheus", "", "Prometheus's URL (http://host:9090)")
	f.StringVar(&o.canarySel, "canary", "", "label matchers that select the canary hosts' series ('group=\"canary\"')")
	f.StringVar(&o.controlSel, "control", "", "label matchers that select the control hosts' series")
	f.DurationVar(&o.window, "window", 0, "the window judged, ending at --end (24h)")
	f.DurationVar(&o.step, "step", 0, "a host's value is one per step (default: the window / 24 in whole seconds, at least two scrape intervals)")
	f.StringVar(&o.end, "end", "", "the window's end, RFC 3339 or unix seconds, not in the future (default: now less two scrape intervals, so its last step is complete)")
	f.DurationVar(&o.scrapeInterval, "scrape-interval", 15*time.Second, "how often Prometheus scrapes the monitors: a step is at least two of them")
	f.Var(&o.metrics, "metric", "metrics to judge, repeatable or comma-separated: p50, p90, p99, p999, first_byte_p99, jitter, loss, or a lowlat histogram as NAME[:pNN] (default p99,jitter,loss)")
	f.StringVar(&o.slo, "slo", "", "terms the canary group must meet over the window: \"p99<=8ms,loss<=1%\"")
	f.StringVar(&o.hostLabel, "host-label", "instance", "the label that names a host")
	f.BoolVar(&o.json, "json", false, "print the judgement as JSON")
	f.StringVar(&o.html, "html", "", "write a self-contained HTML page of the judgement (the groups' CDFs, each host's series) to this file")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "give up on Prometheus after this long (the verdict is then inconclusive)")
	f.BoolVar(&o.validate, "validate", false, "check the command line as a judgement would (and that --html can be written), query nothing, print nothing: exit 0, or 2 with one line")
	f.BoolVar(&o.listHosts, "list-hosts", false, "the same checks, then list the hosts each selector selects (those with a judged metric's series in the window) and exit 0; 5 when Prometheus cannot answer")
	return cmd
}

// judgeRequest is a checked command line: everything the judgement needs,
// before anything is queried.
type judgeRequest struct {
	// url is Prometheus's base URL as given, credentials and all (the
	// requests authenticate with them); shown is its redacted form, the
	// only one ever printed.
	url, shown      string
	canary, control canaryprom.Selector
	window          canaryprom.Window
	metrics         []canaryprom.Metric
	slo             []sloTerm
	hostLabel       string
	timeout         time.Duration
	scrapeInterval  time.Duration
}

// sloTerm is one --slo term on a judged metric; Limit in the metric's
// own unit (seconds, or a fraction for loss).
type sloTerm struct {
	Term   string  `json:"term"`
	Metric string  `json:"metric"`
	Op     string  `json:"op"`
	Limit  float64 `json:"limit"`
	metric canaryprom.Metric
}

var promLabelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// checkJudge turns the flags into a request, or says in one line what is
// wrong with them. Nothing is queried before it passes; --validate is
// this alone.
func checkJudge(o *canaryJudgeOptions, now time.Time) (*judgeRequest, error) {
	r := &judgeRequest{hostLabel: o.hostLabel, timeout: o.timeout, scrapeInterval: o.scrapeInterval}
	if o.validate && o.listHosts {
		return nil, errors.New("--validate and --list-hosts: give one of them")
	}
	var err error
	if r.url, r.shown, err = checkPrometheusURL(o.prometheus); err != nil {
		return nil, err
	}
	for _, g := range []struct {
		flag, text string
		sel        *canaryprom.Selector
	}{{"--canary", o.canarySel, &r.canary}, {"--control", o.controlSel, &r.control}} {
		if strings.TrimSpace(g.text) == "" {
			return nil, fmt.Errorf("%s is required: label matchers that select the group's hosts, e.g. 'group=\"canary\"'", g.flag)
		}
		if *g.sel, err = canaryprom.ParseSelector(g.text); err != nil {
			return nil, fmt.Errorf("%s %v", g.flag, err)
		}
	}
	if r.canary.Equal(r.control) {
		return nil, errors.New("--canary and --control select the same series: the control group must be hosts the change did not touch")
	}
	if !promLabelName.MatchString(o.hostLabel) {
		return nil, fmt.Errorf("--host-label %q is not a label name", o.hostLabel)
	}
	if o.window <= 0 {
		return nil, errors.New("--window is required: how long the canary has run (24h)")
	}
	if o.scrapeInterval <= 0 {
		return nil, fmt.Errorf("--scrape-interval %v: want how often Prometheus scrapes the monitors (15s)", o.scrapeInterval)
	}
	// rate() and increase() need two scrapes inside a step: a shorter
	// step has no value, and the judgement would always be inconclusive.
	twoScrapes := 2 * o.scrapeInterval
	step := o.step
	if step == 0 {
		// A 24th of the window in whole seconds (hourly for 24h), and at
		// least two scrapes.
		step = max((o.window / 24).Truncate(time.Second), time.Second, (twoScrapes + time.Second - 1).Truncate(time.Second))
	}
	minSteps := time.Duration(canary.DefaultRules.MinSteps)
	switch {
	case step < time.Second || step%time.Second != 0:
		return nil, fmt.Errorf("--step %v: want whole seconds, at least 1s", step)
	case step < twoScrapes:
		return nil, fmt.Errorf("--step %v: under two scrape intervals (--scrape-interval %v): rate() needs two scrapes in a step, so every step would be empty", step, o.scrapeInterval)
	case o.window/step < minSteps:
		return nil, fmt.Errorf("--step %v: the window %v has %d steps of it, a host needs at least %d (a window of at least %v, steps of at least two scrape intervals, --scrape-interval %v)", step, o.window, o.window/step, minSteps, minSteps*step, o.scrapeInterval)
	case o.window/step > 5000:
		return nil, fmt.Errorf("--step %v: the window %v would have %d steps, at most 5000 (Prometheus answers at most 11,000 points a series)", step, o.window, o.window/step)
	}
	// By default the window ends two scrape intervals ago: a sample is
	// stamped with its scrape's start and lands only when the scrape
	// returns (up to scrape_timeout, at most one interval, later), so the
	// last interval's samples may be missing yet; the second interval is
	// slack for a delayed scrape or a remote-write hop. The judge needs
	// every canary host's values in the window's last steps.
	end := now.Add(-twoScrapes)
	if o.end != "" {
		if end, err = parseTime(o.end); err != nil {
			return nil, fmt.Errorf("--end %q: want RFC 3339 or unix seconds", o.end)
		}
		if end.After(now) {
			return nil, fmt.Errorf("--end %s is in the future (now is %s): the window's last steps have no data yet", end.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		}
	}
	r.window = canaryprom.Window{End: end, Length: o.window, Step: step}
	names := []string(o.metrics)
	if len(names) == 0 {
		names = []string{"p99", "jitter", "loss"}
	}
	seen := map[string]bool{}
	for _, n := range names {
		m, err := canaryprom.ParseMetric(n)
		if err != nil {
			return nil, fmt.Errorf("--metric: %v", err)
		}
		if seen[m.Name()] {
			return nil, fmt.Errorf("--metric %s: named twice", m.Name())
		}
		seen[m.Name()] = true
		r.metrics = append(r.metrics, m)
	}
	slo, err := gate.ParseSLO(o.slo)
	if err != nil {
		return nil, fmt.Errorf("--slo: %v", err)
	}
	for _, t := range slo {
		m, err := canaryprom.ParseMetric(t.Metric)
		if err != nil || (t.Op != "<=" && t.Op != "<") {
			return nil, fmt.Errorf("--slo term %q: the canary judge checks p50, p90, p99, p999, first_byte_p99, jitter and loss, each with <= or <", t.Text)
		}
		limit := t.Value / 1e3 // ms → s
		if m.Unit == "" {
			limit = t.Value / 100 // % → fraction
		}
		r.slo = append(r.slo, sloTerm{Term: t.Text, Metric: t.Metric, Op: t.Op, Limit: limit, metric: m})
	}
	if o.html != "" {
		if err := checkPage(o.html); err != nil {
			return nil, err
		}
	}
	if o.timeout <= 0 {
		return nil, errors.New("--timeout must be positive")
	}
	return r, nil
}

// checkPrometheusURL checks --prometheus: an http or https URL of the
// server's base (its /api/v1 is the client's to add), without a query.
// It returns the URL to request, credentials included, and the redacted
// form that every message prints instead.
func checkPrometheusURL(raw string) (full, shown string, err error) {
	if raw == "" {
		return "", "", errors.New("--prometheus is required (Prometheus's URL, http://host:9090)")
	}
	want := "want http://host:port or https://host:port[/path]"
	u, perr := url.Parse(raw)
	if perr != nil {
		return "", "", fmt.Errorf("--prometheus %s: %s", redactUnparsed(raw), want)
	}
	base := *u
	base.RawQuery, base.ForceQuery, base.Fragment, base.RawFragment = "", false, "", ""
	shown = strings.TrimRight(base.Redacted(), "/")
	switch {
	case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "":
		// "user:pass@host:9090" reads as scheme "user", opaque the rest.
		return "", "", fmt.Errorf("--prometheus %s: %s", redactUnparsed(raw), want)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", "", fmt.Errorf("--prometheus %s (with a query or fragment): give the server's base URL alone", shown)
	}
	if p := "/" + strings.Trim(u.Path, "/"); strings.HasSuffix(p, "/api/v1") || strings.Contains(p, "/api/v1/") {
		base.Path = strings.TrimRight(p[:strings.Index(p, "/api/v1")], "/")
		base.RawPath = ""
		return "", "", fmt.Errorf("--prometheus %s: give the server's base URL (%s), not its API's: the judge adds /api/v1/... itself", shown, strings.TrimRight(base.Redacted(), "/"))
	}
	return strings.TrimRight(u.String(), "/"), shown, nil
}

// redactUnparsed hides what may be a password in a URL that url.Parse
// refused or read as something else, and drops its query and fragment
// (where tokens go). Such a URL's parts cannot be trusted (one slash too
// few, a colon left out: "http:/user:pass@prom" has no host), so all
// before its last @ that follows the scheme is hidden, user and password.
func redactUnparsed(raw string) string {
	raw, _, _ = strings.Cut(raw, "#")
	raw, _, _ = strings.Cut(raw, "?")
	at := strings.LastIndex(raw, "@")
	if at < 0 {
		return raw
	}
	scheme := leadingScheme.FindString(raw[:at])
	return scheme + "xxxxx" + raw[at:]
}

// leadingScheme is a URL's scheme and the slashes after it, as far as
// they go ("http://", "http:/", "//").
var leadingScheme = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.-]*:)?/*`)

// checkPage checks that --html can be written: its directory exists, and
// a file can be created there (a temporary one, removed at once).
func checkPage(path string) error {
	dir := filepath.Dir(path)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("--html %s: no such directory %s", path, dir)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("--html %s: a directory, not a file", path)
	}
	// The page replaces the file by a rename, which a sticky directory
	// (/tmp) refuses to all but the owner of the file or the directory
	// and root: an earlier run's page of another user cannot be replaced,
	// though a new file can be made beside it.
	if err := replaceable(path, dir); err != nil {
		return fmt.Errorf("--html %s: %v", path, err)
	}
	f, err := os.CreateTemp(dir, ".lowlat-judge-check-*")
	if err != nil {
		return fmt.Errorf("--html %s: cannot create a file in %s: %w", path, dir, err)
	}
	name := f.Name()
	f.Close()
	if err := os.Remove(name); err != nil {
		return fmt.Errorf("--html %s: remove the test file %s: %w", path, name, err)
	}
	return nil
}

func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) {
		return time.Time{}, errors.New("bad time")
	}
	return time.Unix(0, int64(f*1e9)), nil
}

// judgement is the whole result, as --json prints it.
type judgement struct {
	Verdict canary.Class `json:"verdict"`
	// Score is a figure to read (the weighted share of metrics that
	// passed); the most severe finding decides the verdict.
	Score float64 `json:"score"`
	Why   string  `json:"why"`
	// Decided names the metric, SLO term or reading that decided the
	// verdict ("" when every metric passed).
	Decided    string         `json:"decided,omitempty"`
	Prometheus string         `json:"prometheus"`
	Window     judgeWindow    `json:"window"`
	Canary     judgeGroup     `json:"canary"`
	Control    judgeGroup     `json:"control"`
	Metrics    []metricResult `json:"metrics"`
	SLO        []sloResult    `json:"slo,omitempty"`
	// Warnings are Prometheus's (a partial answer, with a store down):
	// they make the verdict inconclusive.
	Warnings []string `json:"warnings,omitempty"`
	// HTMLError says why --html could not be written ("": it was, or was
	// not asked for).
	HTMLError string `json:"html_error,omitempty"`
	// Notes say what the judge could not check of the hosts (their
	// transactions unknown).
	Notes []string `json:"notes,omitempty"`

	// series keep what was read, for the HTML page; level is the one-sided
	// level each metric's bounds hold at.
	series map[string][2]canaryprom.Series
	level  float64
}

type judgeWindow struct {
	Start          time.Time `json:"start"`
	End            time.Time `json:"end"`
	Step           string    `json:"step"`
	ScrapeInterval string    `json:"scrape_interval"`
}

type judgeGroup struct {
	Selector string   `json:"selector"`
	Hosts    []string `json:"hosts"`
}

// metricResult is canary.MetricResult with its numbers as JSON can carry
// them: null where a number is not known (NaN).
type metricResult struct {
	Metric        string       `json:"metric"`
	Class         canary.Class `json:"class"`
	Why           string       `json:"why"`
	CanaryHosts   int          `json:"canary_hosts"`
	ControlHosts  int          `json:"control_hosts"`
	Baseline      bool         `json:"baseline"`
	Effect        *float64     `json:"effect"`
	EffectLo      *float64     `json:"effect_lo"`
	EffectHi      *float64     `json:"effect_hi"`
	Level         float64      `json:"level"`
	P             *float64     `json:"p"`
	PBeyond       *float64     `json:"p_beyond_tolerance"`
	CanaryMedian  *float64     `json:"canary_median"`
	ControlMedian *float64     `json:"control_median"`
	Unit          string       `json:"unit"`
	Resolution    string       `json:"resolution,omitempty"`
	Notes         []string     `json:"notes,omitempty"`
	Hosts         []hostResult `json:"hosts"`
	raw           canary.MetricResult
}

// hostResult is canary.HostNumber as JSON carries it, with the histogram
// its quantile came from.
type hostResult struct {
	Host  string `json:"host"`
	Group string `json:"group"`
	// Effect is the host's number against the control's mean; null for
	// a host left out.
	Effect    *float64 `json:"effect"`
	Baseline  bool     `json:"baseline"`
	Parts     int      `json:"parts"`
	Left      string   `json:"left_out,omitempty"`
	Histogram string   `json:"histogram,omitempty"` // native or classic
}

type sloResult struct {
	sloTerm
	Value *float64 `json:"value"`
	OK    bool     `json:"ok"`
}

func num(f float64) *float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return &f
}

// newMetricResult is r as JSON carries it; level is the level its bounds
// hold at, pair what was read (for each host's histogram).
func newMetricResult(m canaryprom.Metric, r canary.MetricResult, level float64, pair [2]canaryprom.Series) metricResult {
	mr := metricResult{
		Metric: r.Metric, Class: r.Class, Why: r.Why, CanaryHosts: r.Canary, ControlHosts: r.Control, Baseline: r.Baseline,
		Effect: num(r.Effect), EffectLo: num(r.Lo), EffectHi: num(r.Hi), Level: level, P: num(r.P), PBeyond: num(r.PBeyond),
		CanaryMedian: num(r.CanaryMedian), ControlMedian: num(r.ControlMedian), Unit: m.Unit,
		Resolution: r.Resolution, Notes: r.Notes, Hosts: []hostResult{}, raw: r,
	}
	for _, h := range r.Hosts {
		src := pair[0].Source[h.Host]
		if h.Group == "control" {
			src = pair[1].Source[h.Host]
		}
		mr.Hosts = append(mr.Hosts, hostResult{Host: h.Host, Group: h.Group, Effect: num(h.Effect), Baseline: h.Baseline, Parts: h.Parts, Left: h.Left, Histogram: src})
	}
	return mr
}

func runCanaryJudge(ctx context.Context, env *Env, o *canaryJudgeOptions, _ []string) error {
	req, err := checkJudge(o, time.Now())
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("canary judge: %v", err)}
	}
	switch {
	case o.validate:
		return nil // the command line is one a judgement would run
	case o.listHosts:
		return listHosts(ctx, env, req, o.json)
	}
	j := judge(ctx, req)
	// The page first, so the JSON can say it failed. A page that cannot
	// be written keeps the verdict's exit code (a fail stays a fail), but
	// a pass becomes 1: the user asked for a page and got none.
	var pageErr error
	if o.html != "" {
		if err := writeJudgementHTML(o.html, j); err != nil {
			pageErr = fmt.Errorf("write %s: %w", o.html, err)
			j.HTMLError = pageErr.Error()
		}
	}
	if o.json {
		if err := report.JSON(env.Stdout, j); err != nil {
			return err
		}
	} else if err := writeJudgement(env.Stdout, j, env.TTY); err != nil {
		return err
	}
	code := 0
	switch j.Verdict {
	case canary.Pass:
	case canary.Marginal:
		code = ExitCanaryMarginal
	case canary.Fail:
		code = ExitCanaryFail
	default:
		code = ExitCanaryInconclusive
	}
	if pageErr != nil {
		return &ExitError{Code: max(code, 1), Err: fmt.Errorf("canary judge: %v (the verdict, %s, stands)", pageErr, j.Verdict)}
	}
	if code == 0 {
		return nil
	}
	return &ExitError{Code: code}
}

// newReader is the request's Prometheus client.
func newReader(req *judgeRequest) (canaryprom.Reader, error) {
	client, err := promapi.NewClient(promapi.Config{Address: req.url, Client: &http.Client{Timeout: req.timeout}})
	if err != nil {
		return canaryprom.Reader{}, fmt.Errorf("prometheus %s: %v", req.shown, err)
	}
	return canaryprom.Reader{API: v1.NewAPI(client), HostLabel: req.hostLabel, Address: req.shown}, nil
}

// hostListing is what --list-hosts prints.
type hostListing struct {
	Canary  judgeGroup `json:"canary"`
	Control judgeGroup `json:"control"`
}

// listHosts prints the hosts each selector selects: those with a series
// of any judged metric in the window (one read-only query). A Prometheus
// that cannot answer, or answers only in part (warnings), exits 5 with one
// line: a partial list is not the list.
func listHosts(ctx context.Context, env *Env, req *judgeRequest, asJSON bool) error {
	unanswered := func(err error) error {
		return &ExitError{Code: ExitCanaryInconclusive, Err: fmt.Errorf("canary judge --list-hosts: %w", err)}
	}
	rd, err := newReader(req)
	if err != nil {
		return unanswered(err)
	}
	ctx, cancel := context.WithTimeout(ctx, req.timeout)
	defer cancel()
	hosts, warnings, err := rd.ListHosts(ctx, req.metrics, []canaryprom.Selector{req.canary, req.control}, req.window.End, req.window.Length)
	if err != nil {
		return unanswered(err)
	}
	if len(warnings) > 0 {
		return unanswered(fmt.Errorf("prometheus %s warned, so the list may lack hosts: %s", req.shown, strings.Join(warnings, "; ")))
	}
	l := hostListing{
		Canary:  judgeGroup{Selector: req.canary.String(), Hosts: hosts[0]},
		Control: judgeGroup{Selector: req.control.String(), Hosts: hosts[1]},
	}
	if asJSON {
		return report.JSON(env.Stdout, l)
	}
	for _, g := range []struct {
		name string
		judgeGroup
	}{{"canary", l.Canary}, {"control", l.Control}} {
		fmt.Fprintf(env.Stdout, "%s {%s}: %d hosts\n", g.name, g.Selector, len(g.Hosts))
		for _, h := range g.Hosts {
			fmt.Fprintf(env.Stdout, "  %s\n", h)
		}
	}
	return nil
}

// judge reads every metric of both groups and judges them. Whatever goes
// wrong in reading is an inconclusive finding that says what, never an
// error: a judge that cannot read cannot pass, and a metric that could not
// be read does not hide another's sure fail (canary.Combine decides).
func judge(ctx context.Context, req *judgeRequest) *judgement {
	w := req.window
	j := &judgement{
		Prometheus: req.shown,
		Window:     judgeWindow{Start: w.Start().UTC(), End: w.End.UTC(), Step: w.Step.String(), ScrapeInterval: req.scrapeInterval.String()},
		Canary:     judgeGroup{Selector: req.canary.String(), Hosts: []string{}},
		Control:    judgeGroup{Selector: req.control.String(), Hosts: []string{}},
		Metrics:    []metricResult{},
		series:     map[string][2]canaryprom.Series{},
		level:      canary.DefaultRules.Alpha / float64(len(req.metrics)),
	}
	inconclusive := func(decided, why string) *judgement {
		j.Verdict, j.Decided, j.Why = canary.Inconclusive, decided, why
		return j
	}
	rd, err := newReader(req)
	if err != nil {
		return inconclusive("prometheus", err.Error())
	}
	ctx, cancel := context.WithTimeout(ctx, req.timeout)
	defer cancel()
	var warnings []string
	unread := map[string]error{}
	var cs, ks []canaryprom.Series // each group's reads, for its hosts
	for _, m := range req.metrics {
		var pair [2]canaryprom.Series
		for i, sel := range []canaryprom.Selector{req.canary, req.control} {
			s, err := rd.Read(ctx, m, sel, w)
			if err != nil {
				unread[m.Name()] = err
				break
			}
			pair[i] = s
			warnings = append(warnings, s.Warnings...)
		}
		if unread[m.Name()] == nil {
			j.series[m.Name()] = pair
			cs, ks = append(cs, pair[0]), append(ks, pair[1])
		}
	}
	j.Canary.Hosts, j.Control.Hosts = canaryprom.Hosts(cs...), canaryprom.Hosts(ks...)
	// Other changes in the windows, from the hosts' own journals: a
	// canary host's window before that held an earlier change (a canary
	// rolled back, then run again at once on the same hosts) is not its
	// baseline, and a control host changed during the windows is no
	// control.
	changes := map[string]canaryprom.Changes{}
	for _, sel := range []canaryprom.Selector{req.canary, req.control} {
		c, warn, err := rd.Changes(ctx, sel, w)
		if err != nil {
			j.Notes = append(j.Notes, "the hosts' transactions could not be read, so the windows were not checked for other changes: "+err.Error())
			break
		}
		warnings = append(warnings, warn...)
		maps.Copy(changes, c)
	}
	var unknown []string
	for _, h := range append(slices.Clone(j.Canary.Hosts), j.Control.Hosts...) {
		if !changes[h].Known {
			unknown = append(unknown, h)
		}
	}
	if len(unknown) > 0 && len(j.Notes) == 0 {
		j.Notes = append(j.Notes, fmt.Sprintf("the monitors of %s did not say which lowlat transactions were in force (lowlat_journal_read_successful): their windows were not checked for other changes", strings.Join(unknown, ", ")))
	}
	for _, h := range j.Canary.Hosts {
		if slices.Contains(j.Control.Hosts, h) {
			return inconclusive("selectors", fmt.Sprintf("host %s is in both groups: the selectors must not overlap", h))
		}
	}
	rules := canary.DefaultRules
	rules.Family = len(req.metrics)
	var judged []canary.Metric
	var results []canary.MetricResult
	for _, m := range req.metrics {
		pair := j.series[m.Name()]
		var r canary.MetricResult
		if err := unread[m.Name()]; err != nil {
			r = canary.Unjudged(m.Judge, err.Error())
		} else {
			r = canary.JudgeMetric(m.Judge, hostsOf(pair[0], j.Canary.Hosts, changes, true), hostsOf(pair[1], j.Control.Hosts, changes, false), rules)
		}
		judged, results = append(judged, m.Judge), append(results, r)
		j.Metrics = append(j.Metrics, newMetricResult(m, r, j.level, pair))
	}
	// The SLO, on the canary group over the whole window: a broken term
	// fails the canary whatever the metrics say, one without a value is
	// inconclusive.
	var slo []canary.SLOResult
	var sloErr error
	for _, t := range req.slo {
		x, warn, err := rd.Group(ctx, t.metric, req.canary, w)
		if err != nil {
			sloErr = cmp.Or(sloErr, err)
			j.SLO = append(j.SLO, sloResult{sloTerm: t})
			continue
		}
		warnings = append(warnings, warn...)
		res := sloResult{sloTerm: t, Value: num(x)}
		res.OK = !math.IsNaN(x) && (x < t.Limit || (t.Op == "<=" && x == t.Limit))
		j.SLO = append(j.SLO, res)
		slo = append(slo, canary.SLOResult{Term: t.Term, Known: !math.IsNaN(x), OK: res.OK, Value: formatValue(x, t.metric.Unit)})
	}
	j.Warnings = uniq(warnings)
	v := canary.Combine(judged, results, slo, j.Warnings)
	if sloErr != nil && v.Class.Severity() < canary.Inconclusive.Severity() {
		v.Class, v.Decided, v.Why = canary.Inconclusive, "prometheus", sloErr.Error()
	}
	j.Verdict, j.Score, j.Why, j.Decided = v.Class, v.Score, v.Why, v.Decided
	return j
}

// uniq is ss without repeats, in order.
func uniq(ss []string) []string {
	var out []string
	for _, s := range ss {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// hostsOf are the judge's hosts of one group: every host of the group,
// with the parts this metric has for it (none where its series are
// missing, so the metric is inconclusive for a canary host and leaves a
// control host out).
func hostsOf(s canaryprom.Series, hosts []string, changes map[string]canaryprom.Changes, canaryGroup bool) []canary.Host {
	out := make([]canary.Host, 0, len(hosts))
	for _, h := range hosts {
		host := canary.Host{Name: h, Parts: s.Hosts[h]}
		c := changes[h]
		if canaryGroup && len(c.Gone) > 0 {
			host.BeforeVoid = fmt.Sprintf("lowlat transaction %s was in force in its window before and is no longer", strings.Join(c.Gone, ", "))
		}
		if !canaryGroup && len(c.Moved) > 0 {
			host.Touched = fmt.Sprintf("lowlat transaction %s came or went during the windows", strings.Join(c.Moved, ", "))
		}
		out = append(out, host)
	}
	return out
}

// formatValue prints a metric's value in its unit: ms for times, % for
// loss.
func formatValue(v float64, unit string) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case unit == "s":
		return strconv.FormatFloat(v*1e3, 'f', 2, 64) + " ms"
	}
	return strconv.FormatFloat(v*100, 'f', 2, 64) + " %"
}

func formatEffect(m metricResult) string {
	if m.Effect == nil {
		return "-"
	}
	return effectNumber(m.Effect, m.Unit) + effectUnit(m.Unit) + " [" + effectNumber(m.EffectLo, m.Unit) + ", " + effectNumber(m.EffectHi, m.Unit) + "]"
}

// effectNumber prints an effect: a ratio − 1 as percent, points of loss;
// "?" where it is not known.
func effectNumber(p *float64, unit string) string {
	switch {
	case p == nil:
		return "?"
	case unit == "":
		return fmt.Sprintf("%+.2f", 100**p)
	}
	return fmt.Sprintf("%+.1f", 100**p)
}

// effectUnit is an effect's unit: % for times, pt (points) for loss.
func effectUnit(unit string) string {
	if unit == "" {
		return " pt"
	}
	return " %"
}

func classStyle(c canary.Class) report.Style {
	switch c {
	case canary.Pass:
		return report.Good
	case canary.Marginal:
		return report.Warn
	case canary.Fail:
		return report.Bad
	}
	return report.Dim
}

// writeJudgement prints the text table.
func writeJudgement(w io.Writer, j *judgement, color bool) error {
	fmt.Fprintf(w, "canary judge: %s  score %.1f\n", report.Paint(strings.ToUpper(string(j.Verdict)), classStyle(j.Verdict), color), j.Score)
	fmt.Fprintf(w, "window %s .. %s, step %s, from %s; canary %d hosts {%s}, control %d hosts {%s}\n\n",
		j.Window.Start.Format(time.RFC3339), j.Window.End.Format(time.RFC3339), j.Window.Step, j.Prometheus, len(j.Canary.Hosts), j.Canary.Selector, len(j.Control.Hosts), j.Control.Selector)
	if len(j.Metrics) > 0 {
		t := metricsTable(j)
		if err := t.Render(w, color); err != nil {
			return err
		}
	}
	for _, m := range j.Metrics {
		if m.Resolution != "" {
			fmt.Fprintf(w, "%s: resolution: %s\n", m.Metric, m.Resolution)
		}
		for _, n := range m.Notes {
			fmt.Fprintf(w, "%s: note: %s\n", m.Metric, n)
		}
	}
	for _, s := range j.SLO {
		fmt.Fprintf(w, "slo %s: %s\n", s.Term, sloState(s))
	}
	for _, warning := range j.Warnings {
		fmt.Fprintf(w, "warning: prometheus %s: %s\n", j.Prometheus, warning)
	}
	for _, n := range j.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	_, err := fmt.Fprintf(w, "verdict: %s: %s\n", j.Verdict, j.Why)
	return err
}

// sloState says a term's value on the canary group and whether it held.
func sloState(s sloResult) string {
	v := math.NaN()
	if s.Value != nil {
		v = *s.Value
	}
	state := "met"
	switch {
	case s.Value == nil:
		state = "unknown"
	case !s.OK:
		state = "BROKEN"
	}
	return fmt.Sprintf("the canary group's %s over the window is %s: %s", s.Metric, formatValue(v, s.metric.Unit), state)
}

// intervalName names the interval [Lo, Hi] whose ends each hold at
// the one-sided level: 1 − 2·level ("96.7 % interval" for three metrics).
func intervalName(level float64) string {
	return strings.TrimSuffix(strconv.FormatFloat(100*(1-2*level), 'f', 1, 64), ".0") + " % interval"
}

// metricsTable is the metrics' table, for the text output and the page.
func metricsTable(j *judgement) *report.Table {
	t := &report.Table{Header: []string{"metric", "class", "effect [" + intervalName(j.level) + "]", "canary", "control", "baseline", "why"}}
	for _, m := range j.Metrics {
		base := "no"
		if m.Baseline {
			base = "yes"
		}
		t.Add(report.C(m.Metric), report.S(string(m.Class), classStyle(m.Class)), report.C(formatEffect(m)),
			report.C(formatValue(m.raw.CanaryMedian, m.Unit)), report.C(formatValue(m.raw.ControlMedian, m.Unit)), report.C(base), report.C(m.Why))
	}
	return t
}
