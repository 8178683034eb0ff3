// How one tick's readings of several signals become the one delay the
// control law acts on: each signal's baseline, and the rule that ranks them.

package autorate

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// delay turns the tick's readings into one delay over baseline, ranked:
//
//   - One-way delays to reflectors decide when any answered, through their
//     vote (see vote: one that bypasses the bottleneck cannot hide a queue,
//     and one noisy reflector of three cannot cut alone). They see the
//     uplink's queue alone, in the same FIFO as the host's traffic.
//   - Otherwise the echo targets' vote and the passive signal, whichever
//     is larger: an echo may be prioritised or rate-limited past the host,
//     and the host's own flows see the queue it misses.
//
// The passive signal ranks under a reflector because it carries what
// TCP's timing adds at low rates, not a queue: in the VM's
// capped-uplink-varying it read 16–25 ms at 1.2 Mbit/s under a 3 Mbit/s cap,
// where the reflector read under 10, and its step-backs held the rate at
// 40 % of the cap. On the fluid model, the larger of the reflectors' vote
// and the passive delay read 3–4 ms more queue p99 (medians of 60 draws,
// reflector and passive, behind cake and behind a tbf) for a point or two
// of goodput: docs/autorate.md has both rules' figures. It returns the
// delay and the signal it came from; -1 when no signal gave a reading.
func (c *Controller) delay(in Input) (time.Duration, string) {
	var oneWay, echo []*Signal
	var passive *Signal
	for _, r := range in.Readings {
		s := c.baselines[r.Signal]
		if s == nil {
			s = &Signal{Name: r.Signal, Baseline: r.Value}
			c.baselines[r.Signal] = s
		}
		s.Last = in.At
		if r.Relative {
			s.Delay = max(r.Value-c.serialRise(in.At), 0)
			if passive == nil || s.Delay > passive.Delay {
				passive = s
			}
			continue
		}
		// Baseline: fast to fall (0.9 per sample), slow to rise (0.001),
		// as cake-autorate: a one-way delay's clock offset drifts, a
		// queue's delay is there or gone.
		if r.Value < s.Baseline {
			s.Baseline += time.Duration(0.9 * float64(r.Value-s.Baseline))
		} else {
			s.Baseline += time.Duration(0.001 * float64(r.Value-s.Baseline))
		}
		s.Delay = max(r.Value-r.Own-s.Baseline, 0)
		if strings.HasPrefix(r.Signal, oneWayPrefix) {
			oneWay = append(oneWay, s)
		} else {
			echo = append(echo, s)
		}
	}
	if m := vote(oneWay); m != nil {
		return m.Delay, m.Name
	}
	best := vote(echo)
	if best == nil || passive != nil && passive.Delay > best.Delay {
		best = passive
	}
	if best == nil {
		return -1, ""
	}
	return best.Delay, best.Name
}

// vote is the signal whose delay is the upper median of ss (nil for
// none): with one signal, it; with two, the larger; with three, the
// middle; with n, the (n/2+1)th smallest.
//
// A reflector reached by a path that bypasses the bottleneck (another
// uplink, a route around the provider's limiter) reads no queue at all,
// however deep the queue is. The lower median, with two reflectors, was
// the smaller delay: one such reflector hid all the bloat from the other.
// The upper median needs more than half the signals to read no queue to
// hide one (two of two or three, three of four), and half or more to read
// one for a cut on noise (one of two, two of three or four): with three or
// more, one noisy reflector cannot cut alone. With two, a noisy one can; a reflector that reads a
// queue the other misses is taken at its word, since a missed queue costs
// the delay the shaper is there to keep, a false cut some rate for a
// while.
func vote(ss []*Signal) *Signal {
	if len(ss) == 0 {
		return nil
	}
	slices.SortFunc(ss, func(a, b *Signal) int { return cmp.Compare(a.Delay, b.Delay) })
	return ss[len(ss)/2]
}
