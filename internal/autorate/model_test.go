package autorate

import (
	"strings"
	"testing"
	"time"
)

// runEdited is run (control_test.go) with edit changing each tick's input
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
		edit(el, l, &in)
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
