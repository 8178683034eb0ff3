package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/plan"
	"github.com/lowlat/lowlat/internal/profile"
	"github.com/lowlat/lowlat/internal/report"
)

func init() {
	register(&command{name: "plan", summary: "show what a profile would change on this host (or a capture), and why", order: 30, run: runPlan})
}

// planFlags are shared by plan and apply.
type planFlags struct {
	profile string
	ifaces  listFlag
	sets    setFlag
	skips   listFlag
	reserve cpuListFlag
}

func addPlanFlags(fs flagSetLike, pf *planFlags) {
	pf.sets = setFlag{}
	fs.StringVar(&pf.profile, "profile", "", "built-in profile `NAME` or a profile file")
	fs.Var(&pf.ifaces, "iface", "interface(s) for qdisc and route settings (default: those with a default route)")
	fs.Var(pf.sets, "set", "set a parameter or override a setting: `key=value` (repeatable), e.g. rate=2mbit")
	fs.Var(&pf.skips, "skip", "leave a setting of the profile out: `key` (repeatable), e.g. sysfs.kernel/mm/transparent_hugepage/enabled")
	fs.Var(&pf.reserve, "reserve-cpus", "keep these CPUs (`LIST`, e.g. 12-17) for the application: no interrupt goes to them or their SMT siblings")
}

func makePlan(f *host.Facts, pf *planFlags, cmd string) (*plan.Plan, *profile.Resolved, error) {
	if pf.profile == "" {
		return nil, nil, &ExitError{Code: 2, Err: fmt.Errorf("%s: --profile is required (built-in: %v)", cmd, profile.BuiltinNames())}
	}
	p, err := profile.Load(pf.profile)
	if err != nil {
		return nil, nil, err
	}
	r, err := profile.Resolve(p, pf.sets, pf.skips...)
	if err != nil {
		return nil, nil, err
	}
	pl, err := plan.Make(f, r, plan.Options{Ifaces: pf.ifaces, ReserveCPUs: pf.reserve.cpus})
	if err != nil {
		return nil, nil, err
	}
	return pl, r, nil
}

func runPlan(ctx context.Context, env *Env, args []string) error {
	fs := flagSet(env, "plan", "plan --profile NAME [--iface IF]... [--set key=value]... [--from FILE | --root DIR] [--json]")
	var pf planFlags
	addPlanFlags(fs, &pf)
	var src factsSource
	src.register(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args)
	if err != nil {
		return helpOK(err)
	}
	if err := positional(fs, pos, 0, 0, ""); err != nil {
		return err
	}
	f, err := src.load(ctx)
	if err != nil {
		return err
	}
	pl, _, err := makePlan(f, &pf, "plan")
	if err != nil {
		return err
	}
	if *asJSON {
		return report.JSON(env.Stdout, pl)
	}
	return renderPlan(env.Stdout, pl, env.TTY)
}

func renderPlan(w io.Writer, pl *plan.Plan, color bool) error {
	fmt.Fprintf(w, "Plan for profile %s on %s (kernel %s), interfaces: %v\n\n", pl.Profile, orDash(pl.Host.Hostname), pl.Host.Kernel, pl.Ifaces)
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
	_, err := fmt.Fprintf(w, "\n%d to change (~), %d already set (=), %d not possible here (-)\n", set, ok, skip)
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
