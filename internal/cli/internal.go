package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/lowlat/lowlat/internal/report"
)

func init() {
	register(&command{name: "__watchdog", hidden: true, run: runWatchdog})
	register(&command{name: "boot", summary: "at boot: roll back unconfirmed changes, re-apply persisted qdisc, route, NIC and interrupt settings (run by lowlat-boot.service)", order: 80, run: runBoot})
}

// runWatchdog is the detached dead-man process started by apply --confirm.
func runWatchdog(ctx context.Context, env *Env, args []string) error {
	fs := flagSet(env, "__watchdog", "__watchdog --journal FILE --txn ID --deadline RFC3339")
	jpath := fs.String("journal", "", "journal file")
	id := fs.String("txn", "", "transaction")
	dl := fs.String("deadline", "", "deadline")
	if _, err := parse(fs, args); err != nil {
		return helpOK(err)
	}
	deadline, err := time.Parse(time.RFC3339Nano, *dl)
	if err != nil || *id == "" || *jpath == "" {
		return &ExitError{Code: 2, Err: fmt.Errorf("__watchdog: needs --journal, --txn and --deadline")}
	}
	// The apply that spawned this watchdog is its parent until it exits:
	// the one process the watchdog may stop if it still holds the journal
	// at the deadline.
	applyPID := os.Getppid()
	// SIGTERM from 'lowlat confirm' cancels ctx: exit quietly, change kept.
	_, err = engine(env, *jpath).Watchdog(ctx, *id, deadline, applyPID)
	if err == context.Canceled {
		return nil
	}
	return err
}

func runBoot(ctx context.Context, env *Env, args []string) error {
	fs := flagSet(env, "boot", "boot [--journal FILE] [--json]")
	jpath := fs.String("journal", "", "journal `file`")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args); err != nil {
		return helpOK(err)
	}
	if err := requireRoot("boot"); err != nil {
		return err
	}
	res, err := engine(env, *jpath).Boot(ctx)
	if res != nil {
		if *asJSON {
			report.JSON(env.Stdout, res)
		} else {
			renderResult(env, "Re-applied", res)
		}
	}
	return err
}
