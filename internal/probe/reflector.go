package probe

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ReflectorConfig bounds what a reflector will do for anyone who reaches it.
// The zero value of each field means its default.
//
// Peers without a key (every peer of a reflector that has none) may use the
// echo modes: UDP probes, and TCP rr whose response is no larger than its
// request. They may also run CRR up to OpenResponse each way, at OpenRate per
// client. The bulk modes (load sink and source, larger CRR) are refused,
// unless AllowLoad: then they are allowed at LoadRate per client and
// direction, a load flow at most LoadDuration. Key holders may use every
// mode within the other limits, with no rate cap: the key is how an operator
// says "mine", and the reflector is meant to measure the path, not itself.
type ReflectorConfig struct {
	// Key, when set, makes every UDP packet and TCP hello carry an HMAC-SHA256
	// with this key; anything else is dropped without a reply.
	Key []byte
	// MinInterval is the shortest average interval a UDP session may send at
	// (default 10ms, like irtt); sessions asking for less are refused and
	// faster senders are throttled by a token bucket with burst Burst.
	MinInterval time.Duration
	Burst       int // default 5
	// MaxClients caps concurrent UDP sessions plus TCP connections (default 20000).
	MaxClients int
	// MaxSessionsPerIP caps concurrent UDP sessions from one source address,
	// or one IPv6 /64 (default 16, negative: no cap), so one host cannot take every session
	// nor multiply its token bucket by opening many.
	MaxSessionsPerIP int
	// MaxConnsPerIP caps concurrent TCP connections from one source address
	// or IPv6 /64 (default 64, negative: no cap). A connection counts from
	// accept, before its hello says who is asking, so it binds key holders
	// too: a cap that waited for the hello would leave connections that
	// never send one unbounded. probe tcp with thousands of connections, or
	// a loopback benchmark, needs it raised.
	MaxConnsPerIP int
	// MaxSize caps a UDP probe and a TCP request/response message (default 65507).
	MaxSize int
	// MaxResponse caps a CRR response (default 64 MiB).
	MaxResponse int
	// MaxDuration caps one test (session or connection) (default 24h).
	MaxDuration time.Duration
	// IdleTimeout ends sessions and connections that stay silent (default 60s).
	IdleTimeout time.Duration

	// AllowLoad lets peers without a key use the bulk modes, within
	// LoadRate and LoadDuration.
	AllowLoad bool
	// LoadRate caps, in bits per second per client (address or IPv6 /64)
	// and direction, what a peer without a key moves in load flows and CRR
	// when AllowLoad is set (default 100 Mbit/s; negative: no cap, for a
	// lab whose traffic stays inside its own namespaces). Load flows are
	// paced to it; a CRR transaction is refused while the client is over it.
	LoadRate int64
	// LoadDuration caps one load flow of a peer without a key, and the
	// life of one of its CRR connections (default 2m; negative: only
	// MaxDuration).
	LoadDuration time.Duration
	// OpenResponse caps a CRR request and response of a peer without a key
	// when AllowLoad is off (default 64 KiB, at most MaxResponse).
	OpenResponse int
	// OpenRate caps, in bits per second per client and direction, the CRR
	// bytes of a peer without a key when AllowLoad is off (default 1 Mbit/s;
	// negative: no cap). A transaction is refused while the client is over it.
	OpenRate int64

	// Logf, when set, receives one line per notable event (refusals, errors).
	Logf func(format string, args ...any)
}

func (c *ReflectorConfig) setDefaults() {
	if c.MinInterval <= 0 {
		c.MinInterval = 10 * time.Millisecond
	}
	if c.Burst <= 0 {
		c.Burst = 5
	}
	if c.MaxClients <= 0 {
		c.MaxClients = 20000
	}
	if c.MaxSessionsPerIP == 0 {
		c.MaxSessionsPerIP = 16
	}
	if c.MaxConnsPerIP == 0 {
		c.MaxConnsPerIP = 64
	}
	if c.MaxSize <= 0 || c.MaxSize > maxUDPSize {
		c.MaxSize = maxUDPSize
	}
	if c.MaxResponse <= 0 {
		c.MaxResponse = 64 << 20
	}
	if c.MaxDuration <= 0 {
		c.MaxDuration = 24 * time.Hour
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = time.Minute
	}
	if c.LoadRate == 0 {
		c.LoadRate = 100e6
	}
	if c.LoadDuration == 0 {
		c.LoadDuration = 2 * time.Minute
	}
	if c.LoadDuration < 0 || c.LoadDuration > c.MaxDuration {
		c.LoadDuration = c.MaxDuration
	}
	if c.OpenResponse <= 0 {
		c.OpenResponse = 64 << 10
	}
	c.OpenResponse = min(c.OpenResponse, c.MaxResponse)
	if c.OpenRate == 0 {
		c.OpenRate = 1e6
	}
}

// unauthRate is the rate cap (bits/s) on the CRR and load bytes of a peer
// without a key; <= 0: none.
func (c *ReflectorConfig) unauthRate() int64 {
	if c.AllowLoad {
		return c.LoadRate
	}
	return c.OpenRate
}

// Policy says in one line what a peer may do: for a reflector without a key,
// what anyone who reaches it may do. lowlat reflector prints it at start-up.
func (r *Reflector) Policy() string {
	c := &r.cfg
	udp := fmt.Sprintf("UDP echo ≤ %s packets/s per session, %s", fmtPPS(c.MinInterval), perAddr(c.MaxSessionsPerIP, "sessions"))
	conns := perAddr(c.MaxConnsPerIP, "TCP connections")
	tests := "tests ≤ " + fmtDurShort(c.MaxDuration)
	if len(c.Key) > 0 {
		return fmt.Sprintf("peers without the key get no answer; key holders may use every mode, with no rate cap: %s; %s; CRR ≤ %s each way; %s",
			udp, conns, fmtBytes(uint64(c.MaxResponse)), tests)
	}
	s := "unauthenticated peers may: " + udp + "; TCP rr echo (replies no larger than requests); "
	if !c.AllowLoad {
		return s + fmt.Sprintf("CRR ≤ %s each way %s; %s; %s; bulk load (sink, source, larger CRR): refused (no --allow-load)",
			fmtBytes(uint64(c.OpenResponse)), capText(c.OpenRate, "per address"), conns, tests)
	}
	return s + fmt.Sprintf("CRR ≤ %s each way; %s; %s; bulk load (sink, source, CRR): allowed (--allow-load) %s, ≤ %s per load flow",
		fmtBytes(uint64(c.MaxResponse)), conns, tests, capText(c.LoadRate, "per address and direction"), fmtDurShort(c.LoadDuration))
}

func perAddr(n int, what string) string {
	if n <= 0 {
		return what + " per address uncapped"
	}
	return fmt.Sprintf("%d %s per address", n, what)
}

func capText(bitRate int64, per string) string {
	if bitRate <= 0 {
		return "with no rate cap"
	}
	return "at ≤ " + fmtRate(uint64(bitRate)) + " " + per
}

// ReflectorStats counts what a reflector has done since it started.
type ReflectorStats struct {
	Clients      int64 `json:"clients"` // current UDP sessions + TCP connections
	UDPSessions  int64 `json:"udp_sessions"`
	UDPReceived  int64 `json:"udp_received"`
	UDPReplied   int64 `json:"udp_replied"`
	UDPDropped   int64 `json:"udp_dropped"`   // malformed, unauthenticated, unknown session
	UDPThrottled int64 `json:"udp_throttled"` // over the token bucket
	UDPReplayed  int64 `json:"udp_replayed"`
	Refused      int64 `json:"refused"`
	TCPAccepted  int64 `json:"tcp_accepted"`
	TCPDropped   int64 `json:"tcp_dropped"` // bad or unauthenticated hello
	TCPBytesIn   int64 `json:"tcp_bytes_in"`
	TCPBytesOut  int64 `json:"tcp_bytes_out"`
}

// Reflector answers lowlat probes: the UDP probe protocol and the TCP modes
// (rr, crr, sink, source) on one port number. Create it with NewReflector,
// bind with Listen, run with Serve.
type Reflector struct {
	cfg ReflectorConfig

	udp *net.UDPConn
	tcp net.Listener

	clients atomic.Int64
	st      struct {
		udpSessions, udpReceived, udpReplied, udpDropped, udpThrottled, udpReplayed atomic.Int64
		refused, tcpAccepted, tcpDropped, tcpIn, tcpOut                             atomic.Int64
	}

	nonceMu sync.Mutex
	nonces  *nonceCache

	// Per-source-address counts of UDP sessions and TCP connections, for
	// the per-IP caps. Entries go when they reach zero.
	perIPMu sync.Mutex
	perIP   map[perIPKey]int

	// connMu guards conns and closed. serveTCP registers a connection (and
	// adds it to wg) under it only while closed is false, so Serve, which
	// sets closed and closes every registered connection under it, never
	// misses one accepted while it shuts down.
	connMu sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	done   chan struct{} // closed with closed set: paced streams stop waiting
	wg     sync.WaitGroup

	// unauth holds the per-client byte buckets of peers without a key
	// (nil: no rate cap, or a key that every peer must hold).
	unauth *clientBuckets

	// Test hooks, nil outside tests: hookAccepted runs when Accept has
	// returned a connection, hookClosed when Serve has closed the
	// connections it knew of.
	hookAccepted, hookClosed func()

	txOOB     [64]byte // the UDP goroutine's control message for replies
	noTOSCmsg bool     // the kernel refused it once; UDP goroutine only
}

// NewReflector returns a reflector with cfg's limits (defaults filled in).
func NewReflector(cfg ReflectorConfig) *Reflector {
	cfg.setDefaults()
	r := &Reflector{
		cfg:    cfg,
		nonces: newNonceCache(1<<16, 10*time.Minute),
		conns:  map[net.Conn]struct{}{},
		done:   make(chan struct{}),
		perIP:  map[perIPKey]int{},
	}
	if len(cfg.Key) == 0 {
		r.unauth = newClientBuckets(cfg.unauthRate())
	}
	return r
}

type perIPKey struct {
	addr netip.Addr
	tcp  bool
}

// clientOf is the address a per-IP cap counts: an IPv4 address itself, and
// for IPv6 its /64, because one IPv6 host commonly holds a whole /64 and
// could otherwise take a slot set per address.
func clientOf(addr netip.Addr) netip.Addr {
	addr = addr.Unmap()
	if addr.Is6() {
		return netip.PrefixFrom(addr, 64).Masked().Addr()
	}
	return addr
}

// takeIP reserves one of addr's slots of the given kind, or reports that addr
// holds limit already (limit <= 0: no cap).
func (r *Reflector) takeIP(addr netip.Addr, tcp bool, limit int) bool {
	k := perIPKey{clientOf(addr), tcp}
	r.perIPMu.Lock()
	defer r.perIPMu.Unlock()
	if limit > 0 && r.perIP[k] >= limit {
		return false
	}
	r.perIP[k]++
	return true
}

func (r *Reflector) releaseIP(addr netip.Addr, tcp bool) {
	k := perIPKey{clientOf(addr), tcp}
	r.perIPMu.Lock()
	defer r.perIPMu.Unlock()
	if r.perIP[k] <= 1 {
		delete(r.perIP, k)
		return
	}
	r.perIP[k]--
}

// Listen binds TCP and UDP on the same address and port. With port 0 it picks a
// port free for both. Sockets are created on the calling goroutine's thread, so
// a caller locked into a network namespace gets them there.
func (r *Reflector) Listen(ctx context.Context, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("reflector: listen %q: %w", addr, err)
	}
	lc := net.ListenConfig{Control: listenControl}
	// Plain TCP: Go 1.24+ listens with MPTCP by default where the kernel has
	// it, which changes the stack being measured and breaks TCP Fast Open on
	// 6.1 kernels (the lab caught it).
	lc.SetMultipathTCP(false)
	for try := 0; ; try++ {
		ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(host, port))
		if err != nil {
			return fmt.Errorf("reflector: listen tcp %s: %w", addr, err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		uc, err := lc.ListenPacket(ctx, "udp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			ln.Close()
			if port == "0" && try < 20 {
				continue
			}
			return fmt.Errorf("reflector: listen udp %s: %w", net.JoinHostPort(host, strconv.Itoa(p)), err)
		}
		r.tcp, r.udp = ln, uc.(*net.UDPConn)
		break
	}
	_ = r.udp.SetReadBuffer(4 << 20)
	_ = r.udp.SetWriteBuffer(4 << 20)
	if rc, err := r.udp.SyscallConn(); err == nil {
		_ = enableRxTimestamps(rc)
	}
	return nil
}

// Addr is the bound address (host:port), valid after Listen.
func (r *Reflector) Addr() string {
	if r.tcp == nil {
		return ""
	}
	return r.tcp.Addr().String()
}

// Stats returns the counters so far.
func (r *Reflector) Stats() ReflectorStats {
	return ReflectorStats{
		Clients:      r.clients.Load(),
		UDPSessions:  r.st.udpSessions.Load(),
		UDPReceived:  r.st.udpReceived.Load(),
		UDPReplied:   r.st.udpReplied.Load(),
		UDPDropped:   r.st.udpDropped.Load(),
		UDPThrottled: r.st.udpThrottled.Load(),
		UDPReplayed:  r.st.udpReplayed.Load(),
		Refused:      r.st.refused.Load(),
		TCPAccepted:  r.st.tcpAccepted.Load(),
		TCPDropped:   r.st.tcpDropped.Load(),
		TCPBytesIn:   r.st.tcpIn.Load(),
		TCPBytesOut:  r.st.tcpOut.Load(),
	}
}

// Serve answers probes until ctx is cancelled, then closes the sockets and
// every open connection and returns nil once all goroutines have finished.
func (r *Reflector) Serve(ctx context.Context) error {
	if r.udp == nil || r.tcp == nil {
		return errors.New("reflector: Serve before Listen")
	}
	errc := make(chan error, 2)
	r.wg.Add(2)
	go func() { defer r.wg.Done(); errc <- r.serveUDP() }()
	go func() { defer r.wg.Done(); errc <- r.serveTCP() }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	r.udp.Close()
	r.tcp.Close()
	r.connMu.Lock()
	if !r.closed {
		r.closed = true
		close(r.done)
	}
	for c := range r.conns {
		c.Close()
	}
	r.connMu.Unlock()
	if r.hookClosed != nil {
		r.hookClosed()
	}
	r.wg.Wait()
	return err
}

func (r *Reflector) logf(format string, args ...any) {
	if r.cfg.Logf != nil {
		r.cfg.Logf(format, args...)
	}
}

// freshNonce reports whether an authenticated opening nonce is new.
func (r *Reflector) freshNonce(n uint64) bool {
	r.nonceMu.Lock()
	defer r.nonceMu.Unlock()
	return r.nonces.fresh(n, time.Now().UnixNano())
}

// takeClient reserves a client slot, or reports that the reflector is full.
func (r *Reflector) takeClient() bool {
	if r.clients.Add(1) > int64(r.cfg.MaxClients) {
		r.clients.Add(-1)
		return false
	}
	return true
}

// udpSession is one client's UDP test. Only the UDP goroutine touches it.
type udpSession struct {
	id       uint64
	src      netip.AddrPort
	nonce    uint64
	bucket   tokenBucket
	window   replayWindow
	received uint32 // unique probes
	dups     uint32
	// throttled counts the probes the token bucket dropped: a client that
	// fell behind its schedule and caught up in a burst. The close reports
	// it, so the client can tell the reflector's policy from the path.
	throttled uint32
	expire    int64 // hard end, ns
	lastSeen  int64
	closing   bool // the client asked for the final counts; per-IP slot given back
}

func randUint64() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:])
}

func (r *Reflector) serveUDP() error {
	var (
		buf      = make([]byte, 65536)
		oob      = make([]byte, oobSize)
		m        = newMAC(r.cfg.Key)
		sessions = map[uint64]*udpSession{}
		byNonce  = map[uint64]*udpSession{}
		// Session opens from anyone share one bucket (200/s, burst 50), so a
		// flood of opens costs bounded work and state.
		opens     = newTokenBucket(5*time.Millisecond, 50, time.Now().UnixNano())
		nextSweep time.Time
	)
	closeSession := func(s *udpSession) {
		delete(sessions, s.id)
		if byNonce[s.nonce] == s {
			delete(byNonce, s.nonce)
		}
		r.clients.Add(-1)
		if !s.closing {
			r.releaseIP(s.src.Addr(), false)
		}
	}
	defer func() {
		for _, s := range sessions {
			closeSession(s)
		}
	}()
	idle := int64(r.cfg.IdleTimeout)
	for {
		if now := time.Now(); now.After(nextSweep) {
			ns := now.UnixNano()
			for _, s := range sessions {
				if ns > s.expire || ns-s.lastSeen > idle {
					closeSession(s)
				}
			}
			nextSweep = now.Add(time.Second)
			_ = r.udp.SetReadDeadline(nextSweep)
		}
		n, oobn, _, src, err := r.udp.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			// ICMP errors surface on unconnected sockets as read errors; ignore.
			continue
		}
		meta := parseRxMeta(oob[:oobn])
		rx := meta.ts
		if !meta.hasTS {
			rx = time.Now().UnixNano()
		}
		// Every answer leaves with the DSCP its request arrived with, set
		// per datagram, so one socket serves any mix of markings.
		reply := replyTOS{ok: meta.hasTOS, tos: meta.tos &^ 3, v6: !src.Addr().Is4() && !src.Addr().Is4In6()}
		r.st.udpReceived.Add(1)
		b := buf[:n]
		p, err := decodeUDP(b, m)
		if err != nil {
			r.st.udpDropped.Add(1)
			continue
		}
		switch p.Type {
		case pktOpen:
			if !opens.allow(rx) {
				r.st.udpThrottled.Add(1)
				continue
			}
			if s := byNonce[p.Nonce]; s != nil {
				if s.src != src {
					r.st.udpReplayed.Add(1)
					continue
				}
				// A retransmitted open: answer again with the same session.
				p.Type, p.Session, p.A, p.B = pktOpenOK, s.id, uint64(r.cfg.IdleTimeout), uint64(r.cfg.MinInterval)
				r.sendUDP(b, &p, m, src, reply)
				continue
			}
			if m != nil && !r.freshNonce(p.Nonce) {
				r.st.udpReplayed.Add(1)
				continue
			}
			code, limit := r.checkOpen(p, len(b), m != nil)
			if code == refuseNone && !r.takeIP(src.Addr(), false, r.cfg.MaxSessionsPerIP) {
				code, limit = refusePerIP, uint64(r.cfg.MaxSessionsPerIP)
			} else if code == refuseNone && !r.takeClient() {
				r.releaseIP(src.Addr(), false)
				code, limit = refuseCapacity, uint64(r.cfg.MaxClients)
			}
			if code != refuseNone {
				r.st.refused.Add(1)
				r.logf("refused udp session from %s: %v", src, &RefusedError{Code: int(code), Limit: limit})
				p.Type, p.Code, p.Session, p.A, p.B = pktRefused, code, 0, limit, 0
				r.sendUDP(b, &p, m, src, reply)
				continue
			}
			id := randUint64()
			for id == 0 || sessions[id] != nil {
				id = randUint64()
			}
			dur := int64(p.B)
			s := &udpSession{
				id: id, src: src, nonce: p.Nonce,
				bucket:   newTokenBucket(r.cfg.MinInterval, r.cfg.Burst, rx),
				window:   newReplayWindow(),
				expire:   rx + dur + dur/10 + int64(10*time.Second),
				lastSeen: rx,
			}
			sessions[id], byNonce[p.Nonce] = s, s
			r.st.udpSessions.Add(1)
			p.Type, p.Code, p.Session, p.A, p.B = pktOpenOK, 0, id, uint64(r.cfg.IdleTimeout), uint64(r.cfg.MinInterval)
			r.sendUDP(b, &p, m, src, reply)

		case pktProbe:
			s := sessions[p.Session]
			if s == nil || s.src != src {
				r.st.udpDropped.Add(1)
				continue
			}
			if !s.bucket.allow(rx) {
				r.st.udpThrottled.Add(1)
				s.throttled++
				continue
			}
			s.lastSeen = rx
			if s.window.check(p.Seq) {
				s.received++
			} else if m != nil {
				// Authenticated sessions drop replays (and numbers too old
				// to tell); without a key a duplicate is echoed so the client
				// sees upstream duplication.
				r.st.udpReplayed.Add(1)
				continue
			} else {
				s.dups++
			}
			p.Type, p.SrvRecv, p.SrvRx = pktReply, s.received, rx
			p.SrvDSCP = 0
			if reply.ok {
				p.SrvDSCP = dscpKnown | reply.tos>>2
			}
			p.SrvProc = time.Now().UnixNano() - rx
			r.sendUDP(b, &p, m, src, reply)

		case pktClose:
			s := sessions[p.Session]
			if s == nil || s.src != src {
				r.st.udpDropped.Add(1)
				continue
			}
			if !s.bucket.allow(rx) {
				r.st.udpThrottled.Add(1)
				continue
			}
			// Keep the session a moment so a retried close gets the same
			// answer, but give its address's slot back now: a script running
			// probes back to back should not meet the per-IP cap.
			s.expire = min(s.expire, rx+int64(3*time.Second))
			if !s.closing {
				s.closing = true
				r.releaseIP(s.src.Addr(), false)
			}
			p.Type, p.Seq, p.SrvRecv, p.Throttled = pktClosed, s.received, s.dups, s.throttled
			r.sendUDP(b, &p, m, src, reply)

		default:
			r.st.udpDropped.Add(1)
		}
	}
}

// checkOpen validates a session request against the reflector's limits.
func (r *Reflector) checkOpen(p packet, pktLen int, auth bool) (uint8, uint64) {
	switch {
	case time.Duration(p.A) < r.cfg.MinInterval:
		return refuseInterval, uint64(r.cfg.MinInterval)
	case p.B == 0 || time.Duration(p.B) > r.cfg.MaxDuration:
		return refuseDuration, uint64(r.cfg.MaxDuration)
	case int(p.Size) > r.cfg.MaxSize || int(p.Size) < minPacket(auth) || pktLen > r.cfg.MaxSize:
		return refuseSize, uint64(r.cfg.MaxSize)
	}
	return refuseNone, 0
}

// replyTOS is the marking an answer copies from its request (ECN bits
// cleared: those belong to the path, not to the reflector).
type replyTOS struct {
	ok  bool
	v6  bool
	tos uint8
}

func (r *Reflector) sendUDP(b []byte, p *packet, m *mac, dst netip.AddrPort, tos replyTOS) {
	encodeUDP(b, p, m)
	var oob []byte
	if tos.ok && tosCmsgSpace > 0 && !r.noTOSCmsg {
		oob = tosCmsg(r.txOOB[:], tos.v6, tos.tos)
	}
	_, _, err := r.udp.WriteMsgUDPAddrPort(b, oob, dst)
	if err != nil && oob != nil && (errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOPROTOOPT)) {
		// A kernel that will not take the marking per datagram still gets
		// its replies, unmarked, and is not asked again.
		r.noTOSCmsg = true
		r.logf("udp: per-reply DSCP not supported here (%v); replies keep the default marking", err)
		_, _, err = r.udp.WriteMsgUDPAddrPort(b, nil, dst)
	}
	if err == nil {
		r.st.udpReplied.Add(1)
	}
}
