package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/lowlat/lowlat/internal/nsthread"
)

// Request/response patterns.
const (
	PatternRR             = "rr"               // write the request, read the reply
	PatternWriteWriteRead = "write-write-read" // write it in two parts, then read
)

// TCPConfig is one TCP request/response run over persistent connections.
type TCPConfig struct {
	Target      string `json:"target"`
	Connections int    `json:"connections"`
	// Rate is requests per second over all connections (wrk2's -R); each
	// connection sends every Connections/Rate seconds, staggered.
	Rate float64 `json:"rate"`
	// Size is the request and the response size in bytes (1..65507).
	Size    int    `json:"size"`
	Pattern string `json:"pattern"`
	// Nagle leaves Nagle's algorithm on for the client's sockets (NoDelay in
	// the result is its inverse): they are left as the kernel makes them,
	// with no setsockopt at all, so an option set from outside (lowlat's
	// sock_ops program) stays in force as for a C program; ServerNagle asks the reflector to do the same
	// for its side.
	Nagle       bool     `json:"-"`
	NoDelay     bool     `json:"nodelay"`
	ServerNagle bool     `json:"server_nagle"`
	Duration    Duration `json:"duration"`
	// Timeout bounds one request (default 5s) and one connection setup.
	Timeout       Duration `json:"timeout"`
	Authenticated bool     `json:"authenticated"`
	Key           []byte   `json:"-"`
	Force         bool     `json:"-"`
}

// TCPResult is the outcome of a TCP request/response run.
type TCPResult struct {
	Meta
	Config TCPConfig `json:"config"`
	// RTT is request latency from the intended send time (see docs/probe.md:
	// a reply that delays later requests is charged to them).
	RTT Percentiles `json:"rtt_us"`
	// Service is each request's round trip as it happened, from its send to
	// its reply's last byte reaching the socket, with no correction: the
	// figure sockperf and netperf report.
	Service Percentiles `json:"service_us"`
	// Timestamps says where reply times came from: "kernel" (SO_TIMESTAMPNS
	// for every reply), "userspace" (the read's return, our own wake-up
	// included) or "mixed".
	Timestamps  string `json:"timestamps"`
	Connections int    `json:"connections"`
	Requests    int64  `json:"requests"`
	// Errors is how many connections failed (each ends its connection).
	Errors int64 `json:"errors"`
	// Failed is how many scheduled requests got no reply: the one that
	// failed on each connection, and every later one it could not send.
	// Failed / (Requests + Failed) is the run's error rate.
	Failed int64 `json:"failed"`
	// ErrorSample is the first error seen, when Errors > 0.
	ErrorSample string      `json:"error_sample,omitempty"`
	Connect     Percentiles `json:"connect_us"`
	// SendLag is how late requests left against the schedule, µs.
	SendLag Percentiles `json:"send_lag_us"`
	// Batches are the RTT figures of each fifth of the run, by scheduled
	// send time.
	Batches    *Batches          `json:"batches,omitempty"`
	Histograms map[string]string `json:"histograms"`
}

func (c *TCPConfig) normalize() error {
	if c.Connections == 0 {
		c.Connections = 1
	}
	if c.Rate == 0 {
		c.Rate = 10 * float64(c.Connections)
	}
	if c.Size == 0 {
		c.Size = 64
	}
	if c.Pattern == "" {
		c.Pattern = PatternRR
	}
	if c.Duration == 0 {
		c.Duration = Duration(10 * time.Second)
	}
	if c.Timeout == 0 {
		c.Timeout = Duration(5 * time.Second)
	}
	c.NoDelay = !c.Nagle
	c.Authenticated = len(c.Key) > 0
	switch {
	case c.Connections < 1 || c.Connections > MaxConnections:
		return fmt.Errorf("connections %d: must be 1..%d", c.Connections, MaxConnections)
	case c.Rate <= 0 || c.Rate > 10_000_000:
		return fmt.Errorf("rate %g/s: must be above 0 and at most 10000000/s", c.Rate)
	case c.Size < 1 || c.Size > MaxMessage:
		return fmt.Errorf("size %d: must be 1..%d bytes", c.Size, MaxMessage)
	case c.Pattern != PatternRR && c.Pattern != PatternWriteWriteRead:
		return fmt.Errorf("pattern %q: must be %s or %s", c.Pattern, PatternRR, PatternWriteWriteRead)
	case c.Pattern == PatternWriteWriteRead && c.Size < 2:
		return fmt.Errorf("size %d: write-write-read needs at least 2 bytes", c.Size)
	case c.Timeout < 0 || time.Duration(c.Timeout) > time.Minute:
		return fmt.Errorf("timeout %s: must be at most 1m", time.Duration(c.Timeout))
	}
	if err := checkDuration("duration", time.Duration(c.Duration), c.Force); err != nil {
		return err
	}
	if lo, hi, ok := localPortRange(); ok && c.Connections > hi-lo+1 {
		return fmt.Errorf("connections %d: at most %d to one reflector from one source address (net.ipv4.ip_local_port_range %d-%d)", c.Connections, hi-lo+1, lo, hi)
	}
	return nil
}

func localPortRange() (lo, hi int, ok bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, false
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	return lo, hi, err1 == nil && err2 == nil && hi >= lo
}

// accepted is what a reflector's status says when it accepts a test.
type accepted struct {
	value   uint64 // the idle timeout, ns
	capKbit uint32 // sink and source: the rate cap for this client and direction (0: none)
}

// contextDialer is a *net.Dialer, or kernelDefaults.
type contextDialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// kernelDefaults dials connections whose socket options stay as the kernel
// made them (dialKernelDefaults): the Nagle client of probe tcp.
type kernelDefaults struct{ timeout time.Duration }

func (k kernelDefaults) DialContext(ctx context.Context, _, address string) (net.Conn, error) {
	return dialKernelDefaults(ctx, address, k.timeout)
}

// dialHello connects, sends the hello and reads the reflector's status. It
// turns the reflector's silence (wrong key) and its refusals into clear
// errors.
func dialHello(ctx context.Context, d contextDialer, target string, h *hello, m *mac, timeout time.Duration) (net.Conn, accepted, error) {
	conn, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		return nil, accepted{}, dialError(target, err)
	}
	var hb [helloLen + macLen]byte
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write(encodeHello(hb[:], h, m)); err != nil {
		conn.Close()
		return nil, accepted{}, fmt.Errorf("tcp %s: send hello: %w", target, err)
	}
	var sb [statusLen]byte
	if _, err := io.ReadFull(conn, sb[:]); err != nil {
		conn.Close()
		return nil, accepted{}, noReply(target, err)
	}
	code, value, err := decodeStatus(sb[:])
	if err != nil {
		conn.Close()
		return nil, accepted{}, fmt.Errorf("tcp %s: not a lowlat reflector (%v)", target, err)
	}
	if code != 0 {
		conn.Close()
		return nil, accepted{}, &RefusedError{Code: int(code), Limit: value}
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, accepted{value, statusCap(sb[:])}, nil
}

// noReply explains a connection the reflector closed or never answered on.
func noReply(target string, err error) error {
	var ne net.Error
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Errorf("tcp %s: %w", target, ErrNoReplies)
	}
	return fmt.Errorf("tcp %s: %w", target, err)
}

func dialError(target string, err error) error {
	switch {
	case isConnRefused(err):
		return fmt.Errorf("tcp %s: connection refused (is a reflector listening there?)", target)
	case errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE):
		return fmt.Errorf("tcp %s: out of file descriptors: %w", target, err)
	case errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH):
		return fmt.Errorf("tcp %s: unreachable (%w)", target, unwrapErrno(err))
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("tcp %s: connect timed out: unreachable", target)
	}
	return fmt.Errorf("tcp %s: %w", target, err)
}

// unwrapErrno returns the errno inside err, or err: "network is unreachable"
// reads better than the dialer's whole chain.
func unwrapErrno(err error) error {
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	return err
}

// histShards is how many histograms connections record into; hdrhistogram is
// not goroutine-safe and one per connection would cost 270 KB each.
const histShards = 16

// preciseConns is the most connections that each get a thread of their own
// with exact (nanosleep, 1 ns slack) timers.
const preciseConns = 8

// timestampSource names where receive times came from.
func timestampSource(kernel, user int64) string {
	switch {
	case user == 0 && kernel > 0:
		return "kernel"
	case kernel == 0:
		return "userspace"
	}
	return "mixed"
}

type shardedHist struct {
	mu [histShards]sync.Mutex
	h  [histShards]*hdrhistogram.Histogram
}

func newShardedHist() *shardedHist {
	s := &shardedHist{}
	for i := range s.h {
		s.h[i] = newHist()
	}
	return s
}

func (s *shardedHist) record(shard int, ns int64) {
	i := shard % histShards
	s.mu[i].Lock()
	record(s.h[i], ns)
	s.mu[i].Unlock()
}

func (s *shardedHist) merged() *hdrhistogram.Histogram {
	out := newHist()
	for i := range s.h {
		s.mu[i].Lock()
		out.Merge(s.h[i])
		s.mu[i].Unlock()
	}
	return out
}

// dialAll opens n connections with up to 64 dials in flight. Dialing goroutines
// join the caller's network namespace first, so a caller locked into one gets
// its connections there.
func dialAll(ctx context.Context, n int, dial func(ctx context.Context, i int) error) error {
	caller, err := nsthread.Current()
	if err != nil {
		return err
	}
	defer caller.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	workers := min(n, 64)
	wg.Add(workers)
	for range workers {
		go func() {
			defer wg.Done()
			if err := caller.Join(); err != nil {
				errOnce.Do(func() { first = err; cancel() })
				return
			}
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := dial(ctx, i); err != nil {
					errOnce.Do(func() {
						first = err
						if n > 1 {
							first = fmt.Errorf("connection %d of %d: %w", i+1, n, err)
						}
						cancel()
					})
					return
				}
			}
		}()
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return first
}

// schedule gives connection conn's k-th intended send time: connections are
// staggered by 1/rate and each repeats every conns/rate, so the whole run sends
// at a constant rate (wrk2's constant-throughput schedule).
func schedule(start time.Time, conn, conns int, rate float64, k int64) time.Time {
	period := float64(conns) / rate * 1e9
	phase := float64(conn) / rate * 1e9
	return start.Add(time.Duration(phase + float64(k)*period))
}

// firstAt is the first k ≥ from whose send time (schedule) is at or after t.
func firstAt(start time.Time, conn, conns int, rate float64, from int64, t time.Time) int64 {
	period := float64(conns) / rate * 1e9
	phase := float64(conn) / rate * 1e9
	k := max(from, int64(math.Ceil((float64(t.Sub(start))-phase)/period)))
	// The estimate is within a step of the answer; schedule rounds.
	for k > from && !schedule(start, conn, conns, rate, k-1).Before(t) {
		k--
	}
	for schedule(start, conn, conns, rate, k).Before(t) {
		k++
	}
	return k
}

// failRest counts request k of connection conn and every later one scheduled
// before end as failed, each in its block: the connection is gone, so none
// of them is sent. A run whose connections die while it runs thus shows
// the share of its requests that failed, not one error per connection.
// Block i holds the send times from start + i·span (the last one up to
// end), as block() places them.
func (b *timeBlocks) failRest(conn, conns int, rate float64, k int64, end time.Time) int64 {
	last := firstAt(b.start, conn, conns, rate, k, end) // the first not scheduled before end
	b.mu.Lock()
	defer b.mu.Unlock()
	from := k
	for i := range Blocks {
		to := last
		if i < Blocks-1 {
			to = min(last, firstAt(b.start, conn, conns, rate, from, b.start.Add(time.Duration(i+1)*b.span)))
		}
		b.failed[i] += to - from
		from = to
	}
	return last - k
}

// coLatency charges a request with the wait a slow reply caused, without
// charging it with the client's own lateness. It replays the run on an ideal
// client whose timers are exact: request k starts at max(intended(k), the ideal
// completion of k-1) and takes the service time observed (sent to done). A
// stalled reply thus delays every request scheduled behind it (coordinated
// omission corrected, as wrk2 does) while a timer that woke late, or a
// scheduler that ran us late, adds nothing (that is reported as send lag).
func coLatency(intended, idealPrevDone time.Time, service time.Duration) (time.Duration, time.Time) {
	start := intended
	if idealPrevDone.After(start) {
		start = idealPrevDone
	}
	done := start.Add(service)
	return done.Sub(intended), done
}

// TCP runs request/response over persistent connections on a constant-rate
// schedule and reports latency percentiles.
func TCP(ctx context.Context, cfg TCPConfig) (*TCPResult, error) {
	if err := cfg.normalize(); err != nil {
		return nil, configErr(err)
	}
	if err := ensureFiles(cfg.Connections, "connections"); err != nil {
		return nil, err
	}
	start := time.Now()
	m := newMAC(cfg.Key)
	timeout := time.Duration(cfg.Timeout)
	conns := make([]net.Conn, cfg.Connections)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	connectH := newShardedHist()
	var idleTimeout atomic.Uint64
	// Go's dialer turns TCP_NODELAY on for every connection it makes.
	var d contextDialer = &net.Dialer{Timeout: timeout}
	if cfg.Nagle {
		// Nagle is the kernel's default: a client that wants it does not
		// call setsockopt at all, so neither does the probe.
		d = kernelDefaults{timeout}
	}
	flags := uint8(0)
	if cfg.ServerNagle {
		flags |= flagServerNagle
	}
	err := dialAll(ctx, cfg.Connections, func(ctx context.Context, i int) error {
		t := time.Now()
		h := hello{Mode: modeRR, Flags: flags, ReqSize: uint32(cfg.Size), RespSize: uint32(cfg.Size), Nonce: randUint64(), Duration: int64(cfg.Duration)}
		c, acc, err := dialHello(ctx, d, cfg.Target, &h, m, timeout)
		if err != nil {
			return err
		}
		connectH.record(i, int64(time.Since(t)))
		idleTimeout.Store(acc.value)
		conns[i] = c
		return nil
	})
	if err != nil {
		return nil, err
	}
	perConn := time.Duration(float64(cfg.Connections) / cfg.Rate * 1e9)
	if idle := time.Duration(idleTimeout.Load()); idle > 0 && perConn >= idle {
		return nil, fmt.Errorf("rate %g/s over %d connections sends on each every %s: the reflector closes connections idle for %s; raise --rate", cfg.Rate, cfg.Connections, perConn, idle)
	}

	rtt := newShardedHist()
	service := newShardedHist()
	lag := newShardedHist()
	var (
		requests, errs   atomic.Int64
		failed           atomic.Int64
		kernelTS, userTS atomic.Int64
		errOnce          sync.Once
		errSample        string
		wg               sync.WaitGroup
		precise          = cfg.Connections <= preciseConns
	)
	runStart := time.Now().Add(20 * time.Millisecond)
	end := runStart.Add(time.Duration(cfg.Duration))
	blocks := newTimeBlocks(runStart, time.Duration(cfg.Duration))
	half := cfg.Size / 2
	wg.Add(cfg.Connections)
	for i, c := range conns {
		go func() {
			defer wg.Done()
			// fail ends this connection at its request k: that request
			// and every later one it was to send fail.
			fail := func(k int64, err error) {
				errs.Add(1)
				failed.Add(blocks.failRest(i, cfg.Connections, cfg.Rate, k, end))
				errOnce.Do(func() { errSample = err.Error() })
			}
			// A few connections get threads of their own: exact timers,
			// system calls that block the thread (poll), no netpoller
			// hand-off. Many connections share the runtime's threads and
			// its (millisecond) timers.
			var sl preciseSleeper
			if precise {
				sl = lockThread()
			}
			st, err := newTCPStream(ctx, c, precise, true)
			if err != nil {
				fail(0, err)
				return
			}
			buf := make([]byte, cfg.Size)
			var (
				idealDone time.Time
				deadline  time.Time // the conn's deadline (netpoller mode)
				timer     *time.Timer
			)
			if !precise {
				timer = time.NewTimer(time.Hour)
				timer.Stop()
				defer timer.Stop()
			}
			for k := int64(0); ; k++ {
				intended := schedule(runStart, i, cfg.Connections, cfg.Rate, k)
				if !intended.Before(end) {
					return
				}
				if precise {
					// Sleeping, not spinning, until the send time: on a
					// small machine a CPU kept busy sends the reflector's
					// wake-up to another CPU (an inter-processor interrupt,
					// slow in a VM), measured p50 40 µs against 17 µs.
					sl.until(intended)
					if ctx.Err() != nil {
						return
					}
				} else if w := time.Until(intended); w > 0 {
					timer.Reset(w)
					select {
					case <-ctx.Done():
						return
					case <-timer.C:
					}
				} else if ctx.Err() != nil {
					return
				}
				sent := time.Now()
				dl := sent.Add(timeout)
				if !precise && deadline.Before(dl) {
					// Moving a deadline is a timer operation: do it at
					// most every timeout/4, each request keeping at least
					// the full timeout.
					deadline = dl.Add(timeout / 4)
					_ = c.SetDeadline(deadline)
				}
				if cfg.Pattern == PatternWriteWriteRead {
					if err = st.write(buf[:half], dl); err == nil {
						err = st.write(buf[half:], dl)
					}
				} else {
					err = st.write(buf, dl)
				}
				var rx int64
				if err == nil {
					rx, err = st.readFull(buf, dl)
				}
				done := time.Now()
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					fail(k, err)
					return // the stream is out of step; this connection is done
				}
				svc := done.Sub(sent)
				// The kernel's receive time leaves our own wake-up out. It
				// is wall-clock time, so it is checked against the wall
				// readings: outside [sent, done] means the clock stepped.
				if kt := rx - sent.UnixNano(); rx != 0 && kt >= 0 && kt <= done.UnixNano()-sent.UnixNano() {
					svc = time.Duration(kt)
					kernelTS.Add(1)
				} else {
					userTS.Add(1)
				}
				requests.Add(1)
				lag.record(i, int64(sent.Sub(intended)))
				service.record(i, int64(svc))
				lat, ideal := coLatency(intended, idealDone, svc)
				rtt.record(i, int64(lat))
				blocks.record(intended, int64(lat))
				idealDone = ideal
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if requests.Load() == 0 {
		return nil, fmt.Errorf("tcp %s: no request answered (%s)", cfg.Target, errSample)
	}
	merged, svcH := rtt.merged(), service.merged()
	connected := 0
	for _, c := range conns {
		if c != nil {
			connected++
		}
	}
	return &TCPResult{
		Meta:        newMeta("tcp", cfg.Target, start),
		Config:      cfg,
		RTT:         summarize(merged),
		Connections: connected,
		Requests:    requests.Load(),
		Errors:      errs.Load(),
		Failed:      failed.Load(),
		ErrorSample: errSample,
		Service:     summarize(svcH),
		Timestamps:  timestampSource(kernelTS.Load(), userTS.Load()),
		Connect:     summarize(connectH.merged()),
		SendLag:     summarize(lag.merged()),
		Batches:     blocks.batches(),
		Histograms:  map[string]string{"rtt_ns": encodeHist(merged), "service_ns": encodeHist(svcH)},
	}, nil
}
