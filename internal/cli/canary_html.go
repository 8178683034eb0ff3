package cli

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/lowlat/lowlat/internal/atomicfile"
	"github.com/lowlat/lowlat/internal/canaryprom"
	"github.com/lowlat/lowlat/internal/report"
)

// Colours of the groups on the page: the canary's hosts in warm tones,
// the control's in cool ones, so a host's line says its group.
var (
	canaryColors  = []string{"#cf222e", "#e16f24", "#bf3989", "#9a6700", "#d1242f", "#fb8f44"}
	controlColors = []string{"#0969da", "#1a7f37", "#6e7781", "#8250df", "#218bff", "#2da44e"}
)

// writeJudgementHTML writes the judgement as a self-contained page (the
// lab report's rules: inline CSS and SVG, no script, nothing fetched): the
// verdict and its table, then for each metric the groups' CDFs side by
// side and every host's series over the window before and the window.
func writeJudgementHTML(path string, j *judgement) error {
	p := &report.Page{
		Title:    "lowlat canary judge: " + string(j.Verdict),
		Subtitle: fmt.Sprintf("%s .. %s, step %s, from %s", j.Window.Start.Format("2006-01-02 15:04:05Z"), j.Window.End.Format("2006-01-02 15:04:05Z"), j.Window.Step, j.Prometheus),
		Footer:   "lowlat canary judge: hosts are the unit; each host is one number a metric, compared with its own window before where every host has one (docs/canary.md).",
	}
	top := report.Section{
		ID: "verdict", Title: "Verdict", Badge: strings.ToUpper(string(j.Verdict)), BadgeStyle: classStyle(j.Verdict),
		Paragraphs: []string{j.Why},
		Facts: [][2]string{
			{"score", fmt.Sprintf("%.1f (the weighted share of metrics that passed; the most severe metric decides the verdict)", j.Score)},
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
	p.Sections = append(p.Sections, top)
	for _, m := range j.Metrics {
		pair, ok := j.series[m.Metric]
		if !ok {
			continue
		}
		p.Sections = append(p.Sections, metricSection(m, pair, j))
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

// metricSection draws one metric: the CDFs of the two groups' step values
// in the window, and each host's steps over the window before and the
// window (x from the judged window's start).
func metricSection(m metricResult, pair [2]canaryprom.Series, j *judgement) report.Section {
	scale, unit := 1e3, "ms"
	if m.Unit == "" {
		scale, unit = 100, "%"
	}
	sec := report.Section{ID: "m-" + m.Metric, Title: m.Metric, Badge: string(m.Class), BadgeStyle: classStyle(m.Class), Paragraphs: []string{m.Why}}
	cdf := report.Chart{Title: m.Metric + ": the groups' steps", XLabel: m.Metric + " (" + unit + ")", YLabel: "share of steps", Step: true, LogX: m.Unit != "", YMin: 0, YMax: 1}
	// x in the unit that suits the window: seconds, minutes or hours.
	span := j.Window.End.Sub(j.Window.Start)
	xunit, xdiv := "minutes", 60.0
	switch {
	case span < 10*time.Minute:
		xunit, xdiv = "seconds", 1
	case span >= 10*time.Hour:
		xunit, xdiv = "hours", 3600
	}
	series := report.Chart{Title: m.Metric + ": each host", XLabel: xunit + " from the window's start", YLabel: m.Metric + " (" + unit + ")", LogY: m.Unit != "", Dots: false,
		Marks: []report.Mark{{X: 0, Label: "window"}}, Width: 900}
	step := span.Seconds() / xdiv / float64(max(len(pair[0].Times), 1))
	for g, s := range pair {
		name, hosts, colors := "canary", j.Canary.Hosts, canaryColors
		if g == 1 {
			name, hosts, colors = "control", j.Control.Hosts, controlColors
		}
		var vals []float64
		for i, h := range hosts {
			for _, p := range s.Hosts[h] {
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
				if len(pts) > 0 {
					series.Series = append(series.Series, report.Series{Name: name + " " + h + " {" + p.Key + "}", Points: pts, Color: colors[i%len(colors)], Breaks: true})
				}
			}
		}
		if len(vals) > 0 {
			sort.Float64s(vals)
			pts := make([][2]float64, len(vals))
			for i, v := range vals {
				pts[i] = [2]float64{v, float64(i+1) / float64(len(vals))}
			}
			cdf.Series = append(cdf.Series, report.Series{Name: fmt.Sprintf("%s (%d hosts, %d steps)", name, len(hosts), len(vals)), Points: pts, Color: colors[0]})
		}
	}
	if m.Unit != "" && !positive(cdf.Series) {
		cdf.LogX, series.LogY = false, false
	}
	if len(cdf.Series) > 0 {
		sec.Charts = append(sec.Charts, report.SectionChart{Chart: cdf, Caption: "each group's values of every host's steps in the window; the judge compares hosts, this shows what it compared"})
	}
	if len(series.Series) > 0 {
		sec.Charts = append(sec.Charts, report.SectionChart{Chart: series, Wide: true, Caption: "each host's value per step, the window before (x < 0, each host's baseline) and the judged window; warm colours are canary hosts, cool ones control"})
	}
	if len(sec.Charts) == 0 {
		sec.Notes = append(sec.Notes, "no values were read for this metric")
	}
	return sec
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
