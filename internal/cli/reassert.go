package cli

import (
	"context"
	"fmt"

	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/report"
)

func init() {
	register(&command{name: "reassert", summary: "put back applied interrupt affinity, queue, NIC and irqbalance settings that moved (run by lowlat-reassert.timer)", order: 82, run: runReassert})
}

func runReassert(ctx context.Context, env *Env, args []string) error {
	fs := flagSet(env, "reassert", "reassert [--journal FILE] [--json]")
	jpath := fs.String("journal", "", "journal `file` (default $LOWLAT_JOURNAL or "+journal.DefaultPath+")")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args)
	if err != nil {
		return helpOK(err)
	}
	if err := positional(fs, pos, 0, 0, ""); err != nil {
		return err
	}
	if err := requireRoot("reassert"); err != nil {
		return err
	}
	res, err := engine(env, *jpath).Reassert(ctx)
	if err != nil {
		return fmt.Errorf("reassert: %w", err)
	}
	if *asJSON {
		if err := report.JSON(env.Stdout, res); err != nil {
			return err
		}
	} else {
		for _, n := range res.Notes {
			fmt.Fprintln(env.Stdout, "note:", n)
		}
		if res.Skipped != "" {
			fmt.Fprintln(env.Stdout, "Skipped:", res.Skipped)
		}
		for _, m := range res.Moved {
			fmt.Fprintln(env.Stdout, "put back:", orDash(m.Moved), "("+m.Knob+")")
		}
		for _, m := range res.Failed {
			fmt.Fprintf(env.Stdout, "%s %s: %s\n", report.Paint("FAILED:", report.Bad, env.TTY), m.Knob, m.Error)
		}
		fmt.Fprintf(env.Stdout, "Checked %d knob(s): %d had moved and were put back, %d failed.\n", res.Checked, len(res.Moved)-len(res.Failed), len(res.Failed))
	}
	if len(res.Failed) > 0 {
		return &ExitError{Code: 1}
	}
	return nil
}

