package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// ErrNoReplies means the reflector never answered: the key is wrong (it drops
// what it cannot authenticate, silently, by design), or nothing reachable
// listens there.
var ErrNoReplies = errors.New("no replies: wrong key or unreachable")

var errRecvTimeout = errors.New("receive timeout")

// UDPConfig is one UDP probe run. It is embedded verbatim in the result.
type UDPConfig struct {
	Target   string   `json:"target"`
	Interval Duration `json:"interval"`
	Duration Duration `json:"duration"`
	// Size is the UDP payload size in bytes, 48..65507 (80.. with a key: the
	// HMAC takes 32; smaller sizes are raised to the minimum).
	Size int `json:"size"`
	// DSCP (0..63) marks the probes (IP_TOS / IPV6_TCLASS); the reflector
	// marks each reply with the DSCP its probe arrived with.
	DSCP int `json:"dscp"`
	// Wait is how long to wait for late replies after the last send; 0 means
	// 3 × the largest RTT seen, between 200 ms and 3 s.
	Wait          Duration `json:"wait"`
	Authenticated bool     `json:"authenticated"`
	Key           []byte   `json:"-"`
	// Force allows durations above MaxDuration.
	Force bool `json:"-"`
}

// UDPResult is the outcome of a UDP probe run.
type UDPResult struct {
	Meta
	Config UDPConfig   `json:"config"`
	RTT    Percentiles `json:"rtt_us"`
	// Jitter is RFC 3550's interarrival jitter of the RTT, µs.
	Jitter float64 `json:"jitter_us"`
	// IPDV is |RTT(n) − RTT(n−1)| over consecutive sequence numbers (RFC 5481).
	IPDV IPDV `json:"ipdv_us"`
	// PDV is RFC 5481's packet delay variation reported as p99 − min, µs.
	PDV        float64 `json:"pdv_us"`
	Sent       int64   `json:"sent"`
	Received   int64   `json:"received"`
	Loss       Loss    `json:"loss"`
	Duplicates int64   `json:"duplicates"`
	Reordered  int64   `json:"reordered"`
	// Timestamps says where receive times came from: "kernel" (SO_TIMESTAMPNS
	// on every reply) or "userspace" (read time, includes our wake-up latency).
	Timestamps string `json:"timestamps"`
	// DSCP is the marking sent, seen by the reflector, and seen on replies.
	DSCP DSCPReport `json:"dscp"`
	// SendLag is how late sends left against the intended schedule, µs.
	SendLag Percentiles `json:"send_lag_us"`
	// Batches are the figures of each fifth of the run, in send order.
	Batches *Batches `json:"batches,omitempty"`
	// Histograms holds the raw HDR histograms (ns), standard compressed encoding.
	Histograms map[string]string `json:"histograms"`
}

// IPDV percentiles, µs.
type IPDV struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

func (c *UDPConfig) normalize() error {
	if c.Interval == 0 {
		c.Interval = Duration(10 * time.Millisecond)
	}
	if c.Duration == 0 {
		c.Duration = Duration(10 * time.Second)
	}
	if c.Size == 0 {
		c.Size = 64
	}
	c.Authenticated = len(c.Key) > 0
	iv, d := time.Duration(c.Interval), time.Duration(c.Duration)
	switch {
	case iv < MinInterval:
		return fmt.Errorf("interval %s: must be at least %s", iv, MinInterval)
	case iv > MaxInterval:
		return fmt.Errorf("interval %s: must be at most %s", iv, MaxInterval)
	case c.Size < 0 || c.Size > MaxMessage:
		return fmt.Errorf("size %d: must be at most %d bytes (largest UDP payload)", c.Size, MaxMessage)
	case c.DSCP < 0 || c.DSCP > 63:
		return fmt.Errorf("dscp %d: must be 0..63", c.DSCP)
	case c.Wait < 0 || time.Duration(c.Wait) > time.Minute:
		return fmt.Errorf("wait %s: must be 0..1m", time.Duration(c.Wait))
	}
	if err := checkDuration("duration", d, c.Force); err != nil {
		return err
	}
	if d < iv {
		return fmt.Errorf("duration %s: shorter than the interval %s", d, iv)
	}
	if d/iv > maxProbes {
		return fmt.Errorf("duration/interval = %d probes: at most %d per run", d/iv, maxProbes)
	}
	c.Size = max(c.Size, minPacket(c.Authenticated))
	return nil
}

// resolveUDP resolves host:port to one address.
func resolveUDP(target string) (netip.AddrPort, error) {
	ua, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("resolve %s: %w", target, err)
	}
	return ua.AddrPort(), nil
}

// udpClient is one session with a reflector.
type udpClient struct {
	sock    *udpSock
	m       *mac
	cfg     *UDPConfig
	session uint64
	kernel  bool
}

// openSession asks the reflector for a session, retrying for up to 3 s.
func openUDP(ctx context.Context, cfg *UDPConfig) (*udpClient, error) {
	dst, err := resolveUDP(cfg.Target)
	if err != nil {
		return nil, err
	}
	sock, err := dialUDPSock(dst)
	if err != nil {
		return nil, err
	}
	c := &udpClient{sock: sock, m: newMAC(cfg.Key), cfg: cfg}
	c.kernel = sock.kernelTimestamps()
	sock.recvTOS()
	if cfg.DSCP != 0 {
		if err := sock.setDSCP(cfg.DSCP); err != nil {
			sock.close()
			return nil, err
		}
	}
	nonce := randUint64()
	buf := make([]byte, 65536)
	oob := make([]byte, oobSize)
	req := make([]byte, minPacket(c.m != nil))
	encodeUDP(req, &packet{Type: pktOpen, Nonce: nonce, A: uint64(cfg.Interval), B: uint64(cfg.Duration), Size: uint32(cfg.Size), DSCP: uint8(cfg.DSCP)}, c.m)
	deadline := time.Now().Add(3 * time.Second)
	var lastSend time.Time
	for time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			sock.close()
			return nil, err
		}
		if time.Since(lastSend) >= 250*time.Millisecond {
			if err := sock.send(req); err != nil && !errors.Is(err, syscall.ECONNREFUSED) {
				sock.close()
				return nil, fmt.Errorf("udp %s: send: %w", cfg.Target, err)
			}
			lastSend = time.Now()
		}
		n, _, err := sock.recv(buf, oob)
		if err == errRecvTimeout {
			continue
		}
		if err != nil {
			sock.close()
			if isConnRefused(err) {
				return nil, fmt.Errorf("udp %s: connection refused (is a reflector listening there?)", cfg.Target)
			}
			return nil, fmt.Errorf("udp %s: receive: %w", cfg.Target, err)
		}
		p, err := decodeUDP(buf[:n], c.m)
		if err != nil || p.Nonce != nonce {
			continue
		}
		switch p.Type {
		case pktOpenOK:
			c.session = p.Session
			return c, nil
		case pktRefused:
			sock.close()
			return nil, &RefusedError{Code: int(p.Code), Limit: p.A}
		}
	}
	sock.close()
	return nil, fmt.Errorf("udp %s: %w", cfg.Target, ErrNoReplies)
}

// ring slots remember send times by sequence number for the receiver.
const txRing = 1 << 16

type txSlot struct {
	seq atomic.Int64
	tx  atomic.Int64
}

// UDP runs an isochronous UDP probe against a reflector: probes leave on the
// intended schedule whatever the replies do, and each reply's RTT is the
// kernel receive time minus the send time minus the reflector's processing.
// Sockets are created on the calling goroutine's thread.
func UDP(ctx context.Context, cfg UDPConfig) (*UDPResult, error) {
	if err := cfg.normalize(); err != nil {
		return nil, configErr(err)
	}
	start := time.Now()
	c, err := openUDP(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	defer c.sock.close()
	count := int(time.Duration(cfg.Duration) / time.Duration(cfg.Interval))
	stats := newUDPStats(count)
	lag := newHist()
	ring := make([]txSlot, txRing)
	for i := range ring {
		ring[i].seq.Store(-1)
	}

	var (
		sent     atomic.Int64
		sendDone atomic.Bool
		recvStop atomic.Int64 // ns deadline for the receiver, 0: none yet
		kernelTS atomic.Bool
		userTS   atomic.Bool
		maxRTT   atomic.Int64
		wg       sync.WaitGroup
		sendErr  error
		recvErr  error
	)
	kernelTS.Store(false)
	interval := time.Duration(cfg.Interval)
	t0 := time.Now().Add(time.Millisecond)

	// handle processes one datagram; the receiver goroutine owns stats.
	var upDSCP, downDSCP dscpCounts
	var dscpChanged int64
	handle := func(b []byte, oob []byte) {
		meta := parseRxMeta(oob)
		rx, ok := meta.ts, c.kernel && meta.hasTS
		if !ok {
			rx = time.Now().UnixNano()
			userTS.Store(true)
		} else {
			kernelTS.Store(true)
		}
		p, err := decodeUDP(b, c.m)
		if err != nil || p.Type != pktReply || p.Session != c.session || int64(p.Seq) >= sent.Load() {
			return
		}
		changed := false
		if meta.hasTOS {
			d := int(meta.tos >> 2)
			downDSCP[d]++
			changed = d != cfg.DSCP
		}
		if p.SrvDSCP&dscpKnown != 0 {
			d := int(p.SrvDSCP &^ dscpKnown)
			upDSCP[d]++
			changed = changed || d != cfg.DSCP
		}
		if changed {
			dscpChanged++
		}
		tx := p.ClientTx
		if s := &ring[p.Seq%txRing]; s.seq.Load() == int64(p.Seq) {
			tx = s.tx.Load()
		}
		rtt := rx - tx - max(p.SrvProc, 0)
		if rtt > maxRTT.Load() {
			maxRTT.Store(rtt)
		}
		stats.add(p.Seq, rtt, p.SrvRecv)
	}

	sendFinished := make(chan struct{})
	wg.Add(2)
	go func() { // sender
		defer wg.Done()
		defer close(sendFinished)
		defer sendDone.Store(true)
		sl := lockThread()
		sm := newMAC(cfg.Key) // the receiver verifies with c.m; hashes are not shareable
		buf := make([]byte, cfg.Size)
		pk := packet{Type: pktProbe, Session: c.session}
		for i := 0; i < count; i++ {
			intended := t0.Add(time.Duration(i) * interval)
			sl.until(intended)
			if ctx.Err() != nil {
				return
			}
			now := time.Now()
			record(lag, int64(now.Sub(intended)))
			pk.Seq = uint32(i)
			pk.ClientTx = now.UnixNano()
			slot := &ring[i%txRing]
			slot.tx.Store(pk.ClientTx)
			slot.seq.Store(int64(i))
			encodeUDP(buf, &pk, sm)
			sent.Store(int64(i + 1))
			if err := c.sock.send(buf); err != nil && !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOBUFS) {
				sendErr = fmt.Errorf("udp %s: send: %w", cfg.Target, err)
				return
			}
		}
	}()
	go func() { // receiver
		defer wg.Done()
		lockThread()
		buf := make([]byte, 65536)
		oob := make([]byte, oobSize)
		for {
			if stop := recvStop.Load(); stop != 0 && time.Now().UnixNano() >= stop {
				return
			}
			if sendDone.Load() && stats.received == sent.Load() {
				return
			}
			n, oobn, err := c.sock.recv(buf, oob)
			if err == errRecvTimeout {
				if ctx.Err() != nil && recvStop.Load() == 0 {
					recvStop.Store(time.Now().Add(200 * time.Millisecond).UnixNano())
				}
				continue
			}
			if err != nil {
				if isConnRefused(err) {
					// An ICMP error for an earlier probe; keep listening.
					continue
				}
				recvErr = fmt.Errorf("udp %s: receive: %w", cfg.Target, err)
				return
			}
			handle(buf[:n], oob[:oobn])
		}
	}()

	// Once sending ends, give late replies a bounded wait.
	<-sendFinished
	wait := time.Duration(cfg.Wait)
	if wait == 0 {
		wait = min(max(3*time.Duration(maxRTT.Load()), 200*time.Millisecond), 3*time.Second)
	}
	recvStop.CompareAndSwap(0, time.Now().Add(wait).UnixNano())
	wg.Wait()
	if sendErr != nil {
		return nil, sendErr
	}
	if recvErr != nil {
		return nil, recvErr
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	nsent := sent.Load()
	if stats.received == 0 {
		return nil, fmt.Errorf("udp %s: %d probes sent: %w", cfg.Target, nsent, ErrNoReplies)
	}
	srvRecv, throttled := c.close(stats, handle)

	res := &UDPResult{
		Meta:       newMeta("udp", cfg.Target, start),
		Config:     cfg,
		RTT:        summarize(stats.rtt),
		Jitter:     round3(stats.jitter / 1e3),
		Sent:       nsent,
		Received:   stats.received,
		Loss:       stats.loss(nsent, srvRecv, throttled),
		Duplicates: stats.duplicates,
		Reordered:  stats.reordered,
		Timestamps: "userspace",
		DSCP:       DSCPReport{Sent: DSCPName(cfg.DSCP), ReflectorReceived: upDSCP.mode(), Received: downDSCP.mode(), Changed: dscpChanged},
		SendLag:    summarize(lag),
		Batches:    stats.batches(nsent),
		Histograms: map[string]string{"rtt_ns": encodeHist(stats.rtt), "ipdv_ns": encodeHist(stats.ipdv)},
	}
	if kernelTS.Load() && !userTS.Load() {
		res.Timestamps = "kernel"
	}
	res.IPDV = IPDV{P50: us(pctOrZero(stats.ipdv, 50)), P99: us(pctOrZero(stats.ipdv, 99))}
	res.PDV = round3(res.RTT.P99 - res.RTT.Min)
	return res, nil
}

func pctOrZero(h *hdrhistogram.Histogram, q float64) int64 {
	if h.TotalCount() == 0 {
		return 0
	}
	return h.ValueAtQuantile(q)
}

// close asks the reflector for its final count of unique probes received,
// and of those its rate limit dropped (three tries, 300 ms each). Replies
// still arriving are counted. It returns -1, 0 when the reflector does not
// answer.
func (c *udpClient) close(stats *udpStats, handle func(b, oob []byte)) (received, throttled int64) {
	nonce := randUint64()
	req := make([]byte, minPacket(c.m != nil))
	encodeUDP(req, &packet{Type: pktClose, Session: c.session, Nonce: nonce}, c.m)
	buf := make([]byte, 65536)
	oob := make([]byte, oobSize)
	for try := 0; try < 3; try++ {
		if err := c.sock.send(req); err != nil {
			return -1, 0
		}
		end := time.Now().Add(300 * time.Millisecond)
		for time.Now().Before(end) {
			n, oobn, err := c.sock.recv(buf, oob)
			if err != nil {
				if err == errRecvTimeout {
					continue
				}
				return -1, 0
			}
			p, err := decodeUDP(buf[:n], c.m)
			if err == nil && p.Type == pktClosed && p.Nonce == nonce && p.Session == c.session {
				return int64(p.Seq), int64(p.Throttled)
			}
			if err == nil && p.Type == pktReply {
				handle(buf[:n], oob[:oobn])
			}
		}
	}
	return -1, 0
}
