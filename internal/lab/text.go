package lab

import (
	"fmt"
	"io"
	"strings"

	"github.com/lowlat/lowlat/internal/report"
)

// Verdicts in the text table.
const (
	VerdictPass   = "PASS"
	VerdictFail   = "FAIL"
	VerdictNotRun = "NOT RUN"
	VerdictInfo   = "-"
)

// Row is one line of the before/after table.
type Row struct {
	Scenario, Variant, Metric, Before, After, Expectation, Verdict string
}

// Rows flattens a result into table rows: each variant's expectations, then
// the scenario's key metrics it has no expectation on.
func Rows(r *Result) []Row {
	sc, _ := Lookup(r.Scenario)
	var key []Expect
	if sc != nil {
		key = sc.Key
	}
	var rows []Row
	var base map[string]any
	if len(r.Variants) > 0 && r.Variants[0].Status == StatusRan {
		base = flatten(r.Variants[0].Metrics)
	}
	for i, v := range r.Variants {
		flat := flatten(v.Metrics)
		covered := map[string]bool{}
		if v.Status != StatusRan {
			exp := []string{}
			for _, e := range v.Expectations {
				exp = append(exp, e.Desc)
			}
			rows = append(rows, Row{r.Scenario, v.Name, "-", "-", "-", strings.Join(exp, "; "), VerdictNotRun})
			continue
		}
		for _, e := range v.Expectations {
			covered[e.Metric] = true
			row := Row{Scenario: r.Scenario, Variant: v.Name, Metric: e.Metric, Expectation: expString(e), Verdict: VerdictFail}
			if e.Pass {
				row.Verdict = VerdictPass
			}
			if e.Versus != "" {
				row.Metric = e.Metric + " (" + e.Versus + " − this)"
				if e.Before != nil && e.Observed != nil {
					row.Before = fval(*e.Before, e.Unit)
					row.After = fval(*e.Before-*e.Observed, e.Unit)
				}
				row.Expectation = "saved " + row.Expectation
				if e.Observed != nil {
					row.Expectation += " (saved " + fval(*e.Observed, e.Unit) + ")"
				}
			} else {
				row.Before, row.After = beforeAfter(i, e.Before, e.Observed, e.Unit)
			}
			rows = append(rows, row)
		}
		for _, k := range key {
			if covered[k.Metric] {
				continue
			}
			x, ok := lookup(flat, k.Metric)
			if !ok {
				continue
			}
			var b *float64
			if y, ok := lookup(base, k.Metric); ok && i > 0 {
				b = &y
			}
			before, after := beforeAfter(i, b, &x, k.Unit)
			rows = append(rows, Row{r.Scenario, v.Name, k.Metric, before, after, "", VerdictInfo})
		}
	}
	return rows
}

// beforeAfter: the baseline's own value is its "before"; a fix shows the
// baseline's value before and its own after.
func beforeAfter(i int, before, observed *float64, unit string) (string, string) {
	if i == 0 {
		if observed == nil {
			return "-", ""
		}
		return fval(*observed, unit), ""
	}
	b, a := "-", "-"
	if before != nil {
		b = fval(*before, unit)
	}
	if observed != nil {
		a = fval(*observed, unit)
	}
	return b, a
}

func expString(e ExpectResult) string {
	x := Expect{Op: e.Op, Unit: e.Unit}
	switch v := e.Value.(type) {
	case float64:
		x.Value = v
	case []float64:
		x.Value, x.Max = v[0], v[1]
	case []any:
		if len(v) == 2 {
			x.Value, _ = v[0].(float64)
			x.Max, _ = v[1].(float64)
		}
	}
	if strings.HasPrefix(x.Unit, "of ") {
		x.Value *= 100
		x.Max *= 100
		x.Unit = "% " + x.Unit
	}
	return x.String()
}

func fval(x float64, unit string) string {
	if strings.HasPrefix(unit, "of ") {
		return fnum(x*100) + " %"
	}
	if unit == "" {
		return fnum(x)
	}
	return fnum(x) + " " + unit
}

// WriteText renders a result for people: what ran where, the before/after
// table, the notes, and the verdict.
func WriteText(w io.Writer, r *Result, color bool) error {
	fmt.Fprintf(w, "%s (runbook %s): %s\n", r.Scenario, r.Runbook, r.Title)
	env := r.Environment
	if env == "qemu-tcg" {
		env = "a stock kernel under qemu (TCG)"
	}
	fmt.Fprintf(w, "kernel %s on %s; senders start with %s\n", r.Kernel.Version, env, r.Congestion)
	if len(r.Kernel.Missing) > 0 {
		fmt.Fprintf(w, "%s this kernel lacks %s: the run below is the variant it can do (notes say what differs)\n",
			report.Paint("DEGRADED:", report.Warn, color), strings.Join(r.Kernel.Missing, ", "))
	}
	fmt.Fprintln(w)
	t := report.Table{Header: []string{"scenario", "variant", "metric", "before", "after", "expectation", "verdict"}}
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
		t.Add(report.C(row.Scenario), report.C(row.Variant), report.C(row.Metric), report.C(row.Before), report.C(row.After), report.C(row.Expectation), report.S(row.Verdict, st))
	}
	if err := t.Render(w, color); err != nil {
		return err
	}
	var gates []string
	for i := range r.Variants {
		if l := gateLine(&r.Variants[i]); l != "" {
			gates = append(gates, l)
		}
	}
	if len(gates) > 0 {
		fmt.Fprintln(w)
		for _, l := range gates {
			fmt.Fprintln(w, "gate:", l)
		}
	}
	notes := notes(r)
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintln(w, "note:", n)
		}
	}
	fmt.Fprintln(w)
	total, failed := 0, 0
	var misses []string
	for _, v := range r.Variants {
		for _, e := range v.Expectations {
			total++
			if !e.Pass {
				failed++
				misses = append(misses, v.Name+": "+e.Desc)
			}
		}
	}
	if r.Pass {
		_, err := fmt.Fprintf(w, "%s all %d expectations held (%.0f s).\n", report.Paint("PASS:", report.Good, color), total, r.Seconds)
		return err
	}
	_, err := fmt.Fprintf(w, "%s %d of %d expectations missed: %s\n", report.Paint("FAIL:", report.Bad, color), failed, total, strings.Join(misses, "; "))
	return err
}
