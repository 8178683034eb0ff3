package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/persist"
	"github.com/lowlat/lowlat/internal/plan"
	"github.com/lowlat/lowlat/internal/report"
	"github.com/lowlat/lowlat/internal/txn"
	"github.com/lowlat/lowlat/internal/version"
)

func engine(env *Env, journalFlag string) *txn.Engine {
	path := journalPath(env, journalFlag)
	return &txn.Engine{
		JournalPath: path,
		Sys:         knob.Live,
		BootID:      txn.BootID(),
		StartWatchdog: func(id string, deadline time.Time) (int, error) {
			exe, err := os.Executable()
			if err != nil {
				return 0, err
			}
			return txn.SpawnWatchdog(exe, path, id, deadline)
		},
	}
}

// applyOptions are apply's flags.
type applyOptions struct {
	plan        planFlags
	dryRun      bool
	confirm     time.Duration
	persist     bool
	yes         bool
	json        bool
	journal     string
	persistRoot string
}

func newApplyCmd(env *Env) *cobra.Command {
	var o applyOptions
	cmd := &cobra.Command{
		Use:   "apply --profile NAME",
		Short: "apply a profile as one journaled transaction (reversible; --confirm for a dead-man switch)",
		Args:  noArgs,
		RunE:  runWith(env, &o, runApply),
	}
	f := cmd.Flags()
	o.plan.register(f)
	f.BoolVar(&o.dryRun, "dry-run", false, "show what would change and change nothing")
	f.DurationVar(&o.confirm, "confirm", 0, "dead-man switch: roll back automatically unless 'lowlat confirm' runs within this `duration`")
	f.BoolVar(&o.persist, "persist", false, "survive reboots: write /etc/sysctl.d/99-lowlat.conf and a boot unit (journaled, removed by rollback)")
	f.BoolVar(&o.yes, "yes", false, "do not ask before changing the host")
	f.BoolVar(&o.json, "json", false, "print JSON")
	f.StringVar(&o.journal, "journal", "", "journal `file` (default $LOWLAT_JOURNAL or "+journal.DefaultPath+")")
	f.StringVar(&o.persistRoot, "persist-root", "/", "with --persist, write the files below `DIR` instead of / (an image or chroot)")
	return cmd
}

func runApply(ctx context.Context, env *Env, o *applyOptions, args []string) error {
	pf := &o.plan
	if o.confirm < 0 || (o.confirm > 0 && o.confirm < time.Second) || o.confirm > 24*time.Hour {
		return &ExitError{Code: 2, Err: fmt.Errorf("apply: --confirm %v: want 1s..24h", o.confirm)}
	}
	if !o.dryRun {
		if err := requireRoot("apply"); err != nil {
			return err
		}
	}
	src := factsSource{}
	f, err := src.load(ctx)
	if err != nil {
		return err
	}
	pl, r, err := makePlan(f, pf, "apply")
	if err != nil {
		return err
	}
	changes := pl.ToApply()
	var notes []string
	if o.persist {
		exe, _ := os.Executable()
		exe, _ = filepath.Abs(exe)
		var ps []persist.Setting
		for _, c := range pl.Changes {
			if c.Supported && c.Action != plan.Skip {
				ps = append(ps, persist.Setting{Knob: c.Knob, Value: c.Desired})
			}
		}
		files, pnotes := persist.Changes(ps, persist.Options{Profile: r.Name, Exe: exe, Journal: journalPath(env, o.journal), Systemd: f.Systemd, Root: o.persistRoot})
		notes = append(notes, pnotes...)
		for _, fc := range files {
			changes = append(changes, plan.Change{Knob: fc.Knob, Desired: fc.Value, Action: plan.Set, Supported: true, Reason: "persist across reboots"})
		}
	}
	if len(changes) == 0 && !o.dryRun {
		// Nothing to write, but an unfinished or unconfirmed transaction in
		// the journal still needs saying: the host may be half-changed.
		if _, err := engine(env, o.journal).Apply(ctx, nil, journal.Meta{}); err != nil {
			return fmt.Errorf("apply: %w", err)
		}
	}
	if o.dryRun || len(changes) == 0 {
		if o.json {
			return report.JSON(env.Stdout, map[string]any{"txn": nil, "dry_run": o.dryRun, "changed": []txn.Item{}, "failed": []txn.Item{}, "plan": pl})
		}
		if err := renderPlan(env.Stdout, pl, env.TTY); err != nil {
			return err
		}
		if len(changes) == 0 {
			fmt.Fprintln(env.Stdout, "Nothing to change.")
		} else {
			fmt.Fprintf(env.Stdout, "Dry run: %d knob(s) would change; nothing was changed.\n", len(changes))
		}
		return nil
	}
	if !o.yes {
		if !env.TTY {
			return &ExitError{Code: 2, Err: fmt.Errorf("apply: %d change(s) planned; pass --yes to apply without a prompt (nothing was changed)", len(changes))}
		}
		if err := renderPlan(env.Stdout, pl, env.TTY); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "Apply %d change(s)? [y/N] ", len(changes))
		line, _ := bufio.NewReader(env.Stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			return &ExitError{Code: 1, Err: errors.New("apply: cancelled; nothing was changed")}
		}
	}
	meta := journal.Meta{Profile: r.Name, Params: r.Params, Sets: pf.sets, Ifaces: pl.Ifaces, Host: f.Hostname, Tool: version.String(), Args: os.Args, Persist: o.persist}
	var deadline time.Time
	if o.confirm > 0 {
		deadline = time.Now().Add(o.confirm)
		meta.ConfirmBy = &deadline
	}
	var tc []txn.Change
	for _, c := range changes {
		tc = append(tc, txn.Change{Knob: c.Knob, Value: c.Desired})
	}
	eng := engine(env, o.journal)
	res, dropped, err := applyWritable(ctx, eng, tc, meta)
	notes = append(notes, notWritableNotes(dropped)...)
	if err != nil {
		var ae *txn.ApplyError
		if errors.As(err, &ae) && o.json {
			out := map[string]any{"txn": ae.Txn, "changed": []txn.Item{}, "failed": append([]txn.Item{{Knob: ae.Knob, Error: ae.Err.Error()}}, ae.RollbackFailed...), "rolled_back": ae.RolledBack}
			report.JSON(env.Stdout, out)
			return &ExitError{Code: 1}
		}
		return fmt.Errorf("apply: %w", err)
	}
	res.Notes = append(res.Notes, notes...)
	if o.json {
		out := map[string]any{"txn": res.Txn, "changed": res.Changed, "failed": res.Failed, "notes": res.Notes}
		if len(dropped) > 0 {
			out["not_writable"] = dropped
		}
		if o.confirm > 0 {
			out["confirm_by"] = deadline.UTC().Format(time.RFC3339)
		}
		return report.JSON(env.Stdout, out)
	}
	renderResult(env, "Applied", res)
	if o.confirm > 0 {
		fmt.Fprintf(env.Stdout, "%s run 'lowlat confirm' by %s, or everything above is rolled back automatically.\n",
			report.Paint("Unconfirmed:", report.Warn, env.TTY), deadline.Local().Format(time.TimeOnly))
	}
	return nil
}

func renderResult(env *Env, verb string, res *txn.Result) {
	t := report.Table{Header: []string{"knob", "was", "now"}}
	for _, c := range res.Changed {
		t.AddStrings(c.Knob, truncate(c.Before, 50), truncate(c.After, 60))
	}
	for _, c := range res.Failed {
		t.Add(report.S(c.Knob, report.Bad), report.C(truncate(c.After, 50)), report.S("FAILED: "+truncate(c.Error, 80), report.Bad))
	}
	if len(t.Rows) > 0 {
		t.Render(env.Stdout, env.TTY)
	}
	for _, n := range res.Notes {
		fmt.Fprintln(env.Stdout, "note:", n)
	}
	if res.Txn != "" {
		fmt.Fprintf(env.Stdout, "%s %d knob(s) in transaction %s.\n", verb, len(res.Changed), res.Txn)
	} else {
		fmt.Fprintf(env.Stdout, "%s nothing.\n", verb)
	}
}
