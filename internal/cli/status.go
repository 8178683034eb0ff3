package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/lowlat/lowlat/internal/gate"
	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/report"
	"github.com/lowlat/lowlat/internal/txn"
)

// ExitDrift is status's exit code when a knob no longer has its applied value.
const ExitDrift = 3

// statusOptions are status's flags.
type statusOptions struct {
	json    bool
	journal string
}

func newStatusCmd(env *Env) *cobra.Command {
	var o statusOptions
	cmd := &cobra.Command{
		Use:   "status",
		Short: "show what lowlat applied and whether anything drifted (exit 3 on drift)",
		Args:  noArgs,
		RunE:  runWith(env, &o, runStatus),
	}
	f := cmd.Flags()
	f.BoolVar(&o.json, "json", false, "print JSON")
	f.StringVar(&o.journal, "journal", "", "journal `file` (default $LOWLAT_JOURNAL or "+journal.DefaultPath+")")
	return cmd
}

func runStatus(ctx context.Context, env *Env, o *statusOptions, args []string) error {
	// As root, status also recovers an apply that was killed part-way.
	rep, err := engine(env, o.journal).Status(ctx, txn.StatusOptions{Recover: os.Geteuid() == 0})
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	if o.json {
		// "moved" says the drift in words ("irq 45 eth0-TxRx-3: applied
		// cpu 4, now cpu 0") next to the raw values.
		out := struct {
			*txn.StatusReport
			Moved []string `json:"moved,omitempty"`
		}{rep, driftWords(rep.Drift)}
		if err := report.JSON(env.Stdout, out); err != nil {
			return err
		}
	} else {
		renderStatus(env, rep)
	}
	// An overdue transaction is drift too: the host is not in the state
	// the journal promises (rolled back by its deadline).
	if len(rep.Drift) > 0 || len(rep.Overdue) > 0 {
		return &ExitError{Code: ExitDrift}
	}
	return nil
}

func renderStatus(env *Env, rep *txn.StatusReport) {
	for _, id := range rep.Recovered {
		fmt.Fprintf(env.Stdout, "%s transaction %s had been interrupted; its changes were restored.\n", report.Paint("Recovered:", report.Warn, env.TTY), id)
	}
	for _, id := range rep.Lost {
		fmt.Fprintf(env.Stdout, "Transaction %s was applied before the last reboot without --persist; the reboot undid it.\n", id)
	}
	for _, id := range rep.PartlyLost {
		fmt.Fprintf(env.Stdout, "Transaction %s was applied before the last reboot without --persist: the reboot put its kernel settings back; its files, drop-ins and services are still in force ('lowlat rollback' restores them).\n", id)
	}
	for _, o := range rep.Overdue {
		fmt.Fprintf(env.Stdout, "%s %s.\n", report.Paint("Overdue:", report.Bad, env.TTY), o)
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(env.Stdout, "note:", n)
	}
	if g := rep.LastGate; g != nil && g.Evidence != nil && !g.Evidence.Keep {
		fmt.Fprintf(env.Stdout, "Last gate: transaction %s (%s, %s) %s\n", g.ID, orDash(g.Profile), g.Began.Local().Format(time.DateTime), evidenceLine(g.Evidence))
	}
	if rep.Txn == nil {
		fmt.Fprintln(env.Stdout, "Nothing applied by lowlat is in force.")
		return
	}
	t := report.Table{Header: []string{"transaction", "profile", "applied", "knobs", "state"}}
	for _, a := range rep.Active {
		state := a.Status
		if a.ConfirmBy != nil && !a.Confirmed {
			state = "awaiting confirm until " + txn.When(*a.ConfirmBy, time.Now())
		}
		if a.Persist {
			state += ", persisted"
		}
		if a.Lost > 0 {
			state += fmt.Sprintf(", %d knob(s) lost at reboot", a.Lost)
		}
		t.AddStrings(a.ID, a.Profile, a.Began.Local().Format(time.DateTime), fmt.Sprint(a.Knobs), state)
	}
	t.Render(env.Stdout, env.TTY)
	for _, a := range rep.Active {
		if a.Evidence != nil {
			fmt.Fprintf(env.Stdout, "applied %s %s: %s\n", a.Began.Local().Format(time.DateTime), orDash(a.Profile), evidenceLine(a.Evidence))
		}
	}
	if len(rep.Drift) == 0 {
		fmt.Fprintf(env.Stdout, "\n%s all %d applied knobs still have their applied values.\n", report.Paint("No drift:", report.Good, env.TTY), rep.Checked)
		return
	}
	fmt.Fprintf(env.Stdout, "\n%s %d knob(s) changed since lowlat applied them:\n", report.Paint("Drift:", report.Bad, env.TTY), len(rep.Drift))
	d := report.Table{Header: []string{"knob", "applied", "now"}}
	for _, x := range rep.Drift {
		d.Add(report.C(x.Knob), report.C(truncate(x.Applied, 50)), report.S(truncate(x.Live, 60), report.Bad))
	}
	d.Render(env.Stdout, env.TTY)
	for _, w := range driftWords(rep.Drift) {
		fmt.Fprintln(env.Stdout, "  moved:", w)
	}
	fmt.Fprintln(env.Stdout, "Re-apply the profile, or 'lowlat rollback' to restore the values from before lowlat.")
}

// evidenceLine says a gate's verdict in one line: the SLO's first metric
// (p99 without an SLO) before and after, and what the gate did
// ("p99 21.4 → 4.1 ms, kept by gate").
func evidenceLine(ev *journal.Evidence) string {
	metric := "p99"
	if slo, err := gate.ParseSLO(ev.SLO); err == nil && len(slo) > 0 {
		metric = slo[0].Metric
	}
	verdict := "rolled back by gate"
	if ev.Keep {
		verdict = "kept by gate"
	}
	a, ok := ev.After[metric]
	if !ok {
		return verdict + ": " + ev.Reason
	}
	if b, ok := ev.Before[metric]; ok {
		return fmt.Sprintf("%s %s, %s", metric, gate.FormatChange(b.Value, a.Value, a.Unit), verdict)
	}
	return fmt.Sprintf("%s %s, %s", metric, gate.Format(a.Value, a.Unit), verdict)
}
