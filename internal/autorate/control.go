package autorate

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Config is the control law's tuning. Defaults (DefaultConfig) follow
// cake-autorate's where they carry over and were tuned on the fluid model in
// control_test.go where lowlat's targets are tighter (an added p99 within
// 30 ms, convergence within 5 s after a step down).
type Config struct {
	// Tick is how often Step is called.
	Tick time.Duration
	// BloatK of the last BloatN ticks over the threshold make bloat.
	BloatK, BloatN int
	// DecreaseMin and DecreaseMax bound the multiplicative decrease: the
	// factor goes from DecreaseMin (delay just over the threshold) to
	// DecreaseMax (twice the threshold or more).
	DecreaseMin, DecreaseMax float64
	// DrainTime is how fast a queue seen downstream should drain once the
	// delivered rate is known: the new rate leaves room for it.
	DrainTime time.Duration
	// Refractory is the least time between two decreases; a second one
	// inside DrainWait needs the delay to be still rising.
	Refractory, DrainWait time.Duration
	// GrowthLimit is the queue growth (seconds per second) under the
	// threshold that makes the rate step back under the estimated cap.
	GrowthLimit float64
	// OwnQueueBusy is the mean own-queue delay from which the shaper
	// counts as the bottleneck (see Input.OwnQueue).
	OwnQueueBusy time.Duration
	// DrainLimit is how long a falling delay after a cut holds off the
	// next cut.
	DrainLimit time.Duration
	// IncreaseHold is how long after a decrease no increase is made (the
	// queue must drain first).
	IncreaseHold time.Duration
	// ProbeWaitMax bounds the wait between two probes above a ceiling
	// that holds (from IncreaseHold, doubled each time).
	ProbeWaitMax time.Duration
	// Under a ceiling (the cap estimated at the last cut) the rate holds
	// Hold under it. Probe is how far over it a probe goes at first (see
	// calibrate), and Plateau how long the probe holds there at least
	// before the cap counts as risen: a provider's token bucket lets an
	// excess through unseen until the bucket is spent. The plateau lasts
	// until what it sent over the ceiling has spent twice what the bucket
	// took in since the last cut (at most PlateauMax), so a cap that has
	// not moved shows a queue before it ends, whatever the bucket's size.
	// Twice rather than once covers a ceiling a few percent under the
	// cap. Without that rule a plateau read a bucket half refilled as a
	// risen cap.
	Hold, Probe         float64
	Plateau, PlateauMax time.Duration
	// IncreaseMax is the per-tick increase while the delay is at the
	// baseline; it shrinks to IncreaseMin as the delay nears the threshold.
	IncreaseMin, IncreaseMax float64
	// HighLoad is the share of the rate the shaper must carry before the
	// rate may rise: an idle link says nothing about the cap.
	HighLoad float64
	// LowLoad is the share under which the link counts as idle: bloat seen
	// then is not this host's doing, and the rate drifts back to base.
	LowLoad float64
	// IdleAfter is how long the link must stay idle before active probes
	// pause.
	IdleAfter time.Duration
	// SafeRates is how many rates that held without bloat are remembered;
	// SafeAge is how long one stays usable.
	SafeRates int
	SafeAge   time.Duration
	// MTU is the packet size whose serialization time at the current rate
	// is added to the threshold.
	MTU int
}

// DefaultConfig is the control law lowlat ships.
func DefaultConfig() Config {
	return Config{
		Tick:         200 * time.Millisecond,
		BloatK:       3,
		BloatN:       6,
		DecreaseMin:  0.99,
		DecreaseMax:  0.75,
		DrainTime:    500 * time.Millisecond,
		Refractory:   300 * time.Millisecond,
		DrainWait:    time.Second,
		DrainLimit:   5 * time.Second,
		IncreaseHold: time.Second,
		ProbeWaitMax: 2 * time.Second,
		Hold:         0.02,
		Probe:        0.05,
		Plateau:      2 * time.Second,
		PlateauMax:   8 * time.Second,
		GrowthLimit:  0.01,
		OwnQueueBusy: 2 * time.Millisecond,
		IncreaseMin:  0.01,
		IncreaseMax:  0.06,
		HighLoad:     0.75,
		LowLoad:      0.1,
		IdleAfter:    30 * time.Second,
		SafeRates:    100,
		SafeAge:      5 * time.Minute,
		MTU:          1514,
	}
}

// Reading is one fresh sample of one signal.
type Reading struct {
	// Signal names it: "owd:10.0.0.2:7431", "rtt:…", "icmp:…", "passive".
	Signal string
	// Value is the measured delay: a one-way delay or RTT, compared with
	// the signal's own baseline; or, when Relative, already the delay over
	// the path's floor (passive: srtt - min_rtt less this host's queue).
	Value    time.Duration
	Relative bool
	// Own is how much of Value this host's own shaper queue may account
	// for (probes behind a tbf share its FIFO with the bulk traffic): it
	// is taken off the delay but not off what the baseline learns, which
	// would otherwise fall under the path's floor whenever a probe found
	// the queue shorter than Own.
	Own time.Duration
}

// Input is what the daemon saw in one tick.
type Input struct {
	At       time.Time
	Readings []Reading
	// SentBytes is the shaper's cumulative byte counter.
	SentBytes uint64
	// Delivered is the rate (bit/s) the host's busy TCP connections had
	// acknowledged over the last tick, 0 when unknown: while a queue grows
	// past the shaper, it is the rate the bottleneck really drains.
	Delivered float64
	// OwnQueue is the mean delay of the shaper's own queue over the tick.
	// A shaper that holds a queue is the bottleneck itself: what the
	// connections get acknowledged then says nothing of the cap past it.
	OwnQueue time.Duration
}

// Decision is what Step decided, with the reason: the daemon logs one line
// per change and exports the counts.
type Decision struct {
	At  time.Time
	Old uint64
	// Rate is the rate to set (Old when nothing changes).
	Rate uint64
	// Direction is "down", "up", "base" or "hold"; Reason says why:
	// "bloat", "queue", "drain", "load", "probe", "recover", "idle",
	// "no-signal", "bloat-idle", "beyond", "draining", "refractory",
	// "probing", "steady", "start", "stop".
	Direction, Reason string
	// Delay is the combined delay over baseline this tick (-1: no signal),
	// and By the signal it came from.
	Delay time.Duration
	By    string
	// Threshold is the bloat threshold at the old rate.
	Threshold time.Duration
	// Load is the shaper's throughput over its rate in the tick.
	Load float64
	// Cap is the estimate of the cap past the shaper a cut went under
	// (bit/s, 0: none, a blind cut), and CapBy where it came from:
	// "acked" (what the connections got acknowledged), "growth" (the
	// sending rate over the queue's growth), "ceiling" (the last cut's),
	// "rate" (the rate that built the queue).
	Cap   float64
	CapBy string
	// Bloat says whether the delay is over the threshold and a queue:
	// k of the last n ticks over it, or rising, or stuck after a cut.
	Bloat bool
	// Idle is true once the link has been idle for Config.IdleAfter: the
	// daemon pauses active probes.
	Idle bool
}

// Changed reports whether the decision moves the rate.
func (d Decision) Changed() bool { return d.Rate != d.Old }

// Key is the decision's adjustment counter key, "direction/reason".
func (d Decision) Key() string { return d.Direction + "/" + d.Reason }

// Signal is one signal's view for the state file.
type Signal struct {
	Name     string
	Delay    time.Duration
	Baseline time.Duration
	Last     time.Time
}

type safeRate struct {
	rate uint64
	at   time.Time
}

// Controller is the control law for one shaper. It holds no kernel state:
// the daemon feeds it one Input per tick and applies the Decision.
type Controller struct {
	cfg  Config
	pol  Policy
	rate uint64

	baselines map[string]*Signal
	window    []bool // the last BloatN tick verdicts, newest last

	lastAt       time.Time
	lastSent     uint64
	lastDecrease time.Time
	// decreaseAt is the delay at the last decrease, or the highest since:
	// the delay goes on rising for a round trip after a cut, and the cut
	// is judged by how far it has fallen from there.
	decreaseAt time.Duration
	lastDecay  time.Time
	idleSince  time.Time
	safe       []safeRate
	// recent are the last ticks' combined delays, for the queue's growth
	// rate (slope).
	recent []point
	// ceil is the cap estimated at the last bloat (bit/s), 0 when unknown
	// or outgrown.
	ceil float64
	// growth says, for the last ticks, whether the delay was growing.
	growth []bool
	// bloated is the last rate at which bloat was seen, 0 once the rate
	// has passed it without: a climb slows down as it nears it.
	bloated   uint64
	bloatedAt time.Time
	// probeWait is how long after a step back the rate waits, near the
	// ceiling, before it probes above it again: doubled each time the
	// ceiling is found where it was (see backoff).
	probeWait time.Duration
	// probeAt is when the rate went to a probe's plateau over the ceiling
	// (zero: no probe), and plateauBits what the shaper has sent since.
	probeAt     time.Time
	plateauBits float64
	// Since the last cut and with no queue showing: holdBits were sent
	// in holdFor, and credit is what a provider's bucket took in meanwhile
	// at the ceiling (bits), which a plateau must spend twice over.
	holdBits, holdFor, credit float64
	// filled is the share of its rate the busy shaper carries, averaged
	// over the ticks with no queue showing (see fill); 0 until known.
	filled float64
	// probe is how far over the ceiling a plateau goes (Config.Probe at
	// first, see calibrate), outgrew the ceiling the last plateau that found no queue
	// went over (0 once the climb after it has found the cap).
	probe, outgrew float64
	// floor is the least cap a plateau that found no queue proved (0:
	// none, or a cut under it has shown the cap fell), upper the rate of
	// the last plateau that found one (0: none, or the cap moved since).
	floor, upper float64
	// prev is the last tick's delay, -1 for none.
	prev   time.Duration
	rising bool // the delay rose by more than an MTU's time this tick
	// calm is whether a tick has been under the threshold since the last
	// decrease: a cut after that starts a new episode, whose cap may
	// have moved.
	calm bool
	// rates are the rates set within MinRTTWindow, oldest first, the
	// first one in force at the window's start (see serialRise).
	rates []safeRate
}

// MinRTTWindow is how long the kernel keeps a connection's min_rtt
// (net.ipv4.tcp_min_rtt_wlen's default).
const MinRTTWindow = 300 * time.Second

// serialRise is how much longer a full-sized RTT sample takes at the
// shaper's rate now than at the highest rate of the last MinRTTWindow, when
// the connection's min_rtt was most likely seen: srtt − min_rtt holds this
// much with no queue at all. Two MTU times: the segment's own serialization,
// and the next segment's, which a delayed ACK waits for before it covers
// both (12 ms at 1 Mbit/s against 2). In the VM's capped-uplink-varying,
// without it, the passive signal read 20–45 ms at 0.7 Mbit/s under a
// 3 Mbit/s cap and the rate never rose.
func (c *Controller) serialRise(now time.Time) time.Duration {
	hi := c.rate
	for i, r := range c.rates {
		if i+1 < len(c.rates) && now.Sub(c.rates[i+1].at) >= MinRTTWindow {
			continue // replaced before the window began
		}
		hi = max(hi, r.rate)
	}
	return max(2*(c.mtuTime(c.rate)-c.mtuTime(hi)), 0)
}

type point struct {
	at    time.Time
	delay time.Duration
}

// NewController starts at the policy's base rate.
func NewController(p Policy, cfg Config) *Controller {
	if p.Threshold == 0 {
		p.Threshold = DefaultThreshold
	}
	return &Controller{cfg: cfg, pol: p, rate: p.Base, baselines: map[string]*Signal{}, prev: -1, probe: cfg.Probe}
}

// Rate is the rate the controller holds now.
func (c *Controller) Rate() uint64 { return c.rate }

// Signals returns each signal's latest delay and baseline, by name.
func (c *Controller) Signals() []Signal {
	var out []Signal
	for _, s := range c.baselines {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Signal) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// threshold is the bloat threshold at rate: the policy's plus one MTU's
// serialization time, which a single packet ahead adds at low rates.
func (c *Controller) threshold(rate uint64) time.Duration {
	return c.pol.Threshold + c.mtuTime(rate)
}

// mtuTime is one MTU's serialization time at rate: what a packet may wait
// behind another one being sent, queue or not, and what every packet takes
// more at a lower rate than at the one its baseline was seen at.
func (c *Controller) mtuTime(rate uint64) time.Duration {
	return time.Duration(float64(c.cfg.MTU*8) / float64(rate) * float64(time.Second))
}

// Step takes one tick's input and decides the rate.
func (c *Controller) Step(in Input) Decision {
	d := Decision{At: in.At, Old: c.rate, Rate: c.rate, Direction: "hold", Threshold: c.threshold(c.rate)}
	if !c.lastAt.IsZero() && in.At.After(c.lastAt) && in.SentBytes >= c.lastSent {
		secs := in.At.Sub(c.lastAt).Seconds()
		d.Load = float64(in.SentBytes-c.lastSent) * 8 / secs / float64(c.rate)
	}
	c.lastAt, c.lastSent = in.At, in.SentBytes

	// Idle: probes pause; a link that carries nothing says nothing.
	if d.Load < c.cfg.LowLoad {
		if c.idleSince.IsZero() {
			c.idleSince = in.At
		}
		d.Idle = in.At.Sub(c.idleSince) >= c.cfg.IdleAfter
	} else {
		c.idleSince = time.Time{}
	}

	d.Delay, d.By = c.delay(in)
	if d.Delay < 0 {
		// No signal answered: hold. Lost probes are not bloat (the rate
		// would fall to the minimum while reflectors are down: the
		// failure cake-autorate #326 and sqm-autorate #152 report).
		d.Reason = "no-signal"
		return d
	}
	if d.Delay > c.decreaseAt && in.At.Sub(c.lastDecrease) < c.cfg.DrainLimit {
		// The probes a cut shows in are a round trip behind it: the
		// queue they read went on growing at the rate before it. Judged
		// from the delay at the cut, a queue falling from that peak
		// counted as not falling, and the next cut came anyway (the
		// lab's step down cut on to --min).
		c.decreaseAt = d.Delay
	}
	rising := c.prev >= 0 && d.Delay > c.prev+c.mtuTime(c.rate)
	c.prev, c.rising = d.Delay, rising
	c.recent = append(c.recent, point{in.At, d.Delay})
	if len(c.recent) > 5 {
		c.recent = c.recent[1:]
	}
	over := d.Delay > d.Threshold
	c.calm = c.calm || !over
	c.window = append(c.window, over)
	if len(c.window) > c.cfg.BloatN {
		c.window = c.window[1:]
	}
	n := 0
	for _, o := range c.window {
		if o {
			n++
		}
	}
	secs := c.cfg.Tick.Seconds()
	sent := d.Load * float64(c.rate)
	switch {
	case !c.probeAt.IsZero():
		// What a plateau spends of a provider's bucket is what the
		// connections really sent, not its rate (see fill).
		c.plateauBits += sent * secs
	case d.Delay < c.pol.Threshold/3:
		if d.Load >= c.cfg.HighLoad && c.settled(in.At) {
			// A few seconds' memory: the share moves with the
			// connections' count and their windows.
			if c.filled == 0 {
				c.filled = d.Load
			}
			c.filled += 0.05 * (d.Load - c.filled)
		}
		// A hold with no queue showing: what the rate leaves of the
		// ceiling refills a provider's bucket, which the next plateau
		// must spend (credit), and what it sends bounds the cap from
		// below once a plateau finds no queue (see floor).
		c.holdBits += sent * secs
		c.holdFor += secs
		if c.ceil > 0 {
			c.credit += math.Max(c.ceil-sent, 0) * secs
		}
	}
	// k of n guards against noise. A queue over the threshold that grew
	// since the last tick by more than a packet's scatter is no noise,
	// and each tick waited adds to it; nor is one that has not shrunk by
	// a tenth in the two ticks after a cut: the cut landed at the cap
	// (srtt, smoothed, falls slower than the queue it follows: the
	// passive signal waits for k of n). Either way the delay now must be
	// over: a verdict held over from a queue gone since would cut a rate
	// that no longer builds one.
	stuck := d.By != PassiveSignal && in.At.Sub(c.lastDecrease) >= 2*c.cfg.Tick && float64(d.Delay) >= 0.9*float64(c.decreaseAt)
	d.Bloat = over && (n >= c.cfg.BloatK || rising || stuck)

	switch {
	case d.Bloat && d.Load < c.cfg.LowLoad:
		// Delay while this host sends next to nothing is not its queue.
		d.Reason = "bloat-idle"
	case d.Bloat:
		c.decrease(&d, in)
	case !over && d.Load >= c.cfg.HighLoad:
		c.increase(&d, in)
	case d.Load < c.cfg.LowLoad && c.rate != c.pol.Base && in.At.Sub(c.lastDecay) >= time.Second:
		// Idle: drift back toward base, 1 % a second, as cake-autorate.
		c.lastDecay = in.At
		d.Direction, d.Reason = "base", "idle"
		if c.rate < c.pol.Base {
			d.Rate = min(uint64(float64(c.rate)*1.01)+1, c.pol.Base)
		} else {
			d.Rate = max(uint64(float64(c.rate)*0.99), c.pol.Base)
		}
	default:
		d.Reason = "steady"
	}
	d.Rate = min(max(d.Rate, c.pol.Min), c.pol.Max)
	if math.Abs(float64(d.Rate)-float64(d.Old)) > 0.02*float64(d.Old) {
		// The queue's growth rate is read at one rate.
		c.recent = c.recent[:0]
	}
	if d.Direction == "down" {
		c.calibrate(d)
		// A queue at a rate says the cap is under it: the next plateau
		// goes no higher, and (once a plateau has found one) no lower:
		// a ceiling read low would put it under the cap, where it finds
		// nothing and the climb after it overshoots. The rate that built
		// the queue is the one in force when the probes that show it
		// were sent.
		built := float64(max(d.Old, c.rateAt(in.At.Add(-d.Delay-c.cfg.Tick))))
		switch {
		case !c.probeAt.IsZero():
			c.upper = built
		case c.upper > 0:
			c.upper = math.Min(c.upper, built)
		}
		// A probe ends with the queue it found, a climb with the cap,
		// and a hold starts with a provider's bucket spent.
		c.probeAt = time.Time{}
		c.holdBits, c.holdFor, c.credit = 0, 0, 0
	}
	if d.Rate == d.Old && d.Direction != "hold" {
		d.Direction = "hold" // at a bound
	}
	if d.Rate != d.Old || len(c.rates) == 0 {
		c.rates = append(c.rates, safeRate{rate: d.Rate, at: in.At})
	}
	// Pruned here, where it grows, not where it is read: a policy with no
	// passive signal never reads it.
	for len(c.rates) > 1 && in.At.Sub(c.rates[1].at) >= MinRTTWindow {
		c.rates = c.rates[1:]
	}
	c.rate = d.Rate
	return d
}

// slope is how fast the delay grows (seconds of queue per second), by least
// squares over the last three ticks at one rate; 0 with fewer than least.
func (c *Controller) slope(least int) float64 {
	pts := c.growthWindow()
	n := float64(len(pts))
	if len(pts) < max(least, 2) {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for _, p := range pts {
		x := p.at.Sub(pts[0].at).Seconds()
		y := p.delay.Seconds()
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / den
}

// growthWindow is the ticks slope reads: the last three. A longer window
// straddles the moment the queue started to grow and reads a steeper slope
// than there is.
func (c *Controller) growthWindow() []point {
	return c.recent[max(len(c.recent)-3, 0):]
}

// estimate is the bottleneck's rate while a queue grows past the shaper:
// what the connections got acknowledged when that is known, otherwise the
// rate this host sends at over one plus the queue's growth rate (a queue
// growing 0.1 s per second is fed 10 % faster than it drains).
func (c *Controller) estimate(in Input, load float64) (float64, string) {
	acked := 0.0
	if in.Delivered > 0 && in.Delivered < float64(c.rate) && in.OwnQueue < c.cfg.OwnQueueBusy {
		acked = in.Delivered
	}
	// Two ticks will do: the two after a cut tell whether the new rate
	// is still over the cap, which is what the next cut needs to know.
	//
	// The delays are the queue as probes found it when they were sent, a
	// queue's depth ago: its growth is what the rate then fed it. With
	// the rate now, the estimate after a cut read the growth the rate
	// before the cut made (on the lab's host, the second cut of an
	// episode read caps of 1 and 2 Mbit/s 13–18 % low, and a plateau
	// over such a ceiling sat under the cap).
	//
	// The growth is read between the window's first and last probes, so
	// what fed it is the rate over the time between their sends. A cut
	// just before the last of them would otherwise lend its rate to a
	// growth the rate before it made: in the VM, the third cut of a step
	// down from 3 to 2 Mbit/s read 1.63 Mbit/s from a queue fed at 2.42
	// for most of the window, and the plateaus over that ceiling found
	// nothing under the cap.
	if s := c.slope(2); s > 0.01 {
		pts := c.growthWindow()
		first, last := pts[0], pts[len(pts)-1]
		fed := c.rateOver(first.at.Add(-first.delay-c.cfg.Tick), last.at.Add(-last.delay-c.cfg.Tick))
		g := math.Min(load, 1) * fed / (1 + s)
		if acked > g {
			return acked, "acked"
		}
		return g, "growth"
	}
	if acked > 0 {
		return acked, "acked"
	}
	return 0, ""
}

// rateOver is the mean rate in force from a to b (the rate at b when b
// is not after a).
func (c *Controller) rateOver(a, b time.Time) float64 {
	if !b.After(a) {
		return float64(c.rateAt(b))
	}
	// The changes are in time order: one pass over those within (a, b).
	t, r, sum := a, c.rateAt(a), 0.0
	for _, s := range c.rates {
		if s.at.After(a) && s.at.Before(b) {
			sum += float64(r) * s.at.Sub(t).Seconds()
			t, r = s.at, s.rate
		}
	}
	sum += float64(r) * b.Sub(t).Seconds()
	return sum / b.Sub(a).Seconds()
}

// rateAt is the rate that was in force at t (the oldest known before
// the history).
func (c *Controller) rateAt(t time.Time) uint64 {
	r := c.rate
	for i := len(c.rates) - 1; i >= 0; i-- {
		r = c.rates[i].rate
		if !c.rates[i].at.After(t) {
			break
		}
	}
	return r
}

// decrease cuts the rate on bloat.
func (c *Controller) decrease(d *Decision, in Input) {
	since := in.At.Sub(c.lastDecrease)
	switch {
	case since < c.cfg.Refractory || (since < c.cfg.DrainWait && (float64(d.Delay) < 0.9*float64(c.decreaseAt) || d.By == PassiveSignal && !c.rising)):
		// Refractory: the last cut needs time to show. srtt moves an
		// eighth of the way to each RTT sample: within DrainWait of a
		// cut, a passive delay that has stopped rising is the cut not
		// shown yet, not a queue the cut left. (After a reflector
		// outage, such a second cut took the rate to 72 % of the cap
		// in a draw of the model.)
		d.Reason = "refractory"
		return
	case float64(d.Delay) < 0.9*float64(c.decreaseAt) && since < c.cfg.DrainLimit && !c.calm:
		// A delay lower than at the last cut is a queue draining: the
		// rate is under the cap already. Steer the drain rather than cut
		// blindly: down to the rate that empties what is left within
		// DrainTime, and held there (a rate that rose as the queue
		// emptied would drain it ever slower) until the delay is under
		// the threshold and the rate recovers.
		d.Reason = "draining"
		if c.ceil > 0 {
			target := c.ceil * math.Max(1-d.Delay.Seconds()/c.cfg.DrainTime.Seconds(), 0.5)
			if target < 0.95*float64(c.rate) {
				d.Rate = uint64(target)
				d.Direction, d.Reason = "down", "drain"
			}
		}
		return
	}
	// The deeper over the threshold, the harder the cut (cake-autorate:
	// 0.99 at the threshold to 0.75 at twice it).
	over := float64(d.Delay-d.Threshold) / float64(d.Threshold)
	f := c.cfg.DecreaseMin + (c.cfg.DecreaseMax-c.cfg.DecreaseMin)*math.Min(math.Max(over, 0), 1)
	next := float64(c.rate) * f
	clamped := false
	// With the bottleneck's rate known, go under it by just enough to
	// drain the queue within DrainTime (rather than by the blind factor),
	// and remember it as the ceiling to recover to.
	est, by := c.estimate(in, d.Load)
	if est == 0 && c.ceil > 0 && (since < c.cfg.DrainLimit && !c.calm || !c.probeAt.IsZero()) {
		// A cut resets the growth reading; the estimate from the cut
		// before still holds within the same episode, and a probe over
		// it has just found it.
		est, by = c.ceil, "ceiling"
	}
	est, by = c.overFloor(est, by)
	d.Cap, d.CapBy = est, by
	if est > 0 {
		drain := 1 - math.Min(d.Delay.Seconds()/c.cfg.DrainTime.Seconds(), 0.5)
		// An estimate read off a few ticks of a changing queue can be
		// far too low: no one cut goes deeper than the blind factor's
		// deepest; a second one follows if the queue still grows.
		want := est * math.Min(drain, 0.95)
		next = math.Max(want, float64(c.rate)*c.cfg.DecreaseMax)
		clamped = want < next
		c.backoff(est)
	}
	if since >= c.cfg.DrainLimit {
		c.bloated = 0 // a new episode
	}
	// The highest rate of the episode: a second cut starts from a rate
	// the first one made, not one that bloated.
	c.bloated, c.bloatedAt = max(c.bloated, c.rate), in.At
	// Rates at or above the one that bloated are not safe any more.
	c.safe = slices.DeleteFunc(c.safe, func(s safeRate) bool { return float64(s.rate) >= next })
	d.Rate = uint64(next)
	d.Direction, d.Reason = "down", "bloat"
	c.lastDecrease, c.decreaseAt, c.calm = in.At, d.Delay, false
	if !clamped {
		// A cut as deep as the estimate asked starts a new count; a
		// clamped one may be followed as soon as the refractory period
		// allows.
		c.window = c.window[:0]
	}
}

// increase raises the rate under load with no bloat. Under a known ceiling:
// straight back to just under it after a cut, then, from time to time, a
// probe's plateau over it. With no ceiling (none yet, or a plateau has
// outgrown it): back to the best recent safe rate, then by 1–6 % a tick,
// less as the delay nears the threshold.
func (c *Controller) increase(d *Decision, in Input) {
	c.remember(d.At)
	c.growth = append(c.growth, c.slope(3) > c.cfg.GrowthLimit)
	if len(c.growth) > 2 {
		c.growth = c.growth[1:]
	}
	growing := len(c.growth) == 2 && !slices.Contains(c.growth, false)
	early := d.Delay > c.pol.Threshold/3+c.mtuTime(c.rate)
	// A probe looks for a queue: one that rose past a third of the
	// threshold since the last tick has found it.
	found := !c.probeAt.IsZero() && c.rising && early
	if found || growing && early && d.At.Sub(c.lastDecrease) >= c.cfg.DrainWait {
		// A queue has grown for two ticks and is past a third of the
		// threshold plus one MTU's time (a real path's delay wanders by a
		// few ms, a packet may wait behind another being sent, and noise
		// has slopes too): the rate has just passed the cap. Step back
		// under it before it is bloat.
		est, by := c.estimate(in, d.Load)
		switch {
		case est > 0:
		case c.ceil > 0 && c.ceil < float64(c.rate):
			est, by = c.ceil, "ceiling"
		default:
			est, by = float64(c.rate), "rate"
		}
		est, by = c.overFloor(est, by)
		d.Cap, d.CapBy = est, by
		c.backoff(est)
		c.safe = slices.DeleteFunc(c.safe, func(r safeRate) bool { return float64(r.rate) >= est })
		drain := 1 - d.Delay.Seconds()/c.cfg.DrainTime.Seconds()
		d.Rate = uint64(math.Min(drain, 0.97) * est)
		d.Direction, d.Reason = "down", "queue"
		c.lastDecrease, c.decreaseAt, c.calm = d.At, d.Delay, false
		return
	}
	if sent := d.Load * float64(c.rate); in.Delivered > 0 && in.Delivered < 0.9*sent && in.OwnQueue < c.cfg.OwnQueueBusy {
		// The connections got a tenth less acknowledged than the shaper
		// sent, and the shaper holds no queue: the path past it drains
		// slower than it is fed, and a queue grows there before the
		// delay shows it. No rise.
		d.Reason = "beyond"
		return
	}
	if d.At.Sub(c.lastDecrease) < c.cfg.IncreaseHold || (c.ceil > 0 && d.Delay > c.pol.Threshold/3+c.mtuTime(c.rate)) {
		// The last cut needs time to drain the queue; near the cap, a
		// rise waits until the queue is gone.
		d.Reason = "draining"
		return
	}
	target := c.bestSafe(d.At)
	if c.ceil > 0 {
		target = uint64((1 - c.cfg.Hold) * c.ceil / c.fill())
	}
	// More than a hair under it: the share the connections fill moves a
	// little every tick, and so does the hold's level; followed to the
	// bit, the rate changed every tick by a few hundred bit/s.
	if float64(target) > 1.005*float64(c.rate) {
		d.Rate = target
		d.Direction, d.Reason = "up", "recover"
		return
	}
	if c.ceil > 0 {
		switch {
		case c.probeAt.IsZero() && d.At.Sub(c.lastDecrease) < c.probeWait:
			// The ceiling held at the last probes: wait before the next.
			d.Reason = "steady"
			return
		case c.probeAt.IsZero():
			// Has the cap moved? Go a little over the ceiling and hold
			// there. A creep would not tell: a provider's token bucket
			// lets each small excess through unseen, and the creep would
			// be far over the cap by the time the bucket ran dry.
			c.probeAt, c.plateauBits = d.At, 0
			// No lower than the last plateau that found a queue, and
			// no more than twice Probe over the ceiling: a bound left
			// by a step down can be far over the cap. The height is
			// what the connections are to send: over the share of its
			// rate they fill.
			fill := c.fill()
			d.Rate = uint64(math.Max((1+c.probe)*c.ceil/fill, math.Min(c.upper, (1+2*c.probe)*c.ceil/fill)))
			d.Direction, d.Reason = "up", "probe"
			return
		case c.probing(d.At):
			d.Reason = "probing"
			return
		}
		// The plateau held with no queue: the cap has risen, past the
		// rate that bloated last too. By how much is unknown, but not
		// less than the plateau proved: the bucket was empty at the cut,
		// took in C·t − sent over the hold and gave out (p−C)·P over the
		// plateau, so no queue means C ≥ (p·P + sent)/(P + t). A ceiling
		// read too low (on the lab's host: 1.64–1.82 Mbit/s under a 2
		// Mbit/s cap) makes a plateau under the cap, and without this
		// floor the climb after it went 50 % over the cap before the
		// delay showed it, again and again.
		pl := d.At.Sub(c.probeAt).Seconds()
		c.floor = (c.plateauBits + c.holdBits) / (pl + c.holdFor)
		c.outgrew, c.ceil, c.probeAt, c.bloated, c.upper = c.ceil, 0, time.Time{}, 0, 0
	}
	room := 1 - float64(d.Delay)/float64(d.Threshold)
	inc := c.cfg.IncreaseMin + (c.cfg.IncreaseMax-c.cfg.IncreaseMin)*math.Max(room, 0)
	if c.bloated > 0 && d.At.Sub(c.bloatedAt) <= c.cfg.SafeAge {
		switch b := float64(c.bloated); {
		case float64(c.rate) > 1.05*b:
			c.bloated = 0 // passed without bloat: the cap has risen
		case float64(c.rate)*(1+inc) > 0.9*b:
			// Near the rate that bloated last (a cut without an
			// estimate leaves no ceiling): a climb at full speed
			// would be far past the cap before the delay showed it.
			inc = c.cfg.IncreaseMin
		}
	}
	d.Rate = uint64(float64(c.rate)*(1+inc)) + 1
	d.Direction, d.Reason = "up", "load"
}

// fill is the share of its rate the busy shaper carries, within [0.8, 1]
// (1: unknown). The levels under and over a ceiling are what the
// connections are to send, so the rate is set that much higher. TCP leaves
// a tbf whose queue holds 20 ms idle now and then: on the lab's host the
// load at the daemon's changes averaged 0.955. A plateau 5 % over the
// ceiling sent about the ceiling then, found nothing under a cap that had
// not moved, and the climb after it overshot (spikes of 46–58 ms at
// 2 Mbit/s).
func (c *Controller) fill() float64 {
	if c.filled == 0 {
		return 1
	}
	return min(max(c.filled, 0.8), 1)
}

// settled reports whether the rate has held long enough (three ticks) for
// the connections to fill it: a tick's load just after a change is the
// connections catching up, not the share they leave idle. Taken from the
// first ticks of the VM's run, while the rate climbed, the share read 0.9
// behind cake, which idles at no rate: the hold after the first cut went
// 9 % over the ceiling, and bloated again within a second.
//
// Nor is it read before the first cut, while the connections are still in
// slow start, or within 2 s of a cut, while they recover from the drops it
// brought at the shaper. In VM runs the first reading, which sets the share,
// read 0.92 at the start of the upload and 0.83 after a 28 % cut: every
// hold after it went 6 % over the ceiling, or to 2.54 Mbit/s under a
// 2 Mbit/s cap.
func (c *Controller) settled(now time.Time) bool {
	return len(c.rates) > 0 && now.Sub(c.rates[len(c.rates)-1].at) >= 3*c.cfg.Tick &&
		!c.lastDecrease.IsZero() && now.Sub(c.lastDecrease) >= 2*time.Second
}

// probing reports whether the plateau that began at probeAt goes on: for
// Plateau at least, PlateauMax at most, and until what the connections
// really sent over the ceiling has spent twice the credit. Nor shorter than
// Probe over the ceiling would take to spend it, the plateau's length
// before it counted what was sent: a plateau that goes higher (up to the
// last upper bound) spends the credit sooner, but a ceiling a few percent
// under the cap takes the same time to show.
func (c *Controller) probing(now time.Time) bool {
	el := now.Sub(c.probeAt)
	switch {
	case el < c.cfg.Plateau:
		return true
	case el >= c.cfg.PlateauMax:
		return false
	}
	return c.plateauBits-c.ceil*el.Seconds() < 2*c.credit || el.Seconds() < 2*c.credit/(c.probe*c.ceil)
}

// calibrate sets the plateaus' height from what the last one found, at a
// cut. The ceilings come from estimates of the cap that read low (the
// connections' acknowledged rate scatters with the ACK clock, and the queue
// is read a round trip late): on the lab's host ceilings sat 5–8 % under a
// 1 Mbit/s cap, a plateau 5 % over them under the cap, and every one of them
// ended in a climb that overshot it. A plateau found no queue, and the cut
// after the climb finds the cap within 15 % of its ceiling: the cap had not
// risen, the plateau was too low, and the next one goes twice as high (up
// to 20 %). A plateau that finds a queue brings the height back toward
// Config.Probe.
func (c *Controller) calibrate(d Decision) {
	switch {
	case !c.probeAt.IsZero():
		c.probe = max(c.probe*0.75, c.cfg.Probe)
	case c.outgrew > 0 && d.Cap > 0 && d.Cap <= 1.15*c.outgrew:
		c.probe = min(2*c.probe, 0.2)
	}
	c.outgrew = 0
}

// overFloor is est, or the floor a plateau proved when est is under it.
// A cut at a rate at or under the floor shows the cap has fallen since:
// the floor is dropped.
func (c *Controller) overFloor(est float64, by string) (float64, string) {
	switch {
	case c.floor <= 0:
	case float64(c.rate) <= c.floor:
		c.floor = 0
	case est > 0 && est < c.floor:
		// A cut without an estimate stays blind: the floor may be a
		// cap that has since risen far.
		return c.floor, "floor"
	}
	return est, by
}

// backoff takes est as the new ceiling. Found within 10 % of where it was,
// the cap has not moved: the next probe above it waits twice as long (up to
// ProbeWaitMax), since each one builds a queue before it is seen. Anywhere
// else, the cap moved and probes start again after IncreaseHold.
func (c *Controller) backoff(est float64) {
	if c.ceil > 0 && est > 0 && math.Abs(est-c.ceil) <= 0.1*c.ceil {
		c.probeWait = min(2*max(c.probeWait, c.cfg.IncreaseHold), c.cfg.ProbeWaitMax)
	} else {
		c.probeWait = c.cfg.IncreaseHold
	}
	c.ceil = est
}

// remember records the current rate as safe: it carried load with no bloat.
func (c *Controller) remember(at time.Time) {
	c.safe = append(c.safe, safeRate{rate: c.rate, at: at})
	if len(c.safe) > c.cfg.SafeRates {
		c.safe = c.safe[1:]
	}
}

// bestSafe is the highest remembered safe rate still young enough, less 2 %
// so the recovery lands just under the rate that last held.
func (c *Controller) bestSafe(now time.Time) uint64 {
	var best uint64
	for _, s := range c.safe {
		if now.Sub(s.at) <= c.cfg.SafeAge && s.rate > best {
			best = s.rate
		}
	}
	return uint64(float64(best) * 0.98)
}

// Stop is the decision taken when the daemon stops: back to base.
func (c *Controller) Stop(at time.Time) Decision {
	d := Decision{At: at, Old: c.rate, Rate: c.pol.Base, Direction: "base", Reason: "stop", Delay: -1}
	c.rate = c.pol.Base
	return d
}
