package autorate

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"
)

// link is a fluid model of a capped uplink: the host's shaper sends at its
// rate (the upload always has data), the provider drains at its cap and
// buffers the excess up to a depth in time, as bufferbloat-uplink's provider.
type link struct {
	cap   float64 // bit/s
	queue float64 // bits queued at the provider
	// bucket is the provider limiter's bucket (bits), tokens what it
	// holds: a token bucket lets an excess through unseen until it is
	// spent. The lab's provider keeps 50 ms of its highest step's rate.
	bucket, tokens float64
	buffer         time.Duration
	base           time.Duration // RTT without queue
	sent           uint64        // bytes through the shaper
	srtt           float64       // the passive signal's smoothing, seconds
	demand         float64       // 0: always backlogged; else the host's offered load (bit/s)
	// fill is the least share of its rate the shaper carries in a tick
	// (uniform from fill to 1; 0: all of it): TCP behind a tbf whose
	// queue holds 20 ms leaves it idle now and then (see tbfFill).
	fill    float64
	noise   func() time.Duration
	lost    bool // reflectors stop answering
	noisy   int  // index of a reflector that adds spikes
	rng     *rand.Rand
	refl    int // reflectors
	passive bool
	// past holds the last ticks' queue delays: a probe reads the queue
	// as it was when it was sent. seen is the last tick's reading.
	past   []time.Duration
	seen   time.Duration
	minSer float64 // the least serialization time seen (min_rtt's part), s
	out    float64 // what the shaper carried in the last tick, bit/s
}

// mtuWait is a random wait behind one 1514-byte packet at rate (bit/s).
func (l *link) mtuWait(rate float64) time.Duration {
	return time.Duration(l.rng.Float64() * 1514 * 8 / rate * float64(time.Second))
}

// tick moves the model by dt at shaper rate r and returns the controller's
// input and the provider's queue delay.
func (l *link) tick(at time.Time, dt time.Duration, r uint64) (Input, time.Duration) {
	out := float64(r)
	if l.demand > 0 {
		out = math.Min(out, l.demand)
	}
	if l.fill > 0 {
		out *= l.fill + (1-l.fill)*l.rng.Float64()
	}
	l.out = out
	secs := dt.Seconds()
	l.sent += uint64(out * secs / 8)
	avail := l.cap*secs + l.tokens
	sendable := out*secs + l.queue
	sends := math.Min(sendable, avail)
	delivered := sends / secs
	l.tokens = math.Min(avail-sends, l.bucket)
	l.queue = math.Min(sendable-sends, l.cap*l.buffer.Seconds())
	qd := time.Duration(l.queue / l.cap * float64(time.Second))
	// A probe answered in this tick was sent its round trip ago, and
	// reads the queue as it was then: the tick's reading is the least of
	// the probes sent at the end of past ticks that came back within this
	// one (none, when the queue grows faster than time passes: the
	// reading before). How long ago a probe was sent is its own queue's
	// depth, not the queue's now: looked back by the queue now, a queue
	// growing by a second each second read the empty queue of seconds
	// before, and a shallow one the queue of this very tick, a tick
	// sooner than the daemon can see it.
	l.past = append(l.past, qd)
	if len(l.past) > 40 {
		l.past = l.past[1:]
	}
	seen := time.Duration(-1)
	for j := range l.past {
		q := l.past[len(l.past)-1-j]
		if ago := time.Duration(j)*dt - q - l.base; ago >= 0 && ago < dt && (seen < 0 || q < seen) {
			seen = q
		}
	}
	if seen < 0 {
		seen = l.seen
	}
	l.seen = seen
	in := Input{At: at, SentBytes: l.sent}
	if l.passive && out > 0 {
		// What the connections got acknowledged in a tick scatters with
		// the ACK clock: on the lab's host the cuts' estimates from it
		// read 0.79–1.06 of the cap (five cuts, host run of
		// capped-uplink-varying).
		in.Delivered = delivered * (0.79 + 0.27*l.rng.Float64())
		// srtt moves 1/8 toward each ACK's RTT sample; with delayed ACKs
		// one ACK comes per two 1514-byte packets delivered: ~8 a tick at
		// 1 Mbit/s leave 1-(7/8)^8 = 0.66 of a change seen within the
		// tick, ~25 at 3 Mbit/s 0.96.
		acks := math.Min(out, l.cap) * secs / (2 * 1514 * 8)
		// Packets are not fluid: each data packet is serialized at the
		// shaper and at the provider, and its delayed ACK waits for the
		// next one; min_rtt keeps the least that ever took.
		ser := 1514 * 8 * (2/float64(r) + 1/l.cap)
		if l.minSer == 0 || ser < l.minSer {
			l.minSer = ser
		}
		l.srtt += (1 - math.Pow(7.0/8, acks)) * (seen.Seconds() + ser - l.srtt)
		in.Readings = append(in.Readings, Reading{Signal: "passive", Value: time.Duration((l.srtt - l.minSer) * float64(time.Second)), Relative: true})
	}
	if !l.lost {
		for i := 0; i < l.refl; i++ {
			var vs []time.Duration
			for range probesPerTick {
				// One-way delay with a clock offset per reflector.
				v := time.Duration(i)*37*time.Millisecond + l.base/2 + seen
				if l.noise != nil {
					v += l.noise()
				}
				if i == l.noisy && l.rng.Intn(4) == 0 {
					v += time.Duration(20+l.rng.Intn(60)) * time.Millisecond
				}
				// A probe waits behind the packet being sent at the
				// shaper (as often as it has one) and at the provider.
				if l.rng.Float64() < out/float64(r) {
					v += l.mtuWait(float64(r))
				}
				if l.queue > 0 || l.rng.Float64() < out/l.cap {
					v += l.mtuWait(l.cap)
				}
				vs = append(vs, v)
			}
			v := slices.Min(vs) // the daemon's reading of a tick
			in.Readings = append(in.Readings, Reading{Signal: "owd:r" + string(rune('0'+i)), Value: v})
		}
	}
	return in, qd
}

// probesPerTick is how many probes a lone reflector gets a tick (the
// daemon's, see probeInterval).
const probesPerTick = 4

type trace struct {
	at    []time.Duration
	rate  []uint64
	cap   []float64
	out   []float64 // what the shaper carried
	delay []time.Duration
	dec   []Decision
}

// run drives a controller over the model for d, calling change at every
// tick (to move the cap or break a signal).
func run(t *testing.T, c *Controller, l *link, d time.Duration, change func(time.Duration, *link)) *trace {
	t.Helper()
	return runEdited(t, c, l, d, change, nil)
}

func policy() Policy {
	return Policy{Iface: "eth0", Min: 500_000, Base: 1_800_000, Max: 4_000_000, Reflectors: []string{"a:1", "b:1", "c:1"}, Passive: true}
}

func newLink(refl int, passive bool) *link { return seededLink(refl, passive, 1) }

// seededLink is newLink with its noise and packet scatter drawn from seed.
func seededLink(refl int, passive bool, seed int64) *link {
	rng := rand.New(rand.NewSource(seed))
	return &link{cap: 2e6, buffer: 5 * time.Second, base: 40 * time.Millisecond, refl: refl, passive: passive, noisy: -1, rng: rng,
		bucket: 3e6 / 20,
		noise:  func() time.Duration { return time.Duration(rng.Intn(2000)) * time.Microsecond }}
}

// stepSchedule is the lab's capped-uplink-varying: 2 → 1 → 3 → 2 Mbit/s
// every 30 s.
func stepSchedule(el time.Duration, l *link) {
	l.cap = []float64{2e6, 1e6, 3e6, 2e6}[min(int(el/(30*time.Second)), 3)]
}

func pct(v []time.Duration, p float64) time.Duration {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[int(math.Ceil(p*float64(len(s))))-1]
}

// figures are the lab's measures of a trace of the step schedule.
type figures struct {
	p99   time.Duration    // queue delay p99, the 5 s after each step left out
	share [4]float64       // goodput over the cap, per step
	conv  [4]time.Duration // to within 10 % of the cap, per step (-1: never)
	rsd   [4]float64       // the rate's relative std in each step's second half
}

func measure(tr *trace) figures {
	var f figures
	step := 30 * time.Second
	var settled []time.Duration
	for i, at := range tr.at {
		if at%step >= 5*time.Second {
			settled = append(settled, tr.delay[i])
		}
	}
	f.p99 = pct(settled, 0.99)
	for s := 0; s < 4; s++ {
		var got, capSum float64
		f.conv[s] = -1
		var flat []float64
		for i, at := range tr.at {
			if at < time.Duration(s)*step || at >= time.Duration(s+1)*step {
				continue
			}
			c := tr.cap[i]
			got += math.Min(tr.out[i], c)
			capSum += c
			if f.conv[s] < 0 && math.Abs(float64(tr.rate[i])-c)/c <= 0.10 {
				f.conv[s] = at - time.Duration(s)*step
			}
			if at%step >= 15*time.Second {
				flat = append(flat, float64(tr.rate[i]))
			}
		}
		f.share[s], f.rsd[s] = got/capSum, relStd(flat)
	}
	return f
}

// bounds are limits on figures: the targets, or a guard.
type bounds struct {
	p99      time.Duration
	share    float64
	down, up time.Duration // convergence after a step down, after the step up
	rsd      float64
}

// with is b changed by set: a bound derived from another differs from it
// only where set says.
func (b bounds) with(set func(*bounds)) bounds {
	set(&b)
	return b
}

// targets are the lab's expectations (issue 14).
var targets = bounds{p99: 30 * time.Millisecond, share: 0.85, down: 5 * time.Second, up: 10 * time.Second, rsd: 0.05}

// misses lists where f falls outside b.
func (f figures) misses(b bounds) []string {
	var out []string
	if f.p99 > b.p99 {
		out = append(out, fmt.Sprintf("queue delay p99 %v outside the 5 s after each step, want ≤ %v", f.p99, b.p99))
	}
	for s := 0; s < 4; s++ {
		if f.share[s] < b.share {
			out = append(out, fmt.Sprintf("step %d: goodput %.0f%% of the cap, want ≥ %.0f%%", s, f.share[s]*100, b.share*100))
		}
		limit := b.down
		if s == 2 {
			limit = b.up
		}
		if s > 0 && (f.conv[s] < 0 || f.conv[s] > limit) {
			out = append(out, fmt.Sprintf("step %d: within 10%% of the cap after %v, want ≤ %v", s, f.conv[s], limit))
		}
		if f.rsd[s] > b.rsd {
			out = append(out, fmt.Sprintf("step %d: rate's relative std %.1f%% in the flat part, want ≤ %.0f%%", s, f.rsd[s]*100, b.rsd*100))
		}
	}
	return out
}

// The bounds below are measured on the model, with margin: none is a
// target. Since its probes read the queue a round trip late (see
// link.tick), the model's medians sit where the kernels' runs do (lab vm,
// reflector and passive: 82–115 ms added p99; passive alone: 85–169 ms),
// and no configuration meets the delay target on it; the misses are logged
// (issue 14). Before, its probes read the queue of the very tick they came
// back in, and the reflectors alone met every target on it.

// guard bounds the worst of the seeds (see checkSeeds): a change that
// loses badly on any one of them fails here even when the median holds.
// The worst of 20 draws: queue p99 up to 121 ms (one reflector alone);
// goodput 76 % and more; 8.4 s down and 12 s up at worst; rsd up to 14 %.
var guard = bounds{p99: 140 * time.Millisecond, share: 0.7, down: 11 * time.Second, up: 14 * time.Second, rsd: 0.18}

// withPassive and passiveAlone bound the median where the passive signal
// takes part: it carries the ACK clock's scatter into the cuts' estimates
// of the cap (what the connections got acknowledged in one tick read
// 0.79–1.06 of the cap on the lab's host), and srtt's smoothing into the
// delay. Medians of 20 draws: queue p99 72.3 ms with the lab's reflector,
// 86.5 ms passive alone; goodput 84 % and 86 %; rsd 10.0 % and 11.0 %.
// reflectorsAlone bounds one and three reflectors alone: 71.1 and 58.6 ms,
// goodput 87 % and 88 %, rsd 6.1 % and 5.3 %.
var (
	withPassive     = bounds{p99: 85 * time.Millisecond, share: 0.8, down: 5 * time.Second, up: 10 * time.Second, rsd: 0.12}
	passiveAlone    = bounds{p99: 100 * time.Millisecond, share: 0.8, down: 5 * time.Second, up: 10 * time.Second, rsd: 0.13}
	reflectorsAlone = bounds{p99: 85 * time.Millisecond, share: 0.83, down: 5 * time.Second, up: 10 * time.Second, rsd: 0.075}
)

// tbfFill is the model's fill behind a tbf: on the lab's host the load at
// the daemon's changes averaged 0.955, a tick's from 0.8 to 1.05 (0.99 in
// the VM, behind cake).
const tbfFill = 0.91

// behindTbf bounds the median where the connections leave the shaper idle
// now and then (tbfFill). Medians of 20 draws: queue p99 73.5 ms with the
// lab's reflector and passive signal, 78.3 passive alone, 84.9 and 88.6
// with one and three reflectors alone; goodput 82–87 %; rsd 8.2–10.9 %.
var behindTbf = bounds{p99: 105 * time.Millisecond, share: 0.78, down: 5 * time.Second, up: 10 * time.Second, rsd: 0.13}

// guardTbf is guard behind a tbf: the worst draws read 134 ms of queue
// p99, 71 % goodput and a 14 s step up there.
var guardTbf = guard.with(func(b *bounds) { b.p99, b.share, b.up, b.rsd = 160*time.Millisecond, 0.65, 17*time.Second, 0.2 })

// seeds is how many draws of the model's noise each step-schedule test
// runs: one run is one sample, as in the lab.
// seeds is how many draws of the model's noise a figure's median is taken
// over; LOWLAT_AUTORATE_SEEDS sets more when tuning (medians of 20 draws
// move by a few ms from one change to the next).
var seeds = 20

func init() {
	if n, err := strconv.Atoi(os.Getenv("LOWLAT_AUTORATE_SEEDS")); err == nil && n > 0 {
		seeds = n
	}
}

// checkSeeds runs the step schedule over seeds draws of the model's noise
// and scatter. The median of each figure must stay within median (bounds
// measured on the model), and its misses of the targets are logged;
// the worst must stay within the guard.
func checkSeeds(t *testing.T, p Policy, refl int, passive bool, fill float64, median, guard bounds) {
	t.Helper()
	med, worst := summarize(sample(t, p, refl, passive, func(l *link) { l.fill = fill }))
	for _, m := range med.misses(median) {
		t.Errorf("median of %d seeds: %s", seeds, m)
	}
	for _, m := range med.misses(targets) {
		t.Logf("median of %d seeds: target missed: %s", seeds, m)
	}
	for _, m := range worst.misses(guard) {
		t.Errorf("worst of %d seeds: %s", seeds, m)
	}
	for _, f := range []struct {
		name string
		f    figures
	}{{"median", med}, {"worst", worst}} {
		t.Logf("%s of %d seeds: queue p99 %v, goodput %.2f, down %v and %v, up %v, rsd %.3f",
			f.name, seeds, f.f.p99, slices.Min(f.f.share[:]), f.f.conv[1], f.f.conv[3], f.f.conv[2], slices.Max(f.f.rsd[:]))
	}
}

// sample runs the step schedule over seeds draws of the model's noise and
// scatter; tweak, when given, changes each link first.
func sample(t *testing.T, p Policy, refl int, passive bool, tweak func(*link)) []figures {
	return sampleWith(t, p, DefaultConfig(), refl, passive, tweak)
}

// sampleWith is sample with the law's tuning cfg.
func sampleWith(t *testing.T, p Policy, cfg Config, refl int, passive bool, tweak func(*link)) []figures {
	var all []figures
	for seed := int64(1); seed <= int64(seeds); seed++ {
		l := seededLink(refl, passive, seed)
		if tweak != nil {
			tweak(l)
		}
		all = append(all, measure(run(t, NewController(p, cfg), l, 120*time.Second, stepSchedule)))
	}
	return all
}

// summarize is the median and the worst of each figure over runs (a step
// that never converged counts as an hour).
func summarize(all []figures) (med, worst figures) {
	pick := func(get func(figures) float64, worstIsMax bool) (float64, float64) {
		var v []float64
		for _, f := range all {
			v = append(v, get(f))
		}
		slices.Sort(v)
		w := v[0]
		if worstIsMax {
			w = v[len(v)-1]
		}
		return v[len(v)/2], w
	}
	conv := func(d time.Duration) float64 {
		if d < 0 {
			return float64(time.Hour)
		}
		return float64(d)
	}
	m, w := pick(func(f figures) float64 { return float64(f.p99) }, true)
	med.p99, worst.p99 = time.Duration(m), time.Duration(w)
	for s := 0; s < 4; s++ {
		med.share[s], worst.share[s] = pick(func(f figures) float64 { return f.share[s] }, false)
		med.rsd[s], worst.rsd[s] = pick(func(f figures) float64 { return f.rsd[s] }, true)
		m, w := pick(func(f figures) float64 { return conv(f.conv[s]) }, true)
		med.conv[s], worst.conv[s] = time.Duration(m), time.Duration(w)
	}
	return med, worst
}

func relStd(v []float64) float64 {
	var sum, sq float64
	for _, x := range v {
		sum += x
	}
	mean := sum / float64(len(v))
	for _, x := range v {
		sq += (x - mean) * (x - mean)
	}
	return math.Sqrt(sq/float64(len(v))) / mean
}

// The lab's capped-uplink-varying on the model, with its provider's token
// bucket: one reflector and the passive signal (the lab's
// autorate-reflector), the passive signal alone (autorate-passive), and
// reflectors alone, one and three.
//
// Behind cake the connections keep the shaper busy (fill 0: the VM's loads
// averaged 0.99); behind a tbf whose queue holds 20 ms they leave it idle
// now and then (tbfFill).
func TestStepSchedule(t *testing.T) {
	for _, tt := range []struct {
		name    string
		refl    int
		passive bool
		fill    float64
		median  bounds
		guard   bounds
	}{
		{"reflector and passive", 1, true, 0, withPassive, guard},
		{"passive alone", 0, true, 0, passiveAlone, guard},
		{"one reflector alone", 1, false, 0, reflectorsAlone, guard},
		{"three reflectors alone", 3, false, 0, reflectorsAlone, guard},
		{"tbf: reflector and passive", 1, true, tbfFill, behindTbf, guardTbf},
		{"tbf: passive alone", 0, true, tbfFill, behindTbf, guardTbf},
		{"tbf: one reflector alone", 1, false, tbfFill, behindTbf, guardTbf},
		{"tbf: three reflectors alone", 3, false, tbfFill, behindTbf, guardTbf},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := policy()
			p.Reflectors, p.Passive = p.Reflectors[:tt.refl], tt.passive
			checkSeeds(t, p, tt.refl, tt.passive, tt.fill, tt.median, tt.guard)
		})
	}
}

// Reflectors going silent mid-run must not move the rate: no signal is not
// bloat (cake-autorate #326, sqm-autorate #152).
func TestReflectorLossHolds(t *testing.T) {
	p := policy()
	p.Passive = false
	c := NewController(p, DefaultConfig())
	l := newLink(3, false)
	tr := run(t, c, l, 60*time.Second, func(el time.Duration, l *link) { l.lost = el >= 20*time.Second })
	before := tr.rate[int(20*time.Second/c.cfg.Tick)-1]
	for i, at := range tr.at {
		if at < 20*time.Second {
			continue
		}
		if tr.rate[i] != before {
			t.Fatalf("at %v the rate moved from %d to %d with no signal", at, before, tr.rate[i])
		}
		if tr.dec[i].Reason != "no-signal" {
			t.Fatalf("at %v reason %q, want no-signal", at, tr.dec[i].Reason)
		}
	}
	if before < 1_700_000 {
		t.Errorf("rate before the outage %d, want near the 2 Mbit/s cap", before)
	}
}

// With the reflectors gone and the passive signal clean, the rate holds on
// the passive signal and never drops to the minimum.
func TestReflectorLossPassiveCarries(t *testing.T) {
	var p99s []time.Duration
	var lows []uint64
	for seed := int64(1); seed <= int64(seeds); seed++ {
		c := NewController(policy(), DefaultConfig())
		tr := run(t, c, seededLink(3, true, seed), 60*time.Second, func(el time.Duration, l *link) { l.lost = el >= 20*time.Second })
		lowest := uint64(math.MaxUint64)
		var after []time.Duration
		for i, at := range tr.at {
			if at >= 25*time.Second {
				lowest = min(lowest, tr.rate[i])
				after = append(after, tr.delay[i])
			}
		}
		// Never at --min, in any draw.
		if lowest <= c.pol.Min || lowest < 1_500_000 {
			t.Errorf("seed %d: lowest rate %d after the reflectors went: want 75 %% of the 2 Mbit/s cap at worst, never --min", seed, lowest)
		}
		lows = append(lows, lowest)
		p99s = append(p99s, pct(after, 0.99))
	}
	// The lab's outage expectation over the draws' median: the rate stays
	// at 80 % of the cap or more; the queue's p99 within the passive
	// signal's measured bound (withPassive).
	slices.Sort(lows)
	med, low := pct(p99s, 0.5), lows[len(lows)/2]
	t.Logf("after the reflectors went, over %d draws: lowest rate median %d, worst %d; queue p99 median %v, worst %v", seeds, low, lows[0], med, pct(p99s, 1))
	if low < 1_600_000 {
		t.Errorf("median lowest rate %d after the reflectors went: want ≥ 80 %% of the 2 Mbit/s cap", low)
	}
	if med > withPassive.p99 {
		t.Errorf("median queue p99 %v after the reflectors went, want ≤ %v", med, withPassive.p99)
	}
}

// An idle link: no increase (nothing is learnt), the rate drifts back to
// base, and after IdleAfter the daemon is told to pause its probes.
func TestIdle(t *testing.T) {
	c := NewController(policy(), DefaultConfig())
	l := newLink(3, true)
	// Busy at first so the rate moves off base, then idle.
	tr := run(t, c, l, 100*time.Second, func(el time.Duration, l *link) {
		if el >= 20*time.Second {
			l.demand = 1 // bit/s: nothing
		}
	})
	last := tr.dec[len(tr.dec)-1]
	if !last.Idle {
		t.Errorf("idle for 80 s but Idle false")
	}
	for i, at := range tr.at {
		if at >= 21*time.Second && tr.dec[i].Direction == "up" {
			t.Fatalf("at %v: %s while idle", at, tr.dec[i].Key())
		}
		if at < 20*time.Second && tr.dec[i].Idle {
			t.Fatalf("at %v: idle while busy", at)
		}
	}
	if r := c.Rate(); r != c.pol.Base {
		mv := math.Abs(float64(r)-float64(c.pol.Base)) / float64(c.pol.Base)
		if mv > 0.02 {
			t.Errorf("rate %d after 80 s idle, want drifting back to base %d", r, c.pol.Base)
		}
	}
}

// One reflector out of three adds random spikes of 20–80 ms to a quarter
// of its samples: the vote (the middle of three) ignores it and the rate stays near the
// cap.
func TestNoisyReflector(t *testing.T) {
	p := policy()
	p.Passive = false
	l := newLink(3, false)
	l.noisy = 1
	c := NewController(p, DefaultConfig())
	tr := run(t, c, l, 60*time.Second, nil)
	for i, d := range tr.dec {
		if tr.at[i] > 10*time.Second && d.Direction == "down" && tr.delay[i] < 5*time.Millisecond {
			t.Errorf("at %v: cut on a noisy reflector with the queue at %v", tr.at[i], tr.delay[i])
		}
	}
	var flat []float64
	for i, at := range tr.at {
		if at >= 20*time.Second {
			flat = append(flat, float64(tr.rate[i]))
		}
	}
	if rsd := relStd(flat); rsd > 0.05 {
		t.Errorf("rate rsd %.1f%% with one noisy reflector, want ≤ 5%%", rsd*100)
	}
	// A single noisy reflector does trip the law: that is the control.
	l2 := newLink(1, false)
	l2.noisy = 0
	p.Reflectors = p.Reflectors[:1]
	tr2 := run(t, NewController(p, DefaultConfig()), l2, 60*time.Second, nil)
	cuts := 0
	for _, d := range tr2.dec {
		if d.Direction == "down" {
			cuts++
		}
	}
	if cuts == 0 {
		t.Errorf("the noisy reflector alone never caused a cut: the test's noise is too weak to show anything")
	}
}

// Bounds narrower than the cap: 1.5–2.5 Mbit/s while the cap steps 2 → 1 →
// 3 → 2. Step keeps the rate within them itself, so what is tested here is
// the law at its bounds, over 20 draws of the model: where the cap is over
// --max (the 3 Mbit/s step) the law does not take its own bound for a cap
// (it sits at max and cuts nothing); where the cap is under --min it sits at
// min; and what it learnt at a bound does not hold it there after the cap
// moves back inside (the last step, 2 Mbit/s, is reached within 5 s). Every
// decision says what it did: a bound that stops a change is a hold, not a
// cut or a rise that never happened (the adjustment counters export them).
func TestLawAtItsBounds(t *testing.T) {
	p := policy()
	p.Min, p.Max = 1_500_000, 2_500_000
	for seed := int64(1); seed <= 20; seed++ {
		tr := run(t, NewController(p, DefaultConfig()), seededLink(3, true, seed), 120*time.Second, stepSchedule)
		var atMax, inHigh, cutsHigh, atMin int
		conv := time.Duration(-1)
		for i, d := range tr.dec {
			at := tr.at[i]
			switch {
			case d.Direction == "up" && d.Rate <= d.Old, d.Direction == "down" && d.Rate >= d.Old,
				(d.Direction == "hold" || d.Direction == "") && d.Rate != d.Old:
				t.Fatalf("seed %d at %v: %s from %d to %d", seed, at, d.Key(), d.Old, d.Rate)
			}
			switch {
			case at >= 40*time.Second && at < 60*time.Second && d.Rate == p.Min:
				atMin++
			case at >= 75*time.Second && at < 90*time.Second:
				// The flat half of the 3 Mbit/s step, over --max.
				inHigh++
				if d.Rate == p.Max {
					atMax++
				}
				if d.Direction == "down" {
					cutsHigh++
				}
			case at >= 90*time.Second && conv < 0 && math.Abs(float64(d.Rate)-2e6) <= 0.1*2e6:
				conv = at - 90*time.Second
			}
		}
		if atMin == 0 {
			t.Errorf("seed %d: the cap fell under --min but the rate never reached min", seed)
		}
		if float64(atMax) < 0.9*float64(inHigh) || cutsHigh > 0 {
			t.Errorf("seed %d: with the cap over --max, the rate sat at max in %d of %d ticks and was cut %d times", seed, atMax, inHigh, cutsHigh)
		}
		if conv < 0 || conv > 5*time.Second {
			t.Errorf("seed %d: from max, within 10%% of the 2 Mbit/s cap after %v, want ≤ 5 s", seed, conv)
		}
	}
}

func TestThresholdAddsMTUTime(t *testing.T) {
	c := NewController(policy(), DefaultConfig())
	if got, want := c.threshold(2_000_000), DefaultThreshold+6056*time.Microsecond; got != want {
		t.Errorf("threshold at 2 Mbit/s %v, want %v", got, want)
	}
}

func TestStopReturnsToBase(t *testing.T) {
	c := NewController(policy(), DefaultConfig())
	run(t, c, newLink(3, true), 40*time.Second, stepSchedule)
	d := c.Stop(time.Now())
	if d.Rate != c.pol.Base || d.Key() != "base/stop" || c.Rate() != c.pol.Base {
		t.Errorf("stop: %+v", d)
	}
}
