// What the law knows of the cap between cuts: the ceiling and its floor, the
// plateaus' height and pace, the share of the rate the connections fill, and
// the rates that held.

package autorate

import (
	"math"
	"time"
)

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

// probing reports whether the plateau that began at plateauAt goes on: for
// Plateau at least, PlateauMax at most, and until what the connections
// really sent over the ceiling has spent twice the credit. Nor shorter than
// Probe over the ceiling would take to spend it, the plateau's length
// before it counted what was sent: a plateau that goes higher (up to the
// last upper bound) spends the credit sooner, but a ceiling a few percent
// under the cap takes the same time to show.
func (c *Controller) probing(now time.Time) bool {
	el := now.Sub(c.plateauAt)
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
	case c.phase == plateau && c.cfg.Stairs > 0:
		c.probe = c.cfg.Probe // the stairs start again from the first
	case c.phase == plateau:
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
