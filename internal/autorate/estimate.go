// What the law reads off the ticks it has seen: the queue's growth, the cap
// past the shaper while a queue grows, the rates in force over time, and what
// a lower rate adds to the passive signal with no queue at all.

package autorate

import (
	"math"
	"time"
)

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
