package passive

// The receive hooks turn skb->tstamp (CLOCK_REALTIME) into a delay against
// bpf_ktime_get_ns (CLOCK_MONOTONIC), so they need realtime − monotonic.
// User space reads it: one realtime reading bracketed by two monotonic ones.
// The bracket bounds the error, and it is not small when the thread is
// preempted between the reads (a vCPU descheduled under an emulator, a busy
// host): a reading taken late on the monotonic side sets the offset low by
// half the gap, and every delay shorter than that then reads negative and is
// dropped — the stack stage's delays are microseconds, so on a busy VM half
// of them went missing while the read stage, hundreds of µs, lost none.

// clockReading is one CLOCK_REALTIME reading between two CLOCK_MONOTONIC
// ones, in nanoseconds.
type clockReading struct{ m1, r, m2 int64 }

// offset returns realtime − monotonic at the bracket's midpoint and the
// most it can be wrong by: half the bracket, rounded up (never 0).
func (c clockReading) offset() (off, bound int64) {
	return c.r - (c.m1+c.m2)/2, (c.m2-c.m1)/2 + 1
}

// tightestOffset is the offset of the reading with the narrowest bracket.
func tightestOffset(rs []clockReading) (off, bound int64) {
	bound = -1
	for _, c := range rs {
		o, b := c.offset()
		if bound < 0 || b < bound {
			off, bound = o, b
		}
	}
	return off, bound
}

// nextOffset decides what the hooks use after a new measurement (off,
// bound) when they use cur, measured within curBound: the new one when it
// is tighter, or when cur lies outside the new one's bound (the realtime
// clock was stepped); else cur, so that a loose reading never moves a good
// offset. Kept, cur's bound grows to cover the new reading's: a step
// smaller than the new bound may have moved the truth that far from cur.
func nextOffset(cur, curBound, off, bound int64) (int64, int64) {
	if bound < curBound || cur < off-bound || cur > off+bound {
		return off, bound
	}
	return cur, max(curBound, abs(cur-off)+bound)
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// offsetSlack is added to the offset's bound to give the hooks' slack
// (realtime_offset_slack): how far below zero a delay may read and still
// count as a short one. A microsecond covers the two clocks' reads in the
// hook and the skb's stamp, which the bracket does not.
const offsetSlack = 1000

// offsetReadings is how many brackets a measurement takes: one of eight
// escapes a preemption that is not longer than the whole measurement.
const offsetReadings = 8
