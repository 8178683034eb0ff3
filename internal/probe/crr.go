package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/lowlat/lowlat/internal/nsthread"
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
	Count int `json:"count"`
	// Parallel is how many transaction loops run at once (1..MaxParallel).
	Parallel      int      `json:"parallel"`
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
	if c.Parallel == 0 {
		c.Parallel = 1
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
	case c.Parallel < 1 || c.Parallel > MaxParallel:
		return fmt.Errorf("parallel %d: must be 1..%d", c.Parallel, MaxParallel)
	case c.Timeout < 0 || time.Duration(c.Timeout) > time.Minute:
		return fmt.Errorf("timeout %s: must be at most 1m", time.Duration(c.Timeout))
	}
	return checkDuration("duration", time.Duration(c.Duration), c.Force)
}

// MaxParallel bounds CRR's concurrent transaction loops.
const MaxParallel = 256

// crrTally is one transaction loop's share of the result.
type crrTally struct {
	hc, hf, hl                   *hdrhistogram.Histogram
	transactions, errors         int64
	sent, received, fastOpenUsed int64
	errSample                    string
}

// CRR runs connect-request-response transactions in Parallel loops (one by
// default, on the calling goroutine; more join the caller's network namespace,
// so sockets are made where the caller is) and reports connect, first-byte and
// last-byte times. With Rate, transaction k of the whole run starts at k/Rate
// whichever loop takes it; Count bounds the attempts of the whole run.
func CRR(ctx context.Context, cfg CRRConfig) (*CRRResult, error) {
	if err := cfg.normalize(); err != nil {
		return nil, configErr(err)
	}
	if cfg.Parallel > 1 {
		if err := ensureFiles(cfg.Parallel, "parallel transactions"); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	end := start.Add(time.Duration(cfg.Duration))
	var period time.Duration
	if cfg.Rate > 0 {
		period = time.Duration(1e9 / cfg.Rate)
	}
	parent := ctx
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var (
		next      atomic.Int64 // the next transaction's ticket
		completed atomic.Int64 // successful transactions, all loops
		failOnce  sync.Once
		fatal     error
		firstOnce sync.Once
		firstErr  error
	)
	runStart := time.Now()
	loop := func(t *crrTally) {
		m := newMAC(cfg.Key)
		d := &net.Dialer{Timeout: time.Duration(cfg.Timeout)}
		if cfg.FastOpen {
			d.Control = fastOpenControl
		}
		req := make([]byte, min(cfg.Request, 64<<10))
		buf := make([]byte, 64<<10)
		hs := helloSize(m != nil)
		var timer *time.Timer
		for {
			k := next.Add(1) - 1
			if cfg.Count > 0 && k >= int64(cfg.Count) {
				return
			}
			if period > 0 {
				if w := time.Until(runStart.Add(time.Duration(k) * period)); w > 0 {
					if timer == nil {
						timer = time.NewTimer(w)
						defer timer.Stop()
					} else {
						timer.Reset(w)
					}
					select {
					case <-ctx.Done():
					case <-timer.C:
					}
				}
			}
			if ctx.Err() != nil || !time.Now().Before(end) {
				return
			}
			h := hello{Mode: modeCRR, ReqSize: uint32(cfg.Request), RespSize: uint32(cfg.Response), Nonce: randUint64()}
			encodeHello(req, &h, m)
			if err := crrOnce(ctx, d, &cfg, req, buf, hs, t); err != nil {
				if ctx.Err() != nil {
					return
				}
				var re *RefusedError
				if errors.As(err, &re) {
					// The reflector said no: not a measurement.
					failOnce.Do(func() { fatal = err; cancel() })
					return
				}
				t.errors++
				if t.errSample == "" {
					t.errSample = err.Error()
				}
				if t.transactions == 0 && completed.Load() == 0 {
					// Nothing has worked yet, here or in another loop:
					// a setup problem (unreachable, not a reflector).
					// This loop stops; the run fails if all do.
					firstOnce.Do(func() { firstErr = err })
					return
				}
				continue
			}
			t.transactions++
			completed.Add(1)
		}
	}
	tallies := make([]*crrTally, cfg.Parallel)
	for i := range tallies {
		tallies[i] = &crrTally{hc: newHist(), hf: newHist(), hl: newHist()}
	}
	if cfg.Parallel == 1 {
		loop(tallies[0])
	} else {
		caller, err := nsthread.Current()
		if err != nil {
			return nil, err
		}
		defer caller.Close()
		var wg sync.WaitGroup
		wg.Add(cfg.Parallel)
		for _, t := range tallies {
			go func() {
				defer wg.Done()
				if err := caller.Join(); err != nil {
					failOnce.Do(func() { fatal = err; cancel() })
					return
				}
				loop(t)
			}()
		}
		wg.Wait()
	}
	elapsed := time.Since(runStart)
	if err := parent.Err(); err != nil {
		return nil, err
	}
	if fatal != nil {
		return nil, fatal
	}
	res := &CRRResult{Config: cfg}
	hc, hf, hl := newHist(), newHist(), newHist()
	for _, t := range tallies {
		hc.Merge(t.hc)
		hf.Merge(t.hf)
		hl.Merge(t.hl)
		res.Transactions += t.transactions
		res.Errors += t.errors
		res.BytesSent += t.sent
		res.BytesReceived += t.received
		res.FastOpenUsed += t.fastOpenUsed
		if res.ErrorSample == "" {
			res.ErrorSample = t.errSample
		}
	}
	if res.Transactions == 0 {
		if firstErr != nil {
			return nil, firstErr
		}
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
func crrOnce(ctx context.Context, d *net.Dialer, cfg *CRRConfig, req, buf []byte, hs int, t *crrTally) error {
	clear(req[hs:])
	t0 := time.Now()
	c, err := d.DialContext(ctx, "tcp", cfg.Target)
	if err != nil {
		return dialError(cfg.Target, err)
	}
	defer c.Close()
	tConn := time.Now()
	_ = c.SetDeadline(t0.Add(time.Duration(cfg.Timeout)))
	left := cfg.Request
	for left > 0 {
		k := min(left, len(req))
		n, err := c.Write(req[:k])
		t.sent += int64(n)
		if err != nil {
			return fmt.Errorf("tcp %s: send request: %w", cfg.Target, err)
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
		t.received += int64(n)
		if got >= statusLen && got-n < statusLen {
			code, value, derr := decodeStatus(status[:])
			if derr != nil {
				return fmt.Errorf("tcp %s: not a lowlat reflector (%v)", cfg.Target, derr)
			}
			if code != 0 {
				return &RefusedError{Code: int(code), Limit: value}
			}
		}
		if got > cfg.Response {
			return fmt.Errorf("tcp %s: response longer than %d bytes", cfg.Target, cfg.Response)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			if got == 0 {
				return noReply(cfg.Target, err)
			}
			return fmt.Errorf("tcp %s: after %d of %d response bytes: %w", cfg.Target, got, cfg.Response, err)
		}
		if got == cfg.Response {
			tLast := time.Now()
			// Exactly N bytes: the next read must be the end of the stream.
			n2, err2 := c.Read(buf[:1])
			t.received += int64(n2)
			if n2 != 0 || (err2 != io.EOF && !errors.Is(err2, syscall.ECONNRESET)) {
				if n2 != 0 {
					return fmt.Errorf("tcp %s: response longer than %d bytes", cfg.Target, cfg.Response)
				}
				return fmt.Errorf("tcp %s: after the response: %w", cfg.Target, err2)
			}
			record2(t.hc, tConn.Sub(t0))
			record2(t.hf, tFirst.Sub(t0))
			record2(t.hl, tLast.Sub(t0))
			if cfg.FastOpen {
				if rc, ok := c.(syscall.Conn); ok {
					if raw, err := rc.SyscallConn(); err == nil && synDataAcked(raw) {
						t.fastOpenUsed++
					}
				}
			}
			return nil
		}
	}
	if got == 0 {
		return fmt.Errorf("tcp %s: %w", cfg.Target, ErrNoReplies)
	}
	return fmt.Errorf("tcp %s: response ended after %d of %d bytes", cfg.Target, got, cfg.Response)
}

func record2(h interface{ RecordValue(int64) error }, d time.Duration) {
	_ = h.RecordValue(min(max(int64(d), histLowest), histHighest))
}
