package monitor

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lowlat/lowlat/internal/autorate"
	"github.com/lowlat/lowlat/internal/pathprobe"
	"github.com/lowlat/lowlat/internal/report"
)

// PageCSP is the status page's Content-Security-Policy, sent as a header
// and as the page's own meta tag (the lab report's rules): nothing loads
// from anywhere, no script runs; inline styles and SVG only.
const PageCSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

// WritePage renders the status page: a verdict per target, then each
// target's last hour (p50..p99 band with lost minutes marked, the CDF,
// loss per minute), then the doctor's findings, drift and transactions.
func WritePage(w io.Writer, s *Snapshot) error {
	p := &report.Page{
		Title:    "lowlat monitor — " + orDash(s.Hostname),
		Subtitle: fmt.Sprintf("as of %s · %d target(s) · lowlat %s · %s", s.Now.Format("2006-01-02 15:04:05 MST"), len(s.Targets), s.Version, s.ConfigPath),
		Footer:   "Metrics for Prometheus at /metrics. This page keeps the last hour in fixed rings; Prometheus keeps the rest.",
	}
	if s.ReloadError != "" {
		p.Sections = append(p.Sections, report.Section{ID: "config", Title: "Config", Badge: "RELOAD REJECTED", BadgeStyle: report.Bad,
			Paragraphs: []string{"The last reload failed; the previous config still runs:", s.ReloadError}})
	}
	p.Sections = append(p.Sections, summarySection(s))
	for i := range s.Targets {
		p.Sections = append(p.Sections, targetSection(&s.Targets[i], s.Now))
	}
	p.Sections = append(p.Sections, findingsSection(s), hostSection(s))
	if len(s.Autorate) > 0 {
		p.Sections = append(p.Sections, autorateSection(s))
	}
	return report.WriteHTML(w, p)
}

// figures are a target's verdict inputs: the last full minute and the hour.
type figures struct {
	p50, p99         time.Duration // last minute with replies
	hourP99          time.Duration
	sent, lost       int64 // hour
	lastSent, lastLo int64 // last minute with probes
}

func figuresOf(t *TargetView) figures {
	var f figures
	f.sent, f.lost = t.Sent, t.Lost
	// The newest slot is the minute in progress; take the newest full one
	// that had probes, else the one in progress.
	for i := len(t.Slots) - 1; i >= 0; i-- {
		sl := t.Slots[i]
		if sl.Sent == 0 || (i == len(t.Slots)-1 && len(t.Slots) > 1 && t.Slots[i-1].Sent > 0) {
			continue
		}
		f.p50, f.p99, f.lastSent, f.lastLo = sl.P50, sl.P99, sl.Sent, sl.Lost
		break
	}
	for _, c := range t.CDF {
		if c[1] >= 0.99 {
			f.hourP99 = time.Duration(c[0] * 1e9)
			break
		}
	}
	return f
}

// verdict says in a word how a target is: DOWN (nothing answered in the
// last minute), SLO BREACHED, LOSS (above 5 % in the last minute), OK,
// or NO DATA yet.
func verdict(t *TargetView, f figures) (string, report.Style) {
	switch {
	case f.lastSent == 0:
		return "NO DATA", report.Dim
	case f.lastLo == f.lastSent:
		return "DOWN", report.Bad
	case t.SLO > 0 && f.p99 > t.SLO:
		return "SLO BREACHED", report.Bad
	case 100*f.lastLo > 5*f.lastSent:
		return "LOSS", report.Warn
	}
	return "OK", report.Good
}

func pct(lost, sent int64) string {
	if sent == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f %%", 100*float64(lost)/float64(sent))
}

func ms(d time.Duration) string {
	if d <= 0 {
		return "–"
	}
	v := d.Seconds() * 1e3
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 10:
		return fmt.Sprintf("%.1f ms", v)
	case v >= 1:
		return fmt.Sprintf("%.2f ms", v)
	}
	return fmt.Sprintf("%.0f µs", v*1e3)
}

func summarySection(s *Snapshot) report.Section {
	sec := report.Section{ID: "targets", Title: "Targets"}
	if len(s.Targets) == 0 {
		sec.Paragraphs = []string{"No [[target]] in the config."}
		return sec
	}
	t := &report.Table{Header: []string{"target", "kind", "p50", "p99", "slo p99", "loss", "hour p99", "hour loss", "state"}}
	worst := report.Good
	paths := false
	for i := range s.Targets {
		tv := &s.Targets[i]
		if tv.Kind == "path" {
			// A path target has no probe stream, so no minutes: its row
			// is its last run, to the destination.
			paths = true
			word, st := pathState(tv)
			worst = worse(worst, st)
			p50, p99, loss := "–", "–", "–"
			if d := destination(tv.Path); d != nil {
				p50, p99, loss = ms(usDur(d.RTT.P50)), ms(usDur(d.RTT.P99)), fmt.Sprintf("%.2f %%", d.LossPct)
			}
			t.Add(report.C(tv.Name), report.C(tv.Kind), report.C(p50), report.S(p99, st), report.C("–"),
				report.C(loss), report.C("–"), report.C("–"), report.S(word, st))
			sec.Paragraphs = append(sec.Paragraphs, pathLine(tv, p99, loss, word))
			continue
		}
		f := figuresOf(tv)
		word, st := verdict(tv, f)
		worst = worse(worst, st)
		t.Add(report.C(tv.Name), report.C(tv.Kind), report.C(ms(f.p50)), report.S(ms(f.p99), st), report.C(ms(tv.SLO)),
			report.C(pct(f.lastLo, f.lastSent)), report.C(ms(f.hourP99)), report.C(pct(tv.Lost, tv.Sent)), report.S(word, st))
		sec.Paragraphs = append(sec.Paragraphs, oneLine(tv, f, word))
	}
	sec.Table = t
	sec.Badge, sec.BadgeStyle = map[report.Style]string{report.Good: "ALL OK", report.Warn: "DEGRADED", report.Bad: "FAILING"}[worst], worst
	sec.Notes = []string{"p50, p99 and loss: the last full minute. Hour: the last 60 minutes."}
	if paths {
		sec.Notes = append(sec.Notes, "path targets: the destination's p50, p99 and loss in the last run; the state is the run's verdict.")
	}
	return sec
}

// worse is the worse of two states: Bad, else Warn, else a (Good, Dim and
// Plain rank alike).
func worse(a, b report.Style) report.Style {
	switch {
	case a == report.Bad || b == report.Bad:
		return report.Bad
	case a == report.Warn || b == report.Warn:
		return report.Warn
	}
	return a
}

// pathState says in a word how a path target's last run went: WAITING
// for the first, FAILING when the last could not run, UNREACHED when the
// destination did not answer, the verdict's kind and hop when a hop adds
// delay or loss that carries on to the destination, else CLEAN.
func pathState(t *TargetView) (string, report.Style) {
	r := t.Path
	switch {
	case t.LastError != "":
		return "FAILING", report.Bad
	case r == nil:
		return "WAITING", report.Dim
	case !r.Reached:
		return "UNREACHED", report.Bad
	case r.Verdict.Hop > 0:
		return strings.ToUpper(r.Verdict.Kind) + " AT HOP " + strconv.Itoa(r.Verdict.Hop), report.Warn
	}
	return "CLEAN", report.Good
}

// destination is the hop of a path run that is the target itself, nil
// when there is no run or the destination did not answer.
func destination(r *pathprobe.Result) *pathprobe.Hop {
	if r == nil || !r.Reached {
		return nil
	}
	for i := len(r.Hops) - 1; i >= 0; i-- {
		if r.Hops[i].Destination {
			return &r.Hops[i]
		}
	}
	return nil
}

// usDur is a path run's figure in microseconds as a Duration.
func usDur(us float64) time.Duration { return time.Duration(us * float64(time.Microsecond)) }

// pathLine is a path target's state as a sentence, with the verdict (or
// why the run failed).
func pathLine(t *TargetView, p99, loss, word string) string {
	line := fmt.Sprintf("%s path: destination p99 %s, loss %s — %s", t.Name, p99, loss, word)
	switch {
	case t.LastError != "":
		line += " · " + t.LastError
	case t.Path != nil:
		line += " · " + t.Path.Verdict.Text
	}
	return line
}

// oneLine is a target's verdict as a sentence for 2 a.m.
func oneLine(t *TargetView, f figures, word string) string {
	slo := ""
	if t.SLO > 0 {
		slo = " (SLO " + ms(t.SLO) + ")"
	}
	line := fmt.Sprintf("%s %s: p99 %s%s, loss %s — %s", t.Name, t.Kind, ms(f.p99), slo, pct(f.lastLo, f.lastSent), word)
	if t.LastError != "" {
		line += " · " + t.LastError
	}
	return line
}

func targetSection(t *TargetView, now time.Time) report.Section {
	if t.Kind == "path" {
		return pathSection(t)
	}
	f := figuresOf(t)
	word, st := verdict(t, f)
	sec := report.Section{ID: "target-" + t.Name, Title: t.Name, Badge: word, BadgeStyle: st}
	facts := [][2]string{
		{"probe", fmt.Sprintf("%s to %s every %s", t.Kind, t.Address, t.Interval)},
		{"last hour", fmt.Sprintf("%d sent, %d lost (%s), p99 %s", t.Sent, t.Lost, pct(t.Lost, t.Sent), ms(f.hourP99))},
	}
	if t.SLO > 0 {
		facts = append(facts, [2]string{"objective", "p99 ≤ " + ms(t.SLO)})
	}
	if len(t.Labels) > 0 {
		keys := make([]string, 0, len(t.Labels))
		for k := range t.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var kv []string
		for _, k := range keys {
			kv = append(kv, k+"="+t.Labels[k])
		}
		facts = append(facts, [2]string{"labels", strings.Join(kv, " ")})
	}
	if t.LastError != "" {
		facts = append(facts, [2]string{"failing", t.LastError})
	}
	sec.Facts = facts

	// RTT over the hour: minutes before now on x.
	var lower, upper, mid [][2]float64
	var lostAt []float64
	var lossPts [][2]float64
	for _, sl := range t.Slots {
		x := -now.Sub(sl.Start.Add(SlotWidth / 2)).Minutes()
		if sl.Sent > 0 && sl.Sent > sl.Lost {
			lower = append(lower, [2]float64{x, sl.P50.Seconds() * 1e3})
			upper = append(upper, [2]float64{x, sl.P99.Seconds() * 1e3})
			mid = append(mid, [2]float64{x, sl.P50.Seconds() * 1e3})
		} else {
			nan := [2]float64{x, math.NaN()}
			lower, upper, mid = append(lower, nan), append(upper, nan), append(mid, nan)
		}
		if sl.Lost > 0 {
			lostAt = append(lostAt, x)
		}
		if sl.Sent > 0 {
			lossPts = append(lossPts, [2]float64{x, 100 * float64(sl.Lost) / float64(sl.Sent)})
		}
	}
	rtt := report.Chart{
		Title: "RTT, last hour (per minute)", XLabel: "minutes ago", YLabel: "RTT (ms)", XUnit: "", YUnit: "",
		XMin: -60, XMax: 0, Width: 900, Height: 280,
		Bands:  []report.Band{{Name: "p50 … p99", Lower: lower, Upper: upper, Color: "#1f77b4"}},
		Series: []report.Series{{Name: "p50", Points: mid, Color: "#1f77b4", Breaks: true, Markers: lostAt}},
	}
	if t.SLO > 0 {
		y := t.SLO.Seconds() * 1e3
		rtt.Series = append(rtt.Series, report.Series{Name: "slo p99 " + ms(t.SLO), Points: [][2]float64{{-60, y}, {0, y}}, Color: "#cf222e", Dashed: true})
	}
	cdf := report.Chart{Title: "RTT distribution, last hour", XLabel: "RTT (ms)", YLabel: "fraction ≤ x", LogX: true, Step: true, YMin: 0, YMax: 1, Width: 440, Height: 280}
	if len(t.CDF) > 0 {
		pts := make([][2]float64, 0, len(t.CDF)+1)
		pts = append(pts, [2]float64{t.CDF[0][0] * 1e3 / 1.09, 0})
		for _, c := range t.CDF {
			pts = append(pts, [2]float64{c[0] * 1e3, c[1]})
		}
		cdf.Series = []report.Series{{Name: t.Name, Points: report.Thin(pts, 200), Color: "#1f77b4"}}
	}
	loss := report.Chart{Title: "Loss per minute", XLabel: "minutes ago", YLabel: "lost (%)", XMin: -60, XMax: 0, YMin: 0, YMax: math.Max(5, maxY(lossPts)), Dots: true, Width: 440, Height: 280,
		Series: []report.Series{{Name: "lost %", Points: lossPts, Color: "#cf222e"}}}
	sec.Charts = []report.SectionChart{
		{Chart: rtt, Wide: true, Caption: "Shaded: p50 to p99 of each minute; line: p50; ×: a minute with lost probes; gaps: minutes without replies."},
		{Chart: cdf},
		{Chart: loss},
	}
	return sec
}

// pathSection shows a path target's last run: the verdict and every hop.
func pathSection(t *TargetView) report.Section {
	word, st := pathState(t)
	sec := report.Section{ID: "target-" + t.Name, Title: t.Name, Badge: word, BadgeStyle: st}
	facts := [][2]string{{"probe", fmt.Sprintf("path to %s every %s (%d probes per hop)", t.Address, t.Interval, PathCount)}}
	if r := t.Path; r != nil {
		facts = append(facts, [2]string{"verdict", r.Verdict.Text}, [2]string{"measured", r.Started.Format(time.DateTime) + " UTC"})
		for _, h := range r.Hops {
			v := "no reply"
			if h.Received > 0 {
				v = fmt.Sprintf("%s p50 %s p99 %s loss %.0f%%", h.Address, ms(usDur(h.RTT.P50)), ms(usDur(h.RTT.P99)), h.LossPct)
				if h.RateLimited {
					v += " (rate-limited reply, not on the forwarding path)"
				}
			}
			facts = append(facts, [2]string{"hop " + strconv.Itoa(h.Index), v})
		}
	}
	if t.LastError != "" {
		facts = append(facts, [2]string{"failing", t.LastError})
	}
	sec.Facts = facts
	return sec
}

func maxY(pts [][2]float64) float64 {
	m := 0.0
	for _, p := range pts {
		m = math.Max(m, p[1])
	}
	return m
}

func findingsSection(s *Snapshot) report.Section {
	sec := report.Section{ID: "findings", Title: "Doctor findings"}
	switch {
	case s.DoctorAt.IsZero() && s.DoctorError == "":
		sec.Paragraphs = []string{"The doctor has not run yet (doctor_interval; \"0s\" turns it off)."}
		return sec
	case s.DoctorError != "":
		sec.Badge, sec.BadgeStyle = "DOCTOR FAILED", report.Bad
		sec.Paragraphs = []string{s.DoctorError}
	}
	sec.Facts = [][2]string{{"last run", s.DoctorAt.Format("2006-01-02 15:04:05")}}
	if len(s.Findings) == 0 {
		if sec.Badge == "" {
			sec.Badge, sec.BadgeStyle = "NONE", report.Good
		}
		return sec
	}
	t := &report.Table{Header: []string{"severity", "id", "summary", "fix"}}
	worst := report.Dim
	for _, f := range s.Findings {
		st := map[string]report.Style{"crit": report.Bad, "warn": report.Warn}[f.Severity]
		worst = worse(worst, st)
		t.Add(report.S(f.Severity, st), report.C(f.ID), report.C(f.Summary), report.C(f.Fix))
	}
	sec.Table = t
	if sec.Badge == "" {
		sec.Badge, sec.BadgeStyle = fmt.Sprintf("%d", len(s.Findings)), worst
	}
	return sec
}

func hostSection(s *Snapshot) report.Section {
	sec := report.Section{ID: "host", Title: "Drift and transactions"}
	if s.JournalError != "" {
		sec.Badge, sec.BadgeStyle = "JOURNAL UNREADABLE", report.Bad
		sec.Paragraphs = append(sec.Paragraphs, s.JournalError)
		return sec
	}
	if len(s.Transactions) == 0 {
		sec.Paragraphs = append(sec.Paragraphs, "Nothing applied by lowlat is in force.")
	} else {
		t := &report.Table{Header: []string{"transaction", "profile", "applied", "state", "confirm by"}}
		for _, x := range s.Transactions {
			by, st := "–", report.Plain
			if !x.ConfirmBy.IsZero() {
				by, st = x.ConfirmBy.Format("2006-01-02 15:04:05"), report.Warn
				if s.Now.After(x.ConfirmBy) {
					st = report.Bad
				}
			}
			t.Add(report.C(x.ID), report.C(orDash(x.Profile)), report.C(x.Began.Format("2006-01-02 15:04:05")), report.S(x.State, st), report.S(by, st))
		}
		sec.Table = t
	}
	if len(s.Drift) == 0 {
		sec.Badge, sec.BadgeStyle = "NO DRIFT", report.Good
		return sec
	}
	sec.Badge, sec.BadgeStyle = fmt.Sprintf("%d DRIFTED", len(s.Drift)), report.Bad
	for _, d := range s.Drift {
		sec.Notes = append(sec.Notes, fmt.Sprintf("%s: applied %s, now %s", d.Knob, d.Applied, d.Live))
	}
	sec.Notes = append(sec.Notes, "Re-apply the profile, or 'lowlat rollback' to restore the values from before lowlat.")
	return sec
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// autorateSection is a row per running autorate daemon: where it holds the
// shaper, how loaded, what it changed and what its signals say. A rate at
// the policy's minimum is the known way autorate fails (its signals stop
// answering and it reads silence as bloat): it is marked.
func autorateSection(s *Snapshot) report.Section {
	sec := report.Section{ID: "autorate", Title: "Autorate"}
	t := &report.Table{Header: []string{"device", "shaper", "rate", "policy range", "load", "adjustments", "signals", "updated"}}
	worst := report.Good
	for i := range s.Autorate {
		a := &s.Autorate[i]
		kind := orDash(a.Kind)
		if a.DryRun {
			kind += " (dry run)"
		}
		st, span := report.Plain, "–"
		if p, err := autorate.ParsePolicy(a.Policy); err == nil {
			span = mbit(p.Min) + " … " + mbit(p.Max)
			if a.RateBps <= p.Min+8 { // tbf keeps bytes/s: allow its rounding
				st = report.Warn
			}
		}
		var adj []string
		for _, k := range a.AdjustmentKeys() {
			adj = append(adj, fmt.Sprintf("%s %d", k, a.Adjustments[k]))
		}
		var sigs []string
		healthy := 0
		for _, g := range a.Signals {
			v := g.Name + " " + ms(time.Duration(g.DelaySeconds*1e9))
			if g.Healthy {
				healthy++
			} else {
				v += " (no fresh samples)"
			}
			sigs = append(sigs, v)
		}
		sigStyle := report.Plain
		switch {
		case len(a.Signals) > 0 && healthy == 0:
			sigStyle = report.Bad
		case healthy < len(a.Signals):
			sigStyle = report.Warn
		}
		worst = worse(worst, worse(st, sigStyle))
		updated := "–"
		if !a.Time.IsZero() {
			updated = a.Time.Format(time.TimeOnly)
		}
		t.Add(report.C(a.Device), report.C(kind), report.S(mbit(a.RateBps), st), report.C(span), report.C(fmt.Sprintf("%.0f %%", 100*a.Load)),
			report.C(orDash(strings.Join(adj, " · "))), report.S(orDash(strings.Join(sigs, " · ")), sigStyle), report.C(updated))
	}
	sec.Table = t
	sec.Badge, sec.BadgeStyle = map[report.Style]string{report.Good: "RUNNING", report.Warn: "CHECK", report.Bad: "BLIND"}[worst], worst
	sec.Notes = []string{
		"A rate at the policy's minimum is marked: with unhealthy signals it is autorate reading silence as bloat, not the link.",
		"Backlog and drops of the shaper: node_exporter's node_qdisc_* series.",
	}
	return sec
}

// mbit is a rate in bit/s for people.
func mbit(bps uint64) string {
	if bps < 1e6 {
		return fmt.Sprintf("%.0f kbit/s", float64(bps)/1e3)
	}
	return fmt.Sprintf("%.2f Mbit/s", float64(bps)/1e6)
}
