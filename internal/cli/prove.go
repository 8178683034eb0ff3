package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lowlat/lowlat/internal/gate"
	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/probe"
	"github.com/lowlat/lowlat/internal/report"
)

// proveOptions are prove's flags.
type proveOptions struct {
	txn      string
	baseline string
	json     bool
	journal  string
	gate     gateFlags
}

func newProveCmd(env *Env) *cobra.Command {
	var o proveOptions
	cmd := &cobra.Command{
		Use:   "prove --txn ID --prove \"udp HOST:PORT ...\"",
		Short: "gate a transaction applied with --confirm: measure, then confirm it or roll it back (exit 4)",
		Long: `Gate a transaction already applied with --confirm, as apply --prove does for a new one:
settle, measure with the probe, decide, then confirm the transaction (exit 0) or roll it
back (exit 4). The baseline is --baseline FILE, a result written by 'lowlat probe ... -o
FILE' before the change; without one, the SLO alone decides.`,
		Args: noArgs,
		RunE: runWith(env, &o, runProve),
	}
	f := cmd.Flags()
	f.StringVar(&o.txn, "txn", "", "the transaction to gate (`ID` or a unique prefix); it must await confirmation")
	f.StringVar(&o.baseline, "baseline", "", "the measurement before the change: a JSON `FILE` from 'lowlat probe KIND ... -o FILE' with the same probe")
	f.BoolVar(&o.json, "json", false, "print JSON")
	f.StringVar(&o.journal, "journal", "", "journal `file` (default $LOWLAT_JOURNAL or "+journal.DefaultPath+")")
	o.gate.register(f)
	f.Lookup("settle").DefValue = "0s"
	o.gate.settle = 0
	return cmd
}

func runProve(ctx context.Context, env *Env, o *proveOptions, args []string) error {
	if o.txn == "" {
		return &ExitError{Code: 2, Err: errors.New("prove: --txn is required")}
	}
	if o.gate.prove == "" {
		return &ExitError{Code: 2, Err: errors.New("prove: --prove is required (the probe that measures the change)")}
	}
	g, err := parseGate(env, "prove", o.gate)
	if err != nil {
		return err
	}
	if len(g.slo) == 0 && o.baseline == "" {
		return &ExitError{Code: 2, Err: errors.New("prove: nothing to judge by: give --slo, or --baseline FILE (a 'lowlat probe ... -o FILE' result from before the change)")}
	}
	if g.m.kind == "passive" && o.baseline != "" {
		return &ExitError{Code: 2, Err: errors.New("prove: --baseline: a passive window is measured on this host's traffic, before the change, by apply --prove; prove judges a passive window by --slo alone")}
	}
	var beforeRes any
	var before *gate.Summary
	if o.baseline != "" {
		if beforeRes, before, err = readBaseline(o.baseline, g.m); err != nil {
			return &ExitError{Code: 2, Err: fmt.Errorf("prove: --baseline: %w", err)}
		}
	}
	if err := requireRoot("prove"); err != nil {
		return err
	}
	eng := engine(env, o.journal)
	st, err := journal.ReadState(eng.JournalPath)
	if err != nil {
		return fmt.Errorf("prove: %w", err)
	}
	t, err := st.Find(o.txn)
	if err != nil {
		return fmt.Errorf("prove: %w", err)
	}
	if !t.PendingConfirm() {
		return fmt.Errorf("prove: transaction %s does not await confirmation (%s): only a change applied with --confirm can be gated", t.ID, t.Status)
	}
	if left, need := time.Until(*t.Meta.ConfirmBy), g.settle+g.m.length+10*time.Second; left < need {
		return fmt.Errorf("prove: transaction %s's deadline is in %v, too soon to settle and measure (%v): its watchdog will roll it back", t.ID, left.Round(time.Second), need.Round(time.Second))
	}
	out, err := g.judge(ctx, env, eng, t.ID, beforeRes, before)
	if err != nil {
		return gateErr("prove", err)
	}
	if o.json {
		if err := report.JSON(env.Stdout, map[string]any{"txn": t.ID, "gate": out}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(env.Stdout, "Transaction %s (%s):\n", t.ID, orDash(t.Meta.Profile))
		if err := renderGate(env, out); err != nil {
			return err
		}
	}
	return out.exit()
}

// readBaseline reads a probe result written by 'lowlat probe ... -o FILE'
// and checks it was measured as the gate measures: the same kind of probe,
// the same target and the same probe flags. A baseline measured otherwise
// would make any difference look like the change's.
func readBaseline(path string, m *measurement) (any, *gate.Summary, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	res, err := probe.DecodeResult(b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if k := probe.Kind(res); k != m.kind {
		return nil, nil, fmt.Errorf("%s is a %q result; the gate measures with %q", path, k, m.kind)
	}
	diff, err := probe.ConfigDiff(res, m.config)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(diff) > 0 {
		return nil, nil, fmt.Errorf("%s was measured otherwise than --prove measures (%s)", path, strings.Join(diff, "; "))
	}
	sum, err := gate.Summarize(res)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return res, sum, nil
}
