package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/lowlat/lowlat/internal/report"
	"github.com/lowlat/lowlat/internal/txn"
)

// watchdogOptions are the flags txn.SpawnWatchdog passes.
type watchdogOptions struct {
	journal  string
	txn      string
	deadline string
}

func newWatchdogCmd(env *Env) *cobra.Command {
	var o watchdogOptions
	cmd := &cobra.Command{
		Use:    "__watchdog --journal FILE --txn ID --deadline RFC3339",
		Short:  "the dead-man process of apply --confirm (started by lowlat itself)",
		Hidden: true,
		Args:   noArgs,
		RunE:   runWith(env, &o, runWatchdog),
	}
	f := cmd.Flags()
	f.StringVar(&o.journal, "journal", "", "journal file")
	f.StringVar(&o.txn, "txn", "", "transaction")
	f.StringVar(&o.deadline, "deadline", "", "deadline")
	return cmd
}

// runWatchdog is the detached dead-man process started by apply --confirm.
func runWatchdog(ctx context.Context, env *Env, o *watchdogOptions, args []string) error {
	deadline, err := time.Parse(time.RFC3339Nano, o.deadline)
	if err != nil || o.txn == "" || o.journal == "" {
		return &ExitError{Code: 2, Err: fmt.Errorf("__watchdog: needs --journal, --txn and --deadline")}
	}
	// The apply that spawned this watchdog is its parent until it exits:
	// the one process the watchdog may stop if it still holds the journal
	// at the deadline.
	applyPID := os.Getppid()
	// Started in lowlat's own cgroup (no systemd here), it leaves it and
	// removes it as it exits; the next apply --confirm removes one that a
	// kill -9 left.
	defer txn.LeaveWatchdogCgroup(o.txn)
	// SIGTERM from 'lowlat confirm' cancels ctx: exit quietly, change kept.
	_, err = engine(env, o.journal).Watchdog(ctx, o.txn, deadline, applyPID)
	if err == context.Canceled {
		return nil
	}
	return err
}

// bootOptions are boot's flags.
type bootOptions struct {
	journal string
	json    bool
}

func newBootCmd(env *Env) *cobra.Command {
	var o bootOptions
	cmd := &cobra.Command{
		Use:   "boot",
		Short: "at boot: roll back unconfirmed changes, re-apply persisted qdisc, route, NIC and interrupt settings (run by lowlat-boot.service)",
		Args:  noArgs,
		RunE:  runWith(env, &o, runBoot),
	}
	f := cmd.Flags()
	f.StringVar(&o.journal, "journal", "", "journal `file`")
	f.BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

func runBoot(ctx context.Context, env *Env, o *bootOptions, args []string) error {
	if err := requireRoot("boot"); err != nil {
		return err
	}
	res, err := engine(env, o.journal).Boot(ctx)
	if res != nil {
		if o.json {
			report.JSON(env.Stdout, res)
		} else {
			renderResult(env, "Re-applied", res)
		}
	}
	return err
}
