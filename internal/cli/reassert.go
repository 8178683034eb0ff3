package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/report"
)

// reassertOptions are reassert's flags.
type reassertOptions struct {
	journal string
	json    bool
}

func newReassertCmd(env *Env) *cobra.Command {
	var o reassertOptions
	cmd := &cobra.Command{
		Use:   "reassert",
		Short: "put back applied interrupt affinity, queue, NIC and irqbalance settings that moved, and attach sock_ops programs a service restart detached (run by lowlat-reassert.timer)",
		Args:  noArgs,
		RunE:  runWith(env, &o, runReassert),
	}
	f := cmd.Flags()
	f.StringVar(&o.journal, "journal", "", "journal `file` (default $LOWLAT_JOURNAL or "+journal.DefaultPath+")")
	f.BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

func runReassert(ctx context.Context, env *Env, o *reassertOptions, args []string) error {
	if err := requireRoot("reassert"); err != nil {
		return err
	}
	res, err := engine(env, o.journal).Reassert(ctx)
	if err != nil {
		return fmt.Errorf("reassert: %w", err)
	}
	if o.json {
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
