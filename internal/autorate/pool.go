// The reflector pool: which reflectors are probed, which stand by, and what
// each one's clock has done.

package autorate

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// pool keeps the reflectors as cake-autorate keeps its pingers: a number of
// the --reflector list are probed at a time (Policy.Active, all when 0),
// the first that answered at start, and the rest stand by in order. An
// active reflector is replaced by the first standing by, and goes to the
// back of the line, when it stops answering or its clock keeps stepping.
//
// Each reflector's one-way delay is also corrected here for its clock's
// steps before the control law sees it (see clockStep), so that the law's
// baseline never takes a step for a queue.
//
// A reflector's state is kept while it stands by, as cake-autorate keeps a
// rotated reflector's baselines: one that comes back is compared with what
// it read before.
type pool struct {
	active []string // probed now, in the vote
	spare  []string // standing by; the next replacement first
	refl   map[string]*reflector
	// probing is whether the probes run (they pause while the link is
	// idle), and since when: a reflector's silence counts only then.
	probing bool
	resumed time.Time
	// heard is when, last, a signal showed the path answers: a
	// reflector, an echo target, or the passive signal under the probes'
	// timeout. A reflector silent while nothing else is heard either is
	// not replaced: the path is down, or its queue is longer than the
	// probes wait, and a fresh reflector would only learn a baseline with
	// that queue in it (and a lone one would be replaced over and over).
	heard time.Time
}

// reflector is one reflector's state in the pool.
type reflector struct {
	since time.Time // when it was made active
	last  time.Time // its last answer
	// owdFloor and rttFloor are its one-way delay's floor (after shift)
	// and its round trip's: fast to fall, slow to rise (see floor).
	owdFloor, rttFloor time.Duration
	known              bool
	// shift is what its clock's steps add to its one-way delay, taken
	// off every reading; steps are when they were seen.
	shift time.Duration
	steps []time.Time
}

const (
	// deadAfter is how long an active reflector may go without an answer,
	// while probes run and the path answers, before it is replaced. Its
	// silence is logged at 2 s (see Daemon.health); cake-autorate counts
	// a second without an answer an offence.
	deadAfter = 3 * time.Second
	// clockStep is the least rise of a reflector's one-way delay, over
	// what its round trip rose, taken for a step of its clock (see
	// pool.correct).
	clockStep = 10 * time.Millisecond
	// A reflector whose clock stepped stepsToReplace times within
	// stepWindow is replaced when another stands by: each step is caught
	// only once it is over clockStep, and so leaks up to that much into
	// the vote.
	stepsToReplace = 3
	stepWindow     = 10 * time.Minute
	// rttRise is how fast a round trip's floor follows a rise, per
	// reading (the one-way delay's: 0.001, as the law's baselines). It is
	// slower so that a download's queue, which lengthens the round trip
	// for minutes, does not lift it: lifted, an uplink queue that came as
	// the download ended would read as a rise of the one-way delay the
	// round trip does not share, a clock step. At 1e-5 a 200 ms downlink
	// queue takes 17 minutes to lift it by 10 ms.
	rttRise = 1e-5
)

// newPool makes the pool from the reflectors in the order they are to be
// used (those that answered at start first): n of them active (all when n
// is 0 or more than there are).
func newPool(reflectors []string, n int, now time.Time) *pool {
	if n <= 0 || n > len(reflectors) {
		n = len(reflectors)
	}
	p := &pool{active: slices.Clone(reflectors[:n]), spare: slices.Clone(reflectors[n:]), refl: map[string]*reflector{}}
	for _, t := range p.active {
		p.refl[t] = &reflector{since: now}
	}
	p.resume(now)
	return p
}

// resume notes that the probes (re)started: silence counts from now.
func (p *pool) resume(now time.Time) { p.probing, p.resumed = true, now }

// pause notes that the probes stopped: silence says nothing meanwhile.
func (p *pool) pause() { p.probing = false }

// isActive reports whether target is probed now.
func (p *pool) isActive(target string) bool { return slices.Contains(p.active, target) }

// readings turns a tick's raw readings into the law's: each active
// reflector's one-way delay less its clock's steps; its round trip
// ("rtt:" readings) taken for that and dropped; readings of reflectors no
// longer active (a sample already under way when one was replaced)
// dropped. Every other signal passes through. The second result names the
// reflectors whose clocks stepped in this tick, with the step.
func (p *pool) readings(now time.Time, raw []Reading) ([]Reading, []clockStepped) {
	rtt := map[string]time.Duration{}
	for _, r := range raw {
		if t, ok := strings.CutPrefix(r.Signal, rttPrefix); ok {
			rtt[t] = r.Value
		}
	}
	var out []Reading
	var stepped []clockStepped
	for _, r := range raw {
		switch {
		case strings.HasPrefix(r.Signal, rttPrefix):
			continue
		case strings.HasPrefix(r.Signal, oneWayPrefix):
			t := strings.TrimPrefix(r.Signal, oneWayPrefix)
			if !p.isActive(t) {
				continue
			}
			st := p.refl[t]
			st.last, p.heard = now, now
			rt, ok := rtt[t]
			if !ok {
				// A one-way delay without its round trip cannot be
				// checked; it is taken as it is, less known steps.
				r.Value -= st.shift
				out = append(out, r)
				continue
			}
			var step time.Duration
			r.Value, step = st.correct(now, r.Value, rt)
			if step > 0 {
				stepped = append(stepped, clockStepped{target: t, step: step})
			}
			out = append(out, r)
		default:
			// An echo target answered, or the passive signal read a
			// delay the probes would have waited out: the path answers.
			if !r.Relative || r.Value < probeTimeout {
				p.heard = now
			}
			out = append(out, r)
		}
	}
	return out, stepped
}

// clockStepped is a step of a reflector's clock seen in a tick.
type clockStepped struct {
	target string
	step   time.Duration
}

// correct returns a one-way delay owd, with its round trip rtt, less its
// clock's steps, and the step seen now (0: none).
//
// A queue on the uplink lengthens the one-way delay and the round trip
// alike; one on the downlink only the round trip. A step forward of the
// reflector's clock lengthens the one-way delay alone, by the step: the
// round trip is timed by this host's clock. So a one-way delay that rose
// over its floor by clockStep more than the round trip rose over its own
// is a step, taken off at once, in the very tick it shows: read as a
// delay, a step over the threshold is a rising queue, and the law cuts at
// once. (The least round trip of a tick is at least its least one-way
// delay plus the least way back, so no queue can make the one-way delay
// rise more than the round trip.) A step back makes the one-way delay
// fall: its floor, and the law's baseline, follow at once, as they follow
// any fall.
func (st *reflector) correct(now time.Time, owd, rtt time.Duration) (time.Duration, time.Duration) {
	v := owd - st.shift
	if !st.known {
		st.owdFloor, st.rttFloor, st.known = v, rtt, true
	}
	var step time.Duration
	if ex := (v - st.owdFloor) - max(rtt-st.rttFloor, 0); ex > clockStep {
		step = ex
		st.shift += ex
		v -= ex
		st.steps = append(st.steps, now)
	}
	st.owdFloor = floor(st.owdFloor, v, 0.001)
	st.rttFloor = floor(st.rttFloor, rtt, rttRise)
	return v, step
}

// floor moves a floor toward v: nine tenths of the way when v is under it
// (as the law's baselines: a path's floor is there or not), rise of it
// when v is over.
func floor(f, v time.Duration, rise float64) time.Duration {
	if v < f {
		return f + time.Duration(0.9*float64(v-f))
	}
	return f + time.Duration(rise*float64(v-f))
}

// replaced is one reflector's replacement, and why.
type replaced struct {
	old, new string
	why      string
}

// check replaces at most one active reflector a tick (as cake-autorate,
// one a health check), when another stands by: one silent for deadAfter
// while the probes ran, and the path answered more than a probe's timeout
// after its last answer (its probes went unanswered while others' did
// not); or one whose clock stepped stepsToReplace times within
// stepWindow. ok is false when none was.
func (p *pool) check(now time.Time) (r replaced, ok bool) {
	if len(p.spare) == 0 {
		return r, false
	}
	for i, t := range p.active {
		st := p.refl[t]
		st.steps = slices.DeleteFunc(st.steps, func(at time.Time) bool { return now.Sub(at) > stepWindow })
		from := st.last
		if st.since.After(from) {
			from = st.since
		}
		if p.resumed.After(from) {
			from = p.resumed
		}
		switch {
		case p.probing && now.Sub(from) >= deadAfter && p.heard.Sub(from) > probeTimeout:
			return p.replace(i, now, "no answer for "+now.Sub(from).Round(time.Second).String()), true
		case len(st.steps) >= stepsToReplace:
			return p.replace(i, now, "its clock stepped "+strconv.Itoa(len(st.steps))+" times within "+stepWindow.String()), true
		}
	}
	return r, false
}

// replace puts the first reflector standing by in active slot i, and the
// one it replaces at the back of the line.
func (p *pool) replace(i int, now time.Time, why string) replaced {
	old, next := p.active[i], p.spare[0]
	p.active[i] = next
	p.spare = append(p.spare[1:], old)
	p.refl[old].steps = nil
	st := p.refl[next]
	if st == nil {
		st = &reflector{}
		p.refl[next] = st
	}
	st.since = now
	return replaced{old: old, new: next, why: why}
}
