package pathprobe

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// runTCP sends SYNs with growing TTLs from one source port, one at a time:
// a connect whose SYN expires at a router fails with that router's ICMP in
// the socket's error queue (IP_RECVERR); one that reaches the destination
// connects, or is refused, and is reset at once (SO_LINGER 0, so the
// 4-tuple is free for the next probe). The same 4-tuple cannot be in two
// connects at once, hence one probe in flight.
func runTCP(ctx context.Context, cfg *Config, addr netip.Addr, port, flow int) ([]rawHop, int, runOut, error) {
	raw := make([]rawHop, cfg.MaxHops)
	destTTL := 0
	start := time.Now()
	next := start
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	var err error
	// The first connect finds a free source port at or after flow.
	flow, err = freeTCPPort(addr, flow)
	if err != nil {
		return nil, 0, runOut{}, err
	}
	var label uint32
	if addr.Is6() {
		label = tcpFlowLabel(addr, flow)
	}
	for round := 0; round < cfg.Count && ctx.Err() == nil; round++ {
		limit := cfg.MaxHops
		if destTTL > 0 {
			limit = destTTL
		}
		for ttl := 1; ttl <= limit && ctx.Err() == nil; ttl++ {
			raw[ttl-1].sent++
			at := time.Since(start)
			r, dest, err := tcpProbe(ctx, addr, port, flow, label, ttl, cfg.Timeout)
			if err != nil {
				return nil, 0, runOut{}, err
			}
			if r == nil {
				raw[ttl-1].probes = append(raw[ttl-1].probes, probeOut{at: at})
				continue
			}
			raw[ttl-1].probes = append(raw[ttl-1].probes, probeOut{at: at, rx: at + time.Duration(r.rtt*1e3), answered: true})
			raw[ttl-1].replies = append(raw[ttl-1].replies, *r)
			if dest {
				if destTTL == 0 || ttl < destTTL {
					destTTL = ttl
				}
				break
			}
		}
		if cfg.Progress != nil {
			cfg.Progress(round+1, cfg.Count)
		}
		next = next.Add(cfg.Interval)
		if round < cfg.Count-1 && !sleep(ctx, t, time.Until(next)) {
			break
		}
	}
	if destTTL > 0 {
		raw = raw[:destTTL]
		for i := range raw {
			// A round stops at the destination; rounds before it was
			// known may have sent past it.
			raw[i].sent = min(raw[i].sent, cfg.Count)
		}
	}
	return raw, destTTL, runOut{flow: flow, label: label, socket: "recverr"}, nil
}

// tcpFlowLabel leases the flow's IPv6 label on a socket of the run's
// source port, for every probe's socket to lease again; 0 when the kernel
// gives none (each SYN then carries the kernel's own).
func tcpFlowLabel(addr netip.Addr, flow int) uint32 {
	fd, err := tcpSocket(addr, flow)
	if err != nil {
		return 0
	}
	defer unix.Close(fd)
	label, _ := pickFlowLabel(fd, addr, flow)
	return label
}

// freeTCPPort finds a source port at or after flow that binds.
func freeTCPPort(addr netip.Addr, flow int) (int, error) {
	var last error
	for i := range 64 {
		p := 1 + (flow-1+i)%65535
		fd, err := tcpSocket(addr, p)
		if err == nil {
			unix.Close(fd)
			return p, nil
		}
		last = err
	}
	return 0, fmt.Errorf("probe socket: no free source port from %d: %w", flow, last)
}

func tcpSocket(addr netip.Addr, port int) (int, error) {
	fam := unix.AF_INET
	var sa unix.Sockaddr = &unix.SockaddrInet4{Port: port}
	if addr.Is6() {
		fam, sa = unix.AF_INET6, &unix.SockaddrInet6{Port: port}
	}
	fd, err := unix.Socket(fam, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// tcpProbe makes one connect with the given TTL and waits for its outcome:
// a router's ICMP (a hop), the destination's SYN-ACK or RST, or nothing
// within the timeout (nil).
func tcpProbe(ctx context.Context, addr netip.Addr, port, flow int, label uint32, ttl int, timeout time.Duration) (*reply, bool, error) {
	fd, err := tcpSocket(addr, flow)
	if err != nil {
		return nil, false, fmt.Errorf("probe socket: bind source port %d: %w", flow, err)
	}
	defer unix.Close(fd)
	v6 := addr.Is6()
	var dst unix.Sockaddr
	if v6 {
		dst = &unix.SockaddrInet6{Addr: addr.As16(), Port: port}
		err = errors.Join(unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_RECVERR, 1), unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_UNICAST_HOPS, ttl))
	} else {
		dst = &unix.SockaddrInet4{Addr: addr.As4(), Port: port}
		err = errors.Join(unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_RECVERR, 1), unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_TTL, ttl))
	}
	if err != nil {
		return nil, false, fmt.Errorf("probe socket: %w", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	_ = unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	s := &sock{fd: fd, v6: v6, proto: TCP}
	connect := func() error { return unix.Connect(fd, dst) }
	if label != 0 {
		// The label lingers a few seconds after the last probe's socket
		// closed; past that it is created again.
		if err := leaseFlowLabel(fd, addr, label); err != nil {
			return nil, false, fmt.Errorf("probe socket: flow label %#x: %w", label, err)
		}
		connect = func() error { return connectLabelled(fd, addr, port, label) }
	}
	sent := time.Now()
	if err := connect(); err != nil && err != unix.EINPROGRESS {
		if errors.Is(err, unix.ENETUNREACH) || errors.Is(err, unix.EHOSTUNREACH) {
			return nil, false, fmt.Errorf("connect %s: %w", netip.AddrPortFrom(addr, uint16(port)), err)
		}
		return nil, false, fmt.Errorf("connect: %w", err)
	}
	deadline := sent.Add(timeout)
	buf := make([]byte, 256)
	oob := make([]byte, 512)
	for {
		wait := time.Until(deadline)
		if wait <= 0 || ctx.Err() != nil {
			return nil, false, nil
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, err := unix.Poll(pfd, int(min(wait, 50*time.Millisecond)/time.Millisecond)+1)
		if err == unix.EINTR || n == 0 {
			continue
		}
		if err != nil {
			return nil, false, fmt.Errorf("poll: %w", err)
		}
		if m, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_ERRQUEUE); err == nil {
			if ev, ok := s.parseErr(buf[:m], oob[:oobn]); ok {
				dest := ev.from == addr
				return &reply{addr: ev.from.String(), rtt: float64(ev.rx.Sub(sent).Nanoseconds()) / 1e3, dest: dest}, dest, nil
			}
		}
		soErr, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		rtt := float64(time.Since(sent).Nanoseconds()) / 1e3
		switch {
		case soErr == 0 && pfd[0].Revents&unix.POLLOUT != 0:
			return &reply{addr: addr.String(), rtt: rtt, dest: true}, true, nil // SYN-ACK
		case soErr == int(unix.ECONNREFUSED):
			return &reply{addr: addr.String(), rtt: rtt, dest: true}, true, nil // RST
		case soErr != 0:
			// An ICMP error with nothing queued (another origin): no reply.
			return nil, false, nil
		}
	}
}
