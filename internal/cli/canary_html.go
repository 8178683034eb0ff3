package cli

import (
	"cmp"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lowlat/lowlat/internal/atomicfile"
	"github.com/lowlat/lowlat/internal/canary"
	"github.com/lowlat/lowlat/internal/report"
)

// Colours of the groups on the page: the canary's hosts in warm tones,
// the control's in cool ones, so a host's line says its group.
var (
	canaryColors  = []string{"#cf222e", "#e16f24", "#bf3989", "#9a6700", "#d1242f", "#fb8f44"}
	controlColors = []string{"#0969da", "#1a7f37", "#6e7781", "#8250df", "#218bff", "#2da44e"}
)

// maxPartCharts is how many of a metric's parts get a chart of their own;
// the rest are named in a note (a host of many ports and stages would
// otherwise bury the page).
const maxPartCharts = 6

// writeJudgementHTML writes the judgement as a self-contained page (the
// lab report's rules: inline CSS and SVG, no script, nothing fetched): the
// verdict, its table, the SLO terms and Prometheus's warnings; then for
// each metric what the judge judged: each host's number against the
// control, its group, the hosts left out and why, the notes and the
// resolution, the groups' steps as CDFs, and each part's series per host
// over the window before and the window.
func writeJudgementHTML(path string, j *judgement) error {
	p := &report.Page{
		Title:    "lowlat canary judge: " + string(j.Verdict),
		Subtitle: fmt.Sprintf("%s .. %s, step %s (scrapes every %s), from %s", j.Window.Start.Format("2006-01-02 15:04:05Z"), j.Window.End.Format("2006-01-02 15:04:05Z"), j.Window.Step, j.Window.ScrapeInterval, j.Prometheus),
		Footer:   "lowlat canary judge: hosts are the unit; each host's parts (a probe target, a port, a queue) are read apart and compared like with like, each with its own window before (docs/canary.md).",
	}
	decided := j.Decided
	if decided == "" {
		decided = "every metric passed"
	}
	top := report.Section{
		ID: "verdict", Title: "Verdict", Badge: strings.ToUpper(string(j.Verdict)), BadgeStyle: classStyle(j.Verdict),
		Paragraphs: []string{j.Why},
		Facts: [][2]string{
			{"decided by", decided},
			{"score", fmt.Sprintf("%.1f, a figure to read (the weighted share of metrics that passed, a marginal one counting half); the most severe finding decides the verdict", j.Score)},
			{"interval", fmt.Sprintf("%s: each end one-sided at %.3g %% (5 %% over %d metrics)", intervalName(j.level), 100*j.level, len(j.Metrics))},
			{"canary", fmt.Sprintf("{%s}: %s", j.Canary.Selector, hostList(j.Canary.Hosts))},
			{"control", fmt.Sprintf("{%s}: %s", j.Control.Selector, hostList(j.Control.Hosts))},
		},
	}
	if len(j.Metrics) > 0 {
		top.Table = metricsTable(j)
	}
	for _, s := range j.SLO {
		top.Notes = append(top.Notes, "slo "+s.Term+": "+sloState(s))
	}
	for _, w := range j.Warnings {
		top.Notes = append(top.Notes, "warning: prometheus "+j.Prometheus+": "+w)
	}
	top.Notes = append(top.Notes, j.Notes...)
	p.Sections = append(p.Sections, top)
	for _, m := range j.Metrics {
		p.Sections = append(p.Sections, metricSection(m, j))
	}
	var b strings.Builder
	if err := report.WriteHTML(&b, p); err != nil {
		return err
	}
	return atomicfile.Write(path, []byte(b.String()), 0o644)
}

func hostList(h []string) string {
	if len(h) == 0 {
		return "no hosts"
	}
	return strings.Join(h, ", ")
}

// hostsTable is each host's number as the judge compared it.
func hostsTable(m metricResult) *report.Table {
	t := &report.Table{Header: []string{"host", "group", "against the control", "baseline", "parts", "histogram", "left out"}}
	for _, h := range m.Hosts {
		effect := "-"
		if h.Effect != nil {
			effect = effectNumber(h.Effect, m.Unit) + effectUnit(m.Unit)
		}
		style := report.Plain
		if h.Group == "canary" {
			style = report.Bold
		}
		base := "no"
		if h.Baseline {
			base = "yes"
		}
		t.Add(report.S(h.Host, style), report.C(h.Group), report.C(effect), report.C(base), report.C(strconv.Itoa(h.Parts)), report.C(cmp.Or(h.Histogram, "-")), report.C(h.Left))
	}
	return t
}

// metricSection shows one metric: why its class, each host's number, the
// notes and the resolution, then the groups' steps in the window as CDFs
// and each part's series per host over the window before and the window
// (x from the judged window's start).
func metricSection(m metricResult, j *judgement) report.Section {
	sec := report.Section{ID: "m-" + m.Metric, Title: m.Metric, Badge: string(m.Class), BadgeStyle: classStyle(m.Class), Paragraphs: []string{m.Why}}
	if m.Resolution != "" {
		sec.Facts = append(sec.Facts, [2]string{"resolution", m.Resolution})
	}
	if len(m.Hosts) > 0 {
		sec.Table = hostsTable(m)
	}
	sec.Notes = append(sec.Notes, m.Notes...)
	pair, ok := j.series[m.Metric]
	if !ok {
		return sec // not read: the why says so
	}
	scale, unit := 1e3, "ms"
	if m.Unit == "" {
		scale, unit = 100, "%"
	}
	// Every part key the hosts have, in order.
	var keys []string
	for _, s := range pair {
		for _, ps := range s.Hosts {
			for _, p := range ps {
				if !slices.Contains(keys, p.Key) {
					keys = append(keys, p.Key)
				}
			}
		}
	}
	sort.Strings(keys)
	if len(keys) > maxPartCharts {
		sec.Notes = append(sec.Notes, fmt.Sprintf("%d parts; the first %d are drawn, not %s", len(keys), maxPartCharts, strings.Join(keys[maxPartCharts:], "; ")))
		keys = keys[:maxPartCharts]
	}
	// x in the unit that suits the window: seconds, minutes or hours.
	span := j.Window.End.Sub(j.Window.Start)
	xunit, xdiv := "minutes", 60.0
	switch {
	case span < 10*time.Minute:
		xunit, xdiv = "seconds", 1
	case span >= 10*time.Hour:
		xunit, xdiv = "hours", 3600
	}
	step := span.Seconds() / xdiv / float64(max(len(pair[0].Times), len(pair[1].Times), 1))
	cdf := report.Chart{Title: m.Metric + ": the groups' steps", XLabel: m.Metric + " (" + unit + ")", YLabel: "share of steps", Step: true, LogX: m.Unit != "", YMin: 0, YMax: 1}
	var charts []report.Chart
	for ki, key := range keys {
		title := m.Metric + ": each host"
		if key != "" {
			title = m.Metric + " {" + key + "}: each host"
		}
		series := report.Chart{Title: title, XLabel: xunit + " from the window's start", YLabel: m.Metric + " (" + unit + ")", LogY: m.Unit != "",
			Marks: []report.Mark{{X: 0, Label: "window"}}, Width: 900}
		for g, s := range pair {
			name, hosts, colors := "canary", j.Canary.Hosts, canaryColors
			if g == 1 {
				name, hosts, colors = "control", j.Control.Hosts, controlColors
			}
			var vals []float64
			for i, h := range hosts {
				at := slices.IndexFunc(s.Hosts[h], func(p canary.Part) bool { return p.Key == key })
				if at < 0 {
					continue
				}
				p := s.Hosts[h][at]
				var pts [][2]float64
				n := len(p.After)
				for k, v := range p.Before {
					pts = append(pts, [2]float64{float64(k-n+1) * step, v * scale})
				}
				for k, v := range p.After {
					pts = append(pts, [2]float64{float64(k+1) * step, v * scale})
					if !math.IsNaN(v) {
						vals = append(vals, v*scale)
					}
				}
				series.Series = append(series.Series, report.Series{Name: name + " " + h, Points: pts, Color: colors[i%len(colors)], Breaks: true})
			}
			if len(vals) > 0 {
				sort.Float64s(vals)
				pts := make([][2]float64, len(vals))
				for i, v := range vals {
					pts[i] = [2]float64{v, float64(i+1) / float64(len(vals))}
				}
				label := fmt.Sprintf("%s (%d hosts, %d steps)", name, len(hosts), len(vals))
				if len(keys) > 1 {
					label = fmt.Sprintf("%s %s (%d steps)", name, shortKey(key), len(vals))
				}
				cdf.Series = append(cdf.Series, report.Series{Name: label, Points: pts, Color: colors[ki%len(colors)], Dashed: ki%2 == 1})
			}
		}
		if len(series.Series) > 0 {
			charts = append(charts, series)
		}
	}
	if m.Unit != "" && !positive(cdf.Series) {
		cdf.LogX = false
		for i := range charts {
			charts[i].LogY = false
		}
	}
	if len(cdf.Series) > 0 {
		sec.Charts = append(sec.Charts, report.SectionChart{Chart: cdf, Caption: "each group's values of every host's steps in the window, a line a part; the judge compares hosts, each with its own window before: this shows what it compared"})
	}
	for _, c := range charts {
		sec.Charts = append(sec.Charts, report.SectionChart{Chart: c, Wide: true, Caption: "each host's value per step of this part, the window before (x < 0, each host's baseline) and the judged window; warm colours are canary hosts, cool ones control"})
	}
	if len(sec.Charts) == 0 {
		sec.Notes = append(sec.Notes, "no values were read for this metric")
	}
	return sec
}

var keyValue = regexp.MustCompile(`\w+="((?:[^"\\]|\\.)*)"`)

// shortKey is a part's key as its values alone (near/udp), for a legend.
func shortKey(key string) string {
	var vs []string
	for _, m := range keyValue.FindAllStringSubmatch(key, -1) {
		vs = append(vs, cmp.Or(m[1], `""`))
	}
	return strings.Join(vs, "/")
}

// positive says whether every point's x is above 0 (a log axis needs it).
func positive(ss []report.Series) bool {
	for _, s := range ss {
		for _, p := range s.Points {
			if p[0] <= 0 {
				return false
			}
		}
	}
	return true
}
