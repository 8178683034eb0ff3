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

	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/persist"
	"github.com/lowlat/lowlat/internal/plan"
	"github.com/lowlat/lowlat/internal/report"
	"github.com/lowlat/lowlat/internal/txn"
	"github.com/lowlat/lowlat/internal/version"
)

func init() {
	register(&command{name: "apply", summary: "apply a profile as one journaled transaction (reversible; --confirm for a dead-man switch)", order: 40, run: runApply})
}

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

func runApply(ctx context.Context, env *Env, args []string) error {
	fs := flagSet(env, "apply", "apply --profile NAME [--iface IF]... [--set key=value]... [--dry-run] [--confirm 120s] [--persist] [--yes] [--json]")
	var pf planFlags
	addPlanFlags(fs, &pf)
	dry := fs.Bool("dry-run", false, "show what would change and change nothing")
	confirm := fs.Duration("confirm", 0, "dead-man switch: roll back automatically unless 'lowlat confirm' runs within this `duration`")
	persistFlag := fs.Bool("persist", false, "survive reboots: write /etc/sysctl.d/99-lowlat.conf and a boot unit (journaled, removed by rollback)")
	yes := fs.Bool("yes", false, "do not ask before changing the host")
	asJSON := fs.Bool("json", false, "print JSON")
	jpath := fs.String("journal", "", "journal `file` (default $LOWLAT_JOURNAL or "+journal.DefaultPath+")")
	persistRoot := fs.String("persist-root", "/", "with --persist, write the files below `DIR` instead of / (an image or chroot)")
	pos, err := parse(fs, args)
	if err != nil {
		return helpOK(err)
	}
	if err := positional(fs, pos, 0, 0, ""); err != nil {
		return err
	}
	if *confirm < 0 || (*confirm > 0 && *confirm < time.Second) || *confirm > 24*time.Hour {
		return &ExitError{Code: 2, Err: fmt.Errorf("apply: --confirm %v: want 1s..24h", *confirm)}
	}
	if !*dry {
		if err := requireRoot("apply"); err != nil {
			return err
		}
	}
	src := factsSource{}
	f, err := src.load(ctx)
	if err != nil {
		return err
	}
	pl, r, err := makePlan(f, &pf, "apply")
	if err != nil {
		return err
	}
	changes := pl.ToApply()
	var notes []string
	if *persistFlag {
		exe, _ := os.Executable()
		exe, _ = filepath.Abs(exe)
		var ps []persist.Setting
		for _, c := range pl.Changes {
			if c.Supported && c.Action != plan.Skip {
				ps = append(ps, persist.Setting{Knob: c.Knob, Value: c.Desired})
			}
		}
		files, pnotes := persist.Changes(ps, persist.Options{Profile: r.Name, Exe: exe, Journal: journalPath(env, *jpath), Systemd: f.Systemd, Root: *persistRoot})
		notes = append(notes, pnotes...)
		for _, fc := range files {
			changes = append(changes, plan.Change{Knob: fc.Knob, Desired: fc.Value, Action: plan.Set, Supported: true, Reason: "persist across reboots"})
		}
	}
	if len(changes) == 0 && !*dry {
		// Nothing to write, but an unfinished or unconfirmed transaction in
		// the journal still needs saying: the host may be half-changed.
		if _, err := engine(env, *jpath).Apply(ctx, nil, journal.Meta{}); err != nil {
			return fmt.Errorf("apply: %w", err)
		}
	}
	if *dry || len(changes) == 0 {
		if *asJSON {
			return report.JSON(env.Stdout, map[string]any{"txn": nil, "dry_run": *dry, "changed": []txn.Item{}, "failed": []txn.Item{}, "plan": pl})
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
	if !*yes {
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
	meta := journal.Meta{Profile: r.Name, Params: r.Params, Sets: pf.sets, Ifaces: pl.Ifaces, Host: f.Hostname, Tool: version.String(), Args: os.Args, Persist: *persistFlag}
	var deadline time.Time
	if *confirm > 0 {
		deadline = time.Now().Add(*confirm)
		meta.ConfirmBy = &deadline
	}
	var tc []txn.Change
	for _, c := range changes {
		tc = append(tc, txn.Change{Knob: c.Knob, Value: c.Desired})
	}
	eng := engine(env, *jpath)
	res, dropped, err := applyWritable(ctx, eng, tc, meta)
	notes = append(notes, notWritableNotes(dropped)...)
	if err != nil {
		var ae *txn.ApplyError
		if errors.As(err, &ae) && *asJSON {
			out := map[string]any{"txn": ae.Txn, "changed": []txn.Item{}, "failed": append([]txn.Item{{Knob: ae.Knob, Error: ae.Err.Error()}}, ae.RollbackFailed...), "rolled_back": ae.RolledBack}
			report.JSON(env.Stdout, out)
			return &ExitError{Code: 1}
		}
		return fmt.Errorf("apply: %w", err)
	}
	res.Notes = append(res.Notes, notes...)
	if *asJSON {
		out := map[string]any{"txn": res.Txn, "changed": res.Changed, "failed": res.Failed, "notes": res.Notes}
		if len(dropped) > 0 {
			out["not_writable"] = dropped
		}
		if *confirm > 0 {
			out["confirm_by"] = deadline.UTC().Format(time.RFC3339)
		}
		return report.JSON(env.Stdout, out)
	}
	renderResult(env, "Applied", res)
	if *confirm > 0 {
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
