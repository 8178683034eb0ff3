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
	// Stairs, when not 0, is the second design the delay target was
	// tried with (docs/autorate.md, "Two designs"): a plateau that finds
	// no queue proves its level, which becomes the ceiling, and the next
	// plateau goes twice as far over it (up to Stairs) at once, instead of
	// a climb. Not shipped: on the model it cut the queue's p99 by 10-30 %
	// but cost goodput and a step up's time (TestTwoDesigns).
	Stairs float64
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
//
// The law is a state machine over four phases (see phase). Step reads the
// tick (observe), books what the link carried (account), decides whether
// the delay is bloat, and runs the current phase's step; every change of
// phase goes through enter.
type Controller struct {
	cfg  Config
	pol  Policy
	rate uint64
	// phase is where the law is between two cuts; only enter sets it.
	// Invariants: climbing has no ceiling (ceil == 0); holding and
	// plateau have one (ceil > 0); calm is false only in draining.
	phase phase

	// baselines are each signal's (combine.go).
	baselines map[string]*Signal

	// What the ticks showed (observe).
	lastAt   time.Time
	lastSent uint64
	window   []bool // the last BloatN tick verdicts, newest last
	// prev is the last tick's delay, -1 for none; rising says this tick's
	// rose over it by more than an MTU's time.
	prev   time.Duration
	rising bool
	// recent are the last ticks' delays at one rate, for the queue's
	// growth (slope); growth says, for the last two ticks under the
	// threshold, whether it was growing.
	recent []point
	growth []bool
	// idleSince is when the load fell under LowLoad (zero: busy);
	// lastDecay when the rate last drifted toward base.
	idleSince, lastDecay time.Time
	// rates are the rates set within MinRTTWindow, oldest first, the
	// first one in force at the window's start (see serialRise, rateAt).
	rates []safeRate

	// The episode: kept from the last cut (enter(draining)) on.
	lastDecrease time.Time
	// decreaseAt is the delay at the last cut, or the highest since
	// within DrainLimit: the delay goes on rising for a round trip after
	// a cut, and the cut is judged by how far it has fallen from there.
	decreaseAt time.Duration
	// calm is whether a tick has been under the threshold since the last
	// cut: a cut after that starts a new episode, whose cap may have moved.
	calm bool
	// bloated is the highest rate of the last episode, 0 once the rate
	// has passed it without bloat: a climb slows down as it nears it.
	bloated   uint64
	bloatedAt time.Time

	// What the law knows of the cap (ceiling.go).
	//
	// ceil is the cap estimated at the last cut (bit/s), 0 when unknown
	// or outgrown. floor is the least cap a plateau that found no queue
	// proved (0: none, or a cut under it showed the cap fell), upper the
	// rate of the last plateau that found a queue (0: none, or the cap
	// moved since).
	ceil, floor, upper float64
	// probe is how far over the ceiling a plateau goes (Config.Probe at
	// first, see calibrate); outgrew is the ceiling the last plateau that
	// found no queue went over (0 once the climb after it found the cap).
	probe, outgrew float64
	// probeWait is how long after a cut the rate holds under the ceiling
	// before a plateau: doubled each time the ceiling is found where it
	// was (see backoff).
	probeWait time.Duration
	// filled is the share of its rate the busy shaper carries, averaged
	// over ticks with no queue showing (see fill); 0 until known.
	filled float64
	// safe are rates that held under load with no bloat.
	safe []safeRate

	// The hold's books, from the last cut on, over ticks with no queue
	// showing: holdBits were sent in holdFor, and credit is what a
	// provider's bucket took in meanwhile at the ceiling (bits), which a
	// plateau must spend twice over.
	holdBits, holdFor, credit float64
	// The plateau in progress (phase plateau): when it began, and what
	// the connections sent since.
	plateauAt   time.Time
	plateauBits float64
}

// phase is where the law is between two cuts.
//
//	climbing ──cut──▶ draining ──queue gone, ceiling──▶ holding ──probeWait──▶ plateau
//	   ▲                 ▲  └──queue gone, no ceiling──▶ climbing                │
//	   │                 └──────────── cut, or a queue shows (step back) ◀──────┤
//	   └──────────────── the plateau spent the credit with no queue ◀───────────┘
//
// Any phase goes to draining on a cut (bloat) or a step back (a queue
// growing under the threshold). Idle drift, refractory ticks and held
// decisions leave the phase as it is.
type phase uint8

const (
	// climbing: no ceiling known (none yet, or a plateau outgrew it).
	// Under load the rate returns to the best safe rate, then climbs by
	// IncreaseMin..IncreaseMax a tick, slower near the rate that bloated.
	climbing phase = iota
	// draining: a cut was made and the queue it left drains. No rise for
	// IncreaseHold, nor while a ceiling is known and the delay is past a
	// third of the threshold. A delay still over the threshold but
	// falling from the peak after the cut is steered (drain), not cut.
	draining
	// holding: under a known ceiling. The rate holds Hold under it (over
	// the share the connections fill) and after probeWait goes to a
	// plateau.
	holding
	// plateau: Probe over the ceiling, held until what the connections
	// sent over it has spent the bucket's credit twice. A queue ends it
	// with a step back (to draining); none, with the ceiling outgrown
	// (to climbing, with a floor).
	plateau
)

var phaseNames = [...]string{climbing: "climbing", draining: "draining", holding: "holding", plateau: "plateau"}

func (p phase) String() string { return phaseNames[p] }

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
	c.readLoad(&d, in)
	d.Delay, d.By = c.delay(in)
	if d.Delay < 0 {
		// No signal answered: hold. Lost probes are not bloat (the rate
		// would fall to the minimum while reflectors are down: the
		// failure cake-autorate #326 and sqm-autorate #152 report).
		d.Reason = "no-signal"
		return d
	}
	c.observe(&d)
	c.account(d)
	switch {
	case d.Bloat && d.Load < c.cfg.LowLoad:
		// Delay while this host sends next to nothing is not its queue.
		d.Reason = "bloat-idle"
	case d.Bloat:
		c.decrease(&d, in)
	case d.Delay <= d.Threshold && d.Load >= c.cfg.HighLoad:
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
	c.settle(&d)
	return d
}

// readLoad sets the tick's load (what the shaper sent over its rate) and
// whether the link has been idle for IdleAfter.
func (c *Controller) readLoad(d *Decision, in Input) {
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
}

// observe keeps the tick's delay in the law's memory (the peak after a cut,
// whether it rose, the growth window, the k-of-n window) and sets d.Bloat.
func (c *Controller) observe(d *Decision) {
	if d.Delay > c.decreaseAt && d.At.Sub(c.lastDecrease) < c.cfg.DrainLimit {
		// The probes a cut shows in are a round trip behind it: the
		// queue they read went on growing at the rate before it. Judged
		// from the delay at the cut, a queue falling from that peak
		// counted as not falling, and the next cut came anyway (the
		// lab's step down cut on to --min).
		c.decreaseAt = d.Delay
	}
	c.rising = c.prev >= 0 && d.Delay > c.prev+c.mtuTime(c.rate)
	c.prev = d.Delay
	c.recent = append(c.recent, point{d.At, d.Delay})
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
	// k of n guards against noise. A queue over the threshold that grew
	// since the last tick by more than a packet's scatter is no noise,
	// and each tick waited adds to it; nor is one that has not shrunk by
	// a tenth from its peak two ticks or more after a cut, within the
	// cut's episode (inEpisode): the cut landed at the cap
	// (srtt, smoothed, falls slower than the queue it follows: the
	// passive signal waits for k of n). Either way the delay now must be
	// over: a verdict held over from a queue gone since would cut a rate
	// that no longer builds one.
	stuck := d.By != PassiveSignal && c.inEpisode(d.At) && d.At.Sub(c.lastDecrease) >= 2*c.cfg.Tick && float64(d.Delay) >= 0.9*float64(c.decreaseAt)
	d.Bloat = over && (n >= c.cfg.BloatK || c.rising || stuck)
}

// account books what the connections sent this tick: toward the plateau's
// spend in a plateau; with no queue showing, toward the hold's books (what
// the rate leaves of the ceiling refills a provider's bucket, which the next
// plateau must spend, and what it sends bounds the cap from below once a
// plateau finds no queue: see floor) and the share of the rate they fill.
func (c *Controller) account(d Decision) {
	secs := c.cfg.Tick.Seconds()
	sent := d.Load * float64(c.rate)
	switch {
	case c.phase == plateau:
		// What a plateau spends of a provider's bucket is what the
		// connections really sent, not its rate (see fill).
		c.plateauBits += sent * secs
	case d.Delay < c.pol.Threshold/3:
		if d.Load >= c.cfg.HighLoad && c.settled(d.At) {
			// A few seconds' memory: the share moves with the
			// connections' count and their windows.
			if c.filled == 0 {
				c.filled = d.Load
			}
			c.filled += 0.05 * (d.Load - c.filled)
		}
		c.holdBits += sent * secs
		c.holdFor += secs
		if c.ceil > 0 {
			c.credit += math.Max(c.ceil-sent, 0) * secs
		}
	}
}

// settle bounds the decided rate, takes a cut's transition, and records the
// rate.
func (c *Controller) settle(d *Decision) {
	d.Rate = min(max(d.Rate, c.pol.Min), c.pol.Max)
	if math.Abs(float64(d.Rate)-float64(d.Old)) > 0.02*float64(d.Old) {
		// The queue's growth rate is read at one rate.
		c.recent = c.recent[:0]
	}
	if d.Direction == "down" {
		c.enter(draining, *d)
	}
	if d.Rate == d.Old && d.Direction != "hold" {
		d.Direction = "hold" // at a bound
	}
	if d.Rate != d.Old || len(c.rates) == 0 {
		c.rates = append(c.rates, safeRate{rate: d.Rate, at: d.At})
	}
	// Pruned here, where it grows, not where it is read: a policy with no
	// passive signal never reads it.
	for len(c.rates) > 1 && d.At.Sub(c.rates[1].at) >= MinRTTWindow {
		c.rates = c.rates[1:]
	}
	c.rate = d.Rate
}

// enter is every change of phase, with what each one carries over; d is the
// decision that takes it (its rate not yet in force).
func (c *Controller) enter(to phase, d Decision) {
	switch to {
	case draining:
		// Every cut, step back and steered drain. A queue at a rate
		// says the cap is under it: the next plateau goes no higher,
		// and (once a plateau has found one) no lower: a ceiling read
		// low would put it under the cap, where it finds nothing and
		// the climb after it overshoots. The rate that built the queue
		// is the one in force when the probes that show it were sent.
		c.calibrate(d)
		built := float64(max(d.Old, c.rateAt(d.At.Add(-d.Delay-c.cfg.Tick))))
		switch {
		case c.phase == plateau:
			c.upper = built
		case c.upper > 0:
			c.upper = math.Min(c.upper, built)
		}
		// A plateau ends with the queue it found, a climb with the cap,
		// and a hold starts with a provider's bucket spent.
		c.plateauAt = time.Time{}
		c.holdBits, c.holdFor, c.credit = 0, 0, 0
		if d.Reason != "drain" {
			// A new cut, not the last one's drain steered: the
			// episode's clock and peak start here.
			c.lastDecrease, c.decreaseAt, c.calm = d.At, d.Delay, false
		}
	case holding, climbing:
		if c.phase == plateau && to == climbing {
			// The plateau held with no queue: the cap has risen, past
			// the rate that bloated last too. By how much is unknown,
			// but not less than the plateau proved: the bucket was
			// empty at the cut, took in C·t − sent over the hold and
			// gave out (p−C)·P over the plateau, so no queue means
			// C ≥ (p·P + sent)/(P + t). A ceiling read too low (on the
			// lab's host: 1.64–1.82 Mbit/s under a 2 Mbit/s cap) makes
			// a plateau under the cap, and without this floor the
			// climb after it went 50 % over the cap before the delay
			// showed it, again and again.
			pl := d.At.Sub(c.plateauAt).Seconds()
			c.floor = (c.plateauBits + c.holdBits) / (pl + c.holdFor)
			c.outgrew, c.ceil, c.plateauAt, c.bloated, c.upper = c.ceil, 0, time.Time{}, 0, 0
		}
	case plateau:
		c.plateauAt, c.plateauBits = d.At, 0
	}
	c.phase = to
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
	case float64(d.Delay) < 0.9*float64(c.decreaseAt) && c.inEpisode(in.At):
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
	if est == 0 && c.ceil > 0 && (c.inEpisode(in.At) || c.phase == plateau) {
		// A cut resets the growth reading; the estimate from the cut
		// before still holds within the same episode, and a plateau
		// over it has just found it.
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
	if !clamped {
		// A cut as deep as the estimate asked starts a new count; a
		// clamped one may be followed as soon as the refractory period
		// allows.
		c.window = c.window[:0]
	}
}

// inEpisode reports whether the last cut's queue may still be draining:
// within DrainLimit of it, with no tick under the threshold since. Only in
// phase draining (calm is false nowhere else).
func (c *Controller) inEpisode(at time.Time) bool {
	return at.Sub(c.lastDecrease) < c.cfg.DrainLimit && !c.calm
}

// increase is a tick under the threshold with the link busy: a queue that
// has begun to grow makes the rate step back; otherwise the phase's own
// step (drain, hold, plateau, climb).
func (c *Controller) increase(d *Decision, in Input) {
	c.remember(d.At)
	c.growth = append(c.growth, c.slope(3) > c.cfg.GrowthLimit)
	if len(c.growth) > 2 {
		c.growth = c.growth[1:]
	}
	growing := len(c.growth) == 2 && !slices.Contains(c.growth, false)
	// A queue past a third of the threshold plus one MTU's time (a real
	// path's delay wanders by a few ms, a packet may wait behind another
	// being sent, and noise has slopes too).
	early := d.Delay > c.pol.Threshold/3+c.mtuTime(c.rate)
	// A plateau looks for a queue: one that rose past that since the last
	// tick has found it. Elsewhere a queue that has grown for two ticks
	// and passed it says the rate has just passed the cap.
	if c.phase == plateau && c.rising && early || growing && early && d.At.Sub(c.lastDecrease) >= c.cfg.DrainWait {
		c.stepBack(d, in)
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
	switch c.phase {
	case draining:
		if d.At.Sub(c.lastDecrease) < c.cfg.IncreaseHold || c.ceil > 0 && early {
			// The last cut needs time to drain the queue; near the
			// cap, a rise waits until the queue is gone.
			d.Reason = "draining"
			return
		}
		if c.ceil > 0 {
			c.enter(holding, *d)
		} else {
			c.enter(climbing, *d)
		}
	case holding, plateau:
		if early {
			d.Reason = "draining" // near the cap: no rise while a queue shows
			return
		}
	}
	switch c.phase {
	case holding:
		c.hold(d)
	case plateau:
		c.holdPlateau(d)
	default:
		c.climbStep(d)
	}
}

// stepBack goes under the cap before a growing queue becomes bloat: to the
// estimate of the cap (or the ceiling, or the rate itself), less what drains
// the queue within DrainTime.
func (c *Controller) stepBack(d *Decision, in Input) {
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
}

// holdLevel is the rate that has the connections send Hold under the
// ceiling.
func (c *Controller) holdLevel() uint64 {
	return uint64((1 - c.cfg.Hold) * c.ceil / c.fill())
}

// recover moves the rate up to target when it is more than a hair over it:
// the share the connections fill moves a little every tick, and so does the
// hold's level; followed to the bit, the rate changed every tick by a few
// hundred bit/s.
func (c *Controller) recover(d *Decision, target uint64) bool {
	if float64(target) <= 1.005*float64(c.rate) {
		return false
	}
	d.Rate = target
	d.Direction, d.Reason = "up", "recover"
	return true
}

// hold is phase holding's step: back up to the hold level after a cut;
// after probeWait, a plateau over the ceiling. A creep would not tell
// whether the cap moved: a provider's token bucket lets each small excess
// through unseen, and the creep would be far over the cap by the time the
// bucket ran dry.
func (c *Controller) hold(d *Decision) {
	switch {
	case c.recover(d, c.holdLevel()):
	case d.At.Sub(c.lastDecrease) < c.probeWait:
		// The ceiling held at the last plateaus: wait before the next.
		d.Reason = "steady"
	default:
		c.enter(plateau, *d)
		// No lower than the last plateau that found a queue, and no
		// more than twice Probe over the ceiling: a bound left by a step
		// down can be far over the cap. The height is what the
		// connections are to send: over the share of its rate they fill.
		//
		// Nor under the rate in force: a cut no deeper than DecreaseMax
		// can leave the rate over the ceiling, and a plateau under it
		// was a cut named a probe (TestLawAtItsBounds found "up/probe"
		// from 1.875 to 1.871 Mbit/s).
		fill := c.fill()
		d.Rate = uint64(math.Max((1+c.probe)*c.ceil/fill, math.Min(c.upper, (1+2*c.probe)*c.ceil/fill)))
		d.Rate = max(d.Rate, c.rate)
		d.Direction, d.Reason = "up", "probe"
	}
}

// holdPlateau is phase plateau's step: it holds until the credit is spent
// (probing); with no queue by then the cap has risen, and the law climbs.
func (c *Controller) holdPlateau(d *Decision) {
	switch {
	case c.recover(d, c.holdLevel()):
	case c.probing(d.At):
		d.Reason = "probing"
	case c.cfg.Stairs > 0:
		// The plateau proved what the connections sent on it: that is
		// the ceiling now, and the next stair goes at once, twice as
		// far over it.
		fill := c.fill()
		c.enter(holding, *d)
		c.ceil = float64(c.rate) * fill
		c.probe, c.probeWait = min(2*c.probe, c.cfg.Stairs), 0
		c.hold(d)
	default:
		c.enter(climbing, *d)
		c.climb(d)
	}
}

// climbStep is phase climbing's step: back to the best recent safe rate,
// then the climb.
func (c *Controller) climbStep(d *Decision) {
	if !c.recover(d, c.bestSafe(d.At)) {
		c.climb(d)
	}
}

// climb raises the rate by IncreaseMin..IncreaseMax, less as the delay nears
// the threshold, and IncreaseMin near the rate that bloated last. A faster
// climb reaches a risen cap sooner but overshoots one that has not risen
// further before the delay (a round trip behind) shows it.
func (c *Controller) climb(d *Decision) {
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

// Stop is the decision taken when the daemon stops: back to base.
func (c *Controller) Stop(at time.Time) Decision {
	d := Decision{At: at, Old: c.rate, Rate: c.pol.Base, Direction: "base", Reason: "stop", Delay: -1}
	c.rate = c.pol.Base
	return d
}
