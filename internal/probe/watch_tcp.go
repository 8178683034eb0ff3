package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// tcpConnSpan is how long one watch connection asks the reflector for; the
// watch dials again when it ends.
const tcpConnSpan = time.Hour

// WatchTCP probes a reflector with request/response exchanges on one
// persistent TCP connection (the path a game's or a stream's control channel
// takes) until ctx ends. A reply that does not come within the timeout
// counts as lost and costs the connection: TCP would retransmit, and a
// stalled connection is what the monitor should see and replace. Connect
// failures count one lost probe per tick. RTTs are read times in user space.
func WatchTCP(ctx context.Context, cfg WatchConfig, sink Sink) error {
	if err := cfg.Check("tcp"); err != nil {
		return err
	}
	if cfg.Size == 0 {
		cfg.Size = 64
	}
	w := &tcpWatch{cfg: &cfg, sink: sink, m: newMAC(cfg.Key)}
	defer w.readers.Wait() // no sample after the watch returns
	defer w.drop(nil, "")
	req := make([]byte, cfg.Size)
	runSchedule(ctx, cfg.Interval, func(now time.Time) { w.tick(ctx, now, req) }, func(now time.Time) time.Time {
		w.expire(now)
		if t := w.oldest(); !t.IsZero() {
			return t.Add(cfg.Timeout)
		}
		return time.Time{}
	})
	return nil
}

type tcpWatch struct {
	cfg     *WatchConfig
	sink    Sink
	m       *mac
	readers sync.WaitGroup

	stateMu sync.Mutex
	failing bool

	mu   sync.Mutex
	conn net.Conn
	gen  uint64    // which connection the pending sends belong to
	pend []int64   // send times of requests not yet answered, in order
	done chan bool // closed when the reader of conn exits
}

func (w *tcpWatch) state(failing bool, format string, args ...any) {
	w.stateMu.Lock()
	defer w.stateMu.Unlock()
	if failing != w.failing {
		w.failing = failing
		w.cfg.state(failing, format, args...)
	}
}

func (w *tcpWatch) oldest() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pend) == 0 {
		return time.Time{}
	}
	return time.Unix(0, w.pend[0])
}

// expire drops the connection when its oldest request is past the timeout.
func (w *tcpWatch) expire(now time.Time) {
	w.mu.Lock()
	stale := len(w.pend) > 0 && now.UnixNano()-w.pend[0] >= int64(w.cfg.Timeout)
	w.mu.Unlock()
	if stale {
		w.drop(nil, fmt.Sprintf("tcp %s: no reply within %s", w.cfg.Target, w.cfg.Timeout))
	}
}

// drop closes the connection (when it is c, or any with c nil) and reports
// its unanswered requests lost.
func (w *tcpWatch) drop(c net.Conn, why string) {
	w.mu.Lock()
	if w.conn == nil || (c != nil && c != w.conn) {
		w.mu.Unlock()
		return
	}
	w.conn.Close()
	w.conn = nil
	lost := w.pend
	w.pend = nil
	w.gen++
	w.mu.Unlock()
	for _, t := range lost {
		w.sink(Sample{Sent: time.Unix(0, t), Lost: true, Dir: LossUnknown})
	}
	if why != "" {
		w.state(true, "%s", why)
	}
}

func (w *tcpWatch) tick(ctx context.Context, now time.Time, req []byte) {
	w.mu.Lock()
	c := w.conn
	w.mu.Unlock()
	if c == nil {
		var err error
		if c, err = w.dial(ctx); err != nil {
			w.state(true, "%v", err)
			w.sink(Sample{Sent: now, Lost: true, Dir: LossUnknown})
			return
		}
		now = time.Now()
	}
	w.mu.Lock()
	w.pend = append(w.pend, now.UnixNano())
	w.mu.Unlock()
	_ = c.SetWriteDeadline(now.Add(w.cfg.Timeout))
	if _, err := c.Write(req); err != nil {
		w.drop(c, fmt.Sprintf("tcp %s: send: %v", w.cfg.Target, err))
	}
}

func (w *tcpWatch) dial(ctx context.Context) (net.Conn, error) {
	d := &net.Dialer{Timeout: w.cfg.Timeout}
	if w.cfg.DSCP != 0 {
		d.Control = dscpControl(w.cfg.DSCP)
	}
	h := hello{Mode: modeRR, ReqSize: uint32(w.cfg.Size), RespSize: uint32(w.cfg.Size), Nonce: randUint64(), Duration: int64(tcpConnSpan)}
	c, _, err := dialHello(ctx, d, w.cfg.Target, &h, w.m, w.cfg.Timeout)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.conn = c
	gen := w.gen
	w.mu.Unlock()
	w.readers.Add(1)
	go func() {
		defer w.readers.Done()
		w.read(c, gen)
	}()
	return c, nil
}

// read matches replies to requests in order until the connection ends.
func (w *tcpWatch) read(c net.Conn, gen uint64) {
	buf := make([]byte, w.cfg.Size)
	for {
		if _, err := io.ReadFull(c, buf); err != nil {
			why := ""
			if !errors.Is(err, net.ErrClosed) {
				why = fmt.Sprintf("tcp %s: connection ended: %v", w.cfg.Target, err)
			}
			w.drop(c, why)
			return
		}
		rx := time.Now().UnixNano()
		w.mu.Lock()
		if w.gen != gen || len(w.pend) == 0 {
			w.mu.Unlock()
			return
		}
		tx := w.pend[0]
		w.pend = w.pend[1:]
		w.mu.Unlock()
		w.sink(Sample{Sent: time.Unix(0, tx), RTT: time.Duration(rx - tx)})
		w.state(false, "tcp %s: replies again", w.cfg.Target)
	}
}

// crrMaxInFlight bounds a crr watch's transactions in flight; a tick that
// finds them all busy counts as lost (the path is slower than the schedule).
const crrMaxInFlight = 16

// WatchCRR probes a reflector with one whole transaction per tick, as a
// web or stream client meets the server: connect, send the request, read
// the response, close. Each sample's RTT is connect start to the last
// response byte, FirstByte to the first. A failed or timed-out transaction
// is lost.
func WatchCRR(ctx context.Context, cfg WatchConfig, sink Sink) error {
	if err := cfg.Check("crr"); err != nil {
		return err
	}
	hs := helloSize(len(cfg.Key) > 0)
	cfg.Size = max(cfg.Size, hs)
	cfg.Response = max(cfg.Response, statusLen)
	var (
		inFlight atomic.Int32
		wg       sync.WaitGroup
		failing  atomic.Bool
		stateMu  sync.Mutex
	)
	defer wg.Wait()
	state := func(fail bool, format string, args ...any) {
		stateMu.Lock()
		defer stateMu.Unlock()
		if failing.Load() != fail {
			failing.Store(fail)
			cfg.state(fail, format, args...)
		}
	}
	d := &net.Dialer{Timeout: cfg.Timeout}
	if cfg.DSCP != 0 {
		d.Control = dscpControl(cfg.DSCP)
	}
	runSchedule(ctx, cfg.Interval, func(now time.Time) {
		if inFlight.Load() >= crrMaxInFlight {
			sink(Sample{Sent: now, Lost: true, Dir: LossUnknown})
			state(true, "crr %s: %d transactions in flight", cfg.Target, crrMaxInFlight)
			return
		}
		inFlight.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer inFlight.Add(-1)
			s, err := crrWatchOnce(ctx, d, &cfg, now)
			if ctx.Err() != nil {
				return
			}
			sink(s)
			if err != nil {
				state(true, "%v", err)
			} else {
				state(false, "crr %s: transactions complete again", cfg.Target)
			}
		}()
	}, nil)
	return nil
}

// crrWatchOnce runs one transaction.
func crrWatchOnce(ctx context.Context, d *net.Dialer, cfg *WatchConfig, t0 time.Time) (Sample, error) {
	lost := Sample{Sent: t0, Lost: true, Dir: LossUnknown}
	ctx, cancel := context.WithDeadline(ctx, t0.Add(cfg.Timeout))
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", cfg.Target)
	if err != nil {
		return lost, dialError(cfg.Target, err)
	}
	defer c.Close()
	_ = c.SetDeadline(t0.Add(cfg.Timeout))
	req := make([]byte, cfg.Size)
	m := newMAC(cfg.Key)
	encodeHello(req, &hello{Mode: modeCRR, ReqSize: uint32(cfg.Size), RespSize: uint32(cfg.Response), Nonce: randUint64()}, m)
	if _, err := c.Write(req); err != nil {
		return lost, fmt.Errorf("crr %s: send request: %w", cfg.Target, err)
	}
	buf := make([]byte, min(cfg.Response, 64<<10))
	var (
		got    int
		tFirst time.Time
		status [statusLen]byte
	)
	for got < cfg.Response {
		n, err := c.Read(buf[:min(len(buf), cfg.Response-got)])
		if n > 0 && got == 0 {
			tFirst = time.Now()
		}
		if got < statusLen && n > 0 {
			copy(status[got:], buf[:min(n, statusLen-got)])
		}
		got += n
		if got >= statusLen && got-n < statusLen {
			code, value, derr := decodeStatus(status[:])
			if derr != nil {
				return lost, fmt.Errorf("crr %s: not a lowlat reflector (%v)", cfg.Target, derr)
			}
			if code != 0 {
				return lost, fmt.Errorf("crr %s: %w", cfg.Target, &RefusedError{Code: int(code), Limit: value})
			}
		}
		if err != nil && got < cfg.Response {
			return lost, noReply(cfg.Target, err)
		}
	}
	tLast := time.Now()
	return Sample{Sent: t0, RTT: tLast.Sub(t0), FirstByte: tFirst.Sub(t0)}, nil
}
