package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/report"
	"github.com/lowlat/lowlat/internal/txn"
)

// rollbackOptions are rollback's flags.
type rollbackOptions struct {
	txn     string
	all     bool
	json    bool
	journal string
}

func newRollbackCmd(env *Env) *cobra.Command {
	var o rollbackOptions
	cmd := &cobra.Command{
		Use:   "rollback",
		Short: "restore what the last apply changed (also recovers an interrupted apply)",
		Args:  noArgs,
		RunE:  runWith(env, &o, runRollback),
	}
	f := cmd.Flags()
	f.StringVar(&o.txn, "txn", "", "roll back this transaction (must be the newest one in force)")
	f.BoolVar(&o.all, "all", false, "roll back every transaction in force, newest first")
	f.BoolVar(&o.json, "json", false, "print JSON")
	f.StringVar(&o.journal, "journal", "", "journal `file` (default $LOWLAT_JOURNAL or "+journal.DefaultPath+")")
	return cmd
}

func runRollback(ctx context.Context, env *Env, o *rollbackOptions, args []string) error {
	if o.txn != "" && o.all {
		return &ExitError{Code: 2, Err: fmt.Errorf("rollback: --txn and --all are alternatives")}
	}
	if err := requireRoot("rollback"); err != nil {
		return err
	}
	res, err := engine(env, o.journal).Rollback(ctx, txn.RollbackOptions{Txn: o.txn, All: o.all})
	if o.json && res != nil {
		report.JSON(env.Stdout, map[string]any{"txn": nullable(res.Txn), "changed": len(res.Changed) > 0, "changes": res.Changed, "failed": res.Failed, "gone": res.Gone, "inexact": res.Inexact, "rolled_back": res.RolledBack, "notes": res.Notes})
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

// confirmOptions are confirm's flags.
type confirmOptions struct {
	journal string
	json    bool
}

func newConfirmCmd(env *Env) *cobra.Command {
	var o confirmOptions
	cmd := &cobra.Command{
		Use:   "confirm",
		Short: "keep a change applied with --confirm (stops its dead-man switch)",
		Args:  noArgs,
		RunE:  runWith(env, &o, runConfirm),
	}
	f := cmd.Flags()
	f.StringVar(&o.journal, "journal", "", "journal `file`")
	f.BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

func runConfirm(ctx context.Context, env *Env, o *confirmOptions, args []string) error {
	if err := requireRoot("confirm"); err != nil {
		return err
	}
	res, err := engine(env, o.journal).Confirm(ctx)
	if err != nil {
		if res != nil && len(res.Failed) > 0 && !o.json {
			renderResult(env, "Persisted", res)
		}
		return fmt.Errorf("confirm: %w", err)
	}
	if o.json {
		return report.JSON(env.Stdout, map[string]any{"txn": res.Txn, "confirmed": true, "changed": len(res.Changed) > 0, "changes": res.Changed})
	}
	if len(res.Changed) > 0 {
		renderResult(env, "Persisted", res)
	}
	fmt.Fprintf(env.Stdout, "Confirmed transaction %s; it stays applied.\n", res.Txn)
	return nil
}
