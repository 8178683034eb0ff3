package canaryprom

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
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

// Series are one group's hosts' values of one metric, each a slice of one
// value per step (NaN where the host had none).
type Series struct {
	After, Before map[string][]float64
	// Times are the steps' ends in the judged window.
	Times []time.Time
}

// Read reads m for the hosts sel selects: every step of the window and of
// the window before it, in one range query. A step's value is over the
// step that ends at it ([Step] in PromQL), so the steps do not overlap.
func (r Reader) Read(ctx context.Context, m Metric, sel Selector, w Window) (Series, error) {
	n := w.Steps()
	start := w.End.Add(-time.Duration(2*n-1) * w.Step)
	expr := m.expr(sel, []string{r.HostLabel}, model.Duration(w.Step).String())
	val, _, _, err := r.API.QueryRange(ctx, expr, v1.Range{Start: start, End: w.End, Step: w.Step})
	if err != nil {
		return Series{}, fmt.Errorf("prometheus %s: query %s: %w", r.Address, m.Name(), err)
	}
	mat, ok := val.(model.Matrix)
	if !ok {
		return Series{}, fmt.Errorf("prometheus %s: query %s: a %s, not a matrix", r.Address, m.Name(), val.Type())
	}
	s := Series{After: map[string][]float64{}, Before: map[string][]float64{}}
	for i := range n {
		s.Times = append(s.Times, start.Add(time.Duration(n+i)*w.Step))
	}
	for _, ss := range mat {
		host := string(ss.Metric[model.LabelName(r.HostLabel)])
		if host == "" {
			continue // a series without the host label is no host's
		}
		all := nanSlice(2 * n)
		if old, ok := s.After[host]; ok { // one host in two series: keep both
			copy(all, s.Before[host])
			copy(all[n:], old)
		}
		for _, p := range ss.Values {
			i := int(math.Round(float64(p.Timestamp.Time().Sub(start)) / float64(w.Step)))
			if i >= 0 && i < 2*n && !math.IsNaN(float64(p.Value)) {
				all[i] = float64(p.Value)
			}
		}
		s.Before[host], s.After[host] = all[:n:n], all[n:]
	}
	return s, nil
}

// Group reads m over the whole window for the group sel selects, as one
// value: a quantile of all its hosts' values together, the loss of all
// their probes, the mean of their jitter. NaN where there is none.
func (r Reader) Group(ctx context.Context, m Metric, sel Selector, w Window) (float64, error) {
	expr := m.expr(sel, nil, model.Duration(time.Duration(w.Steps())*w.Step).String())
	val, _, _, err := r.API.Query(ctx, expr, w.End)
	if err != nil {
		return math.NaN(), fmt.Errorf("prometheus %s: query %s of the group: %w", r.Address, m.Name(), err)
	}
	vec, ok := val.(model.Vector)
	if !ok {
		return math.NaN(), fmt.Errorf("prometheus %s: query %s of the group: a %s, not a vector", r.Address, m.Name(), val.Type())
	}
	if len(vec) == 0 {
		return math.NaN(), nil
	}
	return float64(vec[0].Value), nil
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

// Hosts lists the hosts that have any value in any of the series, sorted.
func Hosts(all ...Series) []string {
	seen := map[string]bool{}
	for _, s := range all {
		for h := range s.After {
			seen[h] = true
		}
		for h := range s.Before {
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
