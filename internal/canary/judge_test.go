package canary

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// testWindow is the test window of the issue: 4 canary and 8 control
// hosts, 24 hourly steps, hosts spread by 15 %, an hour's p99 by 20 %
// around its host's level, each host's day before the change known.
var testWindow = Synthetic{Canary: 4, Control: 8, Steps: 24, HostSpread: 0.15, StepNoise: 0.2, Baseline: true}

var (
	p99    = Metric{Name: "p99", Scale: Ratio, Tolerance: 0.05}
	jitter = Metric{Name: "jitter", Scale: Ratio, Tolerance: 0.05}
	loss   = Metric{Name: "loss", Scale: Points, Tolerance: 0.005}
)

// lossWindow is the test window's loss: 200 probes a host and step (a
// monitor's 20 a second over 10 s), 0.2 % lost around each host's rate.
var lossWindow = SyntheticLoss{Canary: 4, Control: 8, Steps: 24, Probes: 200, Rate: 0.002, HostSpread: 0.5, Baseline: true}

// A/A: the same distribution in both groups fails in at most 5 % of 1,000
// runs, with a baseline and without.
func TestAAFalseFail(t *testing.T) {
	for _, baseline := range []bool{true, false} {
		f := testWindow
		f.Baseline = baseline
		got := f.Share(p99, DefaultRules, Fail, 1000, 1)
		t.Logf("A/A, baseline %v: fail in %.1f %% of 1000 runs", baseline, 100*got)
		if got > 0.05 {
			t.Errorf("A/A, baseline %v: fail in %.1f %% of 1000 runs, want at most 5 %%", baseline, 100*got)
		}
	}
}

// Power: a 20 % p99 increase in 4 canary hosts against 8 control hosts over
// the test window is a fail in at least 95 % of runs.
func TestPowerTwentyPercent(t *testing.T) {
	f := testWindow
	f.Effect = 0.20
	got := f.Share(p99, DefaultRules, Fail, 1000, 2)
	t.Logf("+20 %% p99, 4 canary vs 8 control, 24 steps: fail in %.1f %% of 1000 runs", 100*got)
	if got < 0.95 {
		t.Errorf("+20 %% p99: fail in %.1f %% of runs, want at least 95 %%", 100*got)
	}
	// An increase within the tolerance is never a fail.
	f.Effect = 0.02
	if got := f.Share(p99, DefaultRules, Fail, 1000, 3); got > 0.05 {
		t.Errorf("+2 %% p99 (tolerance 5 %%): fail in %.1f %% of runs", 100*got)
	}
}

// Thin data is inconclusive in every run, however large the effect:
// a group of one host, a canary host without values, a canary host with
// gaps, too few steps.
func TestThinDataInconclusive(t *testing.T) {
	cases := []struct {
		name string
		f    Synthetic
		thin func(c, ctl []Host) ([]Host, []Host)
	}{
		{"one canary host", testWindow, func(c, ctl []Host) ([]Host, []Host) { return c[:1], ctl }},
		{"no control host", testWindow, func(c, ctl []Host) ([]Host, []Host) { return c, nil }},
		{"a canary host's series gone", testWindow, func(c, ctl []Host) ([]Host, []Host) {
			fill(c[0].Parts[0].After, 0, 24, math.NaN())
			return c, ctl
		}},
		{"a canary host with half its steps", testWindow, func(c, ctl []Host) ([]Host, []Host) {
			for i := range c[1].Parts[0].After {
				if i%2 == 0 {
					c[1].Parts[0].After[i] = math.NaN()
				}
			}
			return c, ctl
		}},
		{"three steps", Synthetic{Canary: 4, Control: 8, Steps: 3, HostSpread: 0.15, StepNoise: 0.2}, func(c, ctl []Host) ([]Host, []Host) { return c, ctl }},
		{"all but one control host thin", testWindow, func(c, ctl []Host) ([]Host, []Host) {
			for _, h := range ctl[1:] {
				fill(h.Parts[0].After, 0, 12, math.NaN())
			}
			return c, ctl
		}},
	}
	for _, tc := range cases {
		for _, effect := range []float64{0, 2} {
			f := tc.f
			f.Effect = effect
			rng := rand.New(rand.NewPCG(4, 1))
			for i := range 1000 {
				c, ctl := tc.thin(f.Draw(rng))
				if r := JudgeMetric(p99, c, ctl, DefaultRules); r.Class != Inconclusive && !(effect > 0 && r.Class == Fail && tc.name == "all but one control host thin") {
					t.Fatalf("%s, effect %+.0f %%, run %d: %s (%s), want inconclusive", tc.name, 100*effect, i, r.Class, r.Why)
				}
			}
		}
	}
}

func fill(vs []float64, from, to int, v float64) {
	for i := from; i < to && i < len(vs); i++ {
		vs[i] = v
	}
}

// A control host with gaps is left out with a note, not a reason to give
// up on the whole verdict, as long as the control keeps its least; a
// canary host with the same gaps makes it inconclusive.
func TestThinControlHostLeftOut(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 1))
	f := testWindow
	f.Effect = 0.5
	c, ctl := f.Draw(rng)
	for i := range ctl[2].Parts[0].After {
		if i%2 == 0 {
			ctl[2].Parts[0].After[i] = math.NaN()
		}
	}
	r := JudgeMetric(p99, c, ctl, DefaultRules)
	if r.Class != Fail || r.Control != 7 || !hasNote(r, "control host k2") {
		t.Errorf("a thin control host: %s with %d control hosts (%s), notes %q; want fail with 7, k2 left out", r.Class, r.Control, r.Why, r.Notes)
	}
	c[0].Parts[0].After = ctl[2].Parts[0].After
	if r := JudgeMetric(p99, c, ctl, DefaultRules); r.Class != Inconclusive || !strings.Contains(r.Why, "canary host c0") {
		t.Errorf("a thin canary host: %s (%s), want inconclusive naming c0", r.Class, r.Why)
	}
}

func hasNote(r MetricResult, s string) bool {
	for _, n := range r.Notes {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// A canary host silent for the window's last hours is judged on old data:
// inconclusive, though 20 of 24 steps are over the coverage of 80 %. A
// control host silent at the end is no one's harm and is judged.
func TestCanaryMustHaveTheWindowsEnd(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 1))
	for range 200 {
		c, ctl := testWindow.Draw(rng)
		fill(ctl[0].Parts[0].After, 20, 24, math.NaN())
		if r := JudgeMetric(p99, c, ctl, DefaultRules); r.Class == Inconclusive && strings.Contains(r.Why, "last") {
			t.Fatalf("a control host silent for the last 4 h: %s (%s)", r.Class, r.Why)
		}
		fill(c[1].Parts[0].After, 20, 24, math.NaN())
		if r := JudgeMetric(p99, c, ctl, DefaultRules); r.Class != Inconclusive || !strings.Contains(r.Why, "last 2 steps") {
			t.Fatalf("a canary host silent for the last 4 h of 24: %s (%s), want inconclusive", r.Class, r.Why)
		}
	}
}

// Loss is the ratio of each host's window (lost / sent), never a trimmed
// mean of its steps: a canary that loses 30 % in 2 of 24 hourly steps (2.5
// points over the window, 5x the tolerance) fails. Today's trimmed mean cut
// exactly those two steps and passed it at +0.00 points [+0.00, +0.00].
func TestBurstyLossIsNotTrimmedAway(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 1))
	failed := 0
	for range 200 {
		c, ctl := lossWindow.Draw(rng)
		for _, h := range c {
			p := &h.Parts[0]
			for _, i := range []int{5, 17} {
				p.AfterNum[i] = math.Round(0.3 * p.AfterDen[i])
				p.After[i] = p.AfterNum[i] / p.AfterDen[i]
			}
		}
		r := JudgeMetric(loss, c, ctl, DefaultRules)
		if r.Class == Pass {
			t.Fatalf("30 %% loss in 2 of 24 steps passed: %s", r.Why)
		}
		if r.Class == Fail {
			failed++
		}
		if math.Abs(r.Effect-0.025) > 0.005 {
			t.Fatalf("30 %% loss in 2 of 24 steps reads %+.2f points, want about +2.5: %s", 100*r.Effect, r.Why)
		}
	}
	if failed < 195 {
		t.Errorf("30 %% loss in 2 of 24 steps: fail in %d of 200 fleets, want at least 195", failed)
	}
	// The same burst in one latency step adds its share of the window:
	// every step counts, the worst included.
	c, ctl := testWindow.Draw(rng)
	before := JudgeMetric(p99, c, ctl, DefaultRules).Effect
	for _, h := range c {
		h.Parts[0].After[23] *= math.Exp(24 * math.Log(1.5))
	}
	after := JudgeMetric(p99, c, ctl, DefaultRules).Effect
	if got := (1 + after) / (1 + before); math.Abs(got-1.5) > 0.01 {
		t.Errorf("one step 1.5^24 times worse in every canary host moved the effect %.3fx, want 1.5x (untrimmed log mean)", got)
	}
}

// Loss mostly zero in both groups passes; two more points in the canary
// fail. Every host at exactly 0 lost is not degenerate: its counts bound
// the loss.
func TestLossPoints(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 1))
	aa := 0
	for range 100 {
		if r := judgeLoss(lossWindow.Draw(rng)); r.Class == Fail {
			aa++
		}
	}
	if aa > 5 {
		t.Errorf("the same loss in both groups: fail in %d of 100", aa)
	}
	f := lossWindow
	f.Effect = 0.02
	c, ctl := f.Draw(rng)
	r := JudgeMetric(loss, c, ctl, DefaultRules)
	if r.Class != Fail || math.Abs(r.Effect-0.02) > 0.005 {
		t.Errorf("2 points more loss in the canary: %s, effect %.4f (%s); want fail, about 0.02", r.Class, r.Effect, r.Why)
	}
	zero := lossWindow
	zero.Rate = 0
	r = judgeLoss(zero.Draw(rng))
	if r.Class != Pass || !(r.Hi > 0) || r.Hi > 0.001 {
		t.Errorf("no loss anywhere over 4,800 probes a host: %s [%g, %g] (%s), want a pass whose upper end the counts set, above 0 and under 0.1 points", r.Class, r.Lo, r.Hi, r.Why)
	}
}

func judgeLoss(c, ctl []Host) MetricResult { return JudgeMetric(loss, c, ctl, DefaultRules) }

// Zero variance is not certainty: every host's number equal (every step
// the same value, as classic buckets give a host whose quantile never
// leaves one bucket) is inconclusive, never "pass [0, 0]".
func TestZeroVarianceIsInconclusive(t *testing.T) {
	flat := func(n int, v float64, before bool) []Host {
		var hs []Host
		for range n {
			after := make([]float64, 24)
			fill(after, 0, 24, v)
			var b []float64
			if before {
				b = make([]float64, 24)
				fill(b, 0, 24, v)
			}
			hs = append(hs, Single("h", after, b))
		}
		return hs
	}
	for _, before := range []bool{true, false} {
		r := JudgeMetric(p99, flat(4, 0.0012, before), flat(8, 0.0012, before), DefaultRules)
		if r.Class != Inconclusive || !strings.Contains(r.Why, "the same") {
			t.Errorf("every host equal (baseline %v): %s (%s), want inconclusive", before, r.Class, r.Why)
		}
		// Loss without counts, every step 0: the same.
		r = JudgeMetric(loss, flat(4, 0, before), flat(8, 0, before), DefaultRules)
		if r.Class != Inconclusive {
			t.Errorf("every host's loss 0 without counts (baseline %v): %s (%s), want inconclusive", before, r.Class, r.Why)
		}
	}
}

// Classic buckets hide moves inside a bucket: a fleet whose p99 moves from
// 0.9 to 1.5 ms inside lowlat's bucket (0.8, 1.6] ms reads +0.0 % from
// histogram_quantile. A canary host that stayed inside one bucket in both
// windows makes the metric inconclusive, not a pass; a move across buckets
// is seen.
func TestOneBucketIsInconclusive(t *testing.T) {
	bounds := classicBounds()
	inBucket := readClassic
	rng := rand.New(rand.NewPCG(10, 1))
	host := func(name string, before, after, noise float64) Host {
		p := Part{Buckets: bounds}
		for range 24 {
			p.Before = append(p.Before, inBucket(before*math.Exp(noise*rng.NormFloat64())))
			p.After = append(p.After, inBucket(after*math.Exp(noise*rng.NormFloat64())))
		}
		return Host{Name: name, Parts: []Part{p}}
	}
	var c, ctl []Host
	for i := range 4 {
		c = append(c, host("c"+string(rune('0'+i)), 0.0009, 0.0015, 0.01))
	}
	for i := range 8 {
		// The controls cross a bucket edge now and then, so their spread
		// is not 0: only the canary's blindness is left to catch.
		ctl = append(ctl, host("k"+string(rune('0'+i)), 0.0016, 0.0016, 0.05))
	}
	r := JudgeMetric(p99, c, ctl, DefaultRules)
	if r.Class != Inconclusive || !(r.Hi >= 0.15) {
		t.Errorf("a canary moving 0.9 -> 1.5 ms inside one bucket: %s, upper end %+.1f %% (%s), want inconclusive, the upper end past +15 %%", r.Class, 100*r.Hi, r.Why)
	}
	// Without windows before for the control (levels compared), a canary
	// host inside one bucket in the window is blind, however its own
	// window before read.
	for i := range c {
		c[i] = host(c[i].Name, 0.0004, 0.0015, 0.01)
	}
	var noBefore []Host
	for _, h := range ctl {
		h.Parts = []Part{h.Parts[0]}
		h.Parts[0].Before = nil
		noBefore = append(noBefore, h)
	}
	if r := JudgeMetric(p99, c, noBefore, DefaultRules); r.Class != Inconclusive || r.Resolution == "" || !strings.Contains(r.Why, "classic histogram buckets") {
		t.Errorf("no baselines, a canary inside one bucket: %s (%s), want inconclusive for the buckets' resolution", r.Class, r.Why)
	}
	// A move past a whole bucket shows, whatever each value was inside
	// its bucket: 0.9 ms in (0.8, 1.6] to 10 ms in (6.4, 12.8] is at least
	// 4x; 0.9 to 3 ms, into the next bucket, may be 1.6 to 1.61 ms and
	// fails nothing.
	noisy := ctl[:0:0]
	for i := range 8 {
		noisy = append(noisy, host("k"+string(rune('0'+i)), 0.0012, 0.0012, 0.3))
	}
	c = c[:0]
	for i := range 4 {
		c = append(c, host("c"+string(rune('0'+i)), 0.0009, 0.0100, 0.01))
	}
	if r := JudgeMetric(p99, c, noisy, DefaultRules); r.Class != Fail {
		t.Errorf("a canary moving 0.9 -> 10 ms, past whole buckets: %s (%s), want fail", r.Class, r.Why)
	}
	c = c[:0]
	for i := range 4 {
		c = append(c, host("c"+string(rune('0'+i)), 0.0009, 0.0030, 0.01))
	}
	if r := JudgeMetric(p99, c, noisy, DefaultRules); r.Class == Fail || r.Class == Pass {
		t.Errorf("a canary moving 0.9 -> 3 ms, into the next bucket: %s (%s), want neither fail nor pass", r.Class, r.Why)
	}
}

// A host's parts (targets) are compared like with like, each with its own
// window before, then combined on the log scale: a near target doubling
// under a far one is +41 % (the geometric mean of 2x and 1x), where one
// histogram summed over both read the far target's p99 and 0 %.
func TestPartsCompareLikeWithLike(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 1))
	host := func(name string, nearAfter float64) Host {
		steps := func(level float64) []float64 {
			vs := make([]float64, 24)
			for i := range vs {
				vs[i] = level * math.Exp(0.05*rng.NormFloat64())
			}
			return vs
		}
		return Host{Name: name, Parts: []Part{
			{Key: `target="near"`, Before: steps(0.001), After: steps(nearAfter)},
			{Key: `target="far"`, Before: steps(0.1), After: steps(0.1)},
		}}
	}
	var c, ctl []Host
	for i := range 3 {
		c = append(c, host("c"+string(rune('0'+i)), 0.002))
	}
	for i := range 6 {
		ctl = append(ctl, host("k"+string(rune('0'+i)), 0.001))
	}
	r := JudgeMetric(p99, c, ctl, DefaultRules)
	if r.Class != Fail || math.Abs(r.Effect-(math.Sqrt2-1)) > 0.03 {
		t.Errorf("a near target doubling beside a steady far one: %s, effect %+.1f %% (%s); want fail at about +41 %%", r.Class, 100*r.Effect, r.Why)
	}
	// A part thin in both windows (a target the host hardly uses) is left
	// out with a note; a canary part that stopped is inconclusive.
	fill(c[0].Parts[1].After, 0, 24, math.NaN())
	fill(c[0].Parts[1].Before, 0, 24, math.NaN())
	if r := JudgeMetric(p99, c, ctl, DefaultRules); r.Class != Fail || !hasNote(r, `part {target="far"} left out`) {
		t.Errorf("a part thin in both windows: %s (%s), notes %q", r.Class, r.Why, r.Notes)
	}
	fill(c[1].Parts[1].After, 0, 24, math.NaN())
	if r := JudgeMetric(p99, c, ctl, DefaultRules); r.Class != Inconclusive || !strings.Contains(r.Why, "series stopped") {
		t.Errorf("a canary part that stopped: %s (%s), want inconclusive", r.Class, r.Why)
	}
}

// One host without a window before no longer switches the difference in
// differences off for everyone: power at 4 against 8 hosts, +20 %, stays
// near that of a full baseline (95.5 % in the review's simulation, 41 %
// with the baseline off for all).
func TestBaselinePerHost(t *testing.T) {
	for _, which := range []string{"control", "canary"} {
		f := testWindow
		f.Effect = 0.2
		rng := rand.New(rand.NewPCG(12, 1))
		fails := 0
		for range 1000 {
			c, ctl := f.Draw(rng)
			if which == "control" {
				ctl[0].Parts[0].Before = nil
			} else {
				c[0].Parts[0].Before = nil
			}
			r := JudgeMetric(p99, c, ctl, DefaultRules)
			if !r.Baseline {
				t.Fatalf("one %s host without a window before switched the baseline off: %s", which, r.Why)
			}
			if r.Class == Fail {
				fails++
			}
		}
		t.Logf("+20 %%, one %s host without a window before: fail in %.1f %%", which, float64(fails)/10)
		// The canary host without one carries the spread between hosts
		// (69.8 % measured; 36 % with the baseline off for all).
		if want := map[string]int{"control": 930, "canary": 600}[which]; fails < want {
			t.Errorf("+20 %%, one %s host without a window before: fail in %.1f %%, want at least %.1f %%", which, float64(fails)/10, float64(want)/10)
		}
	}
}

// A pass must rule out harm with the canary's own spread: 2 canary hosts
// at +40 % and -30 % against 38 tight control hosts passed at -1 %
// [-12, +12] with the pooled error; their own spread puts the upper end
// far past the bound.
func TestPassBoundHasTheCanarysSpread(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 1))
	f := Synthetic{Canary: 2, Control: 38, Steps: 24, HostSpread: 0.02, StepNoise: 0.05, Baseline: true}
	c, ctl := f.Draw(rng)
	for i, mult := range []float64{1.4, 0.7} {
		for k := range c[i].Parts[0].After {
			c[i].Parts[0].After[k] *= mult
		}
	}
	r := JudgeMetric(p99, c, ctl, DefaultRules)
	if r.Class == Pass || r.Hi < 0.3 {
		t.Errorf("canary hosts at +40 %% and -30 %%: %s, upper end %+.1f %% (%s); want not a pass, the upper end near the worse host's +40 %%", r.Class, 100*r.Hi, r.Why)
	}
	// Two canary hosts both better pass: better is not spread on the
	// harmful side.
	c, ctl = f.Draw(rng)
	for i := range c {
		for k := range c[i].Parts[0].After {
			c[i].Parts[0].After[k] *= 0.7 + 0.1*float64(i)
		}
	}
	if r := JudgeMetric(p99, c, ctl, DefaultRules); r.Class != Pass {
		t.Errorf("canary hosts at -30 %% and -20 %%: %s (%s), want pass", r.Class, r.Why)
	}
}

// The verdict: the worst metric decides. A fail outranks an inconclusive
// metric; a broken SLO term fails whatever the metrics say; one fail in
// four or in twenty metrics fails (Kayenta's score made those marginal and
// pass); the why line names what decided.
func TestCombine(t *testing.T) {
	names := "abcdefghijklmnopqrst"
	for _, tc := range []struct {
		name    string
		classes string // p, m, f, i a metric
		slo     []SLOResult
		warn    []string
		want    Class
		decided string
	}{
		{"all pass", "ppp", nil, nil, Pass, ""},
		{"one marginal", "pmp", nil, nil, Marginal, "b"},
		{"one fail", "pfp", nil, nil, Fail, "b"},
		{"one inconclusive", "pip", nil, nil, Inconclusive, "b"},
		{"fail beside inconclusive", "ifp", nil, nil, Fail, "b"},
		{"marginal beside inconclusive", "imp", nil, nil, Marginal, "b"},
		{"one fail in four", "pppf", nil, nil, Fail, "d"},
		{"one fail in twenty", "pppppppppppppppppppf", nil, nil, Fail, "t"},
		{"a broken slo beside inconclusive", "pip", []SLOResult{{Term: "p99<=8ms", Known: true, OK: false, Value: "9 ms"}}, nil, Fail, "slo p99<=8ms"},
		{"an slo without value", "ppp", []SLOResult{{Term: "loss<=1%", Known: false}}, nil, Inconclusive, "slo loss<=1%"},
		{"warnings", "ppp", nil, []string{"partial response"}, Inconclusive, "prometheus"},
		{"warnings beside a fail", "pfp", nil, []string{"partial response"}, Fail, "b"},
	} {
		var ms []Metric
		var rs []MetricResult
		for i, c := range tc.classes {
			ms = append(ms, Metric{Name: names[i : i+1]})
			cl := map[rune]Class{'p': Pass, 'm': Marginal, 'f': Fail, 'i': Inconclusive}[c]
			rs = append(rs, MetricResult{Metric: names[i : i+1], Class: cl, Why: "the " + string(cl) + " reason"})
		}
		v := Combine(ms, rs, tc.slo, tc.warn)
		if v.Class != tc.want || v.Decided != tc.decided {
			t.Errorf("%s: %s decided by %q, want %s by %q", tc.name, v.Class, v.Decided, tc.want, tc.decided)
		}
		if tc.want != Pass && !strings.HasPrefix(v.Why, tc.decided) {
			t.Errorf("%s: why %q does not name %q", tc.name, v.Why, tc.decided)
		}
		if tc.want != Pass && strings.Contains(v.Why, "rules out harm") {
			t.Errorf("%s: why %q says pass under a %s", tc.name, v.Why, v.Class)
		}
	}
	if v := Combine(nil, nil, nil, nil); v.Class != Inconclusive {
		t.Errorf("no metrics: %s, want inconclusive", v.Class)
	}
}

// TestTooNoisyInconclusive: a canary the data cannot tell apart from one
// much worse is inconclusive, not a pass. Hosts whose levels spread by a
// factor of e (σ 1 on the log scale), 2 canary against 4 control, no
// baseline: the effect's interval is most often hundreds of percent wide.
func TestTooNoisyInconclusive(t *testing.T) {
	for _, effect := range []float64{0, 1} {
		f := Synthetic{Canary: 2, Control: 4, Steps: 24, HostSpread: 1, StepNoise: 0.2, Effect: effect}
		loose := DefaultRules
		loose.Bound = 0
		passed := f.Share(p99, loose, Pass, 1000, 5)
		inc := f.Share(p99, DefaultRules, Inconclusive, 1000, 5)
		pass := f.Share(p99, DefaultRules, Pass, 1000, 5)
		t.Logf("+%.0f %%: without the bound pass %.1f %%; with it inconclusive %.1f %%, pass %.1f %%", 100*effect, 100*passed, 100*inc, 100*pass)
		if passed < 0.5 || inc < 0.75 || (effect > 0 && pass > 0.05) {
			t.Errorf("+%.0f %%: without the bound pass %.1f %%; with it inconclusive %.1f %%, pass %.1f %%: want a pass only where harm is ruled out", 100*effect, 100*passed, 100*inc, 100*pass)
		}
	}
	// The usual fleet keeps its passes: A/A with 4 canary and 8 control
	// hosts and each host's day before passes in most runs.
	if pass := testWindow.Share(p99, DefaultRules, Pass, 1000, 6); pass < 0.85 {
		t.Errorf("A/A 4/8 with baseline: pass in %.1f %%, want at least 85 %%", 100*pass)
	}
}

// A fatal reason of a host of one unnamed part reads as one sentence:
// "canary host c0: 4 steps with values, ...", not "c0: : 4 steps".
func TestFatalReasonOfAnUnnamedPart(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 1))
	c, ctl := testWindow.Draw(rng)
	fill(c[0].Parts[0].After, 4, 24, math.NaN())
	r := JudgeMetric(p99, c, ctl, DefaultRules)
	if r.Class != Inconclusive || strings.Contains(r.Why, ": :") || !strings.HasPrefix(r.Why, "canary host c0: 4 steps with values") {
		t.Errorf("a thin unnamed part: %s (%s)", r.Class, r.Why)
	}
}

// A canary host whose window before held another change is compared as
// one without a window before; a control host touched during the windows
// is left out. Both are said in the notes.
func TestBeforeVoidAndTouched(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 1))
	f := testWindow
	c, ctl := f.Draw(rng)
	for i := range c {
		c[i].BeforeVoid = "transaction T1 was in force"
	}
	ctl[0].Touched = "transaction T9 came"
	r := JudgeMetric(p99, c, ctl, DefaultRules)
	if r.Baseline || r.Control != 7 || !hasNote(r, "canary host c0: transaction T1 was in force: its window before is not its baseline") || !hasNote(r, "control host k0 left out: transaction T9 came") {
		t.Errorf("baseline %v, %d control hosts, notes %q: want no baseline for the canary, k0 left out", r.Baseline, r.Control, r.Notes)
	}
	for _, h := range r.Hosts {
		if h.Host == "k0" && h.Left == "" {
			t.Errorf("k0: %+v, want left out", h)
		}
	}
}
