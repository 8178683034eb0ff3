package probe

import (
	"math"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// ipdvWindow is how many recent sequence numbers keep their RTT so that IPDV can
// pair consecutive probes even when they arrive out of order.
const ipdvWindow = 4096

// udpStats accumulates the UDP probe's statistics as replies arrive. It is owned
// by one goroutine (the receiver), streams (memory is one bit per probe plus
// fixed-size histograms) and never allocates per reply.
type udpStats struct {
	rtt  *hdrhistogram.Histogram // ns, server processing removed
	ipdv *hdrhistogram.Histogram // |RTT(s) - RTT(s-1)| for consecutive sequence numbers, ns

	seen       []uint64 // bitset of sequence numbers received
	received   int64    // unique replies
	duplicates int64
	reordered  int64 // replies whose seq is below the highest seen before them
	maxSeq     int64 // highest seq received, -1 before any

	// RFC 3550 interarrival jitter over arrival order, ns.
	jitter   float64
	lastRTT  int64
	haveLast bool

	// Recent RTTs by seq for IPDV.
	ring    [ipdvWindow]int64
	ringSeq [ipdvWindow]int64

	srvRecvMax uint32 // highest "received" count the reflector echoed

	// Per-block RTTs: the probes split by sequence number, so by send time,
	// into Blocks equal runs.
	count  int
	blocks [Blocks]*hdrhistogram.Histogram
}

// Blocks is how many consecutive blocks a UDP run's probes are split into
// for Batches: five, so each block is long enough that its figures do not
// just echo one moment, and the spread across them still has four degrees
// of freedom.
const Blocks = 5

// Batches are a run's figures per block of consecutive probes (by send
// order), µs and %: their spread is how much the path drifted during the
// run, the batch-means estimate of run-to-run noise.
//
// Every array has one entry per block that sent probes (or, for tcp,
// scheduled requests), in order. A block in which nothing came back is kept:
// its Count is 0, its Loss (or Errors) 100, and its latency figures 0,
// which mean "no latency" (readers skip latencies of blocks whose Count is
// 0). Dropping such a block would hide the run's worst moment from the loss.
type Batches struct {
	Count []int64   `json:"count"`
	P50   []float64 `json:"p50"`
	P90   []float64 `json:"p90"`
	P99   []float64 `json:"p99"`
	P999  []float64 `json:"p999"`
	Mean  []float64 `json:"mean"`
	// Loss is the share of each block's probes that got no reply, %.
	Loss []float64 `json:"loss_pct,omitempty"`
	// Errors is the share of each block's requests that failed (or could
	// not be sent because their connection had failed), % (tcp).
	Errors []float64 `json:"errors_pct,omitempty"`
}

// Latencies returns the figures xs (one of b's latency arrays) of the
// blocks that have replies.
func (b *Batches) Latencies(xs []float64) []float64 {
	var out []float64
	for i, x := range xs {
		if i < len(b.Count) && b.Count[i] > 0 {
			out = append(out, x)
		}
	}
	return out
}

// batches reads the per-block figures; sent is how many probes went out.
func (s *udpStats) batches(sent int64) *Batches {
	return BatchesOf(s.blocks[:], func(i int) int64 {
		// Block i holds sequence numbers [i·count/Blocks, (i+1)·count/Blocks)
		// of those sent.
		return min(int64((i+1)*s.count/Blocks), sent) - int64(i*s.count/Blocks)
	}, nil)
}

// BatchesOf reads per-block histograms of round trips (ns). sent, when not
// nil, says how many probes block i sent, for its loss; failed, when not
// nil, how many of its requests failed, for its errors. A block that sent
// nothing (a run stopped early) is left out; a block whose probes all went
// unanswered is not.
func BatchesOf(hs []*hdrhistogram.Histogram, sent, failed func(i int) int64) *Batches {
	b := &Batches{}
	for i, h := range hs {
		var n, f int64
		if sent != nil {
			if n = sent(i); n <= 0 {
				continue
			}
		}
		if failed != nil {
			f = failed(i)
		}
		if h.TotalCount() == 0 && sent == nil && f == 0 {
			continue // nothing was scheduled in this block
		}
		var p Percentiles
		if h.TotalCount() > 0 {
			p = summarize(h)
		}
		b.Count = append(b.Count, p.Count)
		b.P50, b.P90, b.P99, b.P999, b.Mean = append(b.P50, p.P50), append(b.P90, p.P90), append(b.P99, p.P99), append(b.P999, p.P999), append(b.Mean, p.Mean)
		if sent != nil {
			b.Loss = append(b.Loss, round3(100*float64(max(0, n-p.Count))/float64(n)))
		}
		if failed != nil {
			b.Errors = append(b.Errors, round3(100*float64(f)/float64(f+p.Count)))
		}
	}
	return b
}

// newBlockHist is a block's histogram: two significant digits (1 %) keep
// five of them at a few KiB each.
func newBlockHist() *hdrhistogram.Histogram { return hdrhistogram.New(histLowest, histHighest, 2) }

// timeBlocks are per-block histograms filled from many goroutines, a block
// being a fifth of a run's duration by scheduled send time.
type timeBlocks struct {
	start time.Time
	span  time.Duration // one block
	mu    sync.Mutex
	h     [Blocks]*hdrhistogram.Histogram
	// failed counts, per block, the requests scheduled there that failed
	// or could not be sent because their connection had failed.
	failed [Blocks]int64
}

func newTimeBlocks(start time.Time, d time.Duration) *timeBlocks {
	b := &timeBlocks{start: start, span: max(d/Blocks, 1)}
	for i := range b.h {
		b.h[i] = newBlockHist()
	}
	return b
}

// block is the index of the block of scheduled send time at.
func (b *timeBlocks) block(at time.Time) int {
	return min(Blocks-1, max(0, int(at.Sub(b.start)/b.span)))
}

// record adds ns to the block of the scheduled send time at.
func (b *timeBlocks) record(at time.Time, ns int64) {
	i := b.block(at)
	b.mu.Lock()
	record(b.h[i], ns)
	b.mu.Unlock()
}

func (b *timeBlocks) batches() *Batches {
	b.mu.Lock()
	defer b.mu.Unlock()
	return BatchesOf(b.h[:], nil, func(i int) int64 { return b.failed[i] })
}

func newUDPStats(count int) *udpStats {
	s := &udpStats{
		rtt:    newHist(),
		ipdv:   newHist(),
		seen:   make([]uint64, (count+63)/64),
		maxSeq: -1,
		count:  count,
	}
	for i := range s.blocks {
		s.blocks[i] = newBlockHist()
	}
	for i := range s.ringSeq {
		s.ringSeq[i] = -1
	}
	return s
}

// add records one reply: seq is the probe's sequence number (already checked to
// be below the number sent), rtt the round trip in ns with the reflector's
// processing removed, srvRecv the reflector's received count at reply time.
func (s *udpStats) add(seq uint32, rtt int64, srvRecv uint32) {
	i := int64(seq)
	if int(i/64) >= len(s.seen) {
		return
	}
	s.srvRecvMax = max(s.srvRecvMax, srvRecv)
	w, bit := i/64, uint64(1)<<(i%64)
	if s.seen[w]&bit != 0 {
		s.duplicates++
		return
	}
	s.seen[w] |= bit
	s.received++
	if i < s.maxSeq {
		s.reordered++
	} else {
		s.maxSeq = i
	}
	record(s.rtt, rtt)
	record(s.blocks[min(Blocks-1, int(i)*Blocks/max(1, s.count))], rtt)

	// RFC 3550 §6.4.1: J += (|D(i-1,i)| - J) / 16, D being the difference of
	// transit times of consecutive arrivals; the round trip stands in for transit.
	if s.haveLast {
		d := math.Abs(float64(rtt - s.lastRTT))
		s.jitter += (d - s.jitter) / 16
	}
	s.lastRTT, s.haveLast = rtt, true

	// RFC 5481 IPDV pairs consecutive sequence numbers: (s-1, s) and, when s
	// arrived after s+1, (s, s+1).
	slot := i % ipdvWindow
	s.ring[slot], s.ringSeq[slot] = rtt, i
	if i > 0 {
		if p := (i - 1) % ipdvWindow; s.ringSeq[p] == i-1 {
			record(s.ipdv, abs64(rtt-s.ring[p]))
		}
	}
	if n := (i + 1) % ipdvWindow; s.ringSeq[n] == i+1 {
		record(s.ipdv, abs64(s.ring[n]-rtt))
	}
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// Loss splits the probes that did not come back by direction.
type Loss struct {
	// Up is probes the reflector never received; Down is replies the reflector
	// sent that never arrived. Counts of packets.
	Up   int64 `json:"up"`
	Down int64 `json:"down"`
	// UpPct and DownPct are the same as a percentage of probes sent.
	UpPct   float64 `json:"up_pct"`
	DownPct float64 `json:"down_pct"`
	// Throttled is probes the reflector's rate limit dropped (its count, in
	// its answer to the close): a prober that fell behind its schedule
	// (a host too busy to wake it in time, seen as send lag) sends what it
	// owes in a burst, and the reflector drops what exceeds its burst. They
	// are neither path loss nor counted in Up; loss figures leave them out
	// of the probes sent.
	Throttled int64 `json:"throttled,omitempty"`
	// Split says where the reflector's count came from: "final" (its answer to
	// the close request) or "echoed" (the highest count seen in replies, used
	// when the close went unanswered; late losses then count as downstream).
	Split string `json:"split"`
}

// loss computes the split from the probes sent, the reflector's count of
// unique probes it received (srvRecv < 0: unknown, use the echoed maximum)
// and of those its rate limit dropped.
func (s *udpStats) loss(sent int64, srvRecv, throttled int64) Loss {
	l := Loss{Split: "final"}
	if srvRecv < 0 {
		srvRecv = int64(s.srvRecvMax)
		l.Split = "echoed"
		throttled = 0
	}
	srvRecv = min(max(srvRecv, s.received), sent)
	l.Throttled = min(max(throttled, 0), sent-srvRecv)
	l.Up = sent - srvRecv - l.Throttled
	l.Down = srvRecv - s.received
	if sent > 0 {
		l.UpPct = round3(100 * float64(l.Up) / float64(sent))
		l.DownPct = round3(100 * float64(l.Down) / float64(sent))
	}
	return l
}
