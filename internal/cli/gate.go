package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/lowlat/lowlat/internal/gate"
	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/report"
	"github.com/lowlat/lowlat/internal/txn"
)

// ExitGateRolledBack is the exit code of a gated apply (or prove) whose
// measurement did not keep the change: it was rolled back, exactly, and the
// host is as it was.
const ExitGateRolledBack = 4

// gateFlags are the flags of a measured gate (apply --prove, prove).
type gateFlags struct {
	prove   string
	slo     string
	sloOnly bool
	settle  time.Duration
}

func (g *gateFlags) register(f *pflag.FlagSet) {
	f.StringVar(&g.prove, "prove", "", "gate the change on a measurement: a probe as for 'lowlat probe' (`\"udp HOST:PORT [flags]\"`, or tcp, crr, load; \"icmp HOST [flags]\" toward a host without a reflector), run before and after; keep only if it is not worse (exit 4 when rolled back)")
	f.StringVar(&g.slo, "slo", "", "with --prove, what the change must achieve: `TERMS` like \"p99<=8ms,loss<=1%\" (metric OP value), judged beside 'not worse than the baseline' on p50, p99, loss and errors")
	f.BoolVar(&g.sloOnly, "slo-only", false, "with --slo, judge by the SLO's terms alone, not also 'not worse' on p50, p99, loss and errors (for a change that trades one figure for another on purpose)")
	f.DurationVar(&g.settle, "settle", 5*time.Second, "with --prove, wait this long after the change before measuring again")
}

// gateRun is a parsed gate: the probe to run and what to judge by.
type gateRun struct {
	m      *measurement
	policy gate.Policy
	// hold, when set (apply --hold), is how long a change the gate keeps
	// waits for 'lowlat confirm' after the decision, instead of being
	// confirmed by the gate.
	hold time.Duration
	gateFlags
}

// parseGate checks the gate's flags before anything is measured or changed;
// nil when there is no --prove.
func parseGate(env *Env, cmd string, g gateFlags) (*gateRun, error) {
	if g.prove == "" {
		switch {
		case g.slo != "":
			return nil, &ExitError{Code: 2, Err: fmt.Errorf("%s: --slo needs --prove (the probe that measures it)", cmd)}
		case g.sloOnly:
			return nil, &ExitError{Code: 2, Err: fmt.Errorf("%s: --slo-only needs --prove and --slo", cmd)}
		}
		return nil, nil
	}
	m, err := parseMeasurement(env, cmd+": --prove", g.prove)
	if err != nil {
		return nil, err
	}
	slo, err := gate.ParseSLO(g.slo)
	if err == nil {
		err = slo.Check(m.kind)
	}
	if err != nil {
		return nil, &ExitError{Code: 2, Err: fmt.Errorf("%s: --slo %q: %v", cmd, g.slo, err)}
	}
	if g.sloOnly && len(slo) == 0 {
		return nil, &ExitError{Code: 2, Err: fmt.Errorf("%s: --slo-only needs --slo (the terms to judge by)", cmd)}
	}
	if g.settle < 0 {
		return nil, &ExitError{Code: 2, Err: fmt.Errorf("%s: --settle %v: must not be negative", cmd, g.settle)}
	}
	return &gateRun{m: m, policy: gate.Policy{SLO: slo, SLOOnly: g.sloOnly}, gateFlags: g}, nil
}

// gateMargin is what the dead-man deadline leaves beyond settling and one
// measurement: the probe's own connect and close timeouts (5 s each), the
// decision, and a slow host.
const gateMargin = 30 * time.Second

// minConfirm is the shortest dead-man deadline that leaves the gate time to
// settle, measure and decide: if lowlat dies or hangs past it, the change
// reverts by itself.
func (g *gateRun) minConfirm() time.Duration {
	return g.settle + g.m.length + gateMargin
}

// measure runs the gate's probe once, with a progress bar.
func (g *gateRun) measure(ctx context.Context, env *Env, label string) (any, *gate.Summary, error) {
	stop := progress(env, "gate: "+label, g.m.length)
	res, err := g.m.run(ctx)
	stop()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: probe %s: %w", label, g.m.kind, err)
	}
	sum, err := gate.Summarize(res)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", label, err)
	}
	return res, sum, nil
}

// baseline measures before the change. A baseline without a single reply
// is an error, not a measurement: nothing is changed against it.
func (g *gateRun) baseline(ctx context.Context, env *Env) (any, *gate.Summary, error) {
	res, sum, err := g.measure(ctx, env, "baseline")
	switch {
	case err != nil:
	case g.m.samples != nil && g.m.samples(res) < g.m.minSamples:
		// No traffic, no proof: nothing is changed on a guess.
		err = &ExitError{Code: ExitGateRolledBack, Err: fmt.Errorf("%w; nothing was changed", tooFew("baseline", g.m.samples(res), g.m.minSamples))}
	case !sum.Has("p50"):
		err = fmt.Errorf("baseline: probe %s: no replies from %s (is 'lowlat reflector' running there, and reachable?)", g.m.kind, sum.Target)
	}
	return res, sum, err
}

// gateOutcome is what a gate did, for the report and --json.
type gateOutcome struct {
	Probe   string      `json:"probe"`
	SLO     string      `json:"slo,omitempty"`
	Keep    bool        `json:"keep"`
	Verdict string      `json:"verdict"`
	Reason  string      `json:"reason"`
	Rows    []gate.Row  `json:"rows"`
	Before  any         `json:"before"`
	After   any         `json:"after"`
	Result  *txn.Result `json:"result,omitempty"`
	// Rollback is, when the gate rolled the change back, what that did.
	Rollback *rollbackSummary `json:"rollback,omitempty"`
	// Notes say what the probe's figures cannot tell.
	Notes []string `json:"notes,omitempty"`
	// Held is a kept change left awaiting 'lowlat confirm' (apply --hold),
	// under its dead-man switch until ConfirmBy.
	Held      bool       `json:"held,omitempty"`
	ConfirmBy *time.Time `json:"confirm_by,omitempty"`
}

// judge settles, measures after the change, decides, journals the evidence
// and confirms or rolls back transaction id (or, with g.hold, re-arms a kept
// one's deadline to g.hold from now and leaves it awaiting confirmation). before is the baseline (nil:
// judge on the SLO alone). It returns the outcome, and an error when the
// gate itself failed (the transaction is then rolled back too).
func (g *gateRun) judge(ctx context.Context, env *Env, eng *txn.Engine, id string, beforeRes any, before *gate.Summary) (*gateOutcome, error) {
	fail := func(err error) (*gateOutcome, error) {
		// A gate that cannot decide does not keep the change.
		_, rerr := eng.Rollback(context.WithoutCancel(ctx), txn.RollbackOptions{Txn: id, Reason: "gate failed: " + err.Error()})
		if rerr != nil {
			return nil, fmt.Errorf("%w; and the rollback failed: %v (run 'lowlat rollback')", err, rerr)
		}
		if errors.Is(err, context.Canceled) {
			return nil, &ExitError{Code: 130, Err: fmt.Errorf("interrupted; transaction %s rolled back", id)}
		}
		return nil, fmt.Errorf("%w; transaction %s rolled back", err, id)
	}
	if g.settle > 0 {
		select {
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(g.settle):
		}
	}
	afterRes, after, err := g.measure(ctx, env, "after")
	var v gate.Verdict
	switch {
	case err != nil && ctx.Err() != nil:
		return fail(err)
	case err != nil:
		// The probe that measured the baseline fails with the change in
		// force: the change may have cut the path. That is a verdict
		// against the change, not a gate that could not decide.
		v = gate.Verdict{Reason: "the probe failed with the change in force: " + err.Error()}
	case g.m.samples != nil && g.m.samples(afterRes) < g.m.minSamples:
		v = gate.Verdict{Reason: tooFew("after the change", g.m.samples(afterRes), g.m.minSamples).Error()}
	default:
		v = gate.Decide(before, after, g.policy)
	}
	out := &gateOutcome{Probe: g.prove, SLO: g.gateFlags.slo, Keep: v.Keep, Reason: v.Reason, Rows: v.Rows, Before: beforeRes, After: afterRes, Notes: g.m.notes}
	if g.m.compare != nil && beforeRes != nil && afterRes != nil {
		out.Notes = append(out.Notes[:len(out.Notes):len(out.Notes)], g.m.compare(beforeRes, afterRes)...)
	}
	if r, ok := afterRes.(interface{ GateNotes() []string }); ok {
		out.Notes = append(out.Notes[:len(out.Notes):len(out.Notes)], r.GateNotes()...)
	}
	ev := journal.Evidence{Probe: g.prove, SLO: g.gateFlags.slo, Keep: v.Keep, Reason: v.Reason}
	if after != nil {
		ev.After = figures(after)
	}
	if before != nil {
		ev.Before = figures(before)
	}
	if err := eng.RecordEvidence(id, ev); err != nil {
		return fail(fmt.Errorf("journal the evidence: %w", err))
	}
	if v.Keep && g.hold > 0 {
		out.Verdict = "kept"
		by, err := eng.Rearm(context.WithoutCancel(ctx), id, time.Now().Add(g.hold))
		if err != nil {
			return fail(fmt.Errorf("hold for confirmation: %w", err))
		}
		out.Held, out.ConfirmBy = true, &by
		return out, nil
	}
	if v.Keep {
		out.Verdict = "kept"
		res, err := eng.ConfirmTxn(context.WithoutCancel(ctx), id)
		out.Result = res
		if err != nil {
			return fail(fmt.Errorf("confirm: %w", err))
		}
		return out, nil
	}
	out.Verdict = "rolled back"
	res, err := eng.Rollback(context.WithoutCancel(ctx), txn.RollbackOptions{Txn: id, Reason: "gate: " + v.Reason})
	out.Result = res
	out.Rollback = rollbackOutcome(res)
	if err != nil {
		return out, fmt.Errorf("rolled back by the gate, but: %w", err)
	}
	return out, nil
}

// rollbackSummary is what a gate's rollback did to each knob: restored
// exactly, restored but not exactly (the previous value could not be
// recreated), or gone (its device vanished), and any it could not restore.
type rollbackSummary struct {
	Exact   int        `json:"exact"`
	Inexact []txn.Item `json:"inexact"`
	Gone    []txn.Item `json:"gone"`
	Failed  []txn.Item `json:"failed"`
}

func rollbackOutcome(res *txn.Result) *rollbackSummary {
	if res == nil {
		return nil
	}
	return &rollbackSummary{Exact: len(res.Changed), Inexact: orEmpty(res.Inexact), Gone: orEmpty(res.Gone), Failed: orEmpty(res.Failed)}
}

func orEmpty(xs []txn.Item) []txn.Item {
	if xs == nil {
		return []txn.Item{}
	}
	return xs
}

// line is the rollback's outcome in one sentence.
func (r *rollbackSummary) line() string {
	parts := []string{fmt.Sprintf("%d knob(s) restored exactly", r.Exact)}
	for _, x := range []struct {
		what  string
		items []txn.Item
	}{{"not exact", r.Inexact}, {"gone", r.Gone}, {"NOT restored", r.Failed}} {
		if len(x.items) == 0 {
			continue
		}
		var names []string
		for _, it := range x.items {
			n := it.Knob
			if it.Error != "" {
				n += " (" + it.Error + ")"
			}
			names = append(names, n)
		}
		parts = append(parts, fmt.Sprintf("%d %s: %s", len(x.items), x.what, strings.Join(names, "; ")))
	}
	return strings.Join(parts, "; ")
}

// figures is a summary as the journal keeps it.
func figures(s *gate.Summary) map[string]journal.Figure {
	out := map[string]journal.Figure{}
	for name, m := range s.Metrics {
		out[name] = journal.Figure{Value: m.Value, Lo: m.Lo, Hi: m.Hi, Unit: m.Unit}
	}
	return out
}

// renderGate prints the before / after / SLO / verdict table and the verdict.
func renderGate(env *Env, o *gateOutcome) error {
	fmt.Fprintf(env.Stdout, "\nGate (%s", o.Probe)
	if o.SLO != "" {
		fmt.Fprintf(env.Stdout, ", SLO %s", o.SLO)
	}
	fmt.Fprintln(env.Stdout, "):")
	if len(o.Rows) == 0 {
		return renderVerdict(env, o)
	}
	t := report.Table{Header: []string{"metric", "before", "after", "SLO", "verdict"}}
	for _, r := range (gate.Verdict{Rows: o.Rows}).Table() {
		st := report.Plain
		switch {
		case r[4] == gate.Worse || r[4] == gate.Violated:
			st = report.Bad
		case r[4] == gate.Better:
			st = report.Good
		}
		cells := make([]report.Cell, len(r))
		for i, c := range r {
			cells[i] = report.C(c)
			if i == len(r)-1 {
				cells[i] = report.S(c, st)
			}
		}
		t.Add(cells...)
	}
	if err := t.Render(env.Stdout, env.TTY); err != nil {
		return err
	}
	return renderVerdict(env, o)
}

// renderVerdict prints what the figures cannot tell, the gate's decision
// and, when it rolled the change back, what the rollback did.
func renderVerdict(env *Env, o *gateOutcome) error {
	for _, n := range o.Notes {
		fmt.Fprintf(env.Stdout, "note: %s\n", n)
	}
	if o.Keep {
		fmt.Fprintf(env.Stdout, "%s %s\n", report.Paint("Kept by the gate:", report.Good, env.TTY), o.Reason)
		if o.Held {
			fmt.Fprintf(env.Stdout, "%s held: run 'lowlat confirm' by %s, or it is rolled back automatically.\n",
				report.Paint("Unconfirmed:", report.Warn, env.TTY), txn.When(*o.ConfirmBy, time.Now()))
		}
	} else {
		fmt.Fprintf(env.Stdout, "%s %s\n", report.Paint("Rolled back by the gate:", report.Bad, env.TTY), o.Reason)
		if o.Rollback != nil {
			st := report.Good
			if len(o.Rollback.Inexact)+len(o.Rollback.Gone)+len(o.Rollback.Failed) > 0 {
				st = report.Warn
			}
			fmt.Fprintf(env.Stdout, "%s %s\n", report.Paint("Rollback:", st, env.TTY), o.Rollback.line())
		}
	}
	return nil
}

// exit is the gate's exit status: nil when it kept the change, exit 4 when it
// rolled it back (nil outcome: no gate).
func (o *gateOutcome) exit() error {
	if o == nil || o.Keep {
		return nil
	}
	return &ExitError{Code: ExitGateRolledBack}
}

// gateErr reports a gate that failed as cmd's error, keeping an exit code
// the gate chose (130 when interrupted).
func gateErr(cmd string, err error) error {
	var ee *ExitError
	if errors.As(err, &ee) {
		return &ExitError{Code: ee.Code, Err: fmt.Errorf("%s: %w", cmd, ee.Err)}
	}
	return fmt.Errorf("%s: gate: %w", cmd, err)
}
