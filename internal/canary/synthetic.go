package canary

import (
	"math"
	"math/rand/v2"
)

// Synthetic draws a fleet's per-host, per-step p99s, for the judge's tests
// and its power table (bench/canary): each host has a level of its own
// (lognormal around 20 ms, HostSpread the σ of its log: the noise between
// hosts), each step a value around it (StepNoise, the σ of its log), and
// the canary hosts' window is (1+Effect) times their level.
type Synthetic struct {
	Canary, Control int
	Steps           int
	HostSpread      float64
	StepNoise       float64
	Effect          float64
	// Baseline: each host's steps before the change are drawn too.
	Baseline bool
}

// Draw draws one fleet.
func (f Synthetic) Draw(rng *rand.Rand) (canary, control []Host) {
	host := func(effect float64) Host {
		level := 0.020 * math.Exp(f.HostSpread*rng.NormFloat64())
		steps := func(mult float64) []float64 {
			vs := make([]float64, f.Steps)
			for i := range vs {
				vs[i] = level * mult * math.Exp(f.StepNoise*rng.NormFloat64())
			}
			return vs
		}
		h := Host{After: steps(1 + effect)}
		if f.Baseline {
			h.Before = steps(1)
		}
		return h
	}
	for range f.Canary {
		canary = append(canary, host(f.Effect))
	}
	for range f.Control {
		control = append(control, host(0))
	}
	return canary, control
}

// Share is the share of n fleets drawn from seed that JudgeMetric judges
// class.
func (f Synthetic) Share(m Metric, r Rules, class Class, n int, seed uint64) float64 {
	rng := rand.New(rand.NewPCG(seed, 1))
	k := 0
	for range n {
		c, ctl := f.Draw(rng)
		if JudgeMetric(m, c, ctl, r).Class == class {
			k++
		}
	}
	return float64(k) / float64(n)
}
