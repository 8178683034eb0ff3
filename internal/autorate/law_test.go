package autorate

import (
	"math"
	"testing"
	"time"
)

// feeder steps a controller with one reflector's one-way delay over a fixed
// base and a full load, a tick at a time.
type feeder struct {
	c    *Controller
	at   time.Time
	sent uint64
	// fill is the share of the rate the connections send (0: all of it).
	fill float64
	// passive feeds the delay as the passive signal instead.
	passive bool
}

func newFeeder(t *testing.T) *feeder {
	t.Helper()
	p := policy()
	p.Passive, p.Reflectors = false, p.Reflectors[:1]
	return &feeder{c: NewController(p, DefaultConfig()), at: time.Unix(1_700_000_000, 0)}
}

func (f *feeder) step(delay time.Duration) Decision {
	f.at = f.at.Add(f.c.cfg.Tick)
	fill := f.fill
	if fill == 0 {
		fill = 1
	}
	f.sent += uint64(fill * float64(f.c.Rate()) * f.c.cfg.Tick.Seconds() / 8)
	r := Reading{Signal: "owd:a:1", Value: 20*time.Millisecond + delay}
	if f.passive {
		r = Reading{Signal: PassiveSignal, Value: delay, Relative: true}
	}
	return f.c.Step(Input{At: f.at, SentBytes: f.sent, Readings: []Reading{r}})
}

// newPassiveFeeder is newFeeder with the passive signal alone.
func newPassiveFeeder(t *testing.T) *feeder {
	t.Helper()
	f := newFeeder(t)
	f.c.pol.Passive, f.c.pol.Reflectors, f.passive = true, nil, true
	return f
}

// cutsAfter cuts on a queue rising to at, then feeds after and counts the
// cuts that follow.
func (f *feeder) cutsAfter(t *testing.T, at time.Duration, after []time.Duration) int {
	t.Helper()
	for range 5 {
		f.step(0)
	}
	f.step(10 * time.Millisecond)
	if d := f.step(at); d.Direction != "down" {
		t.Fatalf("a delay rising past the threshold to %v: %s, want a cut", at, d.Key())
	}
	cuts := 0
	for _, v := range after {
		if d := f.step(v); d.Direction == "down" {
			cuts++
		}
	}
	return cuts
}

// A k-of-n verdict held over from a queue gone since does not cut a rate
// that no longer builds one: bloat needs the delay over the threshold now.
func TestBloatNeedsTheDelayNow(t *testing.T) {
	f := newFeeder(t)
	for range 5 {
		f.step(0)
	}
	// Three ticks over the threshold in the window, the last cut long ago.
	f.c.window = []bool{false, false, true, true, true}
	d := f.step(0)
	if d.Bloat || d.Direction == "down" {
		t.Errorf("with the delay back at its baseline: %s, bloat %v", d.Key(), d.Bloat)
	}
}

// A queue over the threshold that rose since the last tick by more than a
// packet's scatter is bloat at once, without waiting for k of n.
func TestRisingQueueIsBloatAtOnce(t *testing.T) {
	f := newFeeder(t)
	for range 5 {
		f.step(0)
	}
	f.step(10 * time.Millisecond)
	d := f.step(35 * time.Millisecond)
	if !d.Bloat || d.Direction != "down" {
		t.Errorf("a queue rising past the threshold: %s, bloat %v, want a cut", d.Key(), d.Bloat)
	}
}

// rateAt is the rate in force at a time: the growth estimate divides by the
// rate that fed the queue when its probes were sent.
func TestRateAt(t *testing.T) {
	c := NewController(policy(), DefaultConfig())
	t0 := time.Unix(1_700_000_000, 0)
	c.rates = []safeRate{{rate: 1_000_000, at: t0}, {rate: 2_000_000, at: t0.Add(time.Second)}, {rate: 3_000_000, at: t0.Add(2 * time.Second)}}
	c.rate = 3_000_000
	for _, tt := range []struct {
		at   time.Duration
		want uint64
	}{{-time.Second, 1_000_000}, {500 * time.Millisecond, 1_000_000}, {time.Second, 2_000_000}, {1500 * time.Millisecond, 2_000_000}, {5 * time.Second, 3_000_000}} {
		if got := c.rateAt(t0.Add(tt.at)); got != tt.want {
			t.Errorf("rateAt(%v) = %d, want %d", tt.at, got, tt.want)
		}
	}
}

// Connections that fill 90 % of the shaper's rate: the hold under a ceiling
// and the plateau over it are what they send, so the rate goes that much
// higher; the plateau lasts until what they really sent over the ceiling
// has spent twice the credit, and the floor it proves is what they sent,
// not the rate.
func TestPlateauIsWhatTheConnectionsSend(t *testing.T) {
	f := newFeeder(t)
	f.fill = 0.9
	for range 5 {
		f.step(0)
	}
	const ceil = 1_800_000.0
	// A hold under the ceiling, long enough to learn the share they fill.
	f.c.phase, f.c.ceil, f.c.lastDecrease, f.c.probeWait = holding, ceil, f.at, time.Minute
	for range 50 {
		f.step(0)
	}
	// A cut under the ceiling a while ago, which spent the bucket.
	f.c.lastDecrease, f.c.rate, f.c.probeWait = f.at.Add(-time.Minute), 1_500_000, f.c.cfg.IncreaseHold
	f.c.holdBits, f.c.holdFor, f.c.credit = 0, 0, 0
	var probe Decision
	held := false
	for range 100 {
		d := f.step(0)
		if d.Reason == "recover" {
			held = true
			if got, want := 0.9*float64(d.Rate), (1-f.c.cfg.Hold)*ceil; got < 0.99*want || got > 1.01*want {
				t.Errorf("the hold under %.0f sends %.0f bit/s at a fill of 0.9, want %.0f", ceil, got, want)
			}
		}
		if d.Reason == "probe" {
			probe = d
			break
		}
	}
	if !held || probe.Reason != "probe" {
		t.Fatalf("no hold and probe over the ceiling in 20 s")
	}
	if got, want := 0.9*float64(probe.Rate), (1+f.c.cfg.Probe)*ceil; got < 0.99*want || got > 1.01*want {
		t.Errorf("the plateau sends %.0f bit/s at a fill of 0.9, want %.0f (Probe over the ceiling)", got, want)
	}
	credit := f.c.credit
	start := f.at
	var end Decision
	for range 100 {
		if end = f.step(0); end.Reason != "probing" {
			break
		}
	}
	el := f.at.Sub(start).Seconds()
	// The ticks after the probe's were sent at its rate.
	sent := 0.9 * float64(probe.Rate) * el
	if sent-ceil*el < 2*credit && el < f.c.cfg.PlateauMax.Seconds() {
		t.Errorf("the plateau ended after %.1f s, having sent %.0f bits over the ceiling, want twice the credit %.0f", el, sent-ceil*el, credit)
	}
	if f.c.floor > 0.9*float64(probe.Rate)*1.001 {
		t.Errorf("the floor after a clean plateau is %.0f, over what the connections sent (%.0f)", f.c.floor, 0.9*float64(probe.Rate))
	}
}

// The share of the rate the connections leave idle is read with the rate
// held: in the ticks just after a change the load is the connections
// catching up with it, which the hold must not be set over.
func TestFillIsReadWithTheRateHeld(t *testing.T) {
	f := newFeeder(t)
	// A climb, a while after a cut (the share is not read before the
	// first, see TestFillIsNotReadInSlowStart): the rate rises every
	// tick, the connections behind it.
	f.c.lastDecrease = f.at.Add(-time.Minute)
	f.fill = 0.8
	for i := range 15 {
		if d := f.step(0); i > 0 && d.Direction != "up" {
			t.Fatalf("tick %d of the climb: %s", i, d.Key())
		}
	}
	if got := f.c.fill(); got != 1 {
		t.Errorf("after a climb at a load of 0.8 the share is %.3f, want 1 (unknown)", got)
	}
	// Held under a ceiling, the connections fill 90 % of it.
	f.fill = 0.9
	f.c.phase, f.c.ceil, f.c.lastDecrease, f.c.probeWait = holding, float64(f.c.Rate())*1.1, f.at, time.Minute
	for range 50 {
		f.step(0)
	}
	if got := f.c.fill(); got < 0.89 || got > 0.91 {
		t.Errorf("held at a load of 0.9 the share is %.3f, want 0.9", got)
	}
}

// Nor before the first cut, with the connections in slow start.
func TestFillIsNotReadInSlowStart(t *testing.T) {
	f := newFeeder(t)
	f.fill = 0.8
	// Held at --max, with no queue: nothing moves the rate.
	f.c.pol.Max = f.c.Rate()
	for range 15 {
		if d := f.step(0); d.Rate != d.Old {
			t.Fatalf("at --max: %s", d.Key())
		}
	}
	if got := f.c.fill(); got != 1 {
		t.Errorf("the share read %.3f before any cut, want 1 (unknown)", got)
	}
}

// Nor is it read in the 2 s after a cut, while the connections recover from
// the drops it brought: the hold after it would go over the cap.
func TestFillIsNotReadJustAfterACut(t *testing.T) {
	f := newFeeder(t)
	for range 5 {
		f.step(0)
	}
	f.step(10 * time.Millisecond)
	if d := f.step(40 * time.Millisecond); d.Direction != "down" {
		t.Fatalf("a queue rising past the threshold: %s, want a cut", d.Key())
	}
	// The rate held after the cut, the queue gone, the connections at
	// 80 % of it for 1.8 s.
	f.fill = 0.8
	f.c.phase, f.c.ceil, f.c.probeWait = holding, float64(f.c.Rate())*1.1, time.Minute
	for range 9 {
		f.step(0)
	}
	if got := f.c.fill(); got != 1 {
		t.Errorf("the share read %.3f within 2 s of a cut, want 1 (unknown)", got)
	}
}

// rateOver is the mean rate over a time: the growth between two probes was
// fed by the rate while they were sent.
func TestRateOver(t *testing.T) {
	c := NewController(policy(), DefaultConfig())
	t0 := time.Unix(1_700_000_000, 0)
	c.rates = []safeRate{{rate: 1_000_000, at: t0}, {rate: 2_000_000, at: t0.Add(time.Second)}}
	c.rate = 2_000_000
	for _, tt := range []struct {
		a, b time.Duration
		want float64
	}{
		{0, time.Second, 1_000_000},
		{500 * time.Millisecond, 1500 * time.Millisecond, 1_500_000},
		{900 * time.Millisecond, 2 * time.Second, (0.1*1_000_000 + 1.0*2_000_000) / 1.1},
		{2 * time.Second, time.Second, 2_000_000}, // b before a: the rate at b
	} {
		if got := c.rateOver(t0.Add(tt.a), t0.Add(tt.b)); math.Abs(got-tt.want) > 1 {
			t.Errorf("rateOver(%v, %v) = %.0f, want %.0f", tt.a, tt.b, got, tt.want)
		}
	}
}

// A cut just before the last probe of the growth's window was sent does not
// lend its rate to the growth the rate before it made. The VM's step down
// from 3 to 2 Mbit/s: cut from 3.23 to 2.42 Mbit/s, then to 1.81 at 0.8 s;
// the probes read 160 ms at 1.0 s and 194 ms at 1.2 s, sent (a queue's
// depth and up to a tick before) at 0.64 and 0.81 s, nearly all of that
// at 2.42. The queue grew 0.17 s a second, so it drained at 2.42/1.17 =
// 2.07 Mbit/s; read with the rate at the last send, 1.81/1.17 = 1.55.
func TestGrowthIsFedByTheRateWhileItsProbesWereSent(t *testing.T) {
	c := NewController(policy(), DefaultConfig())
	t0 := time.Unix(1_700_000_000, 0)
	c.rates = []safeRate{{rate: 3_225_000, at: t0.Add(-time.Second)}, {rate: 2_419_000, at: t0.Add(400 * time.Millisecond)}, {rate: 1_814_000, at: t0.Add(800 * time.Millisecond)}}
	c.rate = 1_814_000
	c.recent = []point{{t0.Add(time.Second), 160 * time.Millisecond}, {t0.Add(1200 * time.Millisecond), 194 * time.Millisecond}}
	est, by := c.estimate(Input{At: t0.Add(1200 * time.Millisecond)}, 1)
	if by != "growth" || est < 1.9e6 || est > 2.2e6 {
		t.Errorf("estimate %.0f bit/s (%s), want about 2.07 Mbit/s from the growth", est, by)
	}
}

// The delay a cut shows in goes on rising for a round trip: the probes that
// read it were sent at the rate before. A delay falling from that peak is
// the cut working, even while it is still over the delay at the cut; one
// still rising is not, and is cut again.
func TestCutIsJudgedFromThePeakAfterIt(t *testing.T) {
	checkCutsAfter(t, newFeeder, "delays", 35*time.Millisecond, []cutCase{
		{"falling from its peak", []time.Duration{60 * time.Millisecond, 50 * time.Millisecond, 42 * time.Millisecond, 38 * time.Millisecond}, 0},
		{"still rising", []time.Duration{60 * time.Millisecond, 80 * time.Millisecond, 100 * time.Millisecond}, 1},
	})
}

// cutCase is an episode after a cut: the delays that follow it, and how
// many more cuts they must bring.
type cutCase struct {
	name  string
	after []time.Duration
	cuts  int
}

// checkCutsAfter runs each case on a fresh feeder from newF, cut at at.
func checkCutsAfter(t *testing.T, newF func(*testing.T) *feeder, signal string, at time.Duration, cases []cutCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			if cuts := newF(t).cutsAfter(t, at, tt.after); cuts != tt.cuts {
				t.Errorf("%s %v after a cut at %v: %d more cuts, want %d", signal, tt.after, at, cuts, tt.cuts)
			}
		})
	}
}

// srtt moves an eighth of the way to each RTT sample: the passive signal
// shows a cut late, and a passive delay that has stopped rising within a
// second of a cut is the cut not shown yet. Only one still rising is cut
// again.
func TestPassiveDelayFlatAfterACutIsNotCutAgain(t *testing.T) {
	checkCutsAfter(t, newPassiveFeeder, "passive delays", 40*time.Millisecond, []cutCase{
		{"flat at its peak", []time.Duration{60 * time.Millisecond, 61 * time.Millisecond, 60 * time.Millisecond, 55 * time.Millisecond}, 0},
		{"still rising", []time.Duration{60 * time.Millisecond, 80 * time.Millisecond, 100 * time.Millisecond}, 1},
	})
}

// The phases' invariants hold after every step of the model's runs: no
// ceiling while climbing, one while holding or on a plateau, and an episode
// not yet calm only while draining. The law's steps lean on them (a holding
// step reads the ceiling; a steered drain and the ceiling's reuse at a cut
// are only for the episode's own queue).
func TestPhaseInvariants(t *testing.T) {
	seen := map[phase]int{}
	for _, refl := range []int{0, 1, 3} {
		for seed := int64(1); seed <= 6; seed++ {
			l := seededLink(refl, refl == 0 || seed%2 == 0, seed)
			if seed%3 == 0 {
				l.fill = tbfFill
			}
			c := NewController(policy(), DefaultConfig())
			start := time.Unix(1_700_000_000, 0)
			for el := time.Duration(0); el < 120*time.Second; el += c.cfg.Tick {
				stepSchedule(el, l)
				l.lost = seed == 5 && el >= 70*time.Second && el < 90*time.Second
				in, _ := l.tick(start.Add(el), c.cfg.Tick, c.Rate())
				d := c.Step(in)
				seen[c.phase]++
				switch {
				case c.phase == climbing && c.ceil != 0:
					t.Fatalf("%v: climbing with a ceiling %.0f (%s)", el, c.ceil, d.Key())
				case (c.phase == holding || c.phase == plateau) && c.ceil <= 0:
					t.Fatalf("%v: %v with no ceiling (%s)", el, c.phase, d.Key())
				case !c.calm && c.phase != draining:
					t.Fatalf("%v: %v with the last cut's episode not calm (%s)", el, c.phase, d.Key())
				case c.phase == plateau && c.plateauAt.IsZero():
					t.Fatalf("%v: a plateau with no start (%s)", el, d.Key())
				}
			}
		}
	}
	// Every phase is visited: the invariants are checked on each.
	for p := climbing; p <= plateau; p++ {
		if seen[p] == 0 {
			t.Errorf("phase %v never entered in the model's runs", p)
		}
	}
	t.Logf("ticks per phase: %v", seen)
}

// A delay that has not shrunk by a tenth from the peak after a cut is bloat
// at once ("stuck": the cut landed at the cap), but only in that cut's own
// episode. Once a tick has been under the threshold, a later delay over it
// is a new queue, and must pass k of n (or rise) like any other: before,
// any delay over the threshold and over 0.9 of the last cut's peak was
// bloat at once, for ever after (and before the first cut, whose peak is
// zero), so the k-of-n guard against noise hardly ever applied to a
// reflector.
func TestStuckIsOnlyForTheCutsEpisode(t *testing.T) {
	f := newFeeder(t)
	for range 5 {
		f.step(0)
	}
	thr := f.c.threshold(f.c.Rate())
	f.step(thr - 10*time.Millisecond)
	peak := thr + 3*time.Millisecond
	if d := f.step(peak); d.Direction != "down" {
		t.Fatalf("a queue rising past the threshold: %s, want a cut", d.Key())
	}
	// Half the rate sent from here on: no rise moves the threshold.
	f.fill = 0.5
	for range 20 {
		f.step(0)
	}
	// A creep to just over the threshold and over 0.9 of the cut's peak,
	// by less than an MTU's time a tick: not rising.
	thr = f.c.threshold(f.c.Rate())
	over := max(thr+time.Millisecond, time.Duration(0.9*float64(peak))+time.Millisecond)
	if over-thr > f.c.mtuTime(f.c.Rate())/2 {
		t.Fatalf("the test's creep: %v over a threshold of %v is a rise at %d bit/s", over, thr, f.c.Rate())
	}
	for _, under := range []time.Duration{6, 3, 0} {
		f.step(thr - under*time.Millisecond - time.Millisecond/2)
	}
	if d := f.step(over); d.Bloat {
		t.Errorf("one tick at %v, over a threshold of %v, long after a cut's episode: %s, bloat; want k of n", over, thr, d.Key())
	}
}

// A plateau that found no queue, followed by a cut that finds the cap within
// 15 % of the ceiling it went over, was too low: the next goes twice as high,
// up to 20 %. A plateau that finds a queue brings the height back toward
// Config.Probe.
func TestPlateauHeightFromWhatTheLastFound(t *testing.T) {
	c := NewController(policy(), DefaultConfig())
	for _, want := range []float64{0.10, 0.20, 0.20} {
		c.outgrew = 1e6
		c.calibrate(Decision{Cap: 1.1e6})
		if math.Abs(c.probe-want) > 1e-9 || c.outgrew != 0 {
			t.Fatalf("after a climb that found the cap near the ceiling it outgrew: height %.3f (outgrew %.0f), want %.2f", c.probe, c.outgrew, want)
		}
	}
	// The cap found far over the ceiling it outgrew: it had risen.
	c.outgrew = 1e6
	if c.calibrate(Decision{Cap: 1.5e6}); c.probe != 0.2 {
		t.Errorf("a cap that had risen changed the height to %.3f", c.probe)
	}
	c.phase = plateau
	c.calibrate(Decision{Cap: 1e6})
	if want := 0.15; math.Abs(c.probe-want) > 1e-9 {
		t.Errorf("a plateau that found a queue: height %.3f, want %.2f", c.probe, want)
	}
}

// The least cap a clean plateau proved holds the next cut's estimate up; a
// cut at a rate at or under it shows the cap fell, and drops it.
func TestFloorHoldsTheEstimateUp(t *testing.T) {
	c := NewController(policy(), DefaultConfig())
	c.floor, c.rate = 1.9e6, 2_200_000
	if est, by := c.overFloor(1.6e6, "acked"); est != 1.9e6 || by != "floor" {
		t.Errorf("an estimate under the floor: %.0f by %s, want the floor", est, by)
	}
	if est, by := c.overFloor(0, ""); est != 0 || by != "" {
		t.Errorf("a blind cut took %.0f by %s, want none: the floor may be a cap that has since risen far", est, by)
	}
	c.rate = 1_800_000
	if est, _ := c.overFloor(1.6e6, "acked"); est != 1.6e6 || c.floor != 0 {
		t.Errorf("a cut under the floor: estimate %.0f, floor %.0f; want the estimate and no floor", est, c.floor)
	}
}
