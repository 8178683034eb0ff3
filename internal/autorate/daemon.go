package autorate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lowlat/lowlat/internal/qdisc"
)

// Shaper is the daemon's seam to the kernel: the interface's root shaper.
type Shaper interface {
	// Read returns the shaper's kind, rate and counters.
	Read() (qdisc.Shaper, error)
	// SetRate changes only its rate (bit/s), in place.
	SetRate(bps uint64) error
}

// Options configure a daemon.
type Options struct {
	Policy Policy
	Config Config
	Shaper Shaper
	// DryRun computes and logs decisions without changing the shaper.
	DryRun bool
	// Log gets one line per adjustment and per start, stop and signal
	// change.
	Log io.Writer
	// RunDir holds the state and pid files; "" is RunDir.
	RunDir string
	// MaxProbeRate bounds active probes, all targets together (Hz); 0 is
	// MaxProbeRate.
	MaxProbeRate float64
	// StartTimeout is how long each reflector and echo target has to
	// answer before the daemon changes anything; 0 is 3 s.
	StartTimeout time.Duration
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
}

// Daemon is one running autorate loop.
type Daemon struct {
	o       Options
	ctrl    *Controller
	sigs    *readings
	act     *active
	pool    *pool
	pas     *passive
	state   State
	healthy map[string]bool
	// queueSum and queueN average the shaper's own queue over a tick.
	queueSum, queueMax time.Duration
	queueN             int
}

// ErrNoAnswer marks a signal target that did not answer at start.
var ErrNoAnswer = errors.New("no answer")

// Start checks everything a run needs — the shaper is there, every echo
// target answers, and as many reflectors as are to be active — before it
// changes anything: a bad start leaves the shaper as it was.
func Start(ctx context.Context, o Options) (*Daemon, error) {
	if err := o.Policy.Check(); err != nil {
		return nil, err
	}
	if o.Config.Tick == 0 {
		o.Config = DefaultConfig()
	}
	if o.RunDir == "" {
		o.RunDir = RunDir
	}
	if o.MaxProbeRate == 0 {
		o.MaxProbeRate = MaxProbeRate
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 3 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	sh, err := o.Shaper.Read()
	if err != nil {
		return nil, fmt.Errorf("autorate %s: %w", o.Policy.Iface, err)
	}
	d := &Daemon{o: o, ctrl: NewController(o.Policy, o.Config), sigs: newReadings(), healthy: map[string]bool{}}
	if o.Policy.Passive {
		if d.pas, err = newPassive(o.Policy.Iface); err != nil {
			return nil, fmt.Errorf("autorate %s: passive signal: %w", o.Policy.Iface, err)
		}
	}
	d.state = State{Device: o.Policy.Iface, PID: os.Getpid(), Kind: sh.Kind, Policy: o.Policy.String(), DryRun: o.DryRun,
		RateBps: o.Policy.Base, Adjustments: map[string]uint64{}}
	// At start every reflector is probed, standing by or not: the first
	// that answer are made active, and those that do not go to the back
	// of the line.
	p := o.Policy
	all := newActive(p.Reflectors, p.ICMP, o.MaxProbeRate, d.sigs)
	all.start(ctx)
	order, err := d.awaitAnswers(ctx)
	all.stop()
	if err != nil {
		return nil, err
	}
	d.pool = newPool(order, p.Active, o.Now())
	d.act = newActive(d.pool.active, p.ICMP, o.MaxProbeRate, d.sigs)
	d.act.start(ctx)
	return d, nil
}

// awaitAnswers waits until every echo target and the reflectors to be
// active have answered once: the first Active of the list (all of them
// when none stand by), or, once StartTimeout has passed, any Active of
// them. It returns the reflectors in the order the pool is to use them:
// those that answered, in the list's order, then those that did not.
func (d *Daemon) awaitAnswers(ctx context.Context) ([]string, error) {
	p := d.o.Policy
	want := p.Active
	if !p.standingBy() {
		want = len(p.Reflectors)
	}
	answered := func(sig string) bool { return !d.sigs.lastSeen(sig).IsZero() }
	deadline := time.Now().Add(d.o.StartTimeout)
	for {
		missing := ""
		for _, h := range p.ICMP {
			if !answered(icmpSignal(h)) {
				missing = icmpSignal(h)
				break
			}
		}
		var yes, no []string
		for _, t := range p.Reflectors {
			if answered(reflectorSignal(t)) {
				yes = append(yes, t)
			} else {
				no = append(no, t)
			}
		}
		firstAnswered := !slices.ContainsFunc(p.Reflectors[:want], func(t string) bool { return !answered(reflectorSignal(t)) })
		over := time.Now().After(deadline)
		if missing == "" && (firstAnswered || over && len(yes) >= want) {
			return append(yes, no...), nil
		}
		if over {
			if missing == "" {
				missing = reflectorSignal(no[0])
				if p.standingBy() {
					missing = fmt.Sprintf("%d of %d reflectors answered, %d wanted active; %s", len(yes), len(p.Reflectors), want, missing)
				}
			}
			return nil, fmt.Errorf("autorate %s: %s: %w within %s (is a lowlat reflector running there, and reachable?)", p.Iface, missing, ErrNoAnswer, d.o.StartTimeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Run sets the shaper to the policy's base rate, adjusts it every tick
// until ctx ends, then sets it back to base. The pid file lets a rollback
// (which removes the policy) stop the daemon before it restores the qdisc.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.act.stop()
	p := d.o.Policy
	if err := os.MkdirAll(d.o.RunDir, 0o755); err != nil {
		return fmt.Errorf("autorate %s: run dir: %w", p.Iface, err)
	}
	pidPath := filepath.Join(d.o.RunDir, p.Iface+".pid")
	if err := os.WriteFile(pidPath, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return fmt.Errorf("autorate %s: pid file: %w", p.Iface, err)
	}
	defer os.Remove(pidPath)
	defer os.Remove(filepath.Join(d.o.RunDir, p.Iface+".json"))

	mode := ""
	if d.o.DryRun {
		mode = " (dry run: the shaper is not changed)"
	}
	d.logf("start: %s, shaper %s%s", p.Describe(), d.state.Kind, mode)
	if err := d.apply(Decision{At: d.o.Now(), Old: 0, Rate: p.Base, Direction: "base", Reason: "start", Delay: -1}); err != nil {
		return err
	}
	t := time.NewTicker(d.o.Config.Tick)
	defer t.Stop()
	q := time.NewTicker(d.o.Config.Tick / queueReads)
	defer q.Stop()
	for {
		select {
		case <-q.C:
			d.sampleQueue()
		case <-ctx.Done():
			dec := d.ctrl.Stop(d.o.Now())
			err := d.apply(dec)
			d.logf("stop: shaper back to base %s", qdisc.FormatRate(p.Base))
			return err
		case <-t.C:
			if err := d.tick(ctx); err != nil {
				return err
			}
		}
	}
}

// tick reads the signals and the shaper, steps the law and applies it.
func (d *Daemon) tick(ctx context.Context) error {
	now := d.o.Now()
	sh, err := d.o.Shaper.Read()
	if err != nil {
		// The shaper is gone (a rollback, someone's tc): nothing to own.
		return fmt.Errorf("autorate %s: %w", d.o.Policy.Iface, err)
	}
	if want := d.ctrl.Rate(); !d.o.DryRun && !sameRate(sh.RateBps, want) {
		// autorate owns the rate: a change made around it (a hand's
		// tc, another tool) is logged and undone.
		d.logf("shaper rate changed outside autorate: %s; set back to %s", qdisc.FormatRate(sh.RateBps), qdisc.FormatRate(want))
		if err := d.o.Shaper.SetRate(want); err != nil {
			return fmt.Errorf("autorate %s: set rate %s: %w", d.o.Policy.Iface, qdisc.FormatRate(want), err)
		}
	}
	in := Input{At: now, SentBytes: sh.Bytes}
	// This host's own queue: the delay a packet waits in the shaper. It is
	// what the shaper is for, not a sign of the cap: the passive signal
	// always leaves it out, and so do probes behind a tbf, which queue in
	// its one FIFO with the bulk traffic (cake gives them a queue of their
	// own).
	mean, most := d.ownQueue(sh)
	in.OwnQueue = mean
	// Probes behind a tbf wait in its one FIFO with the bulk traffic:
	// its largest backlog of the tick is taken off their delays (not off
	// their baselines, see Reading.Own). cake gives them a flow queue of
	// their own.
	own := mean
	if sh.Kind == "tbf" {
		own = most
	}
	raw := d.sigs.take()
	if d.pas != nil {
		if delay, delivered, ok := d.pas.read(now, own); ok {
			raw = append(raw, Reading{Signal: PassiveSignal, Value: delay, Relative: true})
			in.Delivered = delivered
		}
	}
	// The pool takes its reflectors' clock steps off their one-way
	// delays; the shaper's own queue comes off them after, as off every
	// probe's (both the one-way delay and the round trip waited in it).
	var stepped []clockStepped
	in.Readings, stepped = d.pool.readings(now, raw)
	for _, s := range stepped {
		d.logf("reflector %s: its clock stepped %.1f ms ahead (its one-way delay rose, its round trip did not): taken off its delay, not read as a queue", s.target, ms(s.step))
	}
	if sh.Kind == "tbf" {
		for i := range in.Readings {
			if !in.Readings[i].Relative {
				in.Readings[i].Own = own
			}
		}
	}
	dec := d.ctrl.Step(in)
	if dec.Idle {
		d.act.stop()
		d.pool.pause()
	} else if d.act.start(ctx) {
		d.pool.resume(now)
	}
	if r, ok := d.pool.check(now); ok {
		d.act.swap(r.old, r.new)
		d.logf("reflector %s: %s; replaced by %s", r.old, r.why, r.new)
	}
	d.state.Load, d.state.Backlog, d.state.Drops = dec.Load, sh.Backlog, sh.Drops
	d.health(in, now)
	return d.apply(dec)
}

// sameRate reports whether the kernel's rate is the one set: it keeps
// whole bytes per second, so a rate reads back up to 7 bit/s lower.
func sameRate(kernel, set uint64) bool { return kernel <= set && set-kernel < 8 }

// queueReads is how many times a tick the shaper's backlog is read: one
// read is a moment of a queue that fills and drains many times a tick.
const queueReads = 10

// sampleQueue adds one reading of the shaper's backlog (as the delay it
// means at the shaper's rate) to the tick's mean.
func (d *Daemon) sampleQueue() {
	sh, err := d.o.Shaper.Read()
	if err != nil || sh.RateBps == 0 {
		return
	}
	q := time.Duration(float64(sh.Backlog*8) / float64(sh.RateBps) * float64(time.Second))
	d.queueSum += q
	d.queueMax = max(d.queueMax, q)
	d.queueN++
}

// ownQueue is the delay of the shaper's own queue over the tick: the mean
// (by Little's law, the mean backlog over the rate is the mean wait in it),
// and the most any packet can have waited. A tbf is one FIFO, whose
// backlog swings between empty and full many times a tick under TCP; what
// its packets waited is anywhere up to the maximum, so that is what is
// taken off their delays. It hides nothing of a queue past the shaper: when
// the cap is past it, the shaper's own queue stays near empty.
func (d *Daemon) ownQueue(sh qdisc.Shaper) (mean, most time.Duration) {
	d.sampleQueue()
	if d.queueN == 0 {
		return 0, 0
	}
	mean, most = d.queueSum/time.Duration(d.queueN), d.queueMax
	d.queueSum, d.queueMax, d.queueN = 0, 0, 0
	return mean, most
}

// health logs a signal's going quiet or coming back, once per change.
func (d *Daemon) health(in Input, now time.Time) {
	fresh := map[string]bool{}
	for _, r := range in.Readings {
		fresh[r.Signal] = true
	}
	var names []string
	for _, t := range d.pool.active {
		names = append(names, reflectorSignal(t))
	}
	for _, h := range d.o.Policy.ICMP {
		names = append(names, icmpSignal(h))
	}
	for _, t := range d.pool.spare {
		// Standing by: not probed, not healthy, and no news.
		delete(d.healthy, reflectorSignal(t))
	}
	for _, n := range names {
		ok := now.Sub(d.sigs.lastSeen(n)) < 2*time.Second
		if was, known := d.healthy[n]; known && was != ok {
			if ok {
				d.logf("signal %s answers again", n)
			} else {
				d.logf("signal %s: no answer for 2 s; holding on the other signals (lost probes are not bloat)", n)
			}
		}
		d.healthy[n] = ok
	}
	if d.pas != nil {
		d.healthy[PassiveSignal] = fresh[PassiveSignal]
	}
}

// apply sets the decided rate (unless dry), counts and logs a change, and
// publishes the state.
func (d *Daemon) apply(dec Decision) error {
	p := d.o.Policy
	if dec.Changed() {
		if !d.o.DryRun {
			if err := d.o.Shaper.SetRate(dec.Rate); err != nil {
				return fmt.Errorf("autorate %s: set rate %s: %w", p.Iface, qdisc.FormatRate(dec.Rate), err)
			}
		}
		d.state.Adjustments[dec.Key()]++
		if dec.Old != 0 {
			line := fmt.Sprintf("%s %s -> %s", dec.Key(), qdisc.FormatRate(dec.Old), qdisc.FormatRate(dec.Rate))
			if dec.Delay >= 0 {
				line += fmt.Sprintf(": delay %.1f ms over baseline (%s; threshold %.1f ms), load %.2f", ms(dec.Delay), dec.By, ms(dec.Threshold), dec.Load)
			}
			if dec.Cap > 0 {
				line += fmt.Sprintf(", cap estimate %s (%s)", qdisc.FormatRate(uint64(dec.Cap)), dec.CapBy)
			}
			d.logf("%s", line)
		}
	}
	d.state.RateBps = dec.Rate
	d.state.Time = dec.At
	d.state.Signals = d.state.Signals[:0]
	for _, s := range d.ctrl.Signals() {
		if t, ok := strings.CutPrefix(s.Name, oneWayPrefix); ok && !d.pool.isActive(t) {
			// A reflector standing by keeps its baseline (it may come
			// back) but is no signal now.
			continue
		}
		d.state.Signals = append(d.state.Signals, SignalState{Name: s.Name, DelaySeconds: s.Delay.Seconds(), BaselineSeconds: s.Baseline.Seconds(), Healthy: d.healthy[s.Name]})
	}
	if err := WriteState(d.o.RunDir, &d.state); err != nil {
		d.logf("state file: %v", err)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (d *Daemon) logf(format string, args ...any) {
	fmt.Fprintf(d.o.Log, "%s autorate %s: %s\n", d.o.Now().UTC().Format(time.RFC3339Nano), d.o.Policy.Iface, fmt.Sprintf(format, args...))
}

// State returns the daemon's latest published state.
func (d *Daemon) State() State { return d.state }
