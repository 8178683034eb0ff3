package canary

import (
	"math"
	"math/rand/v2"
	"testing"
)

// testWindow is the test window of the issue: 4 canary and 8 control
// hosts, 24 hourly steps, hosts spread by 15 %, an hour's p99 by 20 %
// around its host's level, each host's day before the change known.
var testWindow = Synthetic{Canary: 4, Control: 8, Steps: 24, HostSpread: 0.15, StepNoise: 0.2, Baseline: true}

var p99 = Metric{Name: "p99", Scale: Ratio, Tolerance: 0.05}

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
// a group of one host, a host without values, a host with gaps, too few
// steps.
func TestThinDataInconclusive(t *testing.T) {
	cases := []struct {
		name string
		f    Synthetic
		thin func(c, ctl []Host) ([]Host, []Host)
	}{
		{"one canary host", testWindow, func(c, ctl []Host) ([]Host, []Host) { return c[:1], ctl }},
		{"no control host", testWindow, func(c, ctl []Host) ([]Host, []Host) { return c, nil }},
		{"a canary host's series gone", testWindow, func(c, ctl []Host) ([]Host, []Host) {
			for i := range c[0].After {
				c[0].After[i] = math.NaN()
			}
			return c, ctl
		}},
		{"a control host with half its steps", testWindow, func(c, ctl []Host) ([]Host, []Host) {
			for i := range ctl[3].After {
				if i%2 == 0 {
					ctl[3].After[i] = math.NaN()
				}
			}
			return c, ctl
		}},
		{"three steps", Synthetic{Canary: 4, Control: 8, Steps: 3, HostSpread: 0.15, StepNoise: 0.2}, func(c, ctl []Host) ([]Host, []Host) { return c, ctl }},
	}
	for _, tc := range cases {
		for _, effect := range []float64{0, 2} {
			f := tc.f
			f.Effect = effect
			rng := rand.New(rand.NewPCG(4, 1))
			for i := range 1000 {
				c, ctl := tc.thin(f.Draw(rng))
				if r := JudgeMetric(p99, c, ctl, DefaultRules); r.Class != Inconclusive {
					t.Fatalf("%s, effect %+.0f %%, run %d: %s (%s), want inconclusive", tc.name, 100*effect, i, r.Class, r.Why)
				}
			}
		}
	}
}

// Loss is compared in points: mostly zero in both groups passes; two more
// points in the canary fail.
func TestLossPoints(t *testing.T) {
	loss := Metric{Name: "loss", Scale: Points, Tolerance: 0.005}
	rng := rand.New(rand.NewPCG(5, 1))
	hosts := func(n int, extra float64) []Host {
		var out []Host
		for range n {
			vs := make([]float64, 24)
			for i := range vs {
				if rng.Float64() < 0.1 {
					vs[i] = 0.01 * rng.Float64() // a lost probe now and then
				}
				vs[i] += extra * (0.8 + 0.4*rng.Float64())
			}
			out = append(out, Host{After: vs})
		}
		return out
	}
	if r := JudgeMetric(loss, hosts(4, 0), hosts(8, 0), DefaultRules); r.Class == Fail {
		t.Errorf("the same loss in both groups: %s (%s)", r.Class, r.Why)
	}
	r := JudgeMetric(loss, hosts(4, 0.02), hosts(8, 0), DefaultRules)
	if r.Class != Fail || math.Abs(r.Effect-0.02) > 0.005 {
		t.Errorf("2 points more loss in the canary: %s, effect %.4f (%s); want fail, about 0.02", r.Class, r.Effect, r.Why)
	}
}

// The verdict: any inconclusive metric is inconclusive; one fail in three
// metrics fails; one marginal is marginal; all passing passes.
func TestCombine(t *testing.T) {
	ms := []Metric{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	for _, tc := range []struct {
		classes []Class
		want    Class
		score   float64
	}{
		{[]Class{Pass, Pass, Pass}, Pass, 100},
		{[]Class{Pass, Marginal, Pass}, Marginal, 83.3},
		{[]Class{Pass, Fail, Pass}, Fail, 66.7},
		{[]Class{Pass, Inconclusive, Pass}, Inconclusive, 66.7},
		{[]Class{Fail, Inconclusive, Fail}, Inconclusive, 0},
	} {
		var rs []MetricResult
		for i, c := range tc.classes {
			rs = append(rs, MetricResult{Metric: ms[i].Name, Class: c})
		}
		v := Combine(ms, rs)
		if v.Class != tc.want || v.Score != tc.score {
			t.Errorf("%v: %s, score %.1f; want %s, %.1f", tc.classes, v.Class, v.Score, tc.want, tc.score)
		}
	}
	if v := Combine(nil, nil); v.Class != Inconclusive {
		t.Errorf("no metrics: %s, want inconclusive", v.Class)
	}
}

// TestTooNoisyInconclusive: a canary the data cannot tell apart from one
// much worse is inconclusive, not a pass. Hosts whose levels spread by a
// factor of e (σ 1 on the log scale), 2 canary against 4 control, no
// baseline: the effect's interval is most often hundreds of percent wide.
// With the bound off (the judge before it) most such fleets passed, +100 %
// ones included (84 % of them).
func TestTooNoisyInconclusive(t *testing.T) {
	m := Metric{Name: "p99", Scale: Ratio, Tolerance: 0.05}
	for _, effect := range []float64{0, 1} {
		f := Synthetic{Canary: 2, Control: 4, Steps: 24, HostSpread: 1, StepNoise: 0.2, Effect: effect}
		loose := DefaultRules
		loose.Bound = 0
		passed := f.Share(m, loose, Pass, 1000, 5)
		inc := f.Share(m, DefaultRules, Inconclusive, 1000, 5)
		pass := f.Share(m, DefaultRules, Pass, 1000, 5)
		t.Logf("+%.0f %%: without the bound pass %.1f %%; with it inconclusive %.1f %%, pass %.1f %%", 100*effect, 100*passed, 100*inc, 100*pass)
		// A pass needs an interval that happens to end below +50 %: at
		// +100 % that is chance, a few fleets in a hundred.
		if passed < 0.5 || inc < 0.75 || (effect > 0 && pass > 0.05) {
			t.Errorf("+%.0f %%: without the bound pass %.1f %%; with it inconclusive %.1f %%, pass %.1f %%: want a pass only where harm is ruled out", 100*effect, 100*passed, 100*inc, 100*pass)
		}
	}
	// The fleets of the power table keep their passes: A/A with 4 canary
	// and 8 control hosts, no baseline, passes in most runs.
	f := Synthetic{Canary: 4, Control: 8, Steps: 24, HostSpread: 0.15, StepNoise: 0.2}
	if pass := f.Share(m, DefaultRules, Pass, 1000, 6); pass < 0.9 {
		t.Errorf("A/A 4/8 without baseline: pass in %.1f %%, want at least 90 %%", 100*pass)
	}
}
