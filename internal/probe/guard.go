package probe

import (
	"net/netip"
	"sync"
	"time"
)

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

// clientBuckets bounds, per client (an address, or an IPv6 /64) and
// direction, the bytes a peer without a key moves in the TCP modes that are
// not echo: CRR requests and responses, load sink and source. Each bucket
// fills at rate bytes per second up to depth and may go into debt: a paced
// stream (sink, source) charges what it moves and sleeps off the debt, and a
// CRR transaction is admitted only while neither of its buckets is in debt,
// then charged in full. So one large response passes at once and the
// client's next ones wait until the rate has paid for it, without a depth as
// large as the largest response.
type clientBuckets struct {
	rate  float64 // bytes per second
	depth float64

	mu        sync.Mutex
	m         map[bucketKey]*byteBucket
	nextSweep int64
}

type bucketKey struct {
	client netip.Addr // clientOf(address)
	in     bool       // bytes from the peer (else to it)
}

type byteBucket struct {
	tokens float64 // bytes; negative: debt
	last   int64   // ns
}

// newClientBuckets returns buckets filling at bitRate bits per second, or
// nil (no limit) for bitRate <= 0. The depth is 100 ms at that rate, at
// least 64 KiB: enough for a write or a small response, not a burst that
// would undo the cap.
func newClientBuckets(bitRate int64) *clientBuckets {
	if bitRate <= 0 {
		return nil
	}
	rate := float64(bitRate) / 8
	return &clientBuckets{rate: rate, depth: max(rate/10, 64<<10), m: map[bucketKey]*byteBucket{}}
}

// bucket returns k's bucket refilled to now. Caller holds mu.
func (c *clientBuckets) bucket(k bucketKey, now int64) *byteBucket {
	if now >= c.nextSweep {
		// Forget buckets that have refilled: a new one starts full, the
		// same thing. The map stays as small as the clients of the
		// last second or so.
		for key, b := range c.m {
			if b.tokens+float64(now-b.last)*c.rate/1e9 >= c.depth {
				delete(c.m, key)
			}
		}
		c.nextSweep = now + int64(time.Second)
	}
	b := c.m[k]
	if b == nil {
		b = &byteBucket{tokens: c.depth, last: now}
		c.m[k] = b
	}
	if now > b.last {
		b.tokens = min(c.depth, b.tokens+float64(now-b.last)*c.rate/1e9)
		b.last = now
	}
	return b
}

// charge takes n bytes from the bucket of addr's client in the given
// direction and returns how long the caller must wait for the debt it leaves
// to be paid (0 when none).
func (c *clientBuckets) charge(addr netip.Addr, in bool, n int, now int64) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.bucket(bucketKey{clientOf(addr), in}, now)
	b.tokens -= float64(n)
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / c.rate * 1e9)
}

// admit reports whether a transaction of req bytes in and resp bytes out
// may start now (neither bucket in debt), and if so charges both.
func (c *clientBuckets) admit(addr netip.Addr, req, resp int, now int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	client := clientOf(addr)
	bin, bout := c.bucket(bucketKey{client, true}, now), c.bucket(bucketKey{client, false}, now)
	if bin.tokens < 0 || bout.tokens < 0 {
		return false
	}
	bin.tokens -= float64(req)
	bout.tokens -= float64(resp)
	return true
}
