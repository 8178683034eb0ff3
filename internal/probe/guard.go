package probe

import "time"

// tokenBucket limits one session's packet rate: rate tokens per second, at most
// burst saved up. Like irtt's, it admits an average interval no shorter than the
// reflector's minimum with a small burst for senders that woke late.
type tokenBucket struct {
	interval int64 // ns per token
	burst    int64
	tokens   int64 // in ns-of-credit units: interval per token
	last     int64 // ns
}

func newTokenBucket(interval time.Duration, burst int, now int64) tokenBucket {
	iv := max(int64(interval), 1)
	b := int64(max(burst, 1))
	return tokenBucket{interval: iv, burst: b, tokens: b * iv, last: now}
}

// allow takes one token at time now (ns), reporting whether one was there.
func (t *tokenBucket) allow(now int64) bool {
	if now > t.last {
		t.tokens = min(t.tokens+(now-t.last), t.burst*t.interval)
		t.last = now
	}
	if t.tokens >= t.interval {
		t.tokens -= t.interval
		return true
	}
	return false
}

// replayWindow rejects sequence numbers seen before or too old to tell
// (IPsec-style sliding window of the last replayBits numbers).
type replayWindow struct {
	top  int64 // highest accepted, -1 before any
	bits [replayBits / 64]uint64
}

const replayBits = 1024

func newReplayWindow() replayWindow { return replayWindow{top: -1} }

// check reports whether seq is new, and marks it seen if so.
func (w *replayWindow) check(seq uint32) bool {
	s := int64(seq)
	switch {
	case s > w.top:
		shift := s - w.top
		if shift >= replayBits {
			clear(w.bits[:])
		} else {
			for i := w.top + 1; i <= s; i++ {
				w.clearBit(i)
			}
		}
		w.top = s
		w.setBit(s)
		return true
	case w.top-s >= replayBits:
		return false // too old to know
	default:
		if w.getBit(s) {
			return false
		}
		w.setBit(s)
		return true
	}
}

func (w *replayWindow) idx(s int64) (int, uint64) {
	i := s % replayBits
	return int(i / 64), 1 << (i % 64)
}
func (w *replayWindow) setBit(s int64)      { i, b := w.idx(s); w.bits[i] |= b }
func (w *replayWindow) clearBit(s int64)    { i, b := w.idx(s); w.bits[i] &^= b }
func (w *replayWindow) getBit(s int64) bool { i, b := w.idx(s); return w.bits[i]&b != 0 }

// nonceCache remembers recent session-opening nonces so an authenticated open
// (UDP open or TCP hello) cannot be replayed while it is remembered. It is
// bounded: the oldest entries go first.
type nonceCache struct {
	ttl  time.Duration
	cap  int
	seen map[uint64]int64 // nonce -> expiry ns
	fifo []nonceEnt
}

type nonceEnt struct {
	nonce uint64
	exp   int64
}

func newNonceCache(capacity int, ttl time.Duration) *nonceCache {
	return &nonceCache{ttl: ttl, cap: capacity, seen: make(map[uint64]int64, capacity)}
}

// fresh reports whether nonce was not seen within the TTL, and records it.
func (c *nonceCache) fresh(nonce uint64, now int64) bool {
	if exp, ok := c.seen[nonce]; ok && exp > now {
		return false
	}
	for len(c.fifo) > 0 && (len(c.seen) >= c.cap || c.fifo[0].exp <= now) {
		e := c.fifo[0]
		if c.seen[e.nonce] == e.exp {
			delete(c.seen, e.nonce)
		}
		c.fifo = c.fifo[1:]
	}
	if len(c.fifo) == 0 {
		c.fifo = c.fifo[:0:0] // let the old backing array go
	}
	exp := now + int64(c.ttl)
	c.seen[nonce] = exp
	c.fifo = append(c.fifo, nonceEnt{nonce, exp})
	return true
}
