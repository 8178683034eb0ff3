//go:build linux

package lab

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// egressTimer measures what runbook 000 reports as the server's queueing
// delay: how long the server's packets wait in its egress qdisc. The server
// sends a game update (160 bytes, DSCP EF) to the client at a tick rate; the
// kernel stamps each one when it enters the qdisc (SOF_TIMESTAMPING_TX_SCHED)
// and when the NIC's driver takes it (the transmit software stamp, which veth
// takes in its xmit). Both are kernel times on one clock, so no thread's
// scheduling is inside the interval: a measurement that holds on a busy
// machine, where the round trip through two user-space programs does not.
type egressTimer struct {
	fd     int
	sink   *net.UDPConn
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	phase string
	sent  map[uint32]string // id → phase it was sent in
	sched map[uint32]int64  // id → entered the qdisc (ns)
	snd   map[uint32]int64  // id → left for the wire (ns)
	err   error
}

// egressPayload is the size of a game update.
const egressPayload = 160

// startEgressTimer starts the server's game updates toward a sink in the
// client namespace, every interval, unlabelled until phase is called.
func startEgressTimer(ctx context.Context, server, client *NS, interval time.Duration) (*egressTimer, error) {
	g := &egressTimer{fd: -1, sent: map[uint32]string{}, sched: map[uint32]int64{}, snd: map[uint32]int64{}, done: make(chan struct{})}
	if err := client.Do(func() error {
		var err error
		g.sink, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(ClientAddr)})
		return err
	}); err != nil {
		return nil, fmt.Errorf("egress timer: sink in %s: %w", client.Name, err)
	}
	sinkAddr := g.sink.LocalAddr().(*net.UDPAddr)
	if err := server.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("socket: %w", err)
		}
		g.fd = fd
		flags := unix.SOF_TIMESTAMPING_TX_SCHED | unix.SOF_TIMESTAMPING_TX_SOFTWARE | unix.SOF_TIMESTAMPING_SOFTWARE |
			unix.SOF_TIMESTAMPING_OPT_ID | unix.SOF_TIMESTAMPING_OPT_TSONLY
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPING, flags); err != nil {
			return fmt.Errorf("SO_TIMESTAMPING: %w", err)
		}
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_TOS, 46<<2); err != nil {
			return fmt.Errorf("IP_TOS EF: %w", err)
		}
		sa := &unix.SockaddrInet4{Port: sinkAddr.Port}
		copy(sa.Addr[:], sinkAddr.IP.To4())
		if err := unix.Connect(fd, sa); err != nil {
			return fmt.Errorf("connect %s: %w", sinkAddr, err)
		}
		return nil
	}); err != nil {
		g.close()
		return nil, fmt.Errorf("egress timer: sender in %s: %w", server.Name, err)
	}
	go func() {
		buf := make([]byte, 512)
		for {
			if _, err := g.sink.Read(buf); err != nil {
				return
			}
		}
	}()
	ctx, g.cancel = context.WithCancel(ctx)
	go g.run(ctx, interval)
	return g, nil
}

// mark labels the updates sent from now on ("" leaves them out).
func (g *egressTimer) mark(phase string) {
	g.mu.Lock()
	g.phase = phase
	g.mu.Unlock()
}

func (g *egressTimer) run(ctx context.Context, interval time.Duration) {
	defer close(g.done)
	payload := make([]byte, egressPayload)
	t := time.NewTicker(interval)
	defer t.Stop()
	var id uint32 // OPT_ID numbers the datagrams sent from 0
	for {
		select {
		case <-ctx.Done():
			// The last updates' stamps arrive once they have left.
			time.Sleep(50 * time.Millisecond)
			g.drain()
			return
		case <-t.C:
		}
		binary.BigEndian.PutUint32(payload, id)
		if _, err := unix.Write(g.fd, payload); err != nil {
			g.fail(fmt.Errorf("send: %w", err))
			return
		}
		g.mu.Lock()
		g.sent[id] = g.phase
		g.mu.Unlock()
		id++
		g.drain()
	}
}

func (g *egressTimer) fail(err error) {
	g.mu.Lock()
	if g.err == nil {
		g.err = err
	}
	g.mu.Unlock()
}

// drain reads the stamps queued on the socket's error queue.
func (g *egressTimer) drain() {
	oob := make([]byte, 512)
	for {
		_, oobn, _, _, err := unix.Recvmsg(g.fd, nil, oob, unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			return
		}
		if err != nil {
			g.fail(fmt.Errorf("read timestamps: %w", err))
			return
		}
		kind, id, ns, ok := parseTxStamp(oob[:oobn])
		if !ok {
			continue
		}
		g.mu.Lock()
		switch kind {
		case unix.SCM_TSTAMP_SCHED:
			g.sched[id] = ns
		case unix.SCM_TSTAMP_SND:
			g.snd[id] = ns
		}
		g.mu.Unlock()
	}
}

// parseTxStamp reads one error-queue message: the software stamp
// (SCM_TIMESTAMPING's first timespec) and, from the extended error, which
// stamp it is and the datagram's OPT_ID.
func parseTxStamp(oob []byte) (kind, id uint32, ns int64, ok bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, 0, 0, false
	}
	var haveTS, haveErr bool
	for _, m := range msgs {
		switch {
		case m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPING && len(m.Data) >= 16:
			sec := int64(binary.NativeEndian.Uint64(m.Data[0:8]))
			nsec := int64(binary.NativeEndian.Uint64(m.Data[8:16]))
			ns, haveTS = sec*1e9+nsec, sec != 0 || nsec != 0
		case m.Header.Level == unix.SOL_IP && m.Header.Type == unix.IP_RECVERR && len(m.Data) >= 16:
			if m.Data[4] != unix.SO_EE_ORIGIN_TIMESTAMPING {
				continue
			}
			kind = binary.NativeEndian.Uint32(m.Data[8:12])
			id = binary.NativeEndian.Uint32(m.Data[12:16])
			haveErr = true
		}
	}
	return kind, id, ns, haveTS && haveErr
}

// egressPhase is what the timer saw in one phase.
type egressPhase struct {
	// Waits are each update's time in the qdisc, sorted.
	Waits []time.Duration
	// Sent counts the updates sent; those without both stamps were dropped
	// in the qdisc (or their stamps were lost).
	Sent int
}

// stop ends the updates and returns what each phase saw.
func (g *egressTimer) stop() (map[string]*egressPhase, error) {
	g.cancel()
	<-g.done
	g.close()
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]*egressPhase{}
	for id, phase := range g.sent {
		if phase == "" {
			continue
		}
		p := out[phase]
		if p == nil {
			p = &egressPhase{}
			out[phase] = p
		}
		p.Sent++
		s, ok1 := g.sched[id]
		d, ok2 := g.snd[id]
		if ok1 && ok2 && d >= s {
			p.Waits = append(p.Waits, time.Duration(d-s))
		}
	}
	for _, p := range out {
		slices.Sort(p.Waits)
	}
	return out, g.err
}

func (g *egressTimer) close() {
	if g.fd >= 0 {
		unix.Close(g.fd)
		g.fd = -1
	}
	if g.sink != nil {
		g.sink.Close()
	}
}

// quantile is the q-quantile of sorted durations (nearest rank), in ms.
func quantile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	i = min(max(i, 0), len(sorted)-1)
	return round3(float64(sorted[i]) / 1e6)
}

// meanMS is the mean of durations, in ms.
func meanMS(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return round3(float64(sum) / float64(len(ds)) / 1e6)
}
