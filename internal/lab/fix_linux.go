//go:build linux

package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/plan"
	"github.com/lowlat/lowlat/internal/profile"
	"github.com/lowlat/lowlat/internal/qdisc"
	"github.com/lowlat/lowlat/internal/txn"
	"github.com/lowlat/lowlat/internal/version"
)

// applied is a fix in force in one namespace: what to roll back.
type applied struct {
	ns      *NS
	journal string
	plan    *plan.Plan
	changes []KnobChange
	skipped []KnobChange
	// missing names the required settings the plan could not apply.
	missing []KnobChange
}

// resolveFix loads and resolves the fix's profile with its sets and skips.
func resolveFix(f *Fix) (*profile.Resolved, error) {
	var p *profile.Profile
	var err error
	if f.Inline != "" {
		p, err = profile.Parse("lab:"+f.Profile+".toml", []byte(f.Inline))
		if err == nil && p.Name == "" {
			p.Name = f.Profile
		}
	} else {
		p, err = profile.Builtin(f.Profile)
	}
	if err != nil {
		return nil, err
	}
	var skips []string
	if len(f.Only) > 0 {
		// Resolve once to learn the keys (params bound), then skip the rest.
		all, err := profile.Resolve(p, f.Sets)
		if err != nil {
			return nil, err
		}
		for _, s := range all.Settings {
			if !slices.Contains(f.Only, s.Key) {
				skips = append(skips, s.Key)
			}
		}
	}
	return profile.Resolve(p, f.Sets, skips...)
}

// applyFix plans the fix from facts gathered inside the side's namespace and
// applies it with the transaction engine, journaled in dir. The returned
// applied must be rolled back. When a required setting cannot be applied,
// nothing is written and applied.missing says why.
func (t *Topology) applyFix(ctx context.Context, f *Fix, dir string) (*applied, error) {
	ns := t.Client
	if f.Side == "server" {
		ns = t.Server
	}
	r, err := resolveFix(f)
	if err != nil {
		return nil, fmt.Errorf("fix %s: %w", f.Profile, err)
	}
	a := &applied{ns: ns, journal: filepath.Join(dir, "journal-"+f.Profile)}
	_ = os.Remove(a.journal)
	var pl *plan.Plan
	if err := ns.Do(func() error {
		facts, err := namespaceFacts(ctx, ns.Name)
		if err != nil {
			return err
		}
		if r.Has("sockets") {
			host.GatherSockOps(ctx, facts, r.SocketSelectors()...)
		}
		if r.ClampsMSS() {
			host.GatherMSSClamp(facts)
		}
		pl, err = plan.Make(facts, r, plan.Options{Ifaces: []string{f.Iface()}})
		return err
	}); err != nil {
		return nil, fmt.Errorf("fix %s: plan in %s: %w", f.Profile, ns.Name, err)
	}
	a.plan = pl
	t.labRows(pl, f)

	require := f.Require
	var tc []txn.Change
	for _, c := range pl.Changes {
		switch c.Action {
		case plan.Set:
			tc = append(tc, txn.Change{Knob: c.Knob, Value: c.Desired})
		case plan.Skip:
			kc := KnobChange{Knob: c.Knob, Before: c.Current, After: c.Desired, Reason: c.Reason}
			a.skipped = append(a.skipped, kc)
			if slices.Contains(require, c.Setting) {
				a.missing = append(a.missing, kc)
			}
		}
	}
	if len(a.missing) > 0 || len(tc) == 0 {
		return a, nil
	}
	eng := &txn.Engine{JournalPath: a.journal, Sys: knob.Live, BootID: txn.BootID()}
	meta := journal.Meta{Profile: r.Name, Params: r.Params, Sets: f.Sets, Ifaces: pl.Ifaces, Host: ns.Name, Tool: version.String(), Args: []string{"lowlat", "lab", f.String()}}
	var res *txn.Result
	err = ns.Do(func() error {
		var err error
		res, err = eng.Apply(ctx, tc, meta)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("fix %s: apply in %s: %w", f.Profile, ns.Name, err)
	}
	for _, it := range res.Changed {
		a.changes = append(a.changes, KnobChange{Knob: it.Knob, Before: it.Before, After: it.After})
	}
	return a, nil
}

// rollback restores everything the fix changed, from its journal.
func (a *applied) rollback(ctx context.Context) error {
	if a == nil || len(a.changes) == 0 {
		return nil
	}
	eng := &txn.Engine{JournalPath: a.journal, Sys: knob.Live, BootID: txn.BootID()}
	// A cancelled run still restores: the namespace is deleted afterwards
	// anyway, but a rollback that works is part of what the lab shows.
	ctx = context.WithoutCancel(ctx)
	return a.ns.Do(func() error {
		_, err := eng.Rollback(ctx, txn.RollbackOptions{All: true, Reason: "lab variant done"})
		return err
	})
}

// labRows adapts the plan to the lab, in the open: host-wide rows are never
// applied (the lab must not change the host), and on an emulated NIC the
// root qdisc goes below the NIC's wire.
func (t *Topology) labRows(pl *plan.Plan, f *Fix) {
	for i := range pl.Changes {
		c := &pl.Changes[i]
		kind := knob.Kind(c.Knob)
		switch {
		case kind == "sockopt" || kind == "socket":
			// A port's sock_ops entry is keyed by the namespace's cookie:
			// it acts in the lab's namespace alone, unless the kernel cannot
			// tell namespaces apart; a cgroup's program sits in the host's
			// hierarchy, and only the cgroup the lab made for its own client
			// application is the lab's.
			own := f.cgroup != "" && strings.Contains(c.Knob, "/cgroup:"+f.cgroup+"/")
			if c.Action != plan.OK && !own && (!strings.Contains(c.Knob, "/port:") || strings.Contains(c.Note, "every namespace")) {
				c.Action, c.Supported = plan.Skip, false
				c.Reason = "host-wide setting: the lab never changes the host (lowlat apply on a real host sets it)"
			}
		case kind != "sysctl" && kind != "qdisc" && kind != "route" && kind != "ethtool" && kind != "mss":
			// Only sysctls of the namespace, qdiscs, routes, ethtool
			// settings of its own devices and nftables tables (an MSS
			// clamp) are per namespace; anything else (sysfs, files,
			// IRQs...) would change the host.
			if c.Action != plan.OK {
				c.Action, c.Supported = plan.Skip, false
				c.Reason = "host-wide setting: the lab never changes the host (lowlat apply on a real host sets it)"
			}
		case kind == "sysctl":
			name := strings.TrimPrefix(c.Knob, "sysctl/")
			if !strings.HasPrefix(name, "net.") && c.Action != plan.OK {
				c.Action, c.Supported = plan.Skip, false
				c.Reason = "host-wide setting: the lab never changes the host (lowlat apply on a real host sets it)"
			} else if c.Action == plan.Skip && c.Current == "-" && hostHasSysctl(name) {
				c.Reason = "host-wide sysctl, not one per network namespace: the lab leaves it alone (lowlat apply on a real host sets it)"
			}
		case kind == "qdisc" && t.Spec.ServerNIC != nil && f.Side == "server" && c.Knob == "qdisc/"+ServerIf+"/root" && c.Action != plan.Skip:
			spec, err := qdisc.Parse(c.Desired)
			switch {
			case err != nil:
				c.Action, c.Supported, c.Reason = plan.Skip, false, err.Error()
			case spec.Kind == "tbf" || spec.Kind == "htb" || spec.Kind == "mq" || spec.Kind == "cake" && spec.Opts["bandwidth"] != "" && spec.Opts["bandwidth"] != "0bit":
				c.Action, c.Supported = plan.Skip, false
				c.Reason = "the emulated NIC takes a queue, not a shaper: " + c.Desired
			default:
				wrapped, err := t.Spec.ServerNIC.spec(spec.String())
				if err != nil {
					c.Action, c.Supported, c.Reason = plan.Skip, false, err.Error()
					break
				}
				c.Note = strings.TrimSpace(c.Note + " lab: the emulated " + t.Spec.ServerNIC.Rate + " NIC is a tbf at the root; the profile's qdisc goes below it as its leaf, where a real NIC's queue is")
				c.Desired, c.Action = wrapped, plan.Set
			}
		}
	}
}

// hostHasSysctl reports whether the host's initial namespace has the sysctl.
// It must run on an ordinary goroutine: those never enter a lab namespace.
func hostHasSysctl(name string) bool {
	done := make(chan bool, 1)
	go func() {
		_, err := os.Stat(host.SysctlPath(name))
		done <- err == nil
	}()
	return <-done
}

// namespaceFacts gathers the live facts of the calling thread's namespace,
// named after it. host.Gather reads /proc/sys/net in the caller's namespace or
// records why it could not; a plan without the namespace's sysctls would be
// wrong, so that is an error here.
func namespaceFacts(ctx context.Context, name string) (*host.Facts, error) {
	src, err := host.OpenRoot("")
	if err != nil {
		return nil, err
	}
	f, err := host.Gather(ctx, src)
	if err != nil {
		return nil, err
	}
	for _, e := range f.Errors {
		if e.Source == "/proc/sys/net" {
			return nil, fmt.Errorf("read /proc/sys/net in %s: %s", name, e.Err)
		}
	}
	f.Netns = "other"
	f.Hostname = name
	return f, nil
}

var (
	lacksQdiscRE = regexp.MustCompile(`lacks the (\S+) qdisc`)
	ccNetnsRE    = regexp.MustCompile(`may select (\S+);`)
	noCCRE       = regexp.MustCompile(`has no (\S+) congestion control`)
)

// missingFeature names the kernel feature behind a skipped row, "" when it
// is not a kernel feature.
func missingFeature(reason string) string {
	if m := lacksQdiscRE.FindStringSubmatch(reason); m != nil {
		return m[1]
	}
	if m := ccNetnsRE.FindStringSubmatch(reason); m != nil {
		return m[1] + " (for network namespaces: net.ipv4.tcp_allowed_congestion_control)"
	}
	if m := noCCRE.FindStringSubmatch(reason); m != nil {
		return m[1]
	}
	return ""
}

var errNotRoot = errors.New("must run as root: the lab creates network namespaces (nothing was changed)")
