package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/plan"
	"github.com/lowlat/lowlat/internal/profile"
	"github.com/lowlat/lowlat/internal/sockets"
	"github.com/lowlat/lowlat/internal/sockops"
)

// fixOptions are the flags of 'sockets --fix': the options to enforce on a
// port's connections, and how to apply them.
type fixOptions struct {
	fix     listFlag
	cgroup  string
	service string
	confirm time.Duration
	persist bool
	yes     bool
	dryRun  bool
	journal string
}

// fixProfile is the profile 'sockets --fix OPT --port N' stands for: one
// [[sockets]] block, so it is planned, journaled, verified and rolled back
// exactly as the same block in a profile file.
func fixProfile(fixes []string, port int, cgroup, service string) (*profile.Profile, error) {
	var sels []string
	if port != 0 {
		sels = append(sels, fmt.Sprintf("port:%d", port))
	}
	if cgroup != "" {
		sels = append(sels, "cgroup:"+cgroup)
	}
	if service != "" {
		sels = append(sels, "service:"+service)
	}
	if len(sels) != 1 {
		return nil, fmt.Errorf("--fix needs --port N (the connections a server accepts on it), or --cgroup PATH or --service NAME (the connections their processes open): one of them")
	}
	sel, err := sockops.ParseSelector(sels[0])
	if err != nil {
		return nil, fmt.Errorf("--fix: %w", err)
	}
	p := &profile.Profile{
		Name:    "sockets-fix",
		Summary: "lowlat sockets --fix " + strings.Join(fixes, ",") + " for " + sel.String(),
		Params:  map[string]profile.Param{},
	}
	seen := map[sockops.Option]bool{}
	for _, f := range fixes {
		for _, item := range strings.Split(f, ",") {
			name, val, hasVal := strings.Cut(item, "=")
			opt, err := sockops.ParseOption(name)
			if err != nil {
				return nil, fmt.Errorf("--fix %s: %w", item, err)
			}
			if !hasVal {
				if opt != sockops.NoDelay {
					return nil, fmt.Errorf("--fix %s: give a value (%s=VALUE)", item, name)
				}
				val = "1"
			}
			if err := opt.CheckValue(val); err != nil {
				return nil, fmt.Errorf("--fix %s: %w", item, err)
			}
			if seen[opt] {
				return nil, fmt.Errorf("--fix: %s given twice", opt)
			}
			seen[opt] = true
			name = sel.String() + "/" + opt.String()
			p.Settings = append(p.Settings, profile.Setting{
				Key: "sockets." + name, Section: "sockets", Name: name, Value: opt.Canon(val),
				Why: opt.Doc(), Source: "lowlat sockets --fix", Pos: profile.Pos{File: "--fix " + item},
			})
		}
	}
	return p, nil
}

// runFix applies 'sockets --fix' through apply.
func runFix(ctx context.Context, env *Env, o *socketsOptions) error {
	p, err := fixProfile(o.fix.fix, o.port, o.fix.cgroup, o.fix.service)
	if err != nil {
		return &ExitError{Code: 2, Err: fmt.Errorf("sockets: %w", err)}
	}
	if o.pid != 0 || o.comm != "" || len(o.states) > 0 || len(o.require) > 0 || o.noOpts {
		return &ExitError{Code: 2, Err: fmt.Errorf("sockets --fix selects connections by --port, --cgroup or --service (--pid, --comm, --state, --require and --no-options are for the audit)")}
	}
	// What the kernel or the host cannot do is the command's error, before
	// anything is changed: a --fix that leaves out what it was asked for is
	// not a fix.
	f, err := (&factsSource{}).load(ctx)
	if err != nil {
		return err
	}
	pl, _, err := makePlan(ctx, f, &planFlags{inline: p, sets: setFlag{}}, "sockets --fix")
	if err != nil {
		return err
	}
	var why []string
	for _, c := range pl.Changes {
		if c.Action == plan.Skip && !slices.Contains(why, c.Reason) {
			why = append(why, c.Reason)
		}
	}
	if len(why) > 0 {
		return fmt.Errorf("sockets --fix: %s (nothing was changed)", strings.Join(why, "; "))
	}
	ao := &applyOptions{
		plan:    planFlags{inline: p, sets: setFlag{}},
		dryRun:  o.fix.dryRun,
		confirm: o.fix.confirm,
		persist: o.fix.persist,
		yes:     o.fix.yes,
		json:    o.json,
		journal: o.fix.journal,
	}
	return runApply(ctx, env, ao, nil)
}

func (o *fixOptions) register(fs *pflag.FlagSet) {
	fs.Var(&o.fix, "fix", "enforce `OPT` on the connections of --port, new and open, without touching the application: nodelay, initcwnd=N, delack_max=US, rto_min=US, congestion=NAME, notsent_lowat=N (repeatable; a journaled transaction, undone by 'lowlat rollback')")
	fs.StringVar(&o.cgroup, "cgroup", "", "with --fix: the connections the processes of cgroup `PATH` open (below the cgroup v2 root)")
	fs.StringVar(&o.service, "service", "", "with --fix: the connections the processes of systemd service `NAME` open")
	fs.DurationVar(&o.confirm, "confirm", 0, "with --fix: roll back unless 'lowlat confirm' runs within this `duration`")
	fs.BoolVar(&o.persist, "persist", false, "with --fix: re-attach at boot")
	fs.BoolVar(&o.yes, "yes", false, "with --fix: do not ask before changing the host")
	fs.BoolVar(&o.dryRun, "dry-run", false, "with --fix: show what would change and change nothing")
	fs.StringVar(&o.journal, "journal", "", "with --fix: journal `file` (default $LOWLAT_JOURNAL or "+journal.DefaultPath+")")
}

// set reports whether a flag that only --fix uses was given.
func (o *fixOptions) set() bool {
	return o.confirm != 0 || o.persist || o.yes || o.dryRun || o.journal != "" || o.cgroup != "" || o.service != ""
}

// markEnforced fills each connection's Enforced from lowlat's sock_ops
// entries in this namespace whose program is attached (a service restart
// detaches it, and leaves the entry pinned). Listeners are left alone: the
// entries act on the connections they accept.
func markEnforced(rep *sockets.Report) {
	h, err := sockops.Locate()
	if err != nil {
		return
	}
	entries, err := h.Entries()
	if err != nil || len(entries) == 0 {
		return
	}
	for sel := range entries {
		if on, err := h.Attached(sel); err != nil || !on {
			delete(entries, sel)
		}
	}
	// A cgroup's or service's entry covers the connections its processes
	// hold on ports they do not listen on.
	type outbound struct {
		pids  map[int]bool
		entry sockops.Entry
	}
	var outs []outbound
	listens := map[int]map[uint16]bool{}
	for sel, e := range entries {
		if !sel.Outbound() {
			continue
		}
		if pids, err := sockops.PIDsOf(sel); err == nil {
			outs = append(outs, outbound{pids, e})
		}
	}
	for _, s := range rep.Sockets {
		if s.Listener() {
			if listens[s.PID] == nil {
				listens[s.PID] = map[uint16]bool{}
			}
			listens[s.PID][sockops.LocalPort(s.Local)] = true
		}
	}
	for i := range rep.Sockets {
		s := &rep.Sockets[i]
		if s.Listener() {
			continue
		}
		e, ok := entries[sockops.Selector{Port: sockops.LocalPort(s.Local)}]
		for _, ob := range outs {
			if !ok && ob.pids[s.PID] && !listens[s.PID][sockops.LocalPort(s.Local)] {
				e, ok = ob.entry, true
			}
		}
		if !ok {
			continue
		}
		for _, o := range sockops.Options() {
			v, ok := e[o]
			if !ok {
				continue
			}
			if o == sockops.NoDelay {
				if v == "1" {
					s.Enforced = append(s.Enforced, "nodelay")
				}
				continue
			}
			s.Enforced = append(s.Enforced, o.String()+"="+v)
		}
	}
}

// byLowlat marks an option shown for s as lowlat's when its entry enforces
// that option with that value.
func byLowlat(s *sockets.Socket, opt string) string {
	if slices.Contains(s.Enforced, opt) {
		return "(lowlat)"
	}
	return ""
}
