//go:build linux

package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/probe"
	"github.com/lowlat/lowlat/internal/version"
	"golang.org/x/sys/unix"
)

// ErrInterrupted wraps the error of a run stopped by its context (Ctrl-C).
var ErrInterrupted = errors.New("interrupted")

// env is what a scenario's measurement works with.
type env struct {
	ctx  context.Context
	t    *Topology
	opts *Options
	sc   *Scenario
	v    *Variant
	step Step
	// refl is the reflector's address in the server namespace; echo the
	// samplers' echo server.
	refl string
	echo *echo
	// app is the client application's cgroup (App.OwnProcess), else nil.
	app *appCgroup
	// tmp is the run's scratch directory; journal the fix's journal
	// ("" without a fix), which autorate journals its policy in too.
	tmp, journal string
}

// client runs f on a thread in the client namespace.
func (e *env) client(f func() error) error { return e.t.Client.Do(f) }

// phase reports progress.
func (e *env) phase(what string, d time.Duration) {
	s := e.step
	s.Phase, s.Duration = what, d
	e.opts.step(s)
}

// measurers hold each scenario's measurement, by name.
var measurers = map[string]func(e *env, vr *VariantResult) error{}

// Run builds the scenario's network, runs its variants and removes
// everything again (also on error and cancellation). The returned result's
// Pass says whether every expectation held; err is for runs that could not
// be carried out (not root, unknown scenario, a name taken, interrupted).
func Run(ctx context.Context, name string, opts Options) (*Result, error) {
	sc, err := Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	for _, v := range opts.Variants {
		if !slices.ContainsFunc(sc.Variants, func(x Variant) bool { return x.Name == v }) {
			var names []string
			for _, x := range sc.Variants {
				names = append(names, x.Name)
			}
			return nil, fmt.Errorf("lab: scenario %s has no variant %q (it has: %s)", name, v, strings.Join(names, ", "))
		}
	}
	for _, v := range sc.selected(opts.Variants) {
		if a := v.Peer(); a != nil {
			if _, err := checkPeer(a, opts.CakeAutorate); err != nil {
				return nil, fmt.Errorf("lab: variant %s: %w", v.Name, err)
			}
		}
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("lab run: %w", errNotRoot)
	}
	id := opts.ID
	if id == "" {
		id = newID()
	}
	if err := ValidID(id); err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	if opts.Environment == "" {
		opts.Environment = "host"
	}
	plainTCP()
	st, err := claim(id, name)
	if err != nil {
		return nil, err
	}
	res, err := run(ctx, sc, st, &opts)
	var ce *cleanupError
	switch {
	case errors.As(err, &ce) && ctx.Err() != nil:
		err = fmt.Errorf("lab %s: %w, and cleaning up failed: %v", name, ErrInterrupted, ce.err)
	case errors.As(err, &ce):
	case err != nil && ctx.Err() != nil:
		err = fmt.Errorf("lab %s: %w; everything the run made was removed", name, ErrInterrupted)
	}
	return res, err
}

// cleanupError is a run whose removal of its own namespaces or files failed;
// it names what 'lowlat lab clean' will still find.
type cleanupError struct{ err, cause error }

func (e *cleanupError) Error() string {
	if e.cause != nil {
		return fmt.Sprintf("%v; cleanup: %v", e.cause, e.err)
	}
	return e.err.Error()
}

func (e *cleanupError) Unwrap() error { return e.cause }

func run(ctx context.Context, sc *Scenario, st *state, opts *Options) (res *Result, err error) {
	start := time.Now()
	tmp, err := os.MkdirTemp(TempBase, "lowlat-lab-"+st.ID+"-")
	if err != nil {
		st.remove()
		return nil, fmt.Errorf("lab: %w", err)
	}
	st.TempDir = tmp
	var t *Topology
	defer func() {
		// Cleanup never stops half-way: each step runs whatever the others did.
		var errs []string
		if cerr := t.close(); cerr != nil {
			errs = append(errs, cerr.Error())
		}
		if rerr := os.RemoveAll(tmp); rerr != nil {
			errs = append(errs, rerr.Error())
		}
		if len(errs) == 0 {
			if rerr := st.remove(); rerr != nil {
				errs = append(errs, rerr.Error())
			}
		}
		if len(errs) > 0 {
			err = &cleanupError{err: fmt.Errorf("lab: cleanup: %s (run 'lowlat lab clean')", strings.Join(errs, "; ")), cause: err}
		}
	}()
	if err := st.save(); err != nil {
		return nil, err
	}
	variants := sc.selected(opts.Variants)
	res = &Result{
		Scenario: sc.Name, Runbook: sc.Runbook, Title: sc.Title,
		Kernel:      KernelInfo{Version: kernelRelease(), Missing: []string{}},
		Environment: opts.Environment, Tool: version.String(), Topology: sc.Topo,
		Started: start.UTC(), Variants: []VariantResult{},
	}
	expects := map[string][]Expect{}
	for i, v := range variants {
		expects[v.Name] = v.Expect
		// Every variant gets a network of its own: sockets an earlier
		// variant closed with data unsent keep transmitting for many
		// seconds through a 2 Mbit/s link, and would load the next one.
		step := Step{Scenario: sc.Name, Variant: v.Name, Index: i + 1, Total: len(variants)}
		s := step
		roles, builder := "{client,provider,server}", build
		if sc.Topo.Chain != nil {
			roles, builder = "{client,provider,r2,r3,r4,server}", buildChain
		}
		s.Phase = "build the network (namespaces " + nsName(st.ID, roles) + ")"
		opts.step(s)
		t, err = builder(ctx, st, sc.Topo)
		if err != nil {
			return res, err
		}
		if i == 0 {
			res.Kernel.Missing = append(res.Kernel.Missing, t.Missing...)
			res.Notes = append(res.Notes, t.Notes...)
			res.Congestion = t.Congestion
			if sc.NeedsNetem != "" && slices.Contains(t.Missing, "netem") {
				return res, fmt.Errorf("lab %s: needs netem (sch_netem) for %s, and this kernel (%s) lacks it: run 'lowlat lab vm %s' to use a stock kernel under qemu", sc.Name, sc.NeedsNetem, res.Kernel.Version, sc.Name)
			}
		}
		vr, err := runNetwork(ctx, t, opts, sc, v, step, tmp)
		if cerr := t.close(); cerr != nil && err == nil {
			err = cerr
		}
		t = nil
		if vr != nil {
			res.Variants = append(res.Variants, *vr)
			for _, kc := range vr.Skipped {
				if f := missingFeature(kc.Reason); f != "" && !slices.Contains(res.Kernel.Missing, f) {
					res.Kernel.Missing = append(res.Kernel.Missing, f)
				}
			}
		}
		if err != nil {
			return res, err
		}
	}
	evaluate(res, expects)
	res.Seconds = round3(time.Since(start).Seconds())
	return res, nil
}

// runNetwork runs one variant on a freshly built network: reflector and
// sampler echo in the server namespace, then the variant.
func runNetwork(ctx context.Context, t *Topology, opts *Options, sc *Scenario, v *Variant, step Step, tmp string) (*VariantResult, error) {
	refl, stopRefl, err := startReflector(ctx, t.Server)
	if err != nil {
		return nil, fmt.Errorf("lab: reflector: %w", err)
	}
	defer stopRefl()
	ec, err := startEcho(t.Server)
	if err != nil {
		return nil, fmt.Errorf("lab: sampler echo: %w", err)
	}
	defer ec.close()
	e := &env{ctx: ctx, t: t, opts: opts, sc: sc, v: v, refl: refl, echo: ec, step: step, tmp: tmp}
	return runVariant(e, tmp)
}

// runVariant applies the variant's fix, measures, and rolls the fix back.
func runVariant(e *env, tmp string) (vr *VariantResult, err error) {
	v := e.v
	vr = &VariantResult{Name: v.Name, Fix: v.fixString(), Status: StatusRan, Metrics: map[string]any{}}
	fix := v.Fix
	if v.App.OwnProcess {
		if e.app, err = newAppCgroup(e.t); err != nil {
			return vr, fmt.Errorf("lab: variant %s: %w", v.Name, err)
		}
		// Deferred first, so it runs after the fix's rollback, which finds
		// the cgroup's program through it.
		defer func() {
			if rerr := e.app.remove(); rerr != nil && err == nil {
				err = fmt.Errorf("lab: variant %s: %w", v.Name, rerr)
			}
		}()
		if fix != nil {
			fix = fix.bind(e.app.rel)
		}
	}
	var a *applied
	if fix != nil {
		e.phase("apply "+fix.Profile+" with lowlat's engine", 0)
		a, err = e.t.applyFix(e.ctx, fix, tmp)
		if err != nil {
			return vr, err
		}
		vr.Changes, vr.Skipped = a.changes, a.skipped
		e.journal = a.journal
		defer func() {
			e.phase("roll "+v.Fix.Profile+" back", 0)
			if rerr := a.rollback(e.ctx); rerr != nil && err == nil {
				err = fmt.Errorf("lab: variant %s: rollback: %w", v.Name, rerr)
			}
		}()
		if len(a.missing) > 0 {
			vr.Status = StatusNotRun
			var why []string
			for _, m := range a.missing {
				why = append(why, m.Knob+": "+m.Reason)
			}
			vr.Why = "the fix cannot be applied here: " + strings.Join(why, "; ")
			return vr, nil
		}
	}
	if err := e.ctx.Err(); err != nil {
		return vr, err
	}
	m := measurers[e.sc.Name]
	stopPassive := watchPassive(e, vr)
	err = m(e, vr)
	stopPassive()
	if err != nil {
		if e.ctx.Err() != nil {
			return vr, e.ctx.Err()
		}
		return vr, fmt.Errorf("lab: variant %s: %w", v.Name, err)
	}
	return vr, nil
}

func startReflector(ctx context.Context, ns *NS) (string, func(), error) {
	return startReflectorOn(ctx, ns, ReflectorPort)
}

// startReflectorOn starts a lab reflector on port of the server address.
func startReflectorOn(ctx context.Context, ns *NS, port int) (string, func(), error) {
	// The lab's probes carry no key and run load flows and 1 MB CRR: allow
	// bulk, uncapped, since the traffic stays inside the lab's namespaces
	// and a rate cap would be measured instead of the emulated path.
	r := probe.NewReflector(probe.ReflectorConfig{MaxSessionsPerIP: -1, AllowLoad: true, LoadRate: -1, LoadDuration: -1})
	if err := ns.Do(func() error { return r.Listen(ctx, fmt.Sprintf("%s:%d", ServerAddr, port)) }); err != nil {
		return "", nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		_ = r.Serve(sctx)
		close(done)
	}()
	return r.Addr(), func() { cancel(); <-done }, nil
}

var plainTCPOnce sync.Once

// plainTCP turns off Go's default of Multipath TCP for listeners (Go 1.24
// and later). The reflector's listener would otherwise be an MPTCP socket:
// connections fall back to TCP, but on kernels whose MPTCP lacks
// TCP_FASTOPEN (6.1 has no TFO for MPTCP) the listener cannot do Fast
// Open at all, and the lab measures plain TCP servers. The runtime applies
// a GODEBUG change made with os.Setenv to later listeners.
func plainTCP() {
	plainTCPOnce.Do(func() {
		cur := os.Getenv("GODEBUG")
		if strings.Contains(cur, "multipathtcp=") {
			return
		}
		if cur != "" {
			cur += ","
		}
		os.Setenv("GODEBUG", cur+"multipathtcp=0")
	})
}

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

var _ = host.SysctlPath
