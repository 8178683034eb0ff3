package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/plan"
	"github.com/lowlat/lowlat/internal/profile"
	"github.com/lowlat/lowlat/internal/report"
)

// planFlags are shared by plan, apply, pin and doctor.
type planFlags struct {
	profile string
	ifaces  listFlag
	sets    setFlag
	skips   listFlag
	reserve cpuListFlag
	// inline is a profile made by a command ('sockets --fix') instead of
	// one named by --profile.
	inline *profile.Profile
}

func (pf *planFlags) register(fs *pflag.FlagSet) {
	pf.sets = setFlag{}
	fs.StringVar(&pf.profile, "profile", "", "built-in profile `NAME` or a profile file")
	fs.Var(&pf.ifaces, "iface", "`interface`(s) for qdisc and route settings (default: those with a default route)")
	fs.Var(pf.sets, "set", "set a parameter or override a setting: `key=value` (repeatable), e.g. rate=2mbit")
	fs.Var(&pf.skips, "skip", "leave a setting of the profile out: `key` (repeatable), e.g. sysfs.kernel/mm/transparent_hugepage/enabled")
	fs.Var(&pf.reserve, "reserve-cpus", "keep these CPUs (`LIST`, e.g. 12-17) for the application: no interrupt goes to them or their SMT siblings")
}

func makePlan(ctx context.Context, f *host.Facts, pf *planFlags, cmd string) (*plan.Plan, *profile.Resolved, error) {
	p := pf.inline
	if p == nil {
		if pf.profile == "" {
			return nil, nil, &ExitError{Code: 2, Err: fmt.Errorf("%s: --profile is required (built-in: %v)", cmd, profile.BuiltinNames())}
		}
		var err error
		if p, err = profile.Load(pf.profile); err != nil {
			return nil, nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("%s: %w", cmd, err)}
		}
	}
	// A profile, a --set or a --skip that does not fit is bad input.
	r, err := profile.Resolve(p, pf.sets, pf.skips...)
	if err != nil {
		return nil, nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("%s: %w", cmd, err)}
	}
	if r.Has("sockets") {
		host.GatherSockOps(ctx, f, r.SocketSelectors()...)
	}
	if r.ClampsMSS() {
		host.GatherMSSClamp(f)
	}
	pl, err := plan.Make(f, r, plan.Options{Ifaces: pf.ifaces, ReserveCPUs: pf.reserve.cpus})
	if errors.Is(err, plan.ErrUnknownInterface) {
		return nil, nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("%s: %w", cmd, err)}
	}
	if err != nil {
		return nil, nil, err
	}
	return pl, r, nil
}

// planOptions are plan's flags.
type planOptions struct {
	plan planFlags
	src  factsSource
	json bool
}

func newPlanCmd(env *Env) *cobra.Command {
	var o planOptions
	cmd := &cobra.Command{
		Use:   "plan --profile NAME",
		Short: "show what a profile would change on this host (or a capture), and why",
		Args:  noArgs,
		RunE:  runWith(env, &o, runPlan),
	}
	f := cmd.Flags()
	o.plan.register(f)
	o.src.register(f)
	f.BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

func runPlan(ctx context.Context, env *Env, o *planOptions, args []string) error {
	f, err := o.src.load(ctx)
	if err != nil {
		return err
	}
	pl, _, err := makePlan(ctx, f, &o.plan, "plan")
	if err != nil {
		return err
	}
	if o.json {
		return report.JSON(env.Stdout, planJSON(pl))
	}
	return renderPlan(env.Stdout, pl, env.TTY)
}

// planOut is plan --json: the plan, whether applying it would change the
// host, and the knobs it would set as Ansible's diff mode reads them (a
// list of before/after pairs, one per knob, headed by the knob).
type planOut struct {
	*plan.Plan
	Changed bool       `json:"changed"`
	Diff    []knobDiff `json:"diff"`
}

type knobDiff struct {
	BeforeHeader string `json:"before_header"`
	AfterHeader  string `json:"after_header"`
	Before       string `json:"before"`
	After        string `json:"after"`
}

func planJSON(pl *plan.Plan) planOut {
	out := planOut{Plan: pl, Diff: []knobDiff{}}
	for _, c := range pl.ToApply() {
		out.Diff = append(out.Diff, knobDiff{BeforeHeader: c.Knob, AfterHeader: c.Knob, Before: c.Current + "\n", After: c.Desired + "\n"})
	}
	out.Changed = len(out.Diff) > 0
	return out
}

func renderPlan(w io.Writer, pl *plan.Plan, color bool) error {
	fmt.Fprintf(w, "Plan for profile %s on %s (kernel %s), interfaces: %v\n\n", pl.Profile, orDash(pl.Host.Hostname), orUnknown(pl.Host.Kernel), pl.Ifaces)
	t := report.Table{Header: []string{"", "knob", "current", "desired", "reason"}}
	for _, c := range pl.Changes {
		mark, st := "~", report.Warn
		switch c.Action {
		case plan.OK:
			mark, st = "=", report.Good
		case plan.Skip:
			mark, st = "-", report.Dim
		}
		reason := c.Reason
		if c.Note != "" {
			reason += " [" + c.Note + "]"
		}
		t.Add(report.S(mark, st), report.C(c.Knob), report.C(truncate(c.Current, 48)), report.S(truncate(c.Desired, 48), st), report.C(truncate(reason, 110)))
	}
	if err := t.Render(w, color); err != nil {
		return err
	}
	set, ok, skip := pl.Counts()
	if _, err := fmt.Fprintf(w, "\n%d to change (~), %d already set (=), %d not possible here (-)\n", set, ok, skip); err != nil {
		return err
	}
	for _, n := range persistWarnings(pl) {
		if _, err := fmt.Fprintln(w, "Note:", n); err != nil {
			return err
		}
	}
	return nil
}

// persistWarnings are the plan's sysctls that an apply --persist would not
// keep across a reboot, and why.
func persistWarnings(pl *plan.Plan) []string {
	var out []string
	for _, c := range pl.Changes {
		if c.Persist != "" {
			out = append(out, c.Knob+": "+c.Persist)
		}
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
