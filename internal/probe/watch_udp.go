package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// A UDP watch is a chain of short reflector sessions, each sessionSpan long,
// so that the reflector's count of what it received (its answer to the
// session's close) splits the session's losses into up and down within
// seconds, and a reflector that restarted is met again with a fresh session.
//
// Every tick of the schedule sends one packet, and every packet is a probe:
// a session's probes, and between sessions (or while the reflector is gone)
// an open request, whose answer is a round trip like any other. A dead
// reflector therefore shows as loss at the probing rate, as a dead host does
// to ping, rather than as silence.
var sessionSpan = 5 * time.Second // a var so tests can shorten it

// udpWatchSession is one reflector session of a watch.
type udpWatchSession struct {
	id       uint64
	sentAt   []int64 // send time (wall ns) by sequence; 0: not sent
	answered []bool
	sent     int // probes sent
	received int // replies within the timeout
	// echoQ and echoRecv are the highest answered sequence and the
	// reflector's count echoed with it: the fallback split when the close
	// goes unanswered.
	echoQ, echoRecv int
	// lastReply is when the session last heard from the reflector (its
	// open's answer at first): a session silent past the timeout is
	// ended early, so a restarted reflector, which knows no sessions, is
	// met again within a timeout rather than a session span.
	lastReply  time.Time
	closeNonce uint64
	closeTries int
	nextClose  time.Time
	final      int // the reflector's final count; -1 until known
}

// pendingOpen is an open request in flight.
type pendingOpen struct {
	nonce  uint64
	sentAt int64
}

type udpWatch struct {
	cfg  *WatchConfig
	sink Sink
	m    *mac
	conn *net.UDPConn

	mu      sync.Mutex
	cur     *udpWatchSession   // taking probes; nil between sessions
	closing []*udpWatchSession // sent out, waiting for their final counts
	opens   []pendingOpen
	failing bool // the last state logged was "no replies"
	lastRx  time.Time
	perSess int // probes per session
}

// WatchUDP probes a reflector over UDP until ctx ends (see the package's
// watch notes and sessionSpan).
func WatchUDP(ctx context.Context, cfg WatchConfig, sink Sink) error {
	if err := cfg.Check("udp"); err != nil {
		return err
	}
	if cfg.Size == 0 {
		cfg.Size = 64
	}
	cfg.Size = max(cfg.Size, minPacket(len(cfg.Key) > 0))
	w := &udpWatch{cfg: &cfg, sink: sink, m: newMAC(cfg.Key), lastRx: time.Now()}
	w.perSess = max(1, int(sessionSpan/cfg.Interval))
	defer func() {
		if w.conn != nil {
			w.conn.Close()
		}
	}()

	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	buf := make([]byte, max(cfg.Size, minPacket(true)))
	runSchedule(ctx, cfg.Interval, func(now time.Time) {
		if w.conn == nil {
			if err := w.dial(ctx, &wg); err != nil {
				w.state(true, "%v", err)
				w.sink(Sample{Sent: now, Lost: true, Dir: LossUnknown})
				return
			}
		}
		w.tick(now, buf)
	}, w.housekeep)
	return nil
}

// dial resolves the target and starts the receiver.
func (w *udpWatch) dial(ctx context.Context, wg *sync.WaitGroup) error {
	dst, err := resolveUDP(w.cfg.Target)
	if err != nil {
		return err
	}
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
	if err != nil {
		return fmt.Errorf("udp %s: %w", w.cfg.Target, err)
	}
	if rc, err := c.SyscallConn(); err == nil {
		_ = enableRxTimestamps(rc)
		network := "udp4"
		if dst.Addr().Is6() {
			network = "udp6"
		}
		if w.cfg.DSCP != 0 {
			if err := dscpControl(w.cfg.DSCP)(network, "", rc); err != nil {
				c.Close()
				return fmt.Errorf("udp %s: %w", w.cfg.Target, err)
			}
		}
	}
	w.conn = c
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		c.Close() // ends the receiver's read
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.receive(c)
	}()
	return nil
}

// tick sends the probe of one schedule slot: the current session's next
// probe, or an open request.
func (w *udpWatch) tick(now time.Time, buf []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.cur; s != nil && s.sent == len(s.sentAt) {
		w.startClose(s, now)
		w.cur = nil
	}
	var p packet
	if s := w.cur; s != nil {
		p = packet{Type: pktProbe, Session: s.id, Seq: uint32(s.sent), ClientTx: now.UnixNano()}
		s.sentAt[s.sent] = p.ClientTx
		s.sent++
	} else {
		p = packet{Type: pktOpen, Nonce: randUint64(), A: uint64(w.cfg.Interval), B: uint64(time.Duration(w.perSess)*w.cfg.Interval + w.cfg.Timeout), Size: uint32(w.cfg.Size), DSCP: uint8(w.cfg.DSCP)}
		w.opens = append(w.opens, pendingOpen{nonce: p.Nonce, sentAt: now.UnixNano()})
		buf = buf[:minPacket(w.m != nil)]
	}
	if p.Type == pktProbe {
		buf = buf[:w.cfg.Size]
	}
	encodeUDP(buf, &p, w.m)
	_, err := w.conn.Write(buf)
	switch {
	case err == nil, errors.Is(err, syscall.ECONNREFUSED):
	case errors.Is(err, net.ErrClosed):
		// The watch is ending: its context closed the socket between
		// the schedule's last tick and this send. Not the target's fault.
	default:
		// The probe is counted as sent; its reply will not come and it
		// is lost when its timeout passes.
		w.stateLocked(true, "udp %s: send: %v", w.cfg.Target, err)
	}
}

// startClose asks for the session's final count (up to three times).
func (w *udpWatch) startClose(s *udpWatchSession, now time.Time) {
	s.closeNonce = randUint64()
	s.nextClose = now
	w.closing = append(w.closing, s)
}

// housekeep times out open requests, resends closes and settles sessions
// whose every probe has had its timeout. It returns when it next has work.
func (w *udpWatch) housekeep(now time.Time) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var wake time.Time
	later := func(t time.Time) {
		if wake.IsZero() || t.Before(wake) {
			wake = t
		}
	}
	timeout := int64(w.cfg.Timeout)
	ns := now.UnixNano()
	kept := w.opens[:0]
	for _, o := range w.opens {
		if ns-o.sentAt >= timeout {
			w.sink(Sample{Sent: time.Unix(0, o.sentAt), Lost: true, Dir: LossUnknown})
			continue
		}
		later(time.Unix(0, o.sentAt+timeout))
		kept = append(kept, o)
	}
	w.opens = kept
	if s := w.cur; s != nil && s.sent > 0 && now.Sub(s.lastReply) > w.cfg.Timeout+w.cfg.Interval {
		w.startClose(s, now)
		w.cur = nil
	}
	if now.Sub(w.lastRx) > w.cfg.Timeout+w.cfg.Interval {
		w.stateLocked(true, "udp %s: no replies since %s", w.cfg.Target, w.lastRx.Format(time.TimeOnly))
	}

	open := w.closing[:0]
	for _, s := range w.closing {
		if s.final < 0 && s.closeTries < 3 && !now.Before(s.nextClose) && w.conn != nil {
			b := make([]byte, minPacket(w.m != nil))
			encodeUDP(b, &packet{Type: pktClose, Session: s.id, Nonce: s.closeNonce}, w.m)
			_, _ = w.conn.Write(b)
			s.closeTries++
			s.nextClose = now.Add(300 * time.Millisecond)
		}
		last := time.Unix(0, s.sentAt[s.sent-1]+timeout)
		settled := !now.Before(last) && (s.final >= 0 || (s.closeTries >= 3 && !now.Before(s.nextClose)))
		if settled {
			w.settle(s)
			continue
		}
		later(last)
		if s.final < 0 {
			later(s.nextClose)
		}
		open = append(open, s)
	}
	w.closing = open
	return wake
}

// settle reports a session's lost probes with their direction: from the
// reflector's final count when it came, else from the count echoed with
// the last reply for the probes before it and "unknown" after.
func (w *udpWatch) settle(s *udpWatchSession) {
	var up, down int
	known := s.sent // probes whose split is known
	if s.final >= 0 {
		srv := min(max(s.final, s.received), s.sent)
		up, down = s.sent-srv, srv-s.received
	} else if s.echoQ >= 0 {
		known = s.echoQ + 1
		recvBefore := 0
		for q := 0; q < known; q++ {
			if s.answered[q] {
				recvBefore++
			}
		}
		srv := min(max(s.echoRecv, recvBefore), known)
		up, down = known-srv, srv-recvBefore
	} else {
		known = 0
	}
	for q := 0; q < s.sent; q++ {
		if s.answered[q] {
			continue
		}
		dir := LossUnknown
		switch {
		case q >= known:
		case up > 0:
			dir, up = LossUp, up-1
		case down > 0:
			dir, down = LossDown, down-1
		}
		w.sink(Sample{Sent: time.Unix(0, s.sentAt[q]), Lost: true, Dir: dir})
	}
}

// receive reads replies until the connection closes.
func (w *udpWatch) receive(c *net.UDPConn) {
	// The reflector answers with the datagram it got, and every datagram
	// of a session is cfg.Size long. A 64 KiB buffer per session (one every
	// five seconds per target) was most of the monitor's allocation and a
	// third of its heap.
	buf := make([]byte, w.cfg.Size)
	oob := make([]byte, oobSize)
	for {
		n, oobn, _, _, err := c.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if !errors.Is(err, syscall.ECONNREFUSED) {
				time.Sleep(10 * time.Millisecond) // never spin on an odd error
			}
			continue // ECONNREFUSED: an earlier probe found no reflector
		}
		rx := time.Now().UnixNano()
		if ts, ok := parseRxTimestamp(oob[:oobn]); ok {
			rx = ts
		}
		p, err := decodeUDP(buf[:n], w.m)
		if err != nil {
			continue
		}
		w.handle(&p, rx)
	}
}

func (w *udpWatch) handle(p *packet, rx int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	timeout := int64(w.cfg.Timeout)
	switch p.Type {
	case pktOpenOK, pktRefused:
		i := -1
		for k, o := range w.opens {
			if o.nonce == p.Nonce {
				i = k
			}
		}
		if i < 0 {
			return
		}
		o := w.opens[i]
		w.opens = append(w.opens[:i], w.opens[i+1:]...)
		rtt := rx - o.sentAt
		if rtt >= timeout {
			w.sink(Sample{Sent: time.Unix(0, o.sentAt), Lost: true, Dir: LossDown})
			return
		}
		if p.Type == pktRefused {
			// An answer, but no session: the probe did not measure
			// the path the target's probes take; count it lost.
			w.sink(Sample{Sent: time.Unix(0, o.sentAt), Lost: true, Dir: LossUnknown})
			w.stateLocked(true, "udp %s: %v", w.cfg.Target, &RefusedError{Code: int(p.Code), Limit: p.A})
			return
		}
		w.sink(Sample{Sent: time.Unix(0, o.sentAt), RTT: time.Duration(rtt)})
		w.lastRx = time.Now()
		if w.cur != nil { // a second open came back: give its session back
			w.startClose(&udpWatchSession{id: p.Session, final: -1, echoQ: -1, sentAt: []int64{o.sentAt}, answered: []bool{true}, sent: 1, received: 1}, time.Now())
			return
		}
		w.cur = &udpWatchSession{id: p.Session, sentAt: make([]int64, w.perSess), answered: make([]bool, w.perSess), final: -1, echoQ: -1, lastReply: time.Now()}
		w.stateLocked(false, "udp %s: replies again", w.cfg.Target)
	case pktReply:
		s := w.session(p.Session)
		if s == nil || int(p.Seq) >= s.sent || s.answered[p.Seq] {
			return
		}
		tx := s.sentAt[p.Seq]
		rtt := rx - tx - max(p.SrvProc, 0)
		if rx-tx >= timeout {
			return // too late: lost, settled with the session
		}
		s.answered[p.Seq] = true
		s.received++
		s.lastReply = time.Now()
		if int(p.Seq) > s.echoQ {
			s.echoQ, s.echoRecv = int(p.Seq), int(p.SrvRecv)
		}
		w.lastRx = time.Now()
		w.stateLocked(false, "udp %s: replies again", w.cfg.Target)
		w.sink(Sample{Sent: time.Unix(0, tx), RTT: time.Duration(max(rtt, 0)), Up: time.Duration(p.SrvRx - tx), HasUp: p.SrvRx != 0})
	case pktClosed:
		for _, s := range w.closing {
			if s.id == p.Session && s.closeNonce == p.Nonce && s.final < 0 {
				s.final = int(p.Seq)
			}
		}
	}
}

func (w *udpWatch) session(id uint64) *udpWatchSession {
	if w.cur != nil && w.cur.id == id {
		return w.cur
	}
	for _, s := range w.closing {
		if s.id == id {
			return s
		}
	}
	return nil
}

func (w *udpWatch) state(failing bool, format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stateLocked(failing, format, args...)
}

// stateLocked logs a change between healthy and failing, once per change.
func (w *udpWatch) stateLocked(failing bool, format string, args ...any) {
	if failing == w.failing {
		return
	}
	w.failing = failing
	w.cfg.state(failing, format, args...)
}
