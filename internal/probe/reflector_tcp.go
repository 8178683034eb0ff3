package probe

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/netip"
	"time"
)

// helloTimeout bounds how long a new connection may take to say what it wants.
const helloTimeout = 10 * time.Second

func (r *Reflector) serveTCP() error {
	var backoff time.Duration
	for {
		c, err := r.tcp.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Out of descriptors or similar: back off, like net/http.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			r.logf("accept: %v; retrying in %s", err, backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		r.st.tcpAccepted.Add(1)
		if r.hookAccepted != nil {
			r.hookAccepted()
		}
		// Register under the lock Serve closes connections under: once
		// it has begun, a late arrival is closed here instead of running
		// unseen (its handler could keep Serve waiting for as long as
		// the test it asks for).
		r.connMu.Lock()
		if r.closed {
			r.connMu.Unlock()
			c.Close()
			continue
		}
		r.conns[c] = struct{}{}
		r.wg.Add(1)
		r.connMu.Unlock()
		go func() {
			defer r.wg.Done()
			r.handleTCP(c)
			c.Close()
			r.connMu.Lock()
			delete(r.conns, c)
			r.connMu.Unlock()
		}()
	}
}

// refusedHelloTimeout bounds how long a connection over a cap may take to
// send its hello, which is read only to answer it with the refusal.
const refusedHelloTimeout = 2 * time.Second

// handleTCP takes the connection's slots, reads the hello, applies the limits
// and runs the requested mode. Every read and write has a deadline: the idle
// timeout and the test's end.
func (r *Reflector) handleTCP(c net.Conn) {
	start := time.Now()
	var ip netip.Addr
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		ip = ta.AddrPort().Addr()
	}
	// Slots are taken before the hello is read: a peer holding connections
	// open without a word holds slots too. One over a cap is still heard
	// out, briefly, so the refusal can say which cap.
	over, overLimit := uint8(refuseNone), uint64(0)
	helloWait := helloTimeout
	switch {
	case !r.takeIP(ip, true, r.cfg.MaxConnsPerIP):
		over, overLimit = refuseConnsIP, uint64(r.cfg.MaxConnsPerIP)
	case !r.takeClient():
		r.releaseIP(ip, true)
		over, overLimit = refuseCapacity, uint64(r.cfg.MaxClients)
	default:
		defer r.releaseIP(ip, true)
		defer r.clients.Add(-1)
	}
	if over != refuseNone {
		helloWait = refusedHelloTimeout
	}
	_ = c.SetReadDeadline(start.Add(helloWait))
	var hb [helloLen + macLen]byte
	if _, err := io.ReadFull(c, hb[:helloLen]); err != nil {
		r.st.tcpDropped.Add(1)
		return
	}
	h, auth, err := decodeHelloHeader(hb[:helloLen])
	if err != nil || auth != (len(r.cfg.Key) > 0) {
		r.st.tcpDropped.Add(1)
		return // silently: no key, wrong key, or not our protocol
	}
	if auth {
		if _, err := io.ReadFull(c, hb[helloLen:]); err != nil || !newMAC(r.cfg.Key).verify(hb[:]) || !r.freshNonce(h.Nonce) {
			r.st.tcpDropped.Add(1)
			return
		}
	}
	var sb [statusLen]byte
	refuse := func(code uint8, limit uint64) {
		r.st.refused.Add(1)
		r.logf("refused tcp connection from %s: %v", c.RemoteAddr(), &RefusedError{Code: int(code), Limit: limit})
		_ = c.SetWriteDeadline(time.Now().Add(helloTimeout))
		if _, err := c.Write(encodeStatus(sb[:], code, limit)); err != nil {
			return
		}
		// Closing with the rest of a request unread would reset the
		// connection, and a reset can discard the refusal before it
		// leaves: end the stream after it, and let the client close
		// first (it does once it has read the refusal).
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 1<<20))
	}
	if over != refuseNone {
		refuse(over, overLimit)
		return
	}
	hs := uint32(helloSize(auth))
	switch {
	case h.Mode < modeRR || h.Mode > modeSource:
		refuse(refuseMode, 0)
		return
	case time.Duration(h.Duration) > r.cfg.MaxDuration:
		refuse(refuseDuration, uint64(r.cfg.MaxDuration))
		return
	case h.Mode == modeRR && (h.ReqSize == 0 || h.RespSize == 0 || h.ReqSize > uint32(r.cfg.MaxSize) || h.RespSize > uint32(r.cfg.MaxSize)):
		refuse(refuseSize, uint64(r.cfg.MaxSize))
		return
	case h.Mode == modeCRR && (h.ReqSize < hs || h.RespSize < statusLen || h.ReqSize > uint32(r.cfg.MaxResponse) || h.RespSize > uint32(r.cfg.MaxResponse)):
		refuse(refuseSize, uint64(r.cfg.MaxResponse))
		return
	}
	if !auth {
		if code, limit := r.checkUnauth(&h, ip); code != refuseNone {
			refuse(code, limit)
			return
		}
	}
	if tc, ok := c.(*net.TCPConn); ok {
		// Go sets TCP_NODELAY by default; a client may ask for Nagle to study it.
		_ = tc.SetNoDelay(h.Flags&flagServerNagle == 0)
	}
	end := start.Add(time.Duration(h.Duration) + time.Duration(h.Duration)/10 + helloTimeout)
	if h.Mode == modeCRR {
		end = start.Add(r.cfg.MaxDuration)
		if !auth {
			end = start.Add(r.cfg.LoadDuration)
		}
	}
	idle := r.cfg.IdleTimeout
	deadline := func() time.Time {
		d := time.Now().Add(idle)
		if d.After(end) {
			return end
		}
		return d
	}
	// A peer without a key moves bulk bytes at its client's rate: pace
	// charges n bytes and waits off any debt they leave.
	var lim *clientBuckets
	if !auth {
		lim = r.unauth
	}
	chunk := 64 << 10
	var paceTimer *time.Timer
	pace := func(n int, in bool) bool {
		if lim == nil {
			return true
		}
		d := lim.charge(ip, in, n, time.Now().UnixNano())
		if d <= 0 {
			return true
		}
		if paceTimer == nil {
			paceTimer = time.NewTimer(d)
		} else {
			paceTimer.Reset(d)
		}
		select {
		case <-paceTimer.C:
			return true
		case <-r.done:
			return false
		}
	}
	if lim != nil {
		// 10 ms of the rate per write, so a low cap is a steady stream
		// rather than 64 KB bursts.
		chunk = min(max(int(lim.rate/100), 1500), chunk)
	}
	_ = c.SetWriteDeadline(end)
	switch h.Mode {
	case modeRR:
		if _, err := c.Write(encodeStatus(sb[:], 0, uint64(idle))); err != nil {
			return
		}
		buf := make([]byte, max(h.ReqSize, h.RespSize))
		// The stream's raw reads and writes keep the runtime's sysmon
		// asleep between requests (see tcpStream).
		st, err := newTCPStream(context.Background(), c, false, false)
		if err != nil {
			return
		}
		// Moving a deadline is a timer operation: move it only when less
		// than the idle timeout is left, then by idle + idle/8. A silent
		// connection is closed after between idle and 9/8 idle.
		var rd time.Time
		for {
			if now := time.Now(); rd.Sub(now) < idle && rd.Before(end) {
				rd = now.Add(idle + idle/8)
				if rd.After(end) {
					rd = end
				}
				_ = c.SetReadDeadline(rd)
			}
			if _, err := st.readFull(buf[:h.ReqSize], time.Time{}); err != nil {
				return
			}
			r.st.tcpIn.Add(int64(h.ReqSize))
			if err := st.write(buf[:h.RespSize], time.Time{}); err != nil {
				return
			}
			r.st.tcpOut.Add(int64(h.RespSize))
		}

	case modeCRR:
		_ = c.SetReadDeadline(deadline())
		// The request is ReqSize bytes on the wire, the hello included.
		n, err := io.CopyN(io.Discard, c, int64(h.ReqSize-hs))
		r.st.tcpIn.Add(n + int64(hs))
		if err != nil {
			return
		}
		// The response is RespSize bytes on the wire, the status included,
		// the first write carrying both so the status is not a segment alone.
		buf := make([]byte, min(int(h.RespSize), 64<<10))
		encodeStatus(buf, 0, uint64(idle))
		left := int(h.RespSize)
		for left > 0 {
			k := min(left, len(buf))
			if _, err := c.Write(buf[:k]); err != nil {
				return
			}
			r.st.tcpOut.Add(int64(k))
			left -= k
			if k >= statusLen {
				clear(buf[:statusLen])
			}
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		// Let the client close first (it counts to EOF), then close.
		_ = c.SetReadDeadline(time.Now().Add(helloTimeout))
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 1<<20))

	case modeSink:
		if tc, ok := c.(*net.TCPConn); ok && lim != nil {
			// A paced sink leaves the client blocked on a full window:
			// keep that window to the bucket's depth, or the bytes
			// queued in it arrive after the flow and count as goodput.
			_ = tc.SetReadBuffer(int(lim.depth))
		}
		if _, err := c.Write(r.bulkStatus(sb[:], lim)); err != nil {
			return
		}
		buf := make([]byte, chunk)
		var total int64
		for {
			_ = c.SetReadDeadline(deadline())
			n, err := c.Read(buf)
			total += int64(n)
			r.st.tcpIn.Add(int64(n))
			if err == io.EOF {
				// Report what arrived, so upload goodput is what was delivered.
				_, _ = c.Write(encodeStatus(sb[:], 0, uint64(total)))
				return
			}
			if err != nil || !pace(n, true) {
				return
			}
		}

	case modeSource:
		if _, err := c.Write(r.bulkStatus(sb[:], lim)); err != nil {
			return
		}
		stop := start.Add(time.Duration(h.Duration))
		_ = c.SetWriteDeadline(stop)
		buf := make([]byte, chunk)
		for time.Now().Before(stop) {
			if !pace(len(buf), false) {
				return
			}
			n, err := c.Write(buf)
			r.st.tcpOut.Add(int64(n))
			if err != nil {
				return
			}
		}
	}
}

// checkUnauth applies the limits on a peer without a key to its hello: the
// echo modes may not amplify, the bulk ones need AllowLoad, and CRR draws on
// its client's rate.
func (r *Reflector) checkUnauth(h *hello, ip netip.Addr) (uint8, uint64) {
	switch h.Mode {
	case modeRR:
		if h.RespSize > h.ReqSize {
			return refuseEcho, uint64(h.ReqSize)
		}
	case modeSink, modeSource:
		switch {
		case !r.cfg.AllowLoad:
			return refuseLoad, 0
		case time.Duration(h.Duration) > r.cfg.LoadDuration:
			return refuseLoadDuration, uint64(r.cfg.LoadDuration)
		}
	case modeCRR:
		if !r.cfg.AllowLoad && (h.ReqSize > uint32(r.cfg.OpenResponse) || h.RespSize > uint32(r.cfg.OpenResponse)) {
			return refuseOpenSize, uint64(r.cfg.OpenResponse)
		}
		if r.unauth != nil && !r.unauth.admit(ip, int(h.ReqSize), int(h.RespSize), time.Now().UnixNano()) {
			return refuseRate, uint64(r.cfg.unauthRate())
		}
	}
	return refuseNone, 0
}

// bulkStatus is a sink's or source's acceptance: the idle timeout, and the
// rate cap it will be paced to (kbit/s, 0: none) so the client can tell the
// reflector's cap from the path's.
func (r *Reflector) bulkStatus(b []byte, lim *clientBuckets) []byte {
	encodeStatus(b, 0, uint64(r.cfg.IdleTimeout))
	if lim != nil {
		putStatusCap(b, uint32(min(r.cfg.unauthRate()/1000, math.MaxUint32)))
	}
	return b
}
