package cli

import (
	"context"
	"fmt"

	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/report"
	"github.com/lowlat/lowlat/internal/txn"
)

func init() {
	register(&command{name: "rollback", summary: "restore what the last apply changed (also recovers an interrupted apply)", order: 50, run: runRollback})
	register(&command{name: "confirm", summary: "keep a change applied with --confirm (stops its dead-man switch)", order: 45, run: runConfirm})
}

func runRollback(ctx context.Context, env *Env, args []string) error {
	fs := flagSet(env, "rollback", "rollback [--txn ID | --all] [--json] [--journal FILE]")
	id := fs.String("txn", "", "roll back this transaction (must be the newest one in force)")
	all := fs.Bool("all", false, "roll back every transaction in force, newest first")
	asJSON := fs.Bool("json", false, "print JSON")
	jpath := fs.String("journal", "", "journal `file` (default $LOWLAT_JOURNAL or "+journal.DefaultPath+")")
	pos, err := parse(fs, args)
	if err != nil {
		return helpOK(err)
	}
	if err := positional(fs, pos, 0, 0, ""); err != nil {
		return err
	}
	if *id != "" && *all {
		return &ExitError{Code: 2, Err: fmt.Errorf("rollback: --txn and --all are alternatives")}
	}
	if err := requireRoot("rollback"); err != nil {
		return err
	}
	res, err := engine(env, *jpath).Rollback(ctx, txn.RollbackOptions{Txn: *id, All: *all})
	if *asJSON && res != nil {
		report.JSON(env.Stdout, map[string]any{"txn": nullable(res.Txn), "changed": res.Changed, "failed": res.Failed, "notes": res.Notes})
		if err != nil {
			return &ExitError{Code: 1, Err: err}
		}
		return nil
	}
	if res != nil {
		renderResult(env, "Restored", res)
	}
	return err
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func runConfirm(ctx context.Context, env *Env, args []string) error {
	fs := flagSet(env, "confirm", "confirm [--json] [--journal FILE]")
	jpath := fs.String("journal", "", "journal `file`")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args)
	if err != nil {
		return helpOK(err)
	}
	if err := positional(fs, pos, 0, 0, ""); err != nil {
		return err
	}
	if err := requireRoot("confirm"); err != nil {
		return err
	}
	res, err := engine(env, *jpath).Confirm(ctx)
	if err != nil {
		if res != nil && len(res.Failed) > 0 && !*asJSON {
			renderResult(env, "Persisted", res)
		}
		return fmt.Errorf("confirm: %w", err)
	}
	if *asJSON {
		return report.JSON(env.Stdout, map[string]any{"txn": res.Txn, "confirmed": true, "changed": res.Changed})
	}
	if len(res.Changed) > 0 {
		renderResult(env, "Persisted", res)
	}
	fmt.Fprintf(env.Stdout, "Confirmed transaction %s; it stays applied.\n", res.Txn)
	return nil
}
