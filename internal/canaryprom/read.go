package canaryprom

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/lowlat/lowlat/internal/canary"
)

// Window is the judged window, [End−Length, End], cut into steps of Step;
// the window before it, [End−2·Length, End−Length], is each host's
// baseline.
type Window struct {
	End    time.Time
	Length time.Duration
	Step   time.Duration
}

// Steps is how many steps the window has.
func (w Window) Steps() int { return int(w.Length / w.Step) }

// Start is the judged window's start.
func (w Window) Start() time.Time { return w.End.Add(-time.Duration(w.Steps()) * w.Step) }

// Reader reads from one Prometheus.
type Reader struct {
	API v1.API
	// HostLabel is the label whose values are the hosts (instance).
	HostLabel string
	// Address names the server in errors.
	Address string
}

// Series are one group's hosts' values of one metric: each host's parts
// (one per value of the metric's own labels, partLabels), each with a
// value a step of the window and of the window before it.
type Series struct {
	// Hosts are each host's parts, sorted by key.
	Hosts map[string][]canary.Part
	// Source says where each host's quantile came from: "native" or
	// "classic" (Part.Buckets then holds the bounds); "" for a metric
	// that is not a quantile.
	Source map[string]string
	// Times are the steps' ends in the judged window.
	Times []time.Time
	// Warnings are what Prometheus warned of while answering (a partial
	// answer with a store down).
	Warnings []string
}

// Read reads m for the hosts sel selects: every step of the window and of
// the window before it, per host and part, in one range query (and, where
// a host's quantile came from classic buckets, one instant query of their
// bounds). A step's value is over the step that ends at it ([Step] in
// PromQL), so the steps do not overlap.
func (r Reader) Read(ctx context.Context, m Metric, sel Selector, w Window) (Series, error) {
	n := w.Steps()
	start := w.End.Add(-time.Duration(2*n-1) * w.Step)
	by := []string{r.HostLabel}
	for _, l := range m.parts {
		if l != r.HostLabel {
			by = append(by, l)
		}
	}
	expr := m.stepExpr(sel, by, model.Duration(w.Step).String())
	val, warnings, _, err := r.API.QueryRange(ctx, expr, v1.Range{Start: start, End: w.End, Step: w.Step})
	if err != nil {
		return Series{}, fmt.Errorf("prometheus %s: query %s: %w", r.Address, m.Name(), err)
	}
	mat, ok := val.(model.Matrix)
	if !ok {
		return Series{}, fmt.Errorf("prometheus %s: query %s: a %s, not a matrix", r.Address, m.Name(), val.Type())
	}
	s := Series{Hosts: map[string][]canary.Part{}, Source: map[string]string{}, Warnings: warnings}
	for i := range n {
		s.Times = append(s.Times, start.Add(time.Duration(n+i)*w.Step))
	}
	// A host's quantile from its native histogram where it has one.
	hasNative := map[string]bool{}
	for _, ss := range mat {
		if ss.Metric[sideLabel] == native {
			hasNative[string(ss.Metric[model.LabelName(r.HostLabel)])] = true
		}
	}
	parts := map[string]map[string]*canary.Part{}
	for _, ss := range mat {
		host := string(ss.Metric[model.LabelName(r.HostLabel)])
		if host == "" {
			continue // a series without the host label is no host's
		}
		side := string(ss.Metric[sideLabel])
		if m.kind == quantile {
			if side == classic && hasNative[host] {
				continue
			}
			s.Source[host] = side
		}
		key := partKey(ss.Metric, m.parts)
		if parts[host] == nil {
			parts[host] = map[string]*canary.Part{}
		}
		p := parts[host][key]
		if p == nil {
			p = &canary.Part{Key: key}
			parts[host][key] = p
		}
		before, after := steps(ss, start, w.Step, n)
		switch {
		case m.kind != lossRatio:
			p.Before, p.After = before, after
		case side == "lost":
			p.BeforeNum, p.AfterNum = before, after
		case side == "sent":
			p.BeforeDen, p.AfterDen = before, after
		}
	}
	var bounds map[string][]float64
	for _, src := range s.Source {
		if src == classic {
			if bounds, err = r.buckets(ctx, m, sel, w, &s.Warnings); err != nil {
				return Series{}, err
			}
			break
		}
	}
	for host, ps := range parts {
		keys := make([]string, 0, len(ps))
		for k := range ps {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := ps[k]
			if m.kind == lossRatio {
				p.Before, p.After = ratios(p.BeforeNum, p.BeforeDen, n), ratios(p.AfterNum, p.AfterDen, n)
				p.BeforeNum, p.BeforeDen = orNaN(p.BeforeNum, n), orNaN(p.BeforeDen, n)
				p.AfterNum, p.AfterDen = orNaN(p.AfterNum, n), orNaN(p.AfterDen, n)
			}
			if s.Source[host] == classic {
				p.Buckets = bounds[host]
			}
			s.Hosts[host] = append(s.Hosts[host], *p)
		}
	}
	return s, nil
}

// buckets reads the classic buckets' upper bounds of m's histogram for
// each host sel selects (+Inf left out), from the bucket series of both
// windows, and adds Prometheus's warnings to warnings.
func (r Reader) buckets(ctx context.Context, m Metric, sel Selector, w Window, warnings *[]string) (map[string][]float64, error) {
	rng := model.Duration(2 * time.Duration(w.Steps()) * w.Step).String()
	val, warn, _, err := r.API.Query(ctx, m.bucketsExpr(sel, r.HostLabel, rng), w.End)
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: query %s's classic buckets: %w", r.Address, m.Name(), err)
	}
	*warnings = append(*warnings, warn...)
	vec, ok := val.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("prometheus %s: query %s's classic buckets: a %s, not a vector", r.Address, m.Name(), val.Type())
	}
	out := map[string][]float64{}
	for _, s := range vec {
		host := string(s.Metric[model.LabelName(r.HostLabel)])
		le, err := strconv.ParseFloat(string(s.Metric["le"]), 64)
		if host == "" || err != nil || math.IsInf(le, 1) || math.IsNaN(le) {
			continue
		}
		if !slices.Contains(out[host], le) { // "1" and "1.0" from two exporters
			out[host] = append(out[host], le)
		}
	}
	for _, b := range out {
		sort.Float64s(b)
	}
	return out, nil
}

// partKey names a part by its labels, as PromQL writes them.
func partKey(ls model.Metric, names []string) string {
	sel := make(Selector, len(names))
	for i, n := range names {
		sel[i] = Matcher{Name: n, Op: "=", Value: string(ls[model.LabelName(n)])}
	}
	return sel.String()
}

// steps are a series' values in the window before and the window, one a
// step (NaN where it has none).
func steps(ss *model.SampleStream, start time.Time, step time.Duration, n int) (before, after []float64) {
	all := nanSlice(2 * n)
	for _, p := range ss.Values {
		i := int(math.Round(float64(p.Timestamp.Time().Sub(start)) / float64(step)))
		// ±Inf is no value either (a gauge's average of +Inf): the judge
		// would skip it, and a page could not draw it.
		if v := float64(p.Value); i >= 0 && i < 2*n && !math.IsNaN(v) && !math.IsInf(v, 0) {
			all[i] = float64(p.Value)
		}
	}
	return all[:n:n], all[n:]
}

// ratios are each step's num/den (NaN where either is missing or den is
// not positive): what a step's loss was, for the page; the judge sums.
func ratios(num, den []float64, n int) []float64 {
	out := nanSlice(n)
	for i := range out {
		if i < len(num) && i < len(den) && den[i] > 0 {
			out[i] = num[i] / den[i]
		}
	}
	return out
}

func orNaN(vs []float64, n int) []float64 {
	if vs == nil {
		return nanSlice(n)
	}
	return vs
}

// Group reads m over the whole window for the group sel selects, as one
// value: a quantile of all its hosts' values together, the loss of all
// their probes, the mean of their jitter. NaN where there is none. It
// returns Prometheus's warnings beside it.
func (r Reader) Group(ctx context.Context, m Metric, sel Selector, w Window) (float64, []string, error) {
	expr := m.groupExpr(sel, model.Duration(time.Duration(w.Steps())*w.Step).String())
	val, warnings, _, err := r.API.Query(ctx, expr, w.End)
	if err != nil {
		return math.NaN(), nil, fmt.Errorf("prometheus %s: query %s of the group: %w", r.Address, m.Name(), err)
	}
	vec, ok := val.(model.Vector)
	if !ok {
		return math.NaN(), nil, fmt.Errorf("prometheus %s: query %s of the group: a %s, not a vector", r.Address, m.Name(), val.Type())
	}
	if len(vec) == 0 {
		return math.NaN(), warnings, nil
	}
	return float64(vec[0].Value), warnings, nil
}

// sideLabel labels the sides of one query that reads two things at once
// (label_replace(A, sideLabel, "a") or label_replace(B, sideLabel, "b")):
// "or" keeps both, and each answer says which side it is.
const sideLabel = "lowlat_judge_side"

// ListHosts lists, for each selector, the hosts (values of HostLabel) with
// a series of any of ms in (end−length, end], sorted, in one instant
// query. It returns Prometheus's warnings (a partial answer) beside them.
func (r Reader) ListHosts(ctx context.Context, ms []Metric, sels []Selector, end time.Time, length time.Duration) ([][]string, []string, error) {
	var names []string
	seen := map[string]bool{}
	for _, m := range ms {
		for _, n := range m.seriesNames() {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	// One side a selector and name: count_over_time drops the name, so
	// two names' series of one part would collide in one selector.
	rng := model.Duration(length).String()
	var sides []string
	for i, sel := range sels {
		for _, n := range names {
			sides = append(sides, fmt.Sprintf(`label_replace(group by (%s) (count_over_time(%s{%s}[%s])), %q, "%d", "", "")`, r.HostLabel, n, sel, rng, sideLabel, i))
		}
	}
	val, warnings, _, err := r.API.Query(ctx, strings.Join(sides, " or "), end)
	if err != nil {
		return nil, nil, fmt.Errorf("prometheus %s: list the hosts: %w", r.Address, err)
	}
	vec, ok := val.(model.Vector)
	if !ok {
		return nil, nil, fmt.Errorf("prometheus %s: list the hosts: a %s, not a vector", r.Address, val.Type())
	}
	out := make([][]string, len(sels))
	for i := range out {
		out[i] = []string{}
	}
	for _, s := range vec {
		i, err := strconv.Atoi(string(s.Metric[sideLabel]))
		host := string(s.Metric[model.LabelName(r.HostLabel)])
		if err != nil || i < 0 || i >= len(sels) || host == "" {
			continue
		}
		out[i] = append(out[i], host)
	}
	for _, hs := range out {
		sort.Strings(hs)
	}
	return out, warnings, nil
}

// Hosts lists the hosts that have any series in any of the reads, sorted.
func Hosts(all ...Series) []string {
	seen := map[string]bool{}
	for _, s := range all {
		for h := range s.Hosts {
			seen[h] = true
		}
	}
	hosts := make([]string, 0, len(seen))
	for h := range seen {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	return hosts
}

func nanSlice(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = math.NaN()
	}
	return s
}
