package pathprobe

import (
	"fmt"
	"math"
	"slices"
	"sort"
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
		h := Hop{Index: i + 1, Sent: r.sent, Received: len(r.replies), Histogram: []Bucket{}}
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
// two probes and 5 % go missing.
const (
	minAddedP50US  = 2000
	minAddedP90US  = 5000
	minTailReplies = 10
	shareOfPath    = 0.2
	minLossPct     = 5
	minJitterUS    = 500
)

// judge marks the hops whose loss or delay does not carry on (RateLimited)
// and finds the first hop whose does. It works on floors: a hop's floor is
// the least any hop from it to the end shows, which is what the forwarding
// path adds by then; a hop's own excess over its floor is its slow or
// rate-limited reply.
func judge(hops []Hop) (Verdict, int) {
	var idx []int // responding hops
	for i, h := range hops {
		if h.Received > 0 {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return Verdict{Kind: "none", Text: "no hop answered"}, 0
	}
	floor := func(idx []int, get func(h *Hop) float64) []float64 {
		f := make([]float64, len(idx))
		for k := len(idx) - 1; k >= 0; k-- {
			f[k] = get(&hops[idx[k]])
			if k < len(idx)-1 {
				f[k] = min(f[k], f[k+1])
			}
		}
		return f
	}
	lossSig := func(pct float64, sent int) bool {
		return pct >= minLossPct && pct*float64(sent)/100 >= 2
	}
	// First pass, every responding hop: which replies are slow or
	// rate-limited against what the path shows after them.
	p50 := floor(idx, func(h *Hop) float64 { return h.RTT.P50 })
	loss := floor(idx, func(h *Hop) float64 { return h.LossPct })
	thr50 := max(minAddedP50US, shareOfPath*p50[len(idx)-1])
	var path []int // the hops whose replies tell the forwarding path
	for k, i := range idx {
		h := &hops[i]
		h.RateLimited = lossSig(h.LossPct-loss[k], h.Sent) || h.RTT.P50-p50[k] >= thr50
		if !h.RateLimited {
			path = append(path, i)
		}
	}
	if len(path) == 0 {
		return Verdict{Kind: "none", Text: "every hop that answered was rate-limited"}, 0
	}
	// Second pass, without them: a rate-limited hop's few replies (its
	// loss already said to be its own) would make the floors noise. Where
	// delay starts at such a hop, the next hop that answers fully is named.
	idx, n := path, len(path)
	p50 = floor(idx, func(h *Hop) float64 { return h.RTT.P50 })
	// The tail is judged on p90: with tens of probes per hop p99 is the
	// largest one or two, and one stalled reply would name a hop.
	p90 := floor(idx, func(h *Hop) float64 { return h.RTT.P90 })
	loss = floor(idx, func(h *Hop) float64 { return h.LossPct })
	jit := floor(idx, func(h *Hop) float64 { return h.JitterUS })
	thr50 = max(minAddedP50US, shareOfPath*p50[n-1])
	thr90 := max(minAddedP90US, shareOfPath*p90[n-1])
	thrJit := max(minJitterUS, shareOfPath*jit[n-1])
	v := Verdict{Kind: "none"}
	delayAt, lossAt := -1, -1
	var added, lost float64
	for k := range idx {
		var b50, b90, bl float64
		if k > 0 {
			b50, b90, bl = p50[k-1], p90[k-1], loss[k-1]
		}
		// A tail needs a sample: with fewer than ten replies p90 is the
		// largest one or two.
		tail := hops[idx[k]].Received >= minTailReplies && p90[k]-b90 >= thr90
		if delayAt < 0 && (p50[k]-b50 >= thr50 || tail) {
			delayAt, added = k, round1(p50[k]-b50)
		}
		if lossAt < 0 && lossSig(loss[k]-bl, hops[idx[k]].Sent) {
			lossAt, lost = k, round2(loss[k]-bl)
		}
	}
	jitterFrom := 0
	for k := range idx {
		b := 0.0
		if k > 0 {
			b = jit[k-1]
		}
		if jit[k]-b >= thrJit {
			jitterFrom = hops[idx[k]].Index
			break
		}
	}
	at := -1
	switch {
	case delayAt >= 0 && lossAt >= 0 && delayAt == lossAt:
		at, v.Kind = delayAt, "delay+loss"
	case delayAt >= 0 && (lossAt < 0 || delayAt < lossAt):
		at, v.Kind = delayAt, "delay"
	case lossAt >= 0:
		at, v.Kind = lossAt, "loss"
	}
	if at < 0 {
		v.Text = "no hop adds notable delay or loss on the way to the end of the path"
		return v, jitterFrom
	}
	h := hops[idx[at]]
	v.Hop, v.Address = h.Index, h.Address
	if v.Kind != "loss" {
		v.AddedUS = added
	}
	if v.Kind != "delay" {
		v.LossPct = lost
	}
	switch v.Kind {
	case "delay":
		v.Text = fmt.Sprintf("delay is added at hop %d (%s): +%s p50, carried on to the end of the path", h.Index, h.Address, fmtUS(v.AddedUS))
	case "loss":
		v.Text = fmt.Sprintf("loss starts at hop %d (%s): %.1f %% of probes, carried on to the end of the path", h.Index, h.Address, v.LossPct)
	default:
		v.Text = fmt.Sprintf("delay and loss start at hop %d (%s): +%s p50, %.1f %% lost, carried on to the end of the path", h.Index, h.Address, fmtUS(v.AddedUS), v.LossPct)
	}
	return v, jitterFrom
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
