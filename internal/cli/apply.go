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

	"github.com/lowlat/lowlat/internal/gate"
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
		StartWatchdog: func(id string, deadline time.Time) (txn.Watchdog, error) {
			exe, err := lowlatExecutable()
			if err != nil {
				return txn.Watchdog{}, err
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
	force       bool
	hold        bool
	gate        gateFlags
}

// maxConfirm is the longest dead-man deadline apply accepts: a canary's
// window of a day or more, its judge and a margin, with the change held
// under the switch (--hold) until the judge passes. The watchdog reads the
// wall clock at least once a minute (txn.WatchdogTick), so a deadline days
// away is not pushed back by a suspend, and a reboot before it rolls the
// change back at boot however far away it is.
const maxConfirm = 8 * 24 * time.Hour

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
	f.DurationVar(&o.confirm, "confirm", 0, "dead-man switch: roll back automatically unless 'lowlat confirm' runs within this `duration` (at most 192h; with --hold, counted from the gate's decision)")
	f.BoolVar(&o.persist, "persist", false, "survive reboots: write /etc/sysctl.d/zz-lowlat-<txn>.conf and a boot unit (journaled, removed by rollback; with --confirm, written at confirm)")
	f.BoolVar(&o.force, "force", false, "replace settings lowlat cannot recreate exactly (a qdisc with filters on its root); their rollback leaves the kernel's default")
	f.BoolVar(&o.yes, "yes", false, "do not ask before changing the host")
	f.BoolVar(&o.json, "json", false, "print JSON")
	f.StringVar(&o.journal, "journal", "", "journal `file` (default $LOWLAT_JOURNAL or "+journal.DefaultPath+")")
	f.StringVar(&o.persistRoot, "persist-root", "/", "with --persist, write the files below `DIR` instead of / (an image or chroot)")
	o.gate.register(f)
	f.BoolVar(&o.hold, "hold", false, "with --prove and --confirm: a change the gate keeps is not confirmed but held under its dead-man switch, re-armed to --confirm from the gate's decision, until 'lowlat confirm' keeps it (a canary awaiting its judge)")
	return cmd
}

func runApply(ctx context.Context, env *Env, o *applyOptions, args []string) error {
	pf := &o.plan
	if o.confirm < 0 || (o.confirm > 0 && o.confirm < time.Second) || o.confirm > maxConfirm {
		return &ExitError{Code: 2, Err: fmt.Errorf("apply: --confirm %v: want 1s..192h (8 days)", o.confirm)}
	}
	g, err := parseGate(env, "apply", o.gate)
	if err != nil {
		return err
	}
	switch {
	case o.hold && g == nil:
		return &ExitError{Code: 2, Err: errors.New("apply: --hold needs --prove: it holds a change the gate keeps (without a gate, --confirm already waits for 'lowlat confirm')")}
	case o.hold && o.confirm == 0:
		return &ExitError{Code: 2, Err: errors.New("apply: --hold needs --confirm DURATION: how long a change the gate keeps waits for 'lowlat confirm', from the gate's decision")}
	case o.hold:
		// The gate measures under a deadline of its own; a change it keeps
		// is then held until --confirm after its decision.
		g.hold, o.confirm = o.confirm, g.minConfirm()
	case g != nil:
		// The gate applies under the dead-man switch: if lowlat dies or the
		// host stops answering while it measures, the change reverts.
		switch need := g.minConfirm(); {
		case o.confirm == 0:
			o.confirm = need
		case o.confirm < need:
			return &ExitError{Code: 2, Err: fmt.Errorf("apply: --confirm %v is shorter than the gate needs (%v: --settle, one measurement and 30 s to decide)", o.confirm, need.Round(time.Second))}
		}
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
	pl, r, err := makePlan(ctx, f, pf, "apply")
	if err != nil {
		return err
	}
	changes := pl.ToApply()
	var notes []string
	var settings []persist.Setting
	for _, c := range pl.Changes {
		if c.Supported && c.Action != plan.Skip {
			settings = append(settings, persist.Setting{Knob: c.Knob, Value: c.Desired})
		}
	}
	eng := engine(env, o.journal)
	id := eng.NewID()
	persistFiles := o.persist
	if o.persist && len(changes) == 0 {
		// Idempotence: the host already has every setting, and a
		// transaction in force of this profile already persists them. A
		// second run writes nothing (its files would only differ by the
		// transaction's name).
		if by := persistedBy(ctx, eng, r.Name); by != "" {
			persistFiles = false
			notes = append(notes, fmt.Sprintf("already applied and persisted by transaction %s", by))
		}
	}
	// Files that outlive a reboot: with --confirm they wait for 'lowlat
	// confirm' (Deferred), so nothing unconfirmed comes back at boot, and a
	// guard unit rolls the transaction back at boot when it holds changes
	// that survive a reboot by themselves.
	var deferred []journal.Change
	if persistFiles || (o.confirm > 0 && !o.dryRun) {
		exe, err := lowlatExecutable()
		if err != nil {
			return fmt.Errorf("apply: %w (nothing was changed)", err)
		}
		po := persist.Options{ID: id, Profile: r.Name, Exe: exe, Journal: journalPath(env, o.journal), Systemd: f.Systemd, Root: o.persistRoot}
		add := func(files []persist.Change, why string) {
			for _, fc := range files {
				changes = append(changes, plan.Change{Knob: fc.Knob, Desired: fc.Value, Action: plan.Set, Supported: true, Reason: why})
			}
		}
		if o.confirm > 0 {
			var applying []persist.Setting
			for _, c := range changes {
				applying = append(applying, persist.Setting{Knob: c.Knob, Value: c.Desired})
			}
			guard, gnotes := persist.Guard(applying, po)
			notes = append(notes, gnotes...)
			add(guard, "roll back at boot unless confirmed")
		}
		if persistFiles {
			files, pnotes := persist.Changes(settings, po)
			notes = append(notes, pnotes...)
			notes = append(notes, persistWarnings(pl)...)
			if o.confirm > 0 {
				for _, fc := range files {
					deferred = append(deferred, journal.Change{Knob: fc.Knob, Value: fc.Value})
				}
				if len(files) > 0 {
					notes = append(notes, fmt.Sprintf("--persist: the %d file(s) that make this survive a reboot are written by 'lowlat confirm'", len(files)))
				}
			} else {
				add(files, "persist across reboots")
			}
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
			return report.JSON(env.Stdout, map[string]any{"txn": nil, "dry_run": o.dryRun, "changed": false, "changes": []txn.Item{}, "failed": []txn.Item{}, "plan": planJSON(pl), "notes": notes})
		}
		if err := renderPlan(env.Stdout, pl, env.TTY); err != nil {
			return err
		}
		for _, n := range notes {
			fmt.Fprintln(env.Stdout, "Note:", n)
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
	var gateBefore any
	var gateBaseline *gate.Summary
	if g != nil {
		if gateBefore, gateBaseline, err = g.baseline(ctx, env); err != nil {
			if errors.Is(err, context.Canceled) {
				return &ExitError{Code: 130, Err: errors.New("apply: interrupted during the baseline; nothing was changed")}
			}
			return fmt.Errorf("apply: %w (nothing was changed)", err)
		}
	}
	meta := journal.Meta{Profile: r.Name, Params: r.Params, Sets: pf.sets, Ifaces: pl.Ifaces, Host: f.Hostname, Tool: version.String(), Args: os.Args, Persist: o.persist, Deferred: deferred, Force: o.force}
	var deadline time.Time
	if o.confirm > 0 {
		deadline = time.Now().Add(o.confirm)
		meta.ConfirmBy = &deadline
	}
	var tc []txn.Change
	for _, c := range changes {
		tc = append(tc, txn.Change{Knob: c.Knob, Value: c.Desired})
	}
	res, err := eng.ApplyAs(ctx, id, tc, meta)
	if err != nil {
		var ae *txn.ApplyError
		if errors.As(err, &ae) && o.json {
			out := map[string]any{"txn": ae.Txn, "changed": false, "changes": []txn.Item{}, "failed": append([]txn.Item{{Knob: ae.Knob, Error: ae.Err.Error()}}, ae.RollbackFailed...), "rolled_back": ae.RolledBack}
			report.JSON(env.Stdout, out)
			return &ExitError{Code: 1}
		}
		return fmt.Errorf("apply: %w", err)
	}
	dropped := res.Skipped
	res.Notes = append(res.Notes, notes...)
	res.Notes = append(res.Notes, notWritableNotes(dropped)...)
	var verdict *gateOutcome
	if g != nil {
		if verdict, err = g.judge(ctx, env, eng, res.Txn, gateBefore, gateBaseline); err != nil {
			return gateErr("apply", err)
		}
	}
	if o.json {
		// changed is whether the host ends up changed (Ansible's meaning):
		// not when the gate rolled the change back.
		out := map[string]any{"txn": res.Txn, "changed": len(res.Changed) > 0 && (verdict == nil || verdict.Keep), "changes": res.Changed, "failed": res.Failed, "notes": res.Notes}
		if len(dropped) > 0 {
			out["not_writable"] = dropped
		}
		if res.Watchdog != nil {
			out["watchdog"] = res.Watchdog
		}
		switch {
		case o.confirm > 0 && verdict == nil:
			out["confirm_by"] = deadline.UTC().Format(time.RFC3339)
		case verdict != nil && verdict.ConfirmBy != nil:
			out["confirm_by"] = verdict.ConfirmBy.UTC().Format(time.RFC3339)
		}
		if verdict != nil {
			out["gate"] = verdict
		}
		if err := report.JSON(env.Stdout, out); err != nil {
			return err
		}
		return verdict.exit()
	}
	renderResult(env, "Applied", res)
	if verdict != nil {
		if err := renderGate(env, verdict); err != nil {
			return err
		}
		return verdict.exit()
	}
	if o.confirm > 0 {
		fmt.Fprintf(env.Stdout, "%s run 'lowlat confirm' by %s, or everything above is rolled back automatically.\n",
			report.Paint("Unconfirmed:", report.Warn, env.TTY), deadline.Local().Format(time.TimeOnly))
	}
	return nil
}

// lowlatExecutable is the absolute path of the running binary, which the boot
// and watchdog units run: it must exist under that name after this process
// ends.
func lowlatExecutable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the lowlat binary for the boot unit: %w", err)
	}
	if strings.HasSuffix(exe, " (deleted)") {
		return "", fmt.Errorf("the running lowlat binary %s was replaced or deleted: run the installed one", strings.TrimSuffix(exe, " (deleted)"))
	}
	return filepath.Abs(exe)
}

func renderResult(env *Env, verb string, res *txn.Result) {
	t := report.Table{Header: []string{"knob", "was", "now"}}
	for _, c := range res.Changed {
		t.AddStrings(c.Knob, truncate(c.Before, 50), truncate(c.After, 60))
	}
	for _, c := range res.Failed {
		t.Add(report.S(c.Knob, report.Bad), report.C(truncate(c.After, 50)), report.S("FAILED: "+truncate(c.Error, 80), report.Bad))
	}
	for _, c := range res.Gone {
		t.Add(report.C(c.Knob), report.C(truncate(c.Before, 50)), report.S("not restored: "+truncate(c.Error, 80), report.Warn))
	}
	for _, c := range res.Inexact {
		t.Add(report.C(c.Knob), report.C(truncate(c.Before, 50)), report.S("not exact: "+truncate(c.Error, 80), report.Warn))
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

// persistedBy returns the newest transaction in force that applied profile
// with --persist, or "".
func persistedBy(ctx context.Context, eng *txn.Engine, profile string) string {
	rep, err := eng.Status(ctx, txn.StatusOptions{Peek: true})
	if err != nil {
		return ""
	}
	for i := len(rep.Active) - 1; i >= 0; i-- {
		if a := rep.Active[i]; a.Persist && a.Profile == profile {
			return a.ID
		}
	}
	return ""
}
