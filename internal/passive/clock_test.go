package passive

import "testing"

// A realtime reading whose second monotonic reading came late (the thread
// preempted between them) must not set the offset: with the one reading
// the hooks used to take, a 40 µs preemption set it 20 µs low and every
// receive delay under 20 µs read negative and was dropped (the VM's stack
// stage counted 1140 of 2000 packets).
func TestTightestOffsetSkipsAPreemptedReading(t *testing.T) {
	const truth = 1_700_000_000_000_000_000 // realtime − monotonic
	late := clockReading{m1: 1000, r: 1000 + 100 + truth, m2: 1000 + 100 + 40_000}
	good := clockReading{m1: 90_000, r: 90_000 + 150 + truth, m2: 90_000 + 300}
	off, bound := tightestOffset([]clockReading{late, good, late})
	if err := off - truth; err < -bound || err > bound || bound > 200 {
		t.Errorf("offset %+d ns from the truth within ±%d ns, want the 300 ns bracket's (within ±151 ns)", err, bound)
	}
	if o, b := late.offset(); truth-o < 19_000 || b < 20_000 {
		t.Errorf("the preempted reading's offset %+d ns from the truth within ±%d: the test's premise is gone", o-truth, b)
	}
}

func TestNextOffset(t *testing.T) {
	for _, c := range []struct {
		name                      string
		cur, curBound, off, bound int64
		want, wantBound           int64
	}{
		{"a looser reading that agrees keeps the good offset, its bound grown to cover the reading", 1000, 100, 1500, 20_000, 1000, 20_500},
		{"a tighter reading replaces it", 1000, 100, 1020, 50, 1020, 50},
		{"a step of the realtime clock, seen loosely, is followed", 1000, 100, 5_000_000, 20_000, 5_000_000, 20_000},
		{"an equal bound that agrees keeps it, within both", 1000, 100, 1050, 100, 1000, 150},
		// A 3 µs step seen by a 31 µs reading: kept (it cannot tell), but
		// no longer claimed within 31 ns.
		{"a step smaller than the reading's bound widens the bound", 0, 31, 3000, 31_000, 0, 34_000},
	} {
		got, b := nextOffset(c.cur, c.curBound, c.off, c.bound)
		if got != c.want || b != c.wantBound {
			t.Errorf("%s: %d ±%d, want %d ±%d", c.name, got, b, c.want, c.wantBound)
		}
	}
}
