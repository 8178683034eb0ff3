package canary

// Adversarial review of the canary judge's statistics (branch break1).
// Each test below shows one defect and FAILS on the code as reviewed; its
// comment gives the reproduction and what it means for a user. Run one
// with: go test -run TestBreak<Name> -v ./internal/canary

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// brkBucketHost draws a host's 24 + 24 steps read from classic buckets:
// before and after are its true p99 levels, noise the σ of a step's log;
// the first lowBefore steps of its window before are at 0.7 ms.
func brkBucketHost(rng *rand.Rand, name string, before, after, noise float64, lowBefore int) Host {
	p := Part{Buckets: classicBounds()}
	for i := range 24 {
		b := before
		if i < lowBefore {
			b = 0.0007
		}
		p.Before = append(p.Before, readClassic(b*math.Exp(noise*rng.NormFloat64())))
		p.After = append(p.After, readClassic(after*math.Exp(noise*rng.NormFloat64())))
	}
	return Host{Name: name, Parts: []Part{p}}
}

// TestBreakOneBeforeStepDefeatsBucketBlindness: the one-bucket guard is
// all or nothing, so ONE step of a canary host's window before in the
// next bucket down switches it off, and the blind window after is judged
// as if it could see.
//
// Reproduction: the docs' own case, a canary whose p99 moves 0.9 -> 1.5 ms
// (+67 %) inside the classic bucket (0.8, 1.6] ms, 4 canary hosts against
// 8 control hosts at 0.85 ms (σ 3 % a step, so they cross the 0.8 ms edge
// now and then), 24 steps each window; every canary host's window before
// had one quiet hour at 0.7 ms. Every canary step after reads 1.584 ms
// whatever it really was; resolution() sees the before window cross an
// edge (inBucketBoth false) and does not flag the host. The judge reads
// about +3 % (one step's log 2 / 24) and PASSES 115 of 200 fleets ("not
// worse: +2.6 % [-2.6, +7.7]"): a +67 % regression rolled out to the fleet.
func TestBreakOneBeforeStepDefeatsBucketBlindness(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 1))
	n := 200
	passed, example := passes(n, func() MetricResult {
		var c, ctl []Host
		for i := range 4 {
			c = append(c, brkBucketHost(rng, fmt.Sprint("c", i), 0.0009, 0.0015, 0.01, 1))
		}
		for i := range 8 {
			ctl = append(ctl, brkBucketHost(rng, fmt.Sprint("k", i), 0.00085, 0.00085, 0.03, 0))
		}
		return JudgeMetric(p99, c, ctl, DefaultRules)
	})
	if passed > 0 {
		t.Errorf("a canary moving 0.9 -> 1.5 ms (+67 %%) inside one bucket, one step of its window before in the bucket below: pass in %d of %d fleets (e.g. %q); want never a pass (the window judged is blind)", passed, n, example)
	}
}

// TestBreakWorseStepOutOfBucketMovesTowardsPass: worse data moves a
// metric from inconclusive to pass, against "worse canary data never moves
// a metric towards pass".
//
// Reproduction: 4 canary and 8 control hosts read from classic buckets;
// canary host c0 sits at 1.2 ms inside (0.8, 1.6] in both windows (blind:
// the metric is inconclusive), the other hosts at 0.85 ms (σ 3 %). Make
// c0's LAST step of the window twice as slow (2.4 ms, the next bucket).
// c0 is no longer "inside one bucket", its number is +log 2 / 24, and the
// metric passes in 52 of 200 fleets ("inconclusive (... stayed inside one
// classic histogram bucket ...) -> pass (not worse: +2.9 % [-1.7, +10.1])"):
// the worse canary passes where the better one did not. TestPropertyMonotonicInHarm never sets Buckets,
// so it cannot see this.
func TestBreakWorseStepOutOfBucketMovesTowardsPass(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 1))
	moved, n := 0, 200
	var example string
	for range n {
		var c, ctl []Host
		c = append(c, brkBucketHost(rng, "c0", 0.0012, 0.0012, 0.01, 0))
		for i := 1; i < 4; i++ {
			c = append(c, brkBucketHost(rng, fmt.Sprint("c", i), 0.00085, 0.00085, 0.03, 0))
		}
		for i := range 8 {
			ctl = append(ctl, brkBucketHost(rng, fmt.Sprint("k", i), 0.00085, 0.00085, 0.03, 0))
		}
		was := JudgeMetric(p99, c, ctl, DefaultRules)
		c[0].Parts[0].After[23] *= 2 // one hour twice as slow
		now := JudgeMetric(p99, c, ctl, DefaultRules)
		if now.Class.Severity() < was.Class.Severity() {
			moved++
			example = fmt.Sprintf("%s (%s) -> %s (%s)", was.Class, was.Why, now.Class, now.Why)
		}
	}
	if moved > 0 {
		t.Errorf("one canary step made 2x slower moved the metric towards pass in %d of %d fleets, e.g. %s", moved, n, example)
	}
}

// TestBreakImputedBaselineAAFalseAlarm: a canary host without a window
// before is compared with the fleet's typical window before, so its
// number carries the whole spread BETWEEN hosts (its path against the
// fleet's), while Lo's error is the control's spread of differences in
// differences, which has none of it. Identical groups then alarm far
// above the promised rate.
//
// Reproduction: the docs' A/A shape (4 canary, 8 control, 24 hourly steps,
// hosts spread 15 %, steps 20 %, p99, jitter and loss judged together at
// Family 3), except that canary host c0 has no window before (a host
// re-provisioned, or whose monitor started with the change). Nothing
// changed, yet the verdict is fail or marginal in 13.2 % of 4,000 fleets
// (each latency metric alone: 6.5 % at a nominal 1.67 %; at Family 1,
// 12 % at 5 %). A harmless change is rolled back one time in eight; if c0
// sits on a path 1.5x the fleet's typical, p99 alone is fail or marginal
// in 59 % of fleets with no change at all.
func TestBreakImputedBaselineAAFalseAlarm(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 1))
	ms := []Metric{p99, jitter, loss}
	r := DefaultRules
	r.Family = len(ms)
	const n = 4000
	alarms := 0
	for range n {
		var rs []MetricResult
		for _, m := range ms {
			var c, ctl []Host
			if m.Scale == Points {
				c, ctl = lossWindow.Draw(rng)
			} else {
				c, ctl = testWindow.Draw(rng)
			}
			p := &c[0].Parts[0]
			p.Before, p.BeforeNum, p.BeforeDen = nil, nil, nil
			res := JudgeMetric(m, c, ctl, r)
			if !res.Baseline {
				t.Fatalf("%s: the baseline was switched off: %s", m.Name, res.Why)
			}
			rs = append(rs, res)
		}
		if v := Combine(ms, rs, nil, nil); v.Class == Fail || v.Class == Marginal {
			alarms++
		}
	}
	share := float64(alarms) / n
	if limit := 0.05 + 2*math.Sqrt(0.05*0.95/n); share > limit {
		t.Errorf("A/A, one canary host without a window before, three metrics: fail or marginal in %.1f %% of %d fleets, want at most 5 %% (%.1f %% with the sample's error)", 100*share, n, 100*limit)
	}
}

// brkBurstyHost draws a host's loss as counts when it comes in episodes,
// as real loss does: each 200-probe step is clean, or (probability q) an
// outage that loses b probes together (100: 5 s at the monitor's 20 a
// second).
func brkBurstyHost(rng *rand.Rand, name string, q float64, b int) Host {
	window := func() (vs, num, den []float64) {
		for range 24 {
			k := 0.0
			if rng.Float64() < q {
				k = float64(b)
			}
			vs, num, den = append(vs, k/200), append(num, k), append(den, 200)
		}
		return vs, num, den
	}
	p := Part{}
	p.After, p.AfterNum, p.AfterDen = window()
	p.Before, p.BeforeNum, p.BeforeDen = window()
	return Host{Name: name, Parts: []Part{p}}
}

// TestBreakBurstyLossCountedAsIndependentProbes: the binomial floor (and
// its switch to a known variance, df = ∞, when the control's spread is
// under it) treats every probe as independent. Loss comes in episodes (the
// docs' own udp sessions count 5 s of probes together): one outage of 100
// probes is one event, not 100. A control that happened to see no outage
// is then "known" to vary by a few probes, and one canary host's single
// outage fails the canary.
//
// Reproduction: 4 canary and 8 control hosts, 24 steps of 200 probes in
// each window, no loss except outages of 100 probes in a step with
// probability 0.003 (one every ~14 host-days), the same process in both
// groups; loss judged at Family 3 (1.67 %). Fail or marginal in 6.8 % of
// 4,000 fleets, 4x its level: loss alone breaks the verdict's 5 %.
// Deterministically: every host clean, canary host c0 losing 120 probes
// in one hour (a 6 s outage) reads "+0.62 points [+0.61, +3.93]" and
// fails.
func TestBreakBurstyLossCountedAsIndependentProbes(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 1))
	r := DefaultRules
	r.Family = 3
	const n = 4000
	alarms := 0
	for range n {
		var c, ctl []Host
		for i := range 4 {
			c = append(c, brkBurstyHost(rng, fmt.Sprint("c", i), 0.003, 100))
		}
		for i := range 8 {
			ctl = append(ctl, brkBurstyHost(rng, fmt.Sprint("k", i), 0.003, 100))
		}
		if cl := JudgeMetric(loss, c, ctl, r).Class; cl == Fail || cl == Marginal {
			alarms++
		}
	}
	share := float64(alarms) / n
	level := r.alpha()
	if limit := level + 2*math.Sqrt(level*(1-level)/n); share > limit {
		t.Errorf("A/A, bursty loss (outages of 100 probes), 4/8, 24 steps: loss fail or marginal in %.1f %% of %d fleets, want at most %.2f %% (%.2f %% with the sample's error)", 100*share, n, 100*level, 100*limit)
	}
}

// TestBreakLogLossPoolsAwayAHostsLoss: without windows before, loss as
// counts is compared on the log scale, so the canary's "typical" loss is
// its hosts' GEOMETRIC mean: one canary host losing everything moves it
// by (log of the ratio)/n, and the effect "in points" is that geometric
// move read at the control's level. Harm concentrated in one host, the
// usual way a canary breaks, is pooled away and the number lies.
//
// Reproduction (lossWindow without baselines: hosts around 0.2 %, 200
// probes a step, 24 steps):
//   - 4 canary and 8 control hosts, canary host c0 losing 100 % of its
//     probes (+25 points on the canary's mean): the judge reads about
//     +0.6 points and is not a fail in 177 of 200 fleets ("marginal:
//     canary worse, maybe within the tolerance +0.50 points: +0.59 points
//     [+0.16, +129.54]").
//   - `--metric loss` alone (Family 1), 8 canary against 16 control, c0
//     losing 20 % (+2.5 points, past the pass bound of +1.5): PASS in
//     300 of 1000 fleets ("not worse: +0.13 points [-0.04, +1.45]").
func TestBreakLogLossPoolsAwayAHostsLoss(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 1))
	lose := func(h Host, share float64) {
		p := &h.Parts[0]
		for i := range p.AfterNum {
			p.AfterNum[i] = math.Round(share * p.AfterDen[i])
			p.After[i] = p.AfterNum[i] / p.AfterDen[i]
		}
	}
	f := lossWindow
	f.Baseline = false
	notFail, lowEffect := 0, 0
	var example string
	for range 200 {
		c, ctl := f.Draw(rng)
		lose(c[0], 1)
		// One host's loss is harm to it, not yet the group's: never a
		// pass, and the number says what it lost (the fix: loss in points
		// also without windows before, and a pass needs every canary host
		// inside the control's range).
		r := JudgeMetric(loss, c, ctl, DefaultRules)
		if r.Class == Pass {
			notFail++
			example = fmt.Sprintf("%s: %s", r.Class, r.Why)
		}
		if r.Effect < 0.25/2 { // half the truth, +12.5 points
			lowEffect++
			example = fmt.Sprintf("%s: %s", r.Class, r.Why)
		}
	}
	if notFail > 0 || lowEffect > 0 {
		t.Errorf("one of 4 canary hosts losing 100 %% (+25 points on the canary's mean): a pass in %d of 200 fleets, effect under half the truth in %d (e.g. %s)", notFail, lowEffect, example)
	}
	f.Canary, f.Control = 8, 16
	passed, example := passes(1000, func() MetricResult {
		c, ctl := f.Draw(rng)
		lose(c[0], 0.2)
		return JudgeMetric(loss, c, ctl, DefaultRules)
	})
	if passed > 0 {
		t.Errorf("one of 8 canary hosts losing 20 %% (+2.5 points on the canary's mean, past the +1.5 bound): pass in %d of 1000 fleets (e.g. %q)", passed, example)
	}
}

// TestBreakOneMuchWorseHostPassesBesideBetterOnes: judge.go promises "a
// canary whose hosts split into much better and much worse cannot pass on
// its mean"; it can, once there are more than a few canary hosts. The
// "excess" that stands for the canary's spread is divided by nc², so one
// host's harm is diluted like the mean is.
//
// Reproduction: testWindow's model (hosts 15 %, steps 20 %, each host's
// window before), 12 canary against 24 control hosts, p99 judged at
// Family 3; the change makes 11 canary hosts 30 % faster and one 3x
// slower (a driver that breaks on one kind of NIC): PASS in 488 of 500
// fleets ("not worse: -19.2 % [-23.8, +12.2]"). With 8 against 16, one
// host 2x slower passes in 401 of 500.
func TestBreakOneMuchWorseHostPassesBesideBetterOnes(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 1))
	r := DefaultRules
	r.Family = 3
	for _, tc := range []struct {
		nc  int
		bad float64
	}{{12, 3}, {8, 2}} {
		f := Synthetic{Canary: tc.nc, Control: 2 * tc.nc, Steps: 24, HostSpread: 0.15, StepNoise: 0.2, Baseline: true}
		passed, example := passes(500, func() MetricResult {
			c, ctl := f.Draw(rng)
			for i, h := range c {
				mult := 0.7
				if i == 0 {
					mult = tc.bad
				}
				for k := range h.Parts[0].After {
					h.Parts[0].After[k] *= mult
				}
			}
			return JudgeMetric(p99, c, ctl, r)
		})
		if passed > 0 {
			t.Errorf("%d canary hosts, one %.0fx slower and the rest 30 %% faster: pass in %d of 500 fleets (e.g. %q); a host that much worse must not pass on the others' mean", tc.nc, tc.bad, passed, example)
		}
	}
}

// TestBreakZeroStepReadAsHugeImprovement: a Ratio value of 0 (or anything
// under 1e-12, or negative) is taken as a real reading of 1e-12 s: on the
// log scale a 4·10¹⁰-fold improvement on a 40 ms level, so ONE such step
// among 24 lowers the host's number by ln(0.04/1e-12)/24 ≈ 1.0 (a factor
// 0.36) and more than cancels a doubling on all the others. Zeros are readings, not improvements: a
// native histogram's quantile in its zero bucket (an idle egress queue,
// lowlat_host_egress_queue_seconds:p50), a gauge just reset to 0 (the
// monitor's jitter after a restart).
//
// Reproduction: testWindow (4 canary, 8 control, 24 steps, baselines),
// the canary 2x slower in every step, each canary host with one step
// reading 0; jitter judged at Family 3: PASS in 200 of 200 fleets ("not
// worse: -29.3 % [-34.6, -24.2]").
func TestBreakZeroStepReadAsHugeImprovement(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 1))
	r := DefaultRules
	r.Family = 3
	f := testWindow
	f.Effect = 1
	passed, example := passes(200, func() MetricResult {
		c, ctl := f.Draw(rng)
		for _, h := range c {
			h.Parts[0].After[0] = 0
		}
		return JudgeMetric(jitter, c, ctl, r)
	})
	if passed > 0 {
		t.Errorf("canary 2x slower with one zero step a host: pass in %d of 200 fleets (e.g. %q); want never a pass", passed, example)
	}
}

// TestBreakLossCountsBesideValuesCompareLogsWithPoints: without windows
// before, whether loss is compared on the log scale is decided by the
// CONTROL's parts (compareOf), but every host with counts is moved to the
// log scale (toLogCounts) and every host without stays in points. Mixed
// input (both forms are valid Parts) compares ln(rate) with rate, and
// nothing refuses it.
//
// Reproduction: 4 canary hosts losing 50 % of 200 probes a step, given as
// counts (AfterNum, AfterDen); 8 control hosts around 0.2 %, given as
// step values only; no windows before. The canary's numbers are
// ln(0.5) ≈ -0.69 against the control's 0.002: PASS, "not worse: -69.09
// points [-69.26, -68.40]". (Counts in the control and values in the canary: +6 "points",
// a fail of a harmless change.)
func TestBreakLossCountsBesideValuesCompareLogsWithPoints(t *testing.T) {
	rng := rand.New(rand.NewPCG(28, 1))
	host := func(name string, rate float64, counts bool) Host {
		p := Part{}
		for range 24 {
			k := float64(binomial(rng, 200, rate))
			p.After = append(p.After, k/200)
			if counts {
				p.AfterNum, p.AfterDen = append(p.AfterNum, k), append(p.AfterDen, 200)
			}
		}
		return Host{Name: name, Parts: []Part{p}}
	}
	var c, ctl []Host
	for i := range 4 {
		c = append(c, host(fmt.Sprint("c", i), 0.5, true))
	}
	for i := range 8 {
		ctl = append(ctl, host(fmt.Sprint("k", i), 0.002*math.Exp(0.5*rng.NormFloat64()), false))
	}
	r := JudgeMetric(loss, c, ctl, DefaultRules)
	if r.Class == Pass || r.Effect < 0 {
		t.Errorf("a canary losing 50 %% (counts) against a control at 0.2 %% (values): %s, effect %+.2f points (%s); want a fail, or refused", r.Class, 100*r.Effect, r.Why)
	}
}

// passes runs trial n times and returns how many of its verdicts passed,
// and the reason the last such gave.
func passes(n int, trial func() MetricResult) (passed int, example string) {
	for range n {
		if r := trial(); r.Class == Pass {
			passed++
			example = r.Why
		}
	}
	return passed, example
}
