package canary

import (
	"math"
	"math/rand/v2"
	"strconv"
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
		after := steps(1 + effect)
		var before []float64
		if f.Baseline {
			before = steps(1)
		}
		return Single("", after, before)
	}
	for i := range f.Canary {
		h := host(f.Effect)
		h.Name = "c" + strconv.Itoa(i)
		canary = append(canary, h)
	}
	for i := range f.Control {
		h := host(0)
		h.Name = "k" + strconv.Itoa(i)
		control = append(control, h)
	}
	return canary, control
}

// SyntheticLoss draws a fleet's probes, sent and lost per step: each host
// loses at a rate of its own (lognormal around Rate, HostSpread the σ of
// its log), each probe independently; the canary loses Effect more (points)
// in its window.
type SyntheticLoss struct {
	Canary, Control int
	Steps           int
	// Probes is how many probes a host sends a step.
	Probes     int
	Rate       float64
	HostSpread float64
	Effect     float64
	Baseline   bool
}

// Draw draws one fleet.
func (f SyntheticLoss) Draw(rng *rand.Rand) (canary, control []Host) {
	host := func(name string, effect float64) Host {
		rate := f.Rate * math.Exp(f.HostSpread*rng.NormFloat64())
		steps := func(p float64) (vs, num, den []float64) {
			p = min(max(p, 0), 1)
			for range f.Steps {
				n := binomial(rng, f.Probes, p)
				vs = append(vs, float64(n)/float64(f.Probes))
				num = append(num, float64(n))
				den = append(den, float64(f.Probes))
			}
			return vs, num, den
		}
		p := Part{}
		p.After, p.AfterNum, p.AfterDen = steps(rate + effect)
		if f.Baseline {
			p.Before, p.BeforeNum, p.BeforeDen = steps(rate)
		}
		return Host{Name: name, Parts: []Part{p}}
	}
	for i := range f.Canary {
		canary = append(canary, host("c"+strconv.Itoa(i), f.Effect))
	}
	for i := range f.Control {
		control = append(control, host("k"+strconv.Itoa(i), 0))
	}
	return canary, control
}

// binomial draws how many of n trials of probability p succeed, exactly:
// by geometric jumps from one success to the next (as many draws as
// successes, so a fleet of 1,000 probes a step at 1 % loss is cheap).
func binomial(rng *rand.Rand, n int, p float64) int {
	switch {
	case p <= 0:
		return 0
	case p >= 1:
		return n
	case p > 0.5:
		return n - binomial(rng, n, 1-p)
	}
	l := math.Log1p(-p)
	k, i := 0, 0
	for {
		i += int(math.Floor(math.Log(1-rng.Float64())/l)) + 1
		if i > n {
			return k
		}
		k++
	}
}

// Drawer draws one fleet of one metric's hosts.
type Drawer interface {
	Draw(rng *rand.Rand) (canary, control []Host)
}

// Share is the share of n fleets drawn from seed that JudgeMetric judges
// class.
func Share(f Drawer, m Metric, r Rules, class Class, n int, seed uint64) float64 {
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

// Share is the share of n fleets drawn from seed that JudgeMetric judges
// class.
func (f Synthetic) Share(m Metric, r Rules, class Class, n int, seed uint64) float64 {
	return Share(f, m, r, class, n, seed)
}
