package autorate

import (
	"slices"
	"testing"
	"time"
)

// poolFeed steps a pool a tick at a time with each reflector's one-way delay
// and round trip.
type poolFeed struct {
	p  *pool
	at time.Time
}

func newPoolFeed(reflectors []string, n int) *poolFeed {
	t0 := time.Unix(1_700_000_000, 0)
	return &poolFeed{p: newPool(reflectors, n, t0), at: t0}
}

// tick feeds one tick: for each target answering, its one-way delay and
// round trip; extra readings (echo, passive) pass as they are. It returns
// the law's readings by signal, and the steps seen.
func (f *poolFeed) tick(answers map[string][2]time.Duration, extra ...Reading) (map[string]time.Duration, []clockStepped) {
	f.at = f.at.Add(200 * time.Millisecond)
	var raw []Reading
	for t, a := range answers {
		raw = append(raw, Reading{Signal: reflectorSignal(t), Value: a[0]}, Reading{Signal: rttPrefix + t, Value: a[1]})
	}
	out, stepped := f.p.readings(f.at, append(raw, extra...))
	got := map[string]time.Duration{}
	for _, r := range out {
		got[r.Signal] = r.Value
	}
	return got, stepped
}

const ms1 = time.Millisecond

// A step of a reflector's clock lengthens its one-way delay and not its
// round trip: it is taken off at once, in the tick it shows, and what
// follows is read from the same floor. A queue on the uplink, which
// lengthens both, passes; so does a queue on the downlink, which
// lengthens the round trip alone.
func TestPoolTakesAClockStepOff(t *testing.T) {
	f := newPoolFeed([]string{"a:1"}, 0)
	for range 10 {
		f.tick(map[string][2]time.Duration{"a:1": {20 * ms1, 40 * ms1}})
	}
	for _, tt := range []struct {
		name     string
		owd, rtt time.Duration
		want     time.Duration // the law's reading
		step     time.Duration
	}{
		{"the clock steps 100 ms ahead", 120 * ms1, 40 * ms1, 20 * ms1, 100 * ms1},
		{"after the step", 121 * ms1, 41 * ms1, 21 * ms1, 0},
		{"an uplink queue", 170 * ms1, 90 * ms1, 70 * ms1, 0},
		{"a downlink queue", 120 * ms1, 140 * ms1, 20 * ms1, 0},
		{"the downlink queue gone, an uplink one", 150 * ms1, 70 * ms1, 50 * ms1, 0},
		{"the clock steps 30 ms back", 90 * ms1, 40 * ms1, -10 * ms1, 0},
		{"its floor follows", 90 * ms1, 40 * ms1, -10 * ms1, 0},
		{"and has followed", 90 * ms1, 40 * ms1, -10 * ms1, 0},
		{"and 30 ms ahead again", 120 * ms1, 40 * ms1, -10 * ms1, 30 * ms1},
	} {
		got, stepped := f.tick(map[string][2]time.Duration{"a:1": {tt.owd, tt.rtt}})
		if d := got["owd:a:1"] - tt.want; d < -ms1/2 || d > ms1/2 {
			t.Errorf("%s: one-way %v, round trip %v: the law reads %v, want %v", tt.name, tt.owd, tt.rtt, got["owd:a:1"], tt.want)
		}
		var step time.Duration
		for _, s := range stepped {
			step += s.step
		}
		if d := step - tt.step; d < -ms1 || d > ms1 {
			t.Errorf("%s: step %v seen, want %v", tt.name, step, tt.step)
		}
		if _, ok := got["rtt:a:1"]; ok {
			t.Errorf("%s: the round trip reached the law", tt.name)
		}
	}
}

// The pool's round-trip floor rises slowly enough that a long download's
// queue does not lift it: lifted, an uplink queue that came as the
// download ended would read as a clock step, and be hidden.
func TestPoolDownloadDoesNotLiftTheRoundTripFloor(t *testing.T) {
	f := newPoolFeed([]string{"a:1"}, 0)
	f.tick(map[string][2]time.Duration{"a:1": {20 * ms1, 40 * ms1}})
	// Five minutes of a download with 150 ms of queue on the downlink.
	for range 5 * 60 * 5 {
		f.tick(map[string][2]time.Duration{"a:1": {20 * ms1, 190 * ms1}})
	}
	// It ends as an upload's queue of 40 ms builds on the uplink.
	got, stepped := f.tick(map[string][2]time.Duration{"a:1": {60 * ms1, 80 * ms1}})
	if len(stepped) != 0 || got["owd:a:1"] < 59*ms1 {
		t.Errorf("an uplink queue of 40 ms after a download: read %v with steps %v, want 60ms and none", got["owd:a:1"], stepped)
	}
}

// A reflector that stops answering while another answers is replaced by
// the first standing by, after deadAfter, and goes to the back of the
// line; its late samples are dropped. One silent while every signal is
// silent is not (the path is down), nor while the probes are paused.
func TestPoolReplacesADeadReflector(t *testing.T) {
	f := newPoolFeed([]string{"a:1", "b:1", "c:1", "d:1"}, 2)
	both := map[string][2]time.Duration{"a:1": {20 * ms1, 40 * ms1}, "b:1": {30 * ms1, 40 * ms1}}
	onlyB := map[string][2]time.Duration{"b:1": {30 * ms1, 40 * ms1}}
	f.tick(both)
	// The path is down: nothing answers, for longer than deadAfter.
	for range 20 {
		f.tick(nil)
		if r, ok := f.p.check(f.at); ok {
			t.Fatalf("every reflector silent: %+v, want no replacement", r)
		}
	}
	f.tick(both)
	// Paused: no probes, no silence.
	f.p.pause()
	for range 20 {
		f.tick(nil)
		if r, ok := f.p.check(f.at); ok {
			t.Fatalf("probes paused: %+v, want no replacement", r)
		}
	}
	f.p.resume(f.at)
	var r replaced
	var ok bool
	silent := f.at
	for range 20 {
		f.tick(onlyB)
		if r, ok = f.p.check(f.at); ok {
			break
		}
	}
	if !ok || r.old != "a:1" || r.new != "c:1" {
		t.Fatalf("a:1 silent while b:1 answers: replaced %+v (%v), want a:1 by c:1", r, ok)
	}
	if took := f.at.Sub(silent); took < deadAfter || took > deadAfter+200*time.Millisecond {
		t.Errorf("replaced %v after a:1 went silent, want %v", took, deadAfter)
	}
	if want := []string{"c:1", "b:1"}; !slices.Equal(f.p.active, want) {
		t.Errorf("active %v, want %v", f.p.active, want)
	}
	if want := []string{"d:1", "a:1"}; !slices.Equal(f.p.spare, want) {
		t.Errorf("standing by %v, want %v (the replaced one last)", f.p.spare, want)
	}
	got, _ := f.tick(map[string][2]time.Duration{"a:1": {20 * ms1, 40 * ms1}, "c:1": {25 * ms1, 40 * ms1}})
	if _, late := got["owd:a:1"]; late || got["owd:c:1"] != 25*ms1 {
		t.Errorf("after the replacement the law reads %v, want c:1's and not a:1's", got)
	}
	// A lone reflector is replaced when another signal shows the path
	// answers: here the passive signal.
	f = newPoolFeed([]string{"a:1", "b:1"}, 1)
	f.tick(map[string][2]time.Duration{"a:1": {20 * ms1, 40 * ms1}})
	for range 20 {
		f.tick(nil, Reading{Signal: PassiveSignal, Value: 5 * ms1, Relative: true})
		if r, ok = f.p.check(f.at); ok {
			break
		}
	}
	if !ok || r.old != "a:1" || r.new != "b:1" {
		t.Errorf("a lone a:1 silent while the passive signal reads: replaced %+v (%v), want a:1 by b:1", r, ok)
	}
}

// A reflector whose clock steps again and again is replaced: each step
// leaks up to clockStep into the vote before it is caught.
func TestPoolReplacesASteppingReflector(t *testing.T) {
	f := newPoolFeed([]string{"a:1", "b:1", "c:1"}, 2)
	owd := 20 * ms1
	for i := range stepsToReplace {
		for range 10 {
			f.tick(map[string][2]time.Duration{"a:1": {owd, 40 * ms1}, "b:1": {30 * ms1, 40 * ms1}})
			if r, ok := f.p.check(f.at); ok {
				t.Fatalf("after %d steps: replaced %+v, want none before %d", i, r, stepsToReplace)
			}
		}
		owd += 50 * ms1
	}
	f.tick(map[string][2]time.Duration{"a:1": {owd, 40 * ms1}, "b:1": {30 * ms1, 40 * ms1}})
	if r, ok := f.p.check(f.at); !ok || r.old != "a:1" || r.new != "c:1" {
		t.Errorf("a:1's clock stepped %d times: replaced %+v (%v), want a:1 by c:1", stepsToReplace, r, ok)
	}
}
