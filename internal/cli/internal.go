package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/lowlat/lowlat/internal/report"
)

func init() {
	register(&command{name: "__watchdog", hidden: true, run: runWatchdog})
	register(&command{name: "boot", summary: "re-apply persisted qdisc, route and sysfs settings (run by lowlat-boot.service)", order: 80, run: runBoot})
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
	// SIGTERM from 'lowlat confirm' cancels ctx: exit quietly, change kept.
	_, err = engine(env, *jpath).Watchdog(ctx, *id, deadline)
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
	res, err := engine(env, *jpath).Reapply(ctx)
	if res != nil {
		if *asJSON {
			report.JSON(env.Stdout, res)
		} else {
			renderResult(env, "Re-applied", res)
		}
	}
	return err
}
