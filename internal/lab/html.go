package lab

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/lowlat/lowlat/internal/probe"
	"github.com/lowlat/lowlat/internal/report"
)

// WriteHTML renders results as one self-contained page: per scenario the
// verdict, the before/after table, an RTT CDF of every variant and an
// RTT-over-time plot per variant, all inline SVG.
func WriteHTML(w io.Writer, rs []*Result) error {
	return report.WriteHTML(w, Page(rs))
}

// Page builds the report page for results.
func Page(rs []*Result) *report.Page {
	p := &report.Page{Title: "lowlat lab", Footer: "lowlat lab: namespaces, the probe library and lowlat's own apply engine; see docs/lab.md."}
	var names []string
	for _, r := range rs {
		names = append(names, r.Scenario)
		p.Sections = append(p.Sections, section(r))
	}
	if len(rs) == 1 {
		p.Title = "lowlat lab: " + rs[0].Scenario
	}
	if len(rs) > 0 {
		r := rs[0]
		where := "this host"
		if r.Environment == "qemu-tcg" {
			where = "a stock kernel under qemu (TCG)"
		}
		p.Subtitle = fmt.Sprintf("%s, kernel %s, %s; %s", strings.Join(names, ", "), r.Kernel.Version, where, r.Started.Local().Format(time.RFC1123))
		if r.Tool != "" {
			p.Footer = r.Tool + ". " + p.Footer
		}
	}
	return p
}

func section(r *Result) report.Section {
	s := report.Section{ID: r.Scenario, Title: fmt.Sprintf("%s (runbook %s): %s", r.Scenario, r.Runbook, r.Title)}
	if r.Pass {
		s.Badge, s.BadgeStyle = "PASS", report.Good
	} else {
		s.Badge, s.BadgeStyle = "FAIL", report.Bad
	}
	if len(r.Kernel.Missing) > 0 {
		s.Badge += " · DEGRADED"
	}
	if sc, err := Lookup(r.Scenario); err == nil {
		s.Paragraphs = append(s.Paragraphs, sc.Problem)
	}
	where := "this host's kernel"
	if r.Environment == "qemu-tcg" {
		where = "a stock Debian kernel under qemu (TCG): timings include emulation"
	}
	s.Facts = [][2]string{
		{"kernel", r.Kernel.Version},
		{"ran on", where},
	}
	if len(r.Kernel.Missing) > 0 {
		s.Facts = append(s.Facts, [2]string{"missing here", strings.Join(r.Kernel.Missing, ", ")})
	}
	s.Facts = append(s.Facts,
		[2]string{"provider, client → server", r.Topology.Up.String()},
		[2]string{"provider, server → client", r.Topology.Down.String()})
	if r.Topology.ServerNIC != nil {
		s.Facts = append(s.Facts, [2]string{"server NIC", r.Topology.ServerNIC.Rate + ", starting queue " + orDefault(r.Topology.ServerNIC.Queue, "pfifo limit 1000")})
	}
	s.Facts = append(s.Facts, [2]string{"senders start with", r.Congestion}, [2]string{"run time", fmt.Sprintf("%.0f s", r.Seconds)})

	t := &report.Table{Header: []string{"variant", "metric", "before", "after", "expectation", "verdict"}}
	for _, row := range Rows(r) {
		st := report.Plain
		switch row.Verdict {
		case VerdictPass:
			st = report.Good
		case VerdictFail, VerdictNotRun:
			st = report.Bad
		case VerdictInfo:
			st = report.Dim
		}
		t.Add(report.C(row.Variant), report.C(row.Metric), report.C(row.Before), report.C(row.After), report.C(row.Expectation), report.S(row.Verdict, st))
	}
	s.Table = t

	// The CDF: every variant that ran, on one log axis.
	cdf := report.Chart{Title: "RTT CDF", XLabel: "round-trip time", XUnit: " ms", YLabel: "fraction of samples ≤ x", LogX: true, Step: true, YMin: 0, YMax: 1, Width: 1100, Height: 380}
	var cdfWhat string
	for i, v := range r.Variants {
		if v.Status != StatusRan || v.CDF == "" {
			continue
		}
		pts := histCDF(v.Metrics, v.CDF)
		cdf.Series = append(cdf.Series, report.Series{Name: v.Name, Points: report.Thin(pts, 400), Color: report.Palette(i)})
		cdfWhat = v.CDF
	}
	if len(cdf.Series) > 0 {
		s.Charts = append(s.Charts, report.SectionChart{Chart: cdf, Wide: true,
			Caption: "From the probe's own histogram (" + cdfWhat + ") of each variant; log scale. Further left and steeper is better."})
	}
	// RTT over time, one chart per variant on a shared scale.
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range r.Variants {
		if v.Timeline == nil {
			continue
		}
		for _, pt := range v.Timeline.Points {
			if pt[1] > 0 {
				lo, hi = math.Min(lo, pt[1]), math.Max(hi, pt[1])
			}
		}
	}
	for i, v := range r.Variants {
		if v.Timeline == nil || len(v.Timeline.Points) == 0 {
			continue
		}
		c := report.Chart{Title: "RTT over time: " + v.Name, XLabel: "seconds", XUnit: " s", YLabel: "RTT", YUnit: " ms", LogY: true, Dots: true, YMin: lo, YMax: hi, Width: 560, Height: 280}
		c.Series = []report.Series{{Name: v.Name, Points: v.Timeline.Points, Markers: v.Timeline.Lost, Color: report.Palette(i)}}
		var phases []string
		for k := range v.Timeline.Phases {
			phases = append(phases, k)
		}
		sort.Strings(phases)
		for _, k := range phases {
			c.Marks = append(c.Marks, report.Mark{X: v.Timeline.Phases[k], Label: k})
		}
		s.Charts = append(s.Charts, report.SectionChart{Chart: c, Caption: v.Timeline.Source + "; " + v.Fix})
		if v.Rates != nil && len(v.Rates.Points) > 0 {
			rc := report.Chart{Title: "Shaper rate vs the provider's cap: " + v.Name, XLabel: "seconds", XUnit: " s", YLabel: "rate", YUnit: " Mbit/s", YMin: 0, Width: 560, Height: 280, Marks: c.Marks}
			rc.Series = []report.Series{
				{Name: "provider's cap", Points: v.Rates.Cap, Color: "#888888"},
				{Name: "shaper rate", Points: v.Rates.Points, Color: report.Palette(i)},
			}
			s.Charts = append(s.Charts, report.SectionChart{Chart: rc, Caption: v.Rates.Source + "; the RTT chart beside it is the same run"})
		}
	}
	s.Notes = notes(r)
	return s
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// histCDF reads the named histogram (a dotted path to a probe histogram in
// the variant's metrics) and returns (ms, cumulative fraction) points.
func histCDF(metrics map[string]any, path string) [][2]float64 {
	flat := flatten(metrics)
	var cur any = flat
	for _, p := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	enc, ok := cur.(string)
	if !ok {
		return nil
	}
	h, err := probe.DecodeHistogram(enc)
	if err != nil || h.TotalCount() == 0 {
		return nil
	}
	total := float64(h.TotalCount())
	var out [][2]float64
	var cum int64
	for _, b := range h.Distribution() {
		if b.Count == 0 {
			continue
		}
		if cum == 0 {
			out = append(out, [2]float64{float64(b.From) / 1e6, 0})
		}
		cum += b.Count
		out = append(out, [2]float64{float64(b.To) / 1e6, float64(cum) / total})
	}
	return out
}

// notes are the text report's notes, deduplicated.
func notes(r *Result) []string {
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, n := range r.Notes {
		add(n)
	}
	for _, v := range r.Variants {
		if len(v.Changes) > 0 {
			var ks []string
			for _, c := range v.Changes {
				ks = append(ks, c.Knob+" = "+c.After)
			}
			add(fmt.Sprintf("%s: %s; the engine set %s, then rolled it back", v.Name, v.Fix, strings.Join(ks, ", ")))
		} else if v.Fix != "none" {
			add(fmt.Sprintf("%s: %s", v.Name, v.Fix))
		}
		if v.Why != "" {
			add(fmt.Sprintf("%s did not run: %s", v.Name, v.Why))
		}
		for _, k := range v.Skipped {
			add(fmt.Sprintf("not applied: %s (%s)", k.Knob, k.Reason))
		}
		for _, n := range v.Notes {
			add(v.Name + ": " + n)
		}
	}
	return out
}
