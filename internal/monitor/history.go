package monitor

import (
	"math"
	"time"
)

// History for the status page is a fixed ring of slots per target, so the
// monitor's memory does not grow with uptime: HistorySlots slots of
// SlotWidth, each a log-scale RTT histogram of histBuckets uint16 counts
// (9 % wide buckets from 10 µs to ~37 s: a quantile read from it is within
// ±4.5 %), ~21 KiB per target in all.
const (
	SlotWidth    = time.Minute
	HistorySlots = 60

	histBase      = 10e-6 // seconds, the lower edge of bucket 0
	histPerOctave = 8
	histBuckets   = 176 // 22 octaves: 10 µs .. 41.9 s
)

// bucketOf returns the bucket of an RTT in seconds (clamped to the ends).
func bucketOf(sec float64) int {
	if sec <= histBase {
		return 0
	}
	i := int(math.Log2(sec/histBase) * histPerOctave)
	return min(max(i, 0), histBuckets-1)
}

// bucketMid is a bucket's geometric middle, seconds.
func bucketMid(i int) float64 {
	return histBase * math.Exp2((float64(i)+0.5)/histPerOctave)
}

// bucketTop is a bucket's upper edge, seconds.
func bucketTop(i int) float64 {
	return histBase * math.Exp2(float64(i+1)/histPerOctave)
}

type slot struct {
	start      int64 // unix seconds of the slot's start; 0: never used
	sent, lost uint32
	counts     [histBuckets]uint16
}

// history is one target's ring. Not safe for concurrent use: the target's
// mutex guards it.
type history struct {
	slots [HistorySlots]slot
}

// at returns the slot for time t, recycling the ring's oldest when t opens
// a new slot. Times older than the ring are dropped (nil).
func (h *history) at(t time.Time) *slot {
	start := t.Truncate(SlotWidth).Unix()
	s := &h.slots[(start/int64(SlotWidth/time.Second))%HistorySlots]
	switch {
	case s.start == start:
		return s
	case s.start > start:
		return nil // an hour-old sample: its slot has been reused
	}
	*s = slot{start: start}
	return s
}

func (h *history) add(t time.Time, rtt time.Duration, lost bool) {
	s := h.at(t)
	if s == nil {
		return
	}
	s.sent++
	if lost {
		s.lost++
		return
	}
	if b := &s.counts[bucketOf(rtt.Seconds())]; *b < math.MaxUint16 {
		*b++
	}
}

// view copies the last hour up to now into slot views (oldest first) and
// the hour's CDF.
func (h *history) view(now time.Time) (slots []SlotView, cdf [][2]float64, sent, lost int64) {
	end := now.Truncate(SlotWidth)
	var total [histBuckets]uint64
	for i := HistorySlots - 1; i >= 0; i-- {
		start := end.Add(-time.Duration(i) * SlotWidth)
		v := SlotView{Start: start}
		s := &h.slots[(start.Unix()/int64(SlotWidth/time.Second))%HistorySlots]
		if s.start == start.Unix() {
			v.Sent, v.Lost = int64(s.sent), int64(s.lost)
			v.P50 = quantile(&s.counts, 0.50)
			v.P99 = quantile(&s.counts, 0.99)
			for b, c := range s.counts {
				total[b] += uint64(c)
			}
			sent += v.Sent
			lost += v.Lost
		}
		slots = append(slots, v)
	}
	var n uint64
	for _, c := range total {
		n += c
	}
	if n > 0 {
		var acc uint64
		for b, c := range total {
			if c == 0 {
				continue
			}
			acc += c
			cdf = append(cdf, [2]float64{bucketTop(b), float64(acc) / float64(n)})
		}
	}
	return slots, cdf, sent, lost
}

// quantile reads q from a slot's counts (0 when empty).
func quantile(counts *[histBuckets]uint16, q float64) time.Duration {
	var n uint64
	for _, c := range counts {
		n += uint64(c)
	}
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	var acc uint64
	for b, c := range counts {
		acc += uint64(c)
		if acc >= rank {
			return time.Duration(bucketMid(b) * 1e9)
		}
	}
	return time.Duration(bucketMid(histBuckets-1) * 1e9)
}
