package probe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// ICMP echo, for hosts that run no reflector (runbook 003 watched its host
// with ping). Sockets are ICMP datagram sockets where
// net.ipv4.ping_group_range lets this process's group use them (no
// privilege needed), raw sockets otherwise (root or CAP_NET_RAW). Replies
// carry the kernel's receive time (SO_TIMESTAMPNS). ICMP has no reflector
// to count what arrived, so its loss has no direction.

// ICMPConfig is one ICMP probe run. It is embedded verbatim in the result.
type ICMPConfig struct {
	Target   string   `json:"target"`
	Interval Duration `json:"interval"`
	Duration Duration `json:"duration"`
	// Size is the echo payload in bytes (default 56, as ping's); at least
	// 16 (a token and a probe number).
	Size int `json:"size"`
	DSCP int `json:"dscp"`
	// Wait is how long to wait for late replies after the last send; 0
	// means 3 × the largest RTT seen, between 200 ms and 3 s.
	Wait Duration `json:"wait"`
	// Socket is "dgram", "raw" or "" (datagram where allowed, else raw).
	Socket string `json:"socket,omitempty"`
	Force  bool   `json:"-"`
}

// ICMPResult is the outcome of an ICMP probe run: the fields of a UDP
// result that ICMP can fill.
type ICMPResult struct {
	Meta
	Config ICMPConfig `json:"config"`
	// Address is the address probed; Socket the kind of socket used.
	Address string      `json:"address"`
	Socket  string      `json:"socket"`
	RTT     Percentiles `json:"rtt_us"`
	Jitter  float64     `json:"jitter_us"`
	IPDV    IPDV        `json:"ipdv_us"`
	PDV     float64     `json:"pdv_us"`
	Sent    int64       `json:"sent"`
	// Received counts unique echo replies.
	Received   int64    `json:"received"`
	Loss       ICMPLoss `json:"loss"`
	Duplicates int64    `json:"duplicates"`
	Reordered  int64    `json:"reordered"`
	Timestamps string   `json:"timestamps"`
	// DSCP is the marking sent (replies' markings are the host's choice).
	DSCP       DSCPReport        `json:"dscp"`
	SendLag    Percentiles       `json:"send_lag_us"`
	Batches    *Batches          `json:"batches,omitempty"`
	Histograms map[string]string `json:"histograms"`
}

// ICMPLoss is loss without a direction.
type ICMPLoss struct {
	Lost int64   `json:"lost"`
	Pct  float64 `json:"pct"`
	// Split is "none": an echo request lost on the way out and its reply
	// lost on the way back look the same from here.
	Split string `json:"split"`
}

const (
	defaultPingSize = 56
	minPingSize     = 16 // token (8) + probe number (8)
)

func (c *ICMPConfig) normalize() error {
	if c.Interval == 0 {
		c.Interval = Duration(time.Second)
	}
	if c.Duration == 0 {
		c.Duration = Duration(10 * time.Second)
	}
	if c.Size == 0 {
		c.Size = defaultPingSize
	}
	iv, d := time.Duration(c.Interval), time.Duration(c.Duration)
	switch {
	case iv < MinWatchInterval:
		return fmt.Errorf("interval %s: must be at least %s", iv, MinWatchInterval)
	case iv > MaxInterval:
		return fmt.Errorf("interval %s: must be at most %s", iv, MaxInterval)
	case c.Size < minPingSize || c.Size > 65507-8:
		return fmt.Errorf("size %d: must be %d..%d bytes", c.Size, minPingSize, 65507-8)
	case c.DSCP < 0 || c.DSCP > 63:
		return fmt.Errorf("dscp %d: must be 0..63", c.DSCP)
	case c.Wait < 0 || time.Duration(c.Wait) > time.Minute:
		return fmt.Errorf("wait %s: must be 0..1m", time.Duration(c.Wait))
	case c.Socket != "" && c.Socket != "dgram" && c.Socket != "raw":
		return fmt.Errorf("socket %q: want dgram or raw", c.Socket)
	}
	if err := checkDuration("duration", d, c.Force); err != nil {
		return err
	}
	if d < iv {
		return fmt.Errorf("duration %s: shorter than the interval %s", d, iv)
	}
	return nil
}

// resolveIP resolves a host to one address with r (nil: the system's).
func resolveIP(ctx context.Context, r *net.Resolver, host string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap(), nil
	}
	if r == nil {
		r = net.DefaultResolver
	}
	ips, err := r.LookupNetIP(ctx, "ip", host)
	if err == nil && len(ips) == 0 {
		err = errors.New("no address")
	}
	if err != nil {
		return netip.Addr{}, fmt.Errorf("icmp %s: resolve: %w", host, err)
	}
	return ips[0].Unmap(), nil
}

// echo is an ICMP echo request or reply: identifier, sequence and the
// payload's token and probe number.
type echo struct {
	Reply bool
	ID    uint16
	Seq   uint16
	Token uint64
	N     uint64
}

// ICMP message types.
const (
	icmp4EchoReply   = 0
	icmp4EchoRequest = 8
	icmp6EchoRequest = 128
	icmp6EchoReply   = 129
)

// encodeEcho writes an echo request into b (8 + payload bytes); v4
// messages carry their checksum (the kernel fills ICMPv6's).
func encodeEcho(b []byte, v6 bool, e echo) {
	b[0] = icmp4EchoRequest
	if v6 {
		b[0] = icmp6EchoRequest
	}
	b[1] = 0
	b[2], b[3] = 0, 0
	binary.BigEndian.PutUint16(b[4:], e.ID)
	binary.BigEndian.PutUint16(b[6:], e.Seq)
	binary.BigEndian.PutUint64(b[8:], e.Token)
	binary.BigEndian.PutUint64(b[16:], e.N)
	clear(b[24:])
	if !v6 {
		binary.BigEndian.PutUint16(b[2:], checksum(b))
	}
}

// checksum is the Internet checksum (RFC 1071).
func checksum(b []byte) uint16 {
	var s uint32
	for ; len(b) >= 2; b = b[2:] {
		s += uint32(b[0])<<8 | uint32(b[1])
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}

var errNotEcho = errors.New("not an echo reply")

// decodeEcho reads an echo reply. ipHeader says the message starts with
// an IPv4 header (raw IPv4 sockets), which is skipped.
func decodeEcho(b []byte, v6, ipHeader bool) (echo, error) {
	if ipHeader {
		if len(b) < 20 || b[0]>>4 != 4 {
			return echo{}, errNotEcho
		}
		ihl := int(b[0]&0x0f) * 4
		if ihl < 20 || len(b) < ihl {
			return echo{}, errNotEcho
		}
		b = b[ihl:]
	}
	want := byte(icmp4EchoReply)
	if v6 {
		want = icmp6EchoReply
	}
	if len(b) < 8+minPingSize || b[0] != want || b[1] != 0 {
		return echo{}, errNotEcho
	}
	return echo{
		Reply: true,
		ID:    binary.BigEndian.Uint16(b[4:]),
		Seq:   binary.BigEndian.Uint16(b[6:]),
		Token: binary.BigEndian.Uint64(b[8:]),
		N:     binary.BigEndian.Uint64(b[16:]),
	}, nil
}

// pinger is one echo socket with its token: replies not carrying the
// token (another process's pings on a raw socket) are ignored.
type pinger struct {
	sock  *pingSock
	token uint64
	id    uint16 // raw sockets: the identifier we send (datagram: the kernel's)
	buf   []byte
}

func newPinger(addr netip.Addr, mode string, size, dscp int) (*pinger, error) {
	id := uint16(randUint64())
	s, err := openPingSock(addr, mode, id)
	if err != nil {
		return nil, err
	}
	if dscp != 0 {
		if err := s.setDSCP(dscp); err != nil {
			s.close()
			return nil, err
		}
	}
	return &pinger{sock: s, token: randUint64(), id: id, buf: make([]byte, 8+size)}, nil
}

// send sends echo number n.
func (p *pinger) send(n uint64) error {
	encodeEcho(p.buf, p.sock.v6, echo{ID: p.id, Seq: uint16(n), Token: p.token, N: n})
	return p.sock.send(p.buf)
}

// receive calls f with each of our replies (probe number, kernel or read
// time in ns) until the socket closes.
func (p *pinger) receive(f func(n uint64, rx int64)) {
	buf := make([]byte, 8+len(p.buf)+60)
	oob := make([]byte, oobSize)
	for {
		n, oobn, err := p.sock.recv(buf, oob)
		if err != nil {
			if p.sock.closed.Load() {
				return
			}
			time.Sleep(time.Millisecond) // an ICMP error queued on the socket; never spin
			continue
		}
		rx := time.Now().UnixNano()
		if ts, ok := parseRxTimestamp(oob[:oobn]); ok {
			rx = ts
		}
		e, err := decodeEcho(buf[:n], p.sock.v6, p.sock.ipHeader)
		if err != nil || e.Token != p.token || (!p.sock.dgram && e.ID != p.id) {
			continue
		}
		f(e.N, rx)
	}
}

// ICMP runs an isochronous echo probe: requests leave on schedule whatever
// the replies do; each reply's RTT is its kernel receive time minus the
// request's send time.
func ICMP(ctx context.Context, cfg ICMPConfig) (*ICMPResult, error) {
	if err := cfg.normalize(); err != nil {
		return nil, configErr(err)
	}
	start := time.Now()
	addr, err := resolveIP(ctx, nil, cfg.Target)
	if err != nil {
		return nil, err
	}
	p, err := newPinger(addr, cfg.Socket, cfg.Size, cfg.DSCP)
	if err != nil {
		return nil, fmt.Errorf("icmp %s: %w", cfg.Target, err)
	}
	count := int(time.Duration(cfg.Duration) / time.Duration(cfg.Interval))
	stats := newUDPStats(count)
	lag := newHist()
	sentAt := make([]int64, count)
	var (
		mu       sync.Mutex
		sent     atomic.Int64
		maxRTT   atomic.Int64
		kernelTS = p.sock.timestamps
		wg       sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.receive(func(n uint64, rx int64) {
			if n >= uint64(sent.Load()) {
				return
			}
			rtt := rx - sentAt[n]
			if rtt > maxRTT.Load() {
				maxRTT.Store(rtt)
			}
			mu.Lock()
			stats.add(uint32(n), max(rtt, 0), 0)
			mu.Unlock()
		})
	}()
	interval := time.Duration(cfg.Interval)
	t0 := time.Now().Add(time.Millisecond)
	var sendErr error
	for i := 0; i < count && ctx.Err() == nil; i++ {
		intended := t0.Add(time.Duration(i) * interval)
		if d := time.Until(intended); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
			if ctx.Err() != nil {
				break
			}
		}
		now := time.Now()
		record(lag, int64(now.Sub(intended)))
		sentAt[i] = now.UnixNano()
		sent.Store(int64(i + 1))
		if err := p.send(uint64(i)); err != nil && !isTransientSendErr(err) {
			sendErr = fmt.Errorf("icmp %s: send: %w", cfg.Target, err)
			break
		}
	}
	if sendErr == nil && ctx.Err() == nil {
		wait := time.Duration(cfg.Wait)
		if wait == 0 {
			wait = min(max(3*time.Duration(maxRTT.Load()), 200*time.Millisecond), 3*time.Second)
		}
		deadline := time.Now().Add(wait)
		for time.Now().Before(deadline) {
			mu.Lock()
			done := stats.received == sent.Load()
			mu.Unlock()
			if done {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	p.sock.close()
	wg.Wait()
	if sendErr != nil {
		return nil, sendErr
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	nsent := sent.Load()
	if stats.received == 0 {
		return nil, fmt.Errorf("icmp %s: %d echo requests sent, no replies", cfg.Target, nsent)
	}
	res := &ICMPResult{
		Meta:       newMeta("icmp", cfg.Target, start),
		Config:     cfg,
		Address:    addr.String(),
		Socket:     p.sock.kind(),
		RTT:        summarize(stats.rtt),
		Jitter:     round3(stats.jitter / 1e3),
		Sent:       nsent,
		Received:   stats.received,
		Duplicates: stats.duplicates,
		Reordered:  stats.reordered,
		Timestamps: "userspace",
		DSCP:       DSCPReport{Sent: DSCPName(cfg.DSCP)},
		SendLag:    summarize(lag),
		Batches:    stats.batches(nsent),
		Histograms: map[string]string{"rtt_ns": encodeHist(stats.rtt), "ipdv_ns": encodeHist(stats.ipdv)},
	}
	if kernelTS {
		res.Timestamps = "kernel"
	}
	res.Loss = ICMPLoss{Lost: nsent - stats.received, Split: "none"}
	if nsent > 0 {
		res.Loss.Pct = round3(100 * float64(res.Loss.Lost) / float64(nsent))
	}
	res.IPDV = IPDV{P50: us(pctOrZero(stats.ipdv, 50)), P99: us(pctOrZero(stats.ipdv, 99))}
	res.PDV = round3(res.RTT.P99 - res.RTT.Min)
	return res, nil
}

// Name lookups of an icmp watch: each gives up after resolveTimeout, and a
// failed one is retried no sooner than resolveRetry after it began (a name
// that does not resolve must not query the resolver on every tick).
// Variables for the tests.
var (
	resolveTimeout = 5 * time.Second
	resolveRetry   = 5 * time.Second
)

// WatchICMP pings a host until ctx ends (see the watch notes in watch.go):
// one echo request per tick, lost (direction unknown) when its reply does
// not come within the timeout. A host name is looked up on its own
// goroutine, never under the watch's lock nor on the schedule's: until it
// has an address every tick counts one lost probe. A name that does not
// resolve (or not within resolveTimeout), or a socket that cannot be had,
// counts one lost probe per tick and is retried.
func WatchICMP(ctx context.Context, cfg WatchConfig, sink Sink) error {
	if err := cfg.Check("icmp"); err != nil {
		return err
	}
	if cfg.Size == 0 {
		cfg.Size = defaultPingSize
	}
	cfg.Size = max(cfg.Size, minPingSize)
	w := &pingWatch{cfg: &cfg, sink: sink}
	if a, err := netip.ParseAddr(cfg.Target); err == nil {
		w.addr = a.Unmap()
	}
	// Probes in flight: one per interval for a timeout, and a margin.
	w.ring = make([]pingSlot, ringSize(int(cfg.Timeout/cfg.Interval)+2))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer w.closeSock()
	w.mu.Lock()
	w.lookUp(ctx, time.Now(), &wg) // before the first tick, which may be due at once
	w.mu.Unlock()
	runSchedule(ctx, cfg.Interval, func(now time.Time) { w.tick(ctx, now, &wg) }, func(now time.Time) time.Time {
		w.expire(now)
		if t := w.oldest(); !t.IsZero() {
			return t.Add(cfg.Timeout)
		}
		return time.Time{}
	})
	return nil
}

func ringSize(n int) int {
	s := 64
	for s < n {
		s *= 2
	}
	return s
}

type pingSlot struct {
	sentAt   int64
	answered bool
}

type pingWatch struct {
	cfg  *WatchConfig
	sink Sink

	mu        sync.Mutex
	p         *pinger
	ring      []pingSlot
	head, end uint64 // probes [head, end) are in flight
	lastReply int64  // receive time of the newest reply
	failing   bool

	// The target's address, once known (at once for an address, after a
	// lookup for a name); a lookup in flight; when the next may start;
	// why the last failed.
	addr       netip.Addr
	looking    bool
	nextLookup time.Time
	lookupErr  error
}

// lookUp starts a lookup of the target's name, unless its address is
// known, one is in flight, or the last began less than resolveRetry ago.
// w.mu is held; the lookup runs without it, bounded by resolveTimeout and
// ctx, and stores its answer under it.
func (w *pingWatch) lookUp(ctx context.Context, now time.Time, wg *sync.WaitGroup) {
	if w.addr.IsValid() || w.looking || now.Before(w.nextLookup) {
		return
	}
	w.looking, w.nextLookup = true, now.Add(resolveRetry)
	wg.Add(1)
	go func() {
		defer wg.Done()
		lctx, cancel := context.WithTimeout(ctx, resolveTimeout)
		defer cancel()
		addr, err := resolveIP(lctx, w.cfg.Resolver, w.cfg.Target)
		if err != nil && errors.Is(lctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("icmp %s: resolve: no answer in %s", w.cfg.Target, resolveTimeout)
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.looking = false
		w.addr, w.lookupErr = addr, err
	}()
}

func (w *pingWatch) closeSock() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.p != nil {
		w.p.sock.close()
	}
}

func (w *pingWatch) state(failing bool, format string, args ...any) {
	if failing != w.failing {
		w.failing = failing
		w.cfg.state(failing, format, args...)
	}
}

func (w *pingWatch) oldest() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.head == w.end {
		return time.Time{}
	}
	return time.Unix(0, w.ring[w.head%uint64(len(w.ring))].sentAt)
}

// expire reports probes whose timeout passed unanswered; the in-flight
// window only moves forward.
func (w *pingWatch) expire(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	limit := now.UnixNano() - int64(w.cfg.Timeout)
	for w.head < w.end {
		s := &w.ring[w.head%uint64(len(w.ring))]
		if !s.answered && s.sentAt > limit {
			break
		}
		if !s.answered {
			w.sink(Sample{Sent: time.Unix(0, s.sentAt), Lost: true, Dir: LossUnknown})
			if w.lastReply < s.sentAt { // nothing has come back since it left
				w.state(true, "icmp %s: no echo replies since %s", w.cfg.Target, time.Unix(0, s.sentAt).Format(time.TimeOnly))
			}
		}
		w.head++
	}
}

func (w *pingWatch) tick(ctx context.Context, now time.Time, wg *sync.WaitGroup) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.end-w.head == uint64(len(w.ring)) { // cannot happen with the timeout bound; never overwrite
		w.sink(Sample{Sent: now, Lost: true, Dir: LossUnknown})
		return
	}
	if w.p == nil {
		if !w.addr.IsValid() {
			// No address yet: this probe cannot leave, and counts. The
			// state says why once the lookup failed; the first lookup
			// usually answers within a tick or two.
			w.lookUp(ctx, now, wg)
			w.sink(Sample{Sent: now, Lost: true, Dir: LossUnknown})
			if w.lookupErr != nil {
				w.state(true, "%v", w.lookupErr)
			}
			return
		}
		p, err := newPinger(w.addr, "", w.cfg.Size, w.cfg.DSCP)
		if err != nil {
			w.sink(Sample{Sent: now, Lost: true, Dir: LossUnknown})
			w.state(true, "icmp %s: %v", w.cfg.Target, err)
			return
		}
		w.p = p
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.receive(w.reply)
		}()
	}
	n := w.end
	w.ring[n%uint64(len(w.ring))] = pingSlot{sentAt: now.UnixNano()}
	w.end++
	if err := w.p.send(n); err != nil && !isTransientSendErr(err) {
		w.state(true, "icmp %s: send: %v", w.cfg.Target, err)
	}
}

func (w *pingWatch) reply(n uint64, rx int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n < w.head || n >= w.end {
		return // expired, or not ours
	}
	s := &w.ring[n%uint64(len(w.ring))]
	if s.answered || rx-s.sentAt >= int64(w.cfg.Timeout) {
		return
	}
	s.answered = true
	w.lastReply = rx
	w.sink(Sample{Sent: time.Unix(0, s.sentAt), RTT: time.Duration(max(rx-s.sentAt, 0))})
	w.state(false, "icmp %s: echo replies again", w.cfg.Target)
}
