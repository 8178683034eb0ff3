package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lowlat/lowlat/internal/autorate"
	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/profile"
	"github.com/lowlat/lowlat/internal/qdisc"
)

// autorateOptions are autorate's flags.
type autorateOptions struct {
	iface      string
	min        string
	base       string
	max        string
	reflectors listFlag
	active     int
	icmp       listFlag
	passive    bool
	threshold  time.Duration
	probeRate  float64
	dryRun     bool
	fromPolicy bool
	journal    string
	runDir     string
}

func newAutorateCmd(env *Env) *cobra.Command {
	var o autorateOptions
	cmd := &cobra.Command{
		Use:   "autorate --iface IF",
		Short: "adaptive egress shaper: follow a capped uplink's real rate and keep the queue here (lowlat-autorate@IF.service)",
		Long: "Owns the rate of the egress shaper the capped-uplink profile installed on IF (cake, or its tbf fallback) and moves it, " +
			"in place, within --min..--max: down when the delay over baseline says a queue is building past the shaper, up again " +
			"under load when it is not. Signals: one-way delay to lowlat reflectors (--reflector, several vote; with --active-reflectors N, " +
			"N of them are probed and the others stand by to replace one that stops answering), ICMP echo RTT " +
			"(--icmp), and, needing no reflector at all, srtt - min_rtt of this host's own busy TCP connections routed out through IF (--passive). " +
			"When every signal goes quiet the rate holds; it never falls to --min because probes stopped answering.\n\n" +
			"The policy (interface, rates, signals) is journaled: 'lowlat status' takes any rate within --min..--max as no drift, " +
			"and 'lowlat rollback' stops the daemon, removes the policy and restores the qdisc exactly. The daemon runs in the " +
			"foreground until interrupted, then sets the shaper back to --base; 'systemctl enable --now lowlat-autorate@IF' runs it " +
			"from the journaled policy (--policy). --dry-run changes nothing and journals nothing: it logs the decisions, also on " +
			"an interface without a shaper yet, to observe a path first.",
		Args: noArgs,
		RunE: runWith(env, &o, runAutorate),
	}
	f := cmd.Flags()
	f.StringVar(&o.iface, "iface", "", "the `interface` whose egress shaper to drive (required)")
	f.StringVar(&o.min, "min", "", "lowest rate (default: a quarter of --base)")
	f.StringVar(&o.base, "base", "", "starting rate, and the rate left when the daemon stops (default: the shaper's rate now)")
	f.StringVar(&o.max, "max", "", "highest rate (default: twice --base)")
	f.Var(&o.reflectors, "reflector", "a lowlat reflector `HOST:PORT` for one-way delay (repeatable; several vote)")
	f.IntVar(&o.active, "active-reflectors", 0, "probe `N` of the --reflector list at a time; the others stand by to replace one that stops answering or whose clock keeps stepping (default: all)")
	f.Var(&o.icmp, "icmp", "a `HOST` to probe with ICMP echo (repeatable)")
	f.BoolVar(&o.passive, "passive", true, "use srtt - min_rtt of this host's own busy TCP connections (needs no reflector)")
	f.DurationVar(&o.threshold, "threshold", autorate.DefaultThreshold, "delay over baseline that counts as bloat (one MTU's time at the current rate is added)")
	f.Float64Var(&o.probeRate, "max-probe-rate", autorate.MaxProbeRate, "active probes per second, all targets together")
	f.BoolVar(&o.dryRun, "dry-run", false, "compute and log decisions; change nothing, journal nothing")
	f.BoolVar(&o.fromPolicy, "policy", false, "run from the journaled policy of --iface (what lowlat-autorate@IF.service does)")
	f.StringVar(&o.journal, "journal", "", "journal `file` (default $LOWLAT_JOURNAL or "+journal.DefaultPath+")")
	f.StringVar(&o.runDir, "run-dir", autorate.RunDir, "`directory` of the state and pid files the monitor and rollback read")
	_ = f.MarkHidden("run-dir")
	return cmd
}

func runAutorate(ctx context.Context, env *Env, o *autorateOptions, _ []string) error {
	bad := func(err error) error { return &ExitError{Code: ExitUsage, Err: err} }
	if o.iface == "" {
		return bad(errors.New("autorate: --iface is required"))
	}
	if o.probeRate <= 0 || o.probeRate > 1000 {
		return bad(fmt.Errorf("autorate: --max-probe-rate %g: want 0 < rate ≤ 1000", o.probeRate))
	}
	shaper, err := autorate.KernelShaper(o.iface)
	if err != nil {
		return bad(err)
	}
	live, shErr := shaper.Read()
	switch {
	case shErr != nil && !o.dryRun:
		return fmt.Errorf("autorate %s: %v: apply the capped-uplink profile first (lowlat apply --profile capped-uplink --set rate=RATE --iface %s); nothing was changed", o.iface, shErr, o.iface)
	case shErr != nil && !errors.Is(shErr, qdisc.ErrNoShaper):
		return fmt.Errorf("autorate %s: %w", o.iface, shErr)
	}

	var pol autorate.Policy
	if o.fromPolicy {
		b, err := os.ReadFile(autorate.PolicyPath(o.iface))
		if err != nil {
			return fmt.Errorf("autorate %s: no journaled policy (%v): run 'lowlat autorate --iface %s ...' once to journal one", o.iface, err, o.iface)
		}
		if pol, err = autorate.ParsePolicy(strings.TrimSpace(string(b))); err != nil {
			return fmt.Errorf("autorate %s: %s: %w", o.iface, autorate.PolicyPath(o.iface), err)
		}
		if pol.Iface != o.iface {
			return fmt.Errorf("autorate %s: %s is the policy of %s", o.iface, autorate.PolicyPath(o.iface), pol.Iface)
		}
	} else {
		if pol, err = o.policy(live.RateBps); err != nil {
			return bad(err)
		}
	}
	if shErr != nil {
		// A dry run on an interface without a shaper: observe only.
		shaper = autorate.CounterShaper(o.iface, pol.Base)
	} else if !o.dryRun && !o.fromPolicy {
		if err := ownShaper(journalPath(env, o.journal), o.iface); err != nil {
			return err
		}
	}

	d, err := autorate.Start(ctx, autorate.Options{Policy: pol, Shaper: shaper, DryRun: o.dryRun, Log: env.Stderr, RunDir: o.runDir, MaxProbeRate: o.probeRate})
	if err != nil {
		return err
	}
	if !o.dryRun && !o.fromPolicy {
		// Journal the policy: a rollback stops the daemon and removes it
		// before it restores the qdisc.
		ao := &applyOptions{plan: planFlags{inline: autorateProfile(pol), ifaces: listFlag{o.iface}, sets: setFlag{}}, yes: true, journal: o.journal}
		if err := runApply(ctx, env, ao, nil); err != nil {
			return fmt.Errorf("autorate %s: journal the policy: %w", o.iface, err)
		}
	}
	return d.Run(ctx)
}

// policy builds the policy from the flags; rates default from the shaper's
// rate now.
func (o *autorateOptions) policy(live uint64) (autorate.Policy, error) {
	p := autorate.Policy{Iface: o.iface, Reflectors: o.reflectors, Active: o.active, ICMP: o.icmp, Passive: o.passive, Threshold: o.threshold}
	rate := func(flag, v string, def uint64) (uint64, error) {
		if v == "" {
			return def, nil
		}
		r, err := qdisc.ParseRate(v)
		if err != nil {
			return 0, fmt.Errorf("autorate: --%s %q: %v", flag, v, err)
		}
		return r, nil
	}
	var err error
	if p.Base, err = rate("base", o.base, live); err != nil {
		return p, err
	}
	if p.Base == 0 {
		return p, fmt.Errorf("autorate %s: give --base (the interface has no shaper rate to start from)", o.iface)
	}
	if p.Min, err = rate("min", o.min, max(p.Base/4, autorate.MinRate)); err != nil {
		return p, err
	}
	if p.Max, err = rate("max", o.max, 2*p.Base); err != nil {
		return p, err
	}
	return p, p.Check()
}

// ownShaper checks that the shaper autorate is to drive is lowlat's: a
// transaction in force installed the root qdisc of iface. Moving the rate
// of someone else's shaper could not be rolled back.
func ownShaper(path, iface string) error {
	st, err := journal.ReadState(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("autorate %s: read journal %s: %w", iface, path, err)
	}
	id := "qdisc/" + iface + "/root"
	if st != nil {
		for _, t := range st.Active() {
			for _, in := range t.Intents {
				if in.Knob == id {
					return nil
				}
			}
		}
	}
	return fmt.Errorf("autorate %s: the root qdisc of %s is not lowlat's (no transaction in force installed it): apply the capped-uplink profile first (lowlat apply --profile capped-uplink --set rate=RATE --iface %s); nothing was changed", iface, iface, iface)
}

// autorateProfile is the profile the journaled policy is applied through:
// one [autorate.policy] setting.
func autorateProfile(p autorate.Policy) *profile.Profile {
	v := strings.TrimPrefix(p.String(), "iface="+p.Iface+" ")
	return &profile.Profile{
		Name:    "autorate",
		Summary: "lowlat autorate's policy for " + p.Iface,
		Params:  map[string]profile.Param{},
		Settings: []profile.Setting{{
			Key: "autorate.policy", Section: "autorate", Name: "policy", Value: v,
			Why:    "lowlat autorate moves the shaper's rate within this policy; the moving rate is not journaled, the policy is",
			Source: "lowlat autorate", Pos: profile.Pos{File: "lowlat autorate"},
		}},
	}
}
