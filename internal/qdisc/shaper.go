package qdisc

import (
	"errors"
	"math"
	"time"
)

// Shaper is the live state of an interface's root shaper (cake or tbf), as
// ReadShaper reports it. lowlat autorate reads one several times a second and
// moves its rate with SetShaperRate.
//
// Rates: the kernel holds both cake's bandwidth and tbf's rate in bytes per
// second, so RateBps is always a multiple of 8, and a rate given to
// SetShaperRate is rounded down to one (1234567 bit/s is held, and read back,
// as 1234560), as tc rounds it.
type Shaper struct {
	Kind   string // "cake" or "tbf"
	Handle uint32
	// RateBps is the rate in bits per second as the kernel holds it: cake's
	// bandwidth (0 for an unlimited cake), tbf's rate.
	RateBps uint64
	// Counters of the root qdisc (TCA_STATS2: struct gnet_stats_basic and
	// struct gnet_stats_queue, packets from TCA_STATS_PKT64 once they no
	// longer fit 32 bits). A tbf reports what is queued in its leaf as its own
	// backlog and queue length, and counts the leaf's drops among its own.
	Bytes   uint64 // bytes sent
	Packets uint64 // packets sent
	Backlog uint64 // bytes queued now
	Qlen    uint32 // packets queued now
	Drops   uint64
}

// ErrNoShaper is wrapped by ReadShaper and SetShaperRate when the interface's
// root qdisc is neither cake nor tbf; the error names the kind found.
var ErrNoShaper = errors.New("not a cake or tbf shaper")

// shaperMTU is the frame size the profile sizes tbf buckets with (see
// shaperBurst).
const shaperMTU = 1514

// shaperBurst is the tbf bucket SetShaperRate gives a rate, in bytes: the
// capped-uplink profile's ${tbf_burst(rate)} (profile.TbfBurst), two MTUs or
// 1 ms of traffic, so a shaper moved by autorate has the bucket the profile
// would have given it at that rate. It cannot call the profile's function
// (the profile package imports this one, and its tests' imports reach
// packages still being written), so the two must be changed together.
func shaperBurst(rateBits uint64) uint64 {
	return max(2*shaperMTU, rateBits/8/1000)
}

// ShaperBucketMax is the largest tbf bucket SetShaperRate leaves at any rate
// up to maxBits: the bucket it gives maxBits, and what it adds so a bucket
// takes whole the packets the one before it let in (under a timer tick's
// bytes, and one: see holdingBurst).
func ShaperBucketMax(maxBits uint64) uint64 {
	return shaperBurst(maxBits) + maxBits/8/15_000_000 + 1
}

// shaperLimit is a tbf's byte limit at a new rate and bucket (bytes/s,
// bytes), given its limit, bucket and rate now. tbf queues at most limit
// bytes, so a packet waits up to limit/rate: tc and the profile make that
// bound from a latency, limit = rate*latency + burst (TbfLimit), and this
// keeps the latency, (limit-burst)/rate, and recomputes the limit with the
// new rate and bucket. Where the bucket is 1 ms of traffic (above 24 Mbit/s)
// limit/rate stays what it was; below, where it stays two MTUs, limit/rate
// grows as the rate falls, as the profile's own would, and the queue never
// holds less than the bucket. Keeping limit/rate itself there would shrink
// the queue below one packet at a third of the rate of the profile's plain
// tbf (which then drops every full-size packet), and a floor would lose the
// bound for good: the next rise would scale the floored limit up into a
// queue many times the one the profile chose.
//
// The latency is rounded to 100 us, the profile's step, so that a rate moved
// down and back up gives the limit it started from: the bytes each limit is
// rounded to would otherwise drift it a little with every change. A limit
// below the bucket (a hand-made tbf) counts as latency 0. The result is
// clamped to the kernel's 32 bits.
func shaperLimit(limit, burst, rate, newRate, newBurst uint64) uint64 {
	var lat time.Duration
	if limit > burst && rate > 0 {
		lat = time.Duration(float64(limit-burst) / float64(rate) * float64(time.Second)).Round(100 * time.Microsecond)
	}
	return min(TbfLimit(newRate*8, newBurst, lat), math.MaxUint32)
}
