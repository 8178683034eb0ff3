package pathprobe

import (
	"slices"
	"time"
)

// Routers and hosts limit the rate of the ICMP errors they send, per peer:
// Linux answers a burst of six time-exceeded or unreachable messages, then
// one a second (net.ipv4.icmp_ratelimit, 1000 ms, and the default
// icmp_ratemask; IPv6's net.ipv6.icmp.ratelimit, shortened for routes
// shorter than /128). Probing a hop faster than that, its replies thin out
// to the limiter's rate: at five probes a second it answers about one in
// five, and so does every later hop that limits alike, the destination
// included. That looks like loss starting at the first such hop and carried
// on to the end; it is not.
//
// The answers' pattern tells them apart. Random loss leaves answers next to
// each other and uneven gaps between them. A limiter answers its burst,
// then one probe each time a token has come back: never two in a row
// (while probes come faster than one every two of its periods), at gaps as
// even as the probes' arrival allows, and never silent for long.
const (
	// minLeadingRun is the shortest burst taken for a limiter's when the
	// tail has too few answers to show even gaps on its own (Linux's is 6
	// when its bucket is full).
	minLeadingRun = 4
	// maxSilence bounds a stretch without any answer: a limiter's tokens
	// come back within its period (Linux's is a second), an outage does
	// not.
	maxSilence = 3 * time.Second
)

// rateCap says whether a hop's answers follow a limit on its reply rate
// rather than loss, and the median time between the limited answers (0
// when there are too few to tell). p are the hop's probes in send order.
//
// The run splits where the limiter's burst ends: after the last two
// answers in a row. The burst before it may miss one answer (a reply lost
// on its way back); the tail after it must look like a limiter's: answers
// at even gaps of two probes or more, and no long silence.
func rateCap(p []probeOut) (bool, time.Duration) {
	if len(p) < 3 {
		return false, 0
	}
	// end is the burst's length: up to the second of the last two answers
	// in a row, or the first answer.
	end := 0
	for i := len(p) - 1; i > 0; i-- {
		if p[i].answered && p[i-1].answered {
			end = i + 1
			break
		}
	}
	if end == 0 {
		for end < len(p) && !p[end].answered {
			end++
		}
		end = min(end+1, len(p))
	}
	if end == len(p) {
		return false, 0
	}
	lead := 0
	for _, q := range p[:end] {
		if q.answered {
			lead++
		}
	}
	if end-lead > 1 {
		return false, 0 // a burst with holes: loss, not a limiter's burst
	}
	// The probes' spacing at this hop: a round's interval.
	var sends []time.Duration
	for i := 1; i < len(p); i++ {
		sends = append(sends, p[i].at-p[i-1].at)
	}
	spacing := median(sends)
	// The answers after the burst, timed by their replies' arrival: a
	// queue before the hop moves when a probe reaches the limiter, and the
	// reply leaves then.
	tail := p[end:]
	var rx []time.Duration
	for _, q := range tail {
		if q.answered {
			rx = append(rx, q.rx)
		}
	}
	var gaps []time.Duration
	for i := 1; i < len(rx); i++ {
		gaps = append(gaps, rx[i]-rx[i-1])
	}
	// Too few answers after the burst to show even gaps: the burst must
	// be a limiter's, whole, and the silence after it more than one probe.
	if len(gaps) < 2 && (lead < minLeadingRun || end > lead || len(tail) < 2) {
		return false, 0
	}
	period := time.Duration(0)
	if len(gaps) > 0 {
		period = median(gaps)
		// Answers as often as every other probe, or closer: either not a
		// limit, or one this rate of probing cannot tell from loss.
		if period < spacing*7/4 || slices.Min(gaps) < period*6/10 {
			return false, 0
		}
		// Even gaps; one reply lost on its way back doubles one.
		if len(gaps) >= 3 && slices.Max(gaps) > period*5/2 {
			return false, 0
		}
	}
	// No long silence after the burst: between answers, or from the last
	// one to the end of the run.
	limit := max(maxSilence, 3*period)
	from := p[end-1].at
	for _, q := range tail {
		if q.at-from > limit {
			return false, 0
		}
		if q.answered {
			from = q.at
		}
	}
	return true, period
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
