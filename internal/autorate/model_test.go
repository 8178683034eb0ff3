package autorate

import (
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"
)

// runEdited is run (control_test.go) with edit (nil: none) changing each tick's input
// before the controller sees it: a reflector that bypasses the
// bottleneck, a reflector's clock that steps.
func runEdited(t *testing.T, c *Controller, l *link, d time.Duration, change func(time.Duration, *link), edit func(time.Duration, *link, *Input)) *trace {
	t.Helper()
	tr := &trace{}
	start := time.Unix(1_700_000_000, 0)
	tick := c.cfg.Tick
	for el := time.Duration(0); el < d; el += tick {
		if change != nil {
			change(el, l)
		}
		in, qd := l.tick(start.Add(el), tick, c.Rate())
		if edit != nil {
			edit(el, l, &in)
		}
		dec := c.Step(in)
		tr.at = append(tr.at, el)
		tr.rate = append(tr.rate, dec.Rate)
		tr.cap = append(tr.cap, l.cap)
		tr.out = append(tr.out, l.out)
		tr.delay = append(tr.delay, qd)
		tr.dec = append(tr.dec, dec)
	}
	return tr
}

// bypass makes reflector r0 read no queue: its path goes around the
// bottleneck.
func bypass(_ time.Duration, l *link, in *Input) {
	for i := range in.Readings {
		if in.Readings[i].Signal == "owd:r0" {
			in.Readings[i].Value -= l.seen
		}
	}
}

// One reflector of two or three that bypasses the bottleneck does not hide
// the queue: over the lab's steps the rate is cut as the cap falls, and the
// queue stays within the guard the model's runs keep without it. Voted by
// the lower median, the bypassing one of two hid every queue: the rate
// climbed to --max and the provider's 5 s buffer filled.
func TestBypassingReflectorHidesNoQueue(t *testing.T) {
	for _, refl := range []int{2, 3} {
		t.Run(strings.Repeat("I", refl), func(t *testing.T) {
			p := policy()
			p.Reflectors, p.Passive = []string{"a:1", "b:1", "c:1"}[:refl], false
			c := NewController(p, DefaultConfig())
			tr := runEdited(t, c, newLink(refl, false), 120*time.Second, stepSchedule, bypass)
			f := measure(tr)
			t.Logf("%d reflectors, one bypassing: queue p99 %v, goodput %.2f, down %v and %v", refl, f.p99, f.share, f.conv[1], f.conv[3])
			if f.p99 > guard.p99 {
				t.Errorf("queue p99 %v, want ≤ %v (the model's guard)", f.p99, guard.p99)
			}
			for _, s := range []int{1, 3} {
				if f.conv[s] < 0 || f.conv[s] > guard.down {
					t.Errorf("step %d down: within 10%% of the cap after %v, want ≤ %v", s, f.conv[s], guard.down)
				}
			}
		})
	}
}

// clockStepAt feeds the model's reflectors through a pool, as the daemon
// does, each reading with its round trip; from at on, reflector r0's clock
// is step ahead. Without a pool (nil), the stepped one-way delays go to
// the law as they are.
func clockStepAt(p *pool, at, step time.Duration) func(time.Duration, *link, *Input) {
	rng := rand.New(rand.NewSource(7))
	return func(el time.Duration, l *link, in *Input) {
		var raw []Reading
		for _, r := range in.Readings {
			if !strings.HasPrefix(r.Signal, oneWayPrefix) {
				raw = append(raw, r)
				continue
			}
			i := int(r.Signal[len(r.Signal)-1] - '0')
			// The model's one-way delay less its clock's offset is
			// the way up; back: the base's other half, scattered by up
			// to 2 ms.
			rtt := r.Value - time.Duration(i)*37*time.Millisecond + l.base/2 + time.Duration(rng.Intn(2000))*time.Microsecond
			if i == 0 && el >= at {
				r.Value += step
			}
			raw = append(raw, r, Reading{Signal: rttPrefix + r.Signal[len(oneWayPrefix):], Value: rtt})
		}
		if p == nil {
			in.Readings = slices.DeleteFunc(raw, func(r Reading) bool { return strings.HasPrefix(r.Signal, rttPrefix) })
			return
		}
		in.Readings, _ = p.readings(in.At, raw)
	}
}

// A step of a reflector's clock is not read as bloat: with one reflector,
// which nothing outvotes, the rate is not cut when its clock steps 100 ms
// ahead. The host sends 1.6 Mbit/s under the 2 Mbit/s cap, so that no
// queue of its own brings cuts; the step comes where the same draw without
// it has no bloat for a second before and three after. Fed to the law as
// it is, the step alone is a cut within a tick.
func TestClockStepIsNoBloat(t *testing.T) {
	p := policy()
	p.Reflectors, p.Passive = p.Reflectors[:1], false
	start := time.Unix(1_700_000_000, 0)
	const d = 60 * time.Second
	steady := func(_ time.Duration, l *link) { l.demand = 1.6e6 }
	calm := runEdited(t, NewController(p, DefaultConfig()), newLink(1, false), d, steady, clockStepAt(newPool([]string{"r0"}, 0, start), d, 0))
	// Where the draw is calm: no bloat and no cut within [at-1s, at+3s].
	at := time.Duration(-1)
	for i := range calm.at {
		if calm.at[i] < 20*time.Second || calm.at[i]+3*time.Second >= d {
			continue
		}
		quiet := true
		for j := range calm.at {
			if calm.at[j] >= calm.at[i]-time.Second && calm.at[j] <= calm.at[i]+3*time.Second && (calm.dec[j].Bloat || calm.dec[j].Direction == "down") {
				quiet = false
				break
			}
		}
		if quiet {
			at = calm.at[i]
			break
		}
	}
	if at < 0 {
		t.Fatal("the draw has no calm 4 s after 20 s to step the clock in")
	}
	cutWithin := func(tr *trace, from, to time.Duration) (Decision, bool) {
		for i := range tr.at {
			if tr.at[i] >= from && tr.at[i] <= to && (tr.dec[i].Direction == "down" || tr.dec[i].Bloat) {
				return tr.dec[i], true
			}
		}
		return Decision{}, false
	}
	stepped := runEdited(t, NewController(p, DefaultConfig()), newLink(1, false), d, steady, clockStepAt(newPool([]string{"r0"}, 0, start), at, 100*time.Millisecond))
	if dec, cut := cutWithin(stepped, at, at+3*time.Second); cut {
		t.Errorf("the clock stepped 100 ms at %v: %s, bloat %v, delay %v: want the step taken off, no bloat", at, dec.Key(), dec.Bloat, dec.Delay)
	}
	// The control: the step, not taken off, is a cut.
	raw := runEdited(t, NewController(p, DefaultConfig()), newLink(1, false), d, steady, clockStepAt(nil, at, 100*time.Millisecond))
	if _, cut := cutWithin(raw, at, at+400*time.Millisecond); !cut {
		t.Errorf("the control: the step fed to the law as it is made no cut: the test shows nothing")
	}
}
