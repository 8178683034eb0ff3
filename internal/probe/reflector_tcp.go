package probe

import (
	"context"
	"errors"
	"io"
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

// handleTCP reads the hello, applies the limits and runs the requested mode.
// Every read and write has a deadline: the idle timeout and the test's end.
func (r *Reflector) handleTCP(c net.Conn) {
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(helloTimeout))
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
		_, _ = c.Write(encodeStatus(sb[:], code, limit))
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
	var ip netip.Addr
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		ip = ta.AddrPort().Addr()
	}
	if !r.takeIP(ip, true, r.cfg.MaxConnsPerIP) {
		refuse(refuseConnsIP, uint64(r.cfg.MaxConnsPerIP))
		return
	}
	defer r.releaseIP(ip, true)
	if !r.takeClient() {
		refuse(refuseCapacity, uint64(r.cfg.MaxClients))
		return
	}
	defer r.clients.Add(-1)
	if tc, ok := c.(*net.TCPConn); ok {
		// Go sets TCP_NODELAY by default; a client may ask for Nagle to study it.
		_ = tc.SetNoDelay(h.Flags&flagServerNagle == 0)
	}
	end := start.Add(time.Duration(h.Duration) + time.Duration(h.Duration)/10 + helloTimeout)
	if h.Mode == modeCRR {
		end = start.Add(r.cfg.MaxDuration)
	}
	idle := r.cfg.IdleTimeout
	deadline := func() time.Time {
		d := time.Now().Add(idle)
		if d.After(end) {
			return end
		}
		return d
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
		if _, err := c.Write(encodeStatus(sb[:], 0, uint64(idle))); err != nil {
			return
		}
		buf := make([]byte, 64<<10)
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
			if err != nil {
				return
			}
		}

	case modeSource:
		if _, err := c.Write(encodeStatus(sb[:], 0, uint64(idle))); err != nil {
			return
		}
		stop := start.Add(time.Duration(h.Duration))
		_ = c.SetWriteDeadline(stop)
		buf := make([]byte, 64<<10)
		for time.Now().Before(stop) {
			n, err := c.Write(buf)
			r.st.tcpOut.Add(int64(n))
			if err != nil {
				return
			}
		}
	}
}
