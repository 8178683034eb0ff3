package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
)

// CRRConfig is one connect-request-response run (netperf TCP_CRR): each
// transaction connects, sends Request bytes, reads exactly Response bytes and
// closes.
type CRRConfig struct {
	Target string `json:"target"`
	// Request and Response are the bytes on the wire per transaction, the
	// protocol's hello (40 B, 72 with a key) and status (16 B) included.
	Request  int  `json:"request"`
	Response int  `json:"response"`
	FastOpen bool `json:"fastopen"`
	// Rate caps transactions per second (0: back to back).
	Rate     float64  `json:"rate"`
	Duration Duration `json:"duration"`
	// Count stops after this many transactions (0: run for Duration).
	Count         int      `json:"count"`
	Timeout       Duration `json:"timeout"`
	Authenticated bool     `json:"authenticated"`
	Key           []byte   `json:"-"`
	Force         bool     `json:"-"`
}

// CRRResult is the outcome of a CRR run. Times are from the start of the
// transaction (before connect).
type CRRResult struct {
	Meta
	Config             CRRConfig   `json:"config"`
	Connect            Percentiles `json:"connect_us"`
	FirstByte          Percentiles `json:"first_byte_us"`
	LastByte           Percentiles `json:"last_byte_us"`
	Transactions       int64       `json:"transactions"`
	TransactionsPerSec float64     `json:"transactions_per_sec"`
	Errors             int64       `json:"errors"`
	ErrorSample        string      `json:"error_sample,omitempty"`
	BytesSent          int64       `json:"bytes_sent"`
	BytesReceived      int64       `json:"bytes_received"`
	// FastOpenUsed counts transactions whose SYN carried the request and was
	// accepted (TCP_INFO's TCPI_OPT_SYN_DATA).
	FastOpenUsed int64             `json:"fastopen_used"`
	Histograms   map[string]string `json:"histograms"`
}

func (c *CRRConfig) normalize() error {
	c.Authenticated = len(c.Key) > 0
	if c.Request == 0 {
		c.Request = 1000
	}
	if c.Response == 0 {
		c.Response = 300000
	}
	if c.Duration == 0 {
		c.Duration = Duration(10 * time.Second)
	}
	if c.Timeout == 0 {
		c.Timeout = Duration(10 * time.Second)
	}
	hs := helloSize(c.Authenticated)
	switch {
	case c.Request < hs || c.Request > MaxResponse:
		return fmt.Errorf("request %d: must be %d..%d bytes (the %d-byte hello is part of it)", c.Request, hs, MaxResponse, hs)
	case c.Response < statusLen || c.Response > MaxResponse:
		return fmt.Errorf("response %d: must be %d..%d bytes (the %d-byte status is part of it)", c.Response, statusLen, MaxResponse, statusLen)
	case c.Rate < 0 || c.Rate > 1_000_000:
		return fmt.Errorf("rate %g/s: must be 0..1000000", c.Rate)
	case c.Count < 0:
		return fmt.Errorf("count %d: must not be negative", c.Count)
	case c.Timeout < 0 || time.Duration(c.Timeout) > time.Minute:
		return fmt.Errorf("timeout %s: must be at most 1m", time.Duration(c.Timeout))
	}
	return checkDuration("duration", time.Duration(c.Duration), c.Force)
}

// CRR runs connect-request-response transactions one after another on the
// calling goroutine (so its sockets are made in the caller's network
// namespace) and reports connect, first-byte and last-byte times.
func CRR(ctx context.Context, cfg CRRConfig) (*CRRResult, error) {
	if err := cfg.normalize(); err != nil {
		return nil, configErr(err)
	}
	start := time.Now()
	m := newMAC(cfg.Key)
	d := &net.Dialer{Timeout: time.Duration(cfg.Timeout)}
	if cfg.FastOpen {
		d.Control = fastOpenControl
	}
	req := make([]byte, min(cfg.Request, 64<<10))
	buf := make([]byte, 64<<10)
	hs := helloSize(m != nil)
	var (
		res = &CRRResult{Config: cfg}
		hc  = newHist()
		hf  = newHist()
		hl  = newHist()
	)
	end := start.Add(time.Duration(cfg.Duration))
	var period time.Duration
	if cfg.Rate > 0 {
		period = time.Duration(1e9 / cfg.Rate)
	}
	runStart := time.Now()
	for k := 0; cfg.Count == 0 || k < cfg.Count; k++ {
		if period > 0 {
			if w := time.Until(runStart.Add(time.Duration(k) * period)); w > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(w):
				}
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !time.Now().Before(end) {
			break
		}
		h := hello{Mode: modeCRR, ReqSize: uint32(cfg.Request), RespSize: uint32(cfg.Response), Nonce: randUint64()}
		encodeHello(req, &h, m)
		t, err := crrOnce(ctx, d, &cfg, req, buf, hs, hc, hf, hl, res)
		if err != nil {
			var re *RefusedError
			if errors.As(err, &re) || res.Transactions == 0 {
				// Nothing works yet (or the reflector said no): a setup
				// problem, not a measurement.
				return nil, err
			}
			res.Errors++
			if res.ErrorSample == "" {
				res.ErrorSample = err.Error()
			}
			continue
		}
		_ = t
		res.Transactions++
	}
	elapsed := time.Since(runStart)
	if res.Transactions == 0 {
		return nil, fmt.Errorf("tcp %s: no transaction completed", cfg.Target)
	}
	res.Meta = newMeta("crr", cfg.Target, start)
	res.Connect, res.FirstByte, res.LastByte = summarize(hc), summarize(hf), summarize(hl)
	res.TransactionsPerSec = round3(float64(res.Transactions) / elapsed.Seconds())
	res.Histograms = map[string]string{"connect_ns": encodeHist(hc), "first_byte_ns": encodeHist(hf), "last_byte_ns": encodeHist(hl)}
	return res, nil
}

// crrOnce runs one transaction. req holds the hello at its start; the rest of
// the request is its zero padding, sent in 64 KB writes.
func crrOnce(ctx context.Context, d *net.Dialer, cfg *CRRConfig, req, buf []byte, hs int, hc, hf, hl interface{ RecordValue(int64) error }, res *CRRResult) (time.Duration, error) {
	clear(req[hs:])
	t0 := time.Now()
	c, err := d.DialContext(ctx, "tcp", cfg.Target)
	if err != nil {
		return 0, dialError(cfg.Target, err)
	}
	defer c.Close()
	tConn := time.Now()
	_ = c.SetDeadline(t0.Add(time.Duration(cfg.Timeout)))
	left := cfg.Request
	for left > 0 {
		k := min(left, len(req))
		n, err := c.Write(req[:k])
		res.BytesSent += int64(n)
		if err != nil {
			return 0, fmt.Errorf("tcp %s: send request: %w", cfg.Target, err)
		}
		left -= k
		if k >= hs {
			clear(req[:hs]) // later chunks are padding
		}
	}
	var (
		got    int
		tFirst time.Time
		status [statusLen]byte
	)
	for {
		n, err := c.Read(buf)
		if n > 0 && got == 0 {
			tFirst = time.Now()
		}
		if got < statusLen && n > 0 {
			copy(status[got:], buf[:min(n, statusLen-got)])
		}
		got += n
		res.BytesReceived += int64(n)
		if got >= statusLen && got-n < statusLen {
			code, value, derr := decodeStatus(status[:])
			if derr != nil {
				return 0, fmt.Errorf("tcp %s: not a lowlat reflector (%v)", cfg.Target, derr)
			}
			if code != 0 {
				return 0, &RefusedError{Code: int(code), Limit: value}
			}
		}
		if got > cfg.Response {
			return 0, fmt.Errorf("tcp %s: response longer than %d bytes", cfg.Target, cfg.Response)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			if got == 0 {
				return 0, noReply(cfg.Target, err)
			}
			return 0, fmt.Errorf("tcp %s: after %d of %d response bytes: %w", cfg.Target, got, cfg.Response, err)
		}
		if got == cfg.Response {
			tLast := time.Now()
			// Exactly N bytes: the next read must be the end of the stream.
			n2, err2 := c.Read(buf[:1])
			res.BytesReceived += int64(n2)
			if n2 != 0 || (err2 != io.EOF && !errors.Is(err2, syscall.ECONNRESET)) {
				if n2 != 0 {
					return 0, fmt.Errorf("tcp %s: response longer than %d bytes", cfg.Target, cfg.Response)
				}
				return 0, fmt.Errorf("tcp %s: after the response: %w", cfg.Target, err2)
			}
			record2(hc, tConn.Sub(t0))
			record2(hf, tFirst.Sub(t0))
			record2(hl, tLast.Sub(t0))
			if cfg.FastOpen {
				if rc, ok := c.(syscall.Conn); ok {
					if raw, err := rc.SyscallConn(); err == nil && synDataAcked(raw) {
						res.FastOpenUsed++
					}
				}
			}
			return tLast.Sub(t0), nil
		}
	}
	if got == 0 {
		return 0, fmt.Errorf("tcp %s: %w", cfg.Target, ErrNoReplies)
	}
	return 0, fmt.Errorf("tcp %s: response ended after %d of %d bytes", cfg.Target, got, cfg.Response)
}

func record2(h interface{ RecordValue(int64) error }, d time.Duration) {
	_ = h.RecordValue(min(max(int64(d), histLowest), histHighest))
}
