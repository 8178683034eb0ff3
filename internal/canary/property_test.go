package canary

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// The judge's properties over generated fleets: the cases that reviews
// found by reading (a trimmed mean cutting the harm, zero variance read as
// certainty, one metric's inconclusive hiding another's fail) were each one
// point of these spaces. Each property runs a fixed seed, which reproduces
// what it found, and a fresh one, printed on failure (-canary.seed N
// replays it).
var propertySeed = flag.Uint64("canary.seed", 0, "the fresh seed of the property tests (0: from the clock)")

// seeds are the fixed seed and a fresh one.
func seeds(t *testing.T) []uint64 {
	fresh := *propertySeed
	if fresh == 0 {
		fresh = uint64(time.Now().UnixNano())
	}
	return []uint64{1, fresh}
}

// fleet is one generated metric's hosts.
type fleet struct {
	m               Metric
	canary, control []Host
	what            string
}

// genFleet draws a fleet of any shape the judge meets: 2 to 6 canary and
// 2 to 12 control hosts, 6 to 48 steps, 1 to 3 parts a host, hosts spread
// from 5 % to 100 %, steps from 2 % to 50 %, windows before for every host,
// none or most, gaps in control hosts, and a canary from twice better to
// three times worse, a quarter of them read from classic buckets; loss as
// counts of 20 to 1,000 probes a step at up to 5 %, the canary up to 10
// points worse or better.
func genFleet(rng *rand.Rand) fleet {
	nc, nk := 2+rng.IntN(5), 2+rng.IntN(11)
	steps, parts := 6+rng.IntN(43), 1+rng.IntN(3)
	spread := math.Exp(math.Log(0.05) + rng.Float64()*math.Log(20))
	noise := math.Exp(math.Log(0.02) + rng.Float64()*math.Log(25))
	baseline := []float64{1, 0, 0.7}[rng.IntN(3)]
	gaps := []float64{0, 0, 0.05}[rng.IntN(3)]
	f := fleet{m: p99}
	isLoss := rng.IntN(3) == 0
	if isLoss {
		f.m = loss
	}
	effect := math.Exp(math.Log(0.5) + rng.Float64()*math.Log(6))
	if rng.IntN(3) == 0 {
		effect = 1
	}
	probes := 20 + rng.IntN(981)
	rate := 0.05 * rng.Float64() * rng.Float64()
	lossEffect := 0.1 * (2*rng.Float64() - 1)
	if rng.IntN(3) == 0 {
		lossEffect = 0
	}
	// A quarter of the times read from lowlat's classic buckets.
	var bounds []float64
	if !isLoss && rng.IntN(4) == 0 {
		bounds = classicBounds()
	}
	f.what = fmt.Sprintf("%s: %d canary, %d control, %d steps, %d parts, spread %.2f, noise %.2f, baseline %.1f, gaps %.2f, effect x%.2f / %+.3f, %d probes at %.4f, %d buckets",
		f.m.Name, nc, nk, steps, parts, spread, noise, baseline, gaps, effect, lossEffect, probes, rate, len(bounds))
	host := func(name string, canary bool) Host {
		h := Host{Name: name}
		withBefore := rng.Float64() < baseline
		for j := range parts {
			level := 0.001 * math.Pow(10, float64(j)) * math.Exp(spread*rng.NormFloat64())
			p := Part{Key: fmt.Sprintf(`target="t%d"`, j), Buckets: bounds}
			window := func(mult, extra float64, gapped bool) (vs, num, den []float64) {
				for range steps {
					if gapped && rng.Float64() < gaps {
						vs, num, den = append(vs, math.NaN()), append(num, math.NaN()), append(den, math.NaN())
						continue
					}
					if isLoss {
						pr := min(max(rate*math.Exp(spread*rng.NormFloat64()/4)+extra, 0), 1)
						k := binomial(rng, probes, pr)
						vs, num, den = append(vs, float64(k)/float64(probes)), append(num, float64(k)), append(den, float64(probes))
						continue
					}
					vs = append(vs, level*mult*math.Exp(noise*rng.NormFloat64()))
				}
				return vs, num, den
			}
			mult, extra := 1.0, 0.0
			if canary {
				mult, extra = effect, lossEffect
			}
			p.After, p.AfterNum, p.AfterDen = window(mult, extra, !canary)
			if withBefore {
				p.Before, p.BeforeNum, p.BeforeDen = window(1, 0, !canary)
			}
			h.Parts = append(h.Parts, p)
		}
		return h
	}
	for i := range nc {
		f.canary = append(f.canary, host(fmt.Sprintf("c%d", i), true))
	}
	for i := range nk {
		f.control = append(f.control, host(fmt.Sprintf("k%d", i), false))
	}
	return f
}

func (f fleet) clone() fleet {
	cp := func(hs []Host) []Host {
		out := make([]Host, len(hs))
		for i, h := range hs {
			out[i] = Host{Name: h.Name}
			for _, p := range h.Parts {
				q := p
				for _, s := range []*[]float64{&q.After, &q.Before, &q.AfterNum, &q.AfterDen, &q.BeforeNum, &q.BeforeDen} {
					if *s != nil {
						*s = append([]float64(nil), *s...)
					}
				}
				out[i].Parts = append(out[i].Parts, q)
			}
		}
		return out
	}
	return fleet{m: f.m, canary: cp(f.canary), control: cp(f.control), what: f.what}
}

// harm makes one canary host worse somewhere: one part's steps (all, or a
// burst of some) slower by up to 10x, or losing more of their probes.
func harm(rng *rand.Rand, f *fleet) string {
	h := &f.canary[rng.IntN(len(f.canary))]
	p := &h.Parts[rng.IntN(len(h.Parts))]
	n := len(p.After)
	from, to := 0, n
	if rng.IntN(2) == 0 { // a burst
		from = rng.IntN(n)
		to = from + 1 + rng.IntN(n-from)
	}
	if f.m.Scale == Points {
		for i := from; i < to; i++ {
			if !finiteNum(p.AfterNum[i]) {
				continue
			}
			p.AfterNum[i] = min(p.AfterDen[i], p.AfterNum[i]+float64(1+rng.IntN(int(p.AfterDen[i]/4)+1)))
			p.After[i] = p.AfterNum[i] / p.AfterDen[i]
		}
		return fmt.Sprintf("host %s part %s steps %d..%d lose more", h.Name, p.Key, from, to)
	}
	k := 1 + 9*rng.Float64()
	for i := from; i < to; i++ {
		p.After[i] *= k
	}
	return fmt.Sprintf("host %s part %s steps %d..%d x%.2f", h.Name, p.Key, from, to, k)
}

// Monotonic in harm: making a canary host's values worse (slower, losing
// more, a burst anywhere) never moves the verdict towards pass, over
// thousands of generated fleets, each made worse three times over.
func TestPropertyMonotonicInHarm(t *testing.T) {
	for _, seed := range seeds(t) {
		rng := rand.New(rand.NewPCG(seed, 2))
		moved := 0
		for run := range 3000 {
			f := genFleet(rng)
			r := DefaultRules
			r.Family = 1 + rng.IntN(3)
			was := JudgeMetric(f.m, f.canary, f.control, r)
			var steps []string
			for range 3 {
				g := f.clone()
				steps = append(steps, harm(rng, &g))
				now := JudgeMetric(g.m, g.canary, g.control, r)
				if now.Class.Severity() < was.Class.Severity() {
					t.Fatalf("seed %d run %d: %s\nmade worse (%v): %s (%s) -> %s (%s)", seed, run, f.what, steps, was.Class, was.Why, now.Class, now.Why)
				}
				if now.Class != was.Class {
					moved++
				}
				// Each bound only rises (to rounding).
				if now.Lo < was.Lo-1e-9*max(1, math.Abs(was.Lo)) || now.Hi < was.Hi-1e-9*max(1, math.Abs(was.Hi)) {
					t.Fatalf("seed %d run %d: %s\nmade worse (%v): bounds [%g, %g] -> [%g, %g]", seed, run, f.what, steps, was.Lo, was.Hi, now.Lo, now.Hi)
				}
				f, was = g, now
			}
		}
		// The property can fail: harm does move verdicts.
		if moved < 500 {
			t.Errorf("seed %d: harm moved only %d verdicts of 9,000: the generated fleets do not exercise the judge", seed, moved)
		}
		t.Logf("seed %d: 9,000 worsenings, %d moved the verdict, none towards pass", seed, moved)
	}
}

// Never pass on thin or degenerate data: whatever the canary did, better
// or worse, a fleet with gaps in a canary host, a canary part that stopped,
// a canary host silent at the window's end, every control host equal, a
// canary host whose quantile never left one classic bucket, one canary
// host, or a control group thinned below its least is inconclusive or fail.
func TestPropertyNeverPassOnThinOrDegenerate(t *testing.T) {
	defects := []struct {
		name string
		// apply returns false where the defect does not apply to f.
		apply func(rng *rand.Rand, f *fleet) bool
	}{
		{"a canary host with gaps", func(rng *rand.Rand, f *fleet) bool {
			h := f.canary[rng.IntN(len(f.canary))]
			for _, p := range h.Parts {
				n := len(p.After)
				keep := rng.IntN(min(n*8/10, 6)) // under 80 % and under 6
				for i, k := range rng.Perm(n) {
					if i >= keep {
						setNaN(p, k)
					}
				}
			}
			return true
		}},
		{"a canary part that stopped", func(rng *rand.Rand, f *fleet) bool {
			h := f.canary[rng.IntN(len(f.canary))]
			p := h.Parts[rng.IntN(len(h.Parts))]
			if p.Before == nil {
				return false
			}
			for i := rng.IntN(len(p.After) / 4); i < len(p.After); i++ {
				setNaN(p, i)
			}
			return true
		}},
		{"a canary host silent at the end", func(rng *rand.Rand, f *fleet) bool {
			h := f.canary[rng.IntN(len(f.canary))]
			p := h.Parts[rng.IntN(len(h.Parts))]
			setNaN(p, len(p.After)-1-rng.IntN(DefaultRules.lastSteps(len(p.After))))
			return true
		}},
		{"every control host equal", func(rng *rand.Rand, f *fleet) bool {
			if f.m.Scale == Points { // counts bound the loss: not degenerate
				f.m = Metric{Name: "loss-without-counts", Scale: Points, Tolerance: 0.005}
				for _, g := range [][]Host{f.canary, f.control} {
					for _, h := range g {
						for i := range h.Parts {
							h.Parts[i].AfterNum, h.Parts[i].AfterDen, h.Parts[i].BeforeNum, h.Parts[i].BeforeDen = nil, nil, nil, nil
						}
					}
				}
			}
			v := f.control[0].Parts[0].After[0]
			if !finiteNum(v) {
				v = 0.01
			}
			for _, h := range f.control {
				for j := range h.Parts {
					p := &h.Parts[j]
					fill(p.After, 0, len(p.After), v)
					fill(p.Before, 0, len(p.Before), v)
				}
			}
			return true
		}},
		{"the canary moving inside classic buckets", func(rng *rand.Rand, f *fleet) bool {
			// Every canary part's true p99 moves up from the bottom of
			// the bucket its window before was in to near its top (up
			// to 2x), and histogram_quantile reads both the same. The
			// control reads as the buckets give it.
			if f.m.Scale != Ratio {
				return false
			}
			bounds := classicBounds()
			read := func(v float64) float64 { return readClassic(min(v, bounds[len(bounds)-1])) }
			// The level each canary part reads: the control's typical
			// level of that part (the canary like the control as read,
			// and up to 2x worse inside the bucket).
			typical := make([]float64, len(f.control[0].Parts))
			for j := range typical {
				var vs []float64
				for _, h := range f.control {
					if j < len(h.Parts) {
						for _, v := range h.Parts[j].After {
							if finiteNum(v) {
								vs = append(vs, v)
							}
						}
					}
				}
				typical[j] = median(vs)
			}
			for _, h := range f.control {
				for j := range h.Parts {
					p := &h.Parts[j]
					p.Buckets = bounds
					for _, vs := range [][]float64{p.After, p.Before} {
						for i, v := range vs {
							if finiteNum(v) {
								vs[i] = read(v)
							}
						}
					}
				}
			}
			for _, h := range f.canary {
				for j := range h.Parts {
					p := &h.Parts[j]
					p.Buckets = bounds
					v := read(min(max(typical[j], bounds[1]), bounds[18]))
					for _, vs := range [][]float64{p.After, p.Before} {
						for i := range vs {
							if finiteNum(vs[i]) {
								vs[i] = v
							}
						}
					}
				}
			}
			return true
		}},
		{"one canary host", func(rng *rand.Rand, f *fleet) bool {
			f.canary = f.canary[:1]
			return true
		}},
		{"a control group thinned below its least", func(rng *rand.Rand, f *fleet) bool {
			for _, h := range f.control[1:] {
				for _, p := range h.Parts {
					for i := range len(p.After) / 2 {
						setNaN(p, 2*i)
					}
				}
			}
			return true
		}},
	}
	for _, seed := range seeds(t) {
		rng := rand.New(rand.NewPCG(seed, 3))
		for _, d := range defects {
			judged := 0
			for run := 0; judged < 1000; run++ {
				f := genFleet(rng)
				if !d.apply(rng, &f) {
					continue
				}
				judged++
				r := DefaultRules
				r.Family = 1 + rng.IntN(3)
				if res := JudgeMetric(f.m, f.canary, f.control, r); res.Class == Pass {
					t.Fatalf("seed %d, %s, run %d: %s\npassed: %s", seed, d.name, run, f.what, res.Why)
				}
			}
		}
		t.Logf("seed %d: %d defects x 1,000 fleets, none passed", seed, len(defects))
	}
}

// setNaN empties step i of a part's judged window.
func setNaN(p Part, i int) {
	for _, s := range [][]float64{p.After, p.AfterNum, p.AfterDen} {
		if i < len(s) {
			s[i] = math.NaN()
		}
	}
}

// aaFleets: 10,000 fleets, so that the share is read within ±0.4 points
// (two standard errors) of the rate the design has: Bonferroni's bound is
// 1 − (1 − 0.05/3)³ = 4.9 % for three independent exact tests, and loss's
// is conservative.
const aaFleets = 10000

// A/A per verdict: identical groups, three metrics judged together (p99,
// jitter, loss), fail or go marginal in at most 5 % of the fleets. Each
// metric alone at 5 % made 8-14 % of harmless canaries marginal.
func TestAAPerVerdict(t *testing.T) {
	ms := []Metric{p99, jitter, loss}
	for _, baseline := range []bool{true, false} {
		rng := rand.New(rand.NewPCG(14, 1))
		lat, lw := testWindow, lossWindow
		lat.Baseline, lw.Baseline = baseline, baseline
		r := DefaultRules
		r.Family = len(ms)
		alarms, alone := 0, 0
		for range aaFleets {
			var rs []MetricResult
			single := false
			for _, m := range ms {
				var c, ctl []Host
				if m.Scale == Points {
					c, ctl = lw.Draw(rng)
				} else {
					c, ctl = lat.Draw(rng)
				}
				rs = append(rs, JudgeMetric(m, c, ctl, r))
				one := DefaultRules
				if cl := JudgeMetric(m, c, ctl, one).Class; cl == Fail || cl == Marginal {
					single = true
				}
			}
			if v := Combine(ms, rs, nil, nil); v.Class == Fail || v.Class == Marginal {
				alarms++
			}
			if single {
				alone++
			}
		}
		share, shareAlone := float64(alarms)/aaFleets, float64(alone)/aaFleets
		t.Logf("A/A, baseline %v, three metrics: fail or marginal in %.1f %% of %d fleets (each metric at 5 %% alone: %.1f %%)", baseline, 100*share, aaFleets, 100*shareAlone)
		if limit := 0.05 + 2*math.Sqrt(0.05*0.95/aaFleets); share > limit {
			t.Errorf("A/A, baseline %v: fail or marginal in %.2f %% of %d fleets, want at most 5 %% (%.2f %% with the sample's error)", baseline, 100*share, aaFleets, 100*limit)
		}
	}
}

// A pass rules out harm at the bound: a canary exactly 3 tolerances worse
// (+15 % on p99, +1.5 points of loss) passes in at most Alpha/Family of
// fleets, in every group size of the power table, with windows before and
// without. The bound's error is the least over floored canary numbers,
// which is under Welch's: this is the check that it still covers.
func TestPassRulesOutTheBound(t *testing.T) {
	r := DefaultRules
	r.Family = 3
	const n = 4000
	limit := r.alpha() + 2*math.Sqrt(r.alpha()*(1-r.alpha())/n)
	for _, g := range [][2]int{{2, 4}, {2, 8}, {4, 8}, {8, 16}} {
		for _, baseline := range []bool{true, false} {
			lat := Synthetic{Canary: g[0], Control: g[1], Steps: 24, HostSpread: 0.15, StepNoise: 0.2, Effect: 0.15, Baseline: baseline}
			lw := SyntheticLoss{Canary: g[0], Control: g[1], Steps: 24, Probes: 200, Rate: 0.002, HostSpread: 0.5, Effect: 0.015, Baseline: baseline}
			for _, c := range []struct {
				m Metric
				f Drawer
			}{{p99, lat}, {loss, lw}} {
				got := Share(c.f, c.m, r, Pass, n, uint64(31+g[0]))
				t.Logf("%d/%d, baseline %v, %s at the bound: pass in %.2f %%", g[0], g[1], baseline, c.m.Name, 100*got)
				if got > limit {
					t.Errorf("%d/%d, baseline %v, %s at the bound: pass in %.2f %% of %d fleets, want at most %.2f %% (%.2f %% with the sample's error)", g[0], g[1], baseline, c.m.Name, 100*got, n, 100*r.alpha(), 100*limit)
				}
			}
		}
	}
}
