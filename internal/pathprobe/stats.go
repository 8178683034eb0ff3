package pathprobe

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// reply is one probe's answer.
type reply struct {
	addr string
	rtt  float64 // µs
	dest bool    // from the destination itself
}

// rawHop is what one TTL collected: probes sent, replies in send order.
type rawHop struct {
	sent    int
	replies []reply
	// probes are the probes in send order, when the runner kept them: the
	// pattern of answers tells a limit on the reply rate from loss.
	probes []probeOut
}

// probeOut is one probe's fate: when it left and when its reply came,
// both from the start of the run.
type probeOut struct {
	at, rx   time.Duration
	answered bool
}

// bucketEdges are the histogram's upper bounds, µs: 1-2-5 steps from 50 µs
// to 60 s, the longest a reply is waited for.
var bucketEdges = func() []float64 {
	var out []float64
	for d := 10.0; d <= 1e5; d *= 10 {
		out = append(out, 5*d, 10*d, 20*d)
	}
	return append(out, 5e6, 1e7, 2e7, 6e7)
}()

// summarize turns raw hops (index = TTL − 1) into Hops: figures per hop and
// added delay against the previous responding hop. Without a destination
// reply the list ends at the last hop that answered; with one, at the
// destination's TTL.
func summarize(raw []rawHop, destTTL int) []Hop {
	last := len(raw)
	if destTTL > 0 {
		last = min(last, destTTL)
	} else {
		for last > 0 && len(raw[last-1].replies) == 0 {
			last--
		}
	}
	hops := make([]Hop, 0, last)
	var prev *RTT
	for i := 0; i < last; i++ {
		r := raw[i]
		h := Hop{Index: i + 1, Sent: r.sent, Received: len(r.replies), Histogram: []Bucket{}, probes: r.probes}
		if r.sent > 0 {
			h.LossPct = round2(100 * float64(r.sent-len(r.replies)) / float64(r.sent))
		}
		counts := map[string]int{}
		for _, p := range r.replies {
			counts[p.addr]++
			h.rtts = append(h.rtts, p.rtt)
			h.Destination = h.Destination || p.dest
		}
		addrs := make([]string, 0, len(counts))
		for a := range counts {
			addrs = append(addrs, a)
		}
		sort.Slice(addrs, func(a, b int) bool {
			if counts[addrs[a]] != counts[addrs[b]] {
				return counts[addrs[a]] > counts[addrs[b]]
			}
			return addrs[a] < addrs[b]
		})
		if len(addrs) > 0 {
			h.Address, h.Others = addrs[0], addrs[1:]
		}
		if len(h.rtts) > 0 {
			h.RTT = percentiles(h.rtts)
			h.QueueUS = round1(h.RTT.P99 - h.RTT.Min)
			h.JitterUS = round1(jitter(h.rtts))
			h.Histogram = histogram(h.rtts)
			base := RTT{}
			if prev != nil {
				base = *prev
			}
			h.AddedUS = Added{P50: round1(max(0, h.RTT.P50-base.P50)), P99: round1(max(0, h.RTT.P99-base.P99))}
			rtt := h.RTT
			prev = &rtt
		}
		hops = append(hops, h)
	}
	return hops
}

// percentiles are nearest-rank figures of the round trips.
func percentiles(rtts []float64) RTT {
	s := slices.Clone(rtts)
	slices.Sort(s)
	q := func(p float64) float64 {
		k := int(math.Ceil(p*float64(len(s)))) - 1
		return round1(s[max(0, min(k, len(s)-1))])
	}
	return RTT{Min: round1(s[0]), P50: q(0.5), P90: q(0.9), P99: q(0.99), Max: round1(s[len(s)-1])}
}

// jitter is the mean absolute difference of consecutive round trips
// (RFC 3550's interarrival jitter without its smoothing).
func jitter(rtts []float64) float64 {
	if len(rtts) < 2 {
		return 0
	}
	var sum float64
	for i := 1; i < len(rtts); i++ {
		sum += math.Abs(rtts[i] - rtts[i-1])
	}
	return sum / float64(len(rtts)-1)
}

func histogram(rtts []float64) []Bucket {
	counts := make([]int, len(bucketEdges))
	top := 0
	for _, r := range rtts {
		i, _ := slices.BinarySearch(bucketEdges, r)
		i = min(i, len(bucketEdges)-1)
		counts[i]++
		top = max(top, i)
	}
	out := make([]Bucket, top+1)
	for i := range out {
		out[i] = Bucket{LeUS: bucketEdges[i], Count: counts[i]}
	}
	return out
}

// Thresholds of the verdict. Delay counts when it adds at least the larger
// of an absolute floor and a share of the whole path's, on p50 or on p90 (so
// a few milliseconds of propagation on a 40 ms path is not "the" hop). The
// floors are above what a host's own first hop costs: a LAN, or loopback in
// an emulated VM, answers in about a millisecond. Loss counts when at least
// two probes and 5 % go missing. A rate-limited hop with fewer than
// minFloorReplies replies is left out of the delay floors: its p50 is one or
// two samples.
const (
	minAddedP50US   = 2000
	minAddedP90US   = 5000
	minTailReplies  = 10
	minFloorReplies = 5
	shareOfPath     = 0.2
	minLossPct      = 5
	minJitterUS     = 500
)

// judge marks the hops whose loss or delay is their own reply's
// (RateLimited) and finds the first hop whose added delay or loss carries on
// to the end of the path: the destination when reached, else the last hop
// that answered. It works on floors: a hop's floor is the least any hop from
// it to the end shows, which is what the forwarding path adds by then; a
// hop's own excess over its floor is its slow or rate-limited reply.
//
// A hop whose answers follow a limit on its reply rate (rateCap) is
// rate-limited wherever it sits, the destination included: when every hop
// from some point on limits its replies alike (Linux's default on every
// router and host), the loss each shows is its limiter's, the same at every
// hop, and says nothing of the forwarding path. Their replies still time
// it: a limiter drops replies, it does not delay them.
func judge(hops []Hop, reached bool) (Verdict, int) {
	var idx []int // responding hops
	for i, h := range hops {
		if h.Received > 0 {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return Verdict{Kind: "none", Text: "no hop answered"}, 0
	}
	lossSig := func(pct float64, sent int) bool {
		return pct >= minLossPct && pct*float64(sent)/100 >= 2
	}
	// Hops whose replies come at a limited rate (ReplyRateLimited): their
	// loss is left out of every loss floor.
	var lossIdx []int
	for _, i := range idx {
		h := &hops[i]
		h.RateLimited, h.ReplyRateLimited, h.ReplyEveryMS = false, false, 0
		if lossSig(h.LossPct, h.Sent) {
			if ok, period := rateCap(h.probes); ok {
				h.ReplyRateLimited = true
				h.ReplyEveryMS = math.Round(float64(period.Microseconds()) / 1000)
				continue
			}
		}
		lossIdx = append(lossIdx, i)
	}
	// First pass, every responding hop: which replies are slow or lost
	// against what the path shows after them.
	p50 := floor(hops, idx, func(h *Hop) float64 { return h.RTT.P50 })
	thr50 := max(minAddedP50US, shareOfPath*p50[len(idx)-1])
	slow := make([]bool, len(hops))
	for k, i := range idx {
		slow[i] = hops[i].RTT.P50-p50[k] >= thr50
		hops[i].RateLimited = hops[i].ReplyRateLimited || slow[i]
	}
	loss := floor(hops, lossIdx, func(h *Hop) float64 { return h.LossPct })
	for k, i := range lossIdx {
		if h := &hops[i]; lossSig(h.LossPct-loss[k], h.Sent) {
			h.RateLimited = true
		}
	}
	// Second pass. Delay is read from every hop that is not slow to
	// answer, rate-limited ones with a few replies included; loss from the
	// hops not labelled at all. A rate-limited hop with one or two replies
	// would make the delay floors noise: where delay really starts at such
	// a hop, the next hop that answers more is named.
	var delayIdx []int
	lossIdx = nil
	for _, i := range idx {
		h := &hops[i]
		if !slow[i] && (!h.RateLimited || h.Received >= minFloorReplies) {
			delayIdx = append(delayIdx, i)
		}
		if !h.RateLimited {
			lossIdx = append(lossIdx, i)
		}
	}
	hidden := lossHiddenFrom(hops, idx)
	if len(delayIdx) == 0 && len(lossIdx) == 0 {
		return Verdict{Kind: "none", LossHiddenFrom: hidden, Text: "every hop that answered was rate-limited or slow to answer"}, 0
	}
	delayAt, added := firstDelay(hops, delayIdx)
	lossAt, lost := -1, 0.0
	loss = floor(hops, lossIdx, func(h *Hop) float64 { return h.LossPct })
	for k, i := range lossIdx {
		bl := 0.0
		if k > 0 {
			bl = loss[k-1]
		}
		if lossSig(loss[k]-bl, hops[i].Sent) {
			lossAt, lost = i, round2(loss[k]-bl)
			break
		}
	}
	jitterFrom := 0
	jit := floor(hops, delayIdx, func(h *Hop) float64 { return h.JitterUS })
	if n := len(delayIdx); n > 0 {
		thrJit := max(minJitterUS, shareOfPath*jit[n-1])
		for k, i := range delayIdx {
			b := 0.0
			if k > 0 {
				b = jit[k-1]
			}
			if jit[k]-b >= thrJit {
				jitterFrom = hops[i].Index
				break
			}
		}
	}
	v := Verdict{Kind: "none", LossHiddenFrom: hidden}
	if delayAt >= 0 {
		v.DelayHop = hops[delayAt].Index
	}
	if lossAt >= 0 {
		v.LossHop = hops[lossAt].Index
	}
	at := -1
	switch {
	case delayAt >= 0 && delayAt == lossAt:
		at, v.Kind = delayAt, "delay+loss"
	case delayAt >= 0 && (lossAt < 0 || delayAt < lossAt):
		at, v.Kind = delayAt, "delay"
	case lossAt >= 0:
		at, v.Kind = lossAt, "loss"
	}
	end := "the end of the path"
	if !reached {
		end = "the last hop that answered"
	}
	var parts []string
	if at < 0 {
		if hidden > 0 {
			parts = append(parts, "no hop adds notable delay on the way to "+end)
		} else {
			parts = append(parts, "no hop adds notable delay or loss on the way to "+end)
		}
	} else {
		h := hops[at]
		v.Hop, v.Address = h.Index, h.Address
		if v.Kind != "loss" {
			v.AddedUS = added
		}
		if v.Kind != "delay" {
			v.LossPct = lost
		}
		switch v.Kind {
		case "delay":
			parts = append(parts, fmt.Sprintf("delay is added at hop %d (%s): +%s p50, carried on to %s", h.Index, h.Address, fmtUS(v.AddedUS), end))
			if lossAt >= 0 {
				parts = append(parts, fmt.Sprintf("loss starts at hop %d (%s): %.1f %% of probes", hops[lossAt].Index, hops[lossAt].Address, lost))
			}
		case "loss":
			parts = append(parts, fmt.Sprintf("loss starts at hop %d (%s): %.1f %% of probes, carried on to %s", h.Index, h.Address, v.LossPct, end))
			if delayAt >= 0 {
				// Named too: loss earlier on the path does not make a
				// later queue any less the problem.
				parts = append(parts, fmt.Sprintf("delay is added at hop %d (%s): +%s p50", hops[delayAt].Index, hops[delayAt].Address, fmtUS(added)))
			}
		default:
			parts = append(parts, fmt.Sprintf("delay and loss start at hop %d (%s): +%s p50, %.1f %% lost, carried on to %s", h.Index, h.Address, fmtUS(v.AddedUS), v.LossPct, end))
		}
	}
	if hidden > 0 {
		parts = append(parts, hiddenText(hops, hidden))
	}
	v.Text = strings.Join(parts, "; ")
	return v, jitterFrom
}

// floor is, for each of the hops idx, the least get gives from it to the
// last of them.
func floor(hops []Hop, idx []int, get func(h *Hop) float64) []float64 {
	f := make([]float64, len(idx))
	for k := len(idx) - 1; k >= 0; k-- {
		f[k] = get(&hops[idx[k]])
		if k < len(idx)-1 {
			f[k] = min(f[k], f[k+1])
		}
	}
	return f
}

// firstDelay finds the first of the hops idx whose p50 floor, or p90 floor
// with enough replies, rises by the threshold: its index in hops and the
// p50 it adds, -1 when none does.
func firstDelay(hops []Hop, idx []int) (int, float64) {
	n := len(idx)
	if n == 0 {
		return -1, 0
	}
	p50 := floor(hops, idx, func(h *Hop) float64 { return h.RTT.P50 })
	// The tail is judged on p90: with tens of probes per hop p99 is the
	// largest one or two, and one stalled reply would name a hop.
	p90 := floor(hops, idx, func(h *Hop) float64 { return h.RTT.P90 })
	thr50 := max(minAddedP50US, shareOfPath*p50[n-1])
	thr90 := max(minAddedP90US, shareOfPath*p90[n-1])
	for k, i := range idx {
		var b50, b90 float64
		if k > 0 {
			b50, b90 = p50[k-1], p90[k-1]
		}
		// A tail needs a sample: with fewer than ten replies p90 is the
		// largest one or two.
		tail := hops[i].Received >= minTailReplies && p90[k]-b90 >= thr90
		if p50[k]-b50 >= thr50 || tail {
			return i, round1(p50[k] - b50)
		}
	}
	return -1, 0
}

// lossHiddenFrom is the hop from which every hop that answered limits its
// reply rate, the last one included: loss from there on cannot be read at
// this probe rate. 0 when the last hop that answered does not.
func lossHiddenFrom(hops []Hop, idx []int) int {
	from := 0
	for k := len(idx) - 1; k >= 0 && hops[idx[k]].ReplyRateLimited; k-- {
		from = hops[idx[k]].Index
	}
	return from
}

// hiddenText says why loss from hop `from` on cannot be read, and how to
// read it: probing each hop no faster than its limiter answers.
func hiddenText(hops []Hop, from int) string {
	var periods []float64
	last := from
	for _, h := range hops[from-1:] {
		if h.Received > 0 {
			last = h.Index
		}
		if h.ReplyEveryMS > 0 {
			periods = append(periods, h.ReplyEveryMS)
		}
	}
	which := fmt.Sprintf("hops %d to %d limit", from, last)
	if last == from {
		which = fmt.Sprintf("hop %d limits", from)
	}
	if len(periods) == 0 {
		return fmt.Sprintf("loss from hop %d on cannot be read: %s the rate of their ICMP replies; probe each hop more slowly (--interval 1s) to measure it", from, which)
	}
	slices.Sort(periods)
	p := periods[len(periods)/2]
	iv := time.Duration(max(1, math.Round(p/100)) * 100 * float64(time.Millisecond))
	return fmt.Sprintf("loss from hop %d on cannot be read: %s the rate of their ICMP replies (about one every %s); probe each hop no faster than that (--interval %s) to measure it", from, which, fmtUS(p*1000), iv)
}

// fmtUS renders microseconds with a unit.
func fmtUS(us float64) string {
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%.2f s", us/1e6)
	case us >= 1000:
		return fmt.Sprintf("%.1f ms", us/1000)
	}
	return fmt.Sprintf("%.0f µs", us)
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }
func round2(x float64) float64 { return math.Round(x*100) / 100 }
