package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/persist"
	"github.com/lowlat/lowlat/internal/report"
)

// reassertItem is one knob the re-assertion looked at and found moved.
type reassertItem struct {
	Knob    string `json:"knob"`
	Applied string `json:"applied"`
	Live    string `json:"live"`
	// Moved says it in words ("irq 45 eth0-TxRx-3: applied cpu 4, now cpu 0").
	Moved string `json:"moved,omitempty"`
	Error string `json:"error,omitempty"`
}

type reassertResult struct {
	Checked int            `json:"checked"`
	Moved   []reassertItem `json:"moved"`
	Failed  []reassertItem `json:"failed"`
	// Skipped says why nothing was looked at this round.
	Skipped string `json:"skipped,omitempty"`
}

// reassertOptions are reassert's flags.
type reassertOptions struct {
	journal string
	json    bool
}

func newReassertCmd(env *Env) *cobra.Command {
	var o reassertOptions
	cmd := &cobra.Command{
		Use:   "reassert",
		Short: "put back applied interrupt affinity, queue, NIC and irqbalance settings that moved (run by lowlat-reassert.timer)",
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
	res, err := reassert(ctx, engine(env, o.journal).Sys, journalPath(env, o.journal))
	if err != nil {
		return fmt.Errorf("reassert: %w", err)
	}
	if o.json {
		if err := report.JSON(env.Stdout, res); err != nil {
			return err
		}
	} else {
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

// reassert writes back the applied value of every knob of the kinds that
// other software moves (interrupt affinity, queue steering, NIC settings, the
// irqbalance service), in the transactions in force. It holds the journal
// lock, so it never runs during an apply or rollback, and writes nothing to
// the journal: the values from before lowlat stay the ones a rollback
// restores.
func reassert(ctx context.Context, sys *knob.System, path string) (*reassertResult, error) {
	res := &reassertResult{Moved: []reassertItem{}, Failed: []reassertItem{}}
	j, err := journal.Open(path, journal.ReadWrite)
	if errors.Is(err, journal.ErrLocked) {
		res.Skipped = "an apply or rollback holds the journal; the next round will look"
		return res, nil
	}
	if err != nil {
		return nil, err
	}
	defer j.Close()
	st, err := j.Load()
	if err != nil {
		return nil, err
	}
	if st.Torn != nil || len(st.Incomplete()) > 0 {
		res.Skipped = "the journal has an interrupted transaction: run 'lowlat rollback' first"
		return res, nil
	}
	applied := map[string]string{}
	var order []string
	for _, t := range st.Active() {
		if t.Status != journal.Applied {
			continue
		}
		for _, in := range t.Intents {
			if !persist.Reasserted[knob.Kind(in.Knob)] {
				continue
			}
			if _, seen := applied[in.Knob]; !seen {
				order = append(order, in.Knob)
			}
			applied[in.Knob] = in.After
		}
	}
	for _, id := range order {
		want := applied[id]
		k, err := knob.New(sys, id)
		if err != nil {
			res.Failed = append(res.Failed, reassertItem{Knob: id, Applied: want, Error: err.Error()})
			continue
		}
		live, err := k.Read(ctx)
		res.Checked++
		if err == nil && k.Satisfied(live, want) {
			continue
		}
		it := reassertItem{Knob: id, Applied: want, Live: live, Moved: knob.Describe(id, want, live)}
		if err == nil {
			err = k.Write(ctx, want)
		}
		if err == nil {
			err = knob.Verify(ctx, k, want)
		}
		if err != nil {
			it.Error = err.Error()
			res.Failed = append(res.Failed, it)
		}
		res.Moved = append(res.Moved, it)
	}
	return res, nil
}
