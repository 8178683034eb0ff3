//go:build linux

package lab

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// The lab's own sampler draws the RTT-over-time plots: a small echo server
// in the server namespace and a pinger in the client namespace. The probe
// library measures (its results are the metrics and expectations); the
// sampler only records when each reply came, which the probes summarise away.

// echo answers the samplers: UDP datagrams are sent back as they are; a TCP
// connection's first byte chooses Nagle (1) or TCP_NODELAY (0) for the
// server's side, then every 32-byte message is answered with 32 bytes in one
// write.
type echo struct {
	udp     *net.UDPConn
	tcp     net.Listener
	udpAddr string
	tcpAddr string
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   map[net.Conn]bool
}

const sampleSize = 32

func startEcho(ns *NS) (*echo, error) {
	e := &echo{conns: map[net.Conn]bool{}}
	if err := ns.Do(func() error {
		u, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(ServerAddr)})
		if err != nil {
			return err
		}
		l, err := net.Listen("tcp4", ServerAddr+":0")
		if err != nil {
			u.Close()
			return err
		}
		e.udp, e.tcp = u, l
		return nil
	}); err != nil {
		return nil, err
	}
	e.udpAddr, e.tcpAddr = e.udp.LocalAddr().String(), e.tcp.Addr().String()
	e.wg.Add(2)
	go func() {
		defer e.wg.Done()
		buf := make([]byte, 256)
		for {
			n, a, err := e.udp.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			_, _ = e.udp.WriteToUDPAddrPort(buf[:n], a)
		}
	}()
	go func() {
		defer e.wg.Done()
		for {
			c, err := e.tcp.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.conns[c] = true
			e.mu.Unlock()
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				defer func() { e.mu.Lock(); delete(e.conns, c); e.mu.Unlock(); c.Close() }()
				var mode [1]byte
				if _, err := io.ReadFull(c, mode[:]); err != nil {
					return
				}
				_ = c.(*net.TCPConn).SetNoDelay(mode[0] == 0)
				buf := make([]byte, sampleSize)
				for {
					_ = c.SetDeadline(time.Now().Add(time.Minute))
					if _, err := io.ReadFull(c, buf); err != nil {
						return
					}
					if _, err := c.Write(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	return e, nil
}

func (e *echo) close() {
	if e == nil {
		return
	}
	e.udp.Close()
	e.tcp.Close()
	e.mu.Lock()
	for c := range e.conns {
		c.Close()
	}
	e.mu.Unlock()
	e.wg.Wait()
}

// sampler records one RTT series.
type sampler struct {
	start  time.Time
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	tl     Timeline
}

func (s *sampler) add(sent time.Time, rtt time.Duration) {
	s.mu.Lock()
	s.tl.Points = append(s.tl.Points, [2]float64{round3(sent.Sub(s.start).Seconds()), round3(float64(rtt) / 1e6)})
	s.mu.Unlock()
}

func (s *sampler) lost(sent time.Time) {
	s.mu.Lock()
	s.tl.Lost = append(s.tl.Lost, round3(sent.Sub(s.start).Seconds()))
	s.mu.Unlock()
}

// mark records that a measurement phase began at offset from the start.
func (s *sampler) mark(name string, offset time.Duration) {
	if s == nil {
		return
	}
	s.mu.Lock()
	if s.tl.Phases == nil {
		s.tl.Phases = map[string]float64{}
	}
	s.tl.Phases[name] = round3(offset.Seconds())
	s.mu.Unlock()
}

// stop ends sampling and returns the series.
func (s *sampler) stop() *Timeline {
	if s == nil {
		return nil
	}
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	tl := s.tl
	return &tl
}

// startUDPSampler pings the echo server from ns every interval.
func startUDPSampler(ctx context.Context, ns *NS, addr string, interval time.Duration) (*sampler, error) {
	var conn *net.UDPConn
	if err := ns.Do(func() error {
		ua, err := net.ResolveUDPAddr("udp4", addr)
		if err != nil {
			return err
		}
		conn, err = net.DialUDP("udp4", nil, ua)
		return err
	}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &sampler{start: time.Now(), cancel: cancel, done: make(chan struct{})}
	s.tl.Source = "udp ping every " + interval.String() + " (lab sampler)"
	var mu sync.Mutex
	pending := map[uint64]time.Time{}
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		buf := make([]byte, 256)
		for {
			n, err := conn.Read(buf)
			now := time.Now()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			if n < 8 {
				continue
			}
			seq := binary.BigEndian.Uint64(buf)
			mu.Lock()
			sent, ok := pending[seq]
			delete(pending, seq)
			mu.Unlock()
			if ok {
				s.add(sent, now.Sub(sent))
			}
		}
	}()
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		msg := make([]byte, sampleSize)
		for seq := uint64(0); ; seq++ {
			now := time.Now()
			binary.BigEndian.PutUint64(msg, seq)
			mu.Lock()
			pending[seq] = now
			mu.Unlock()
			_, _ = conn.Write(msg)
			select {
			case <-ctx.Done():
				// Late replies get twice the largest RTT seen (a bloated
				// buffer delivers seconds later), then count as lost.
				s.mu.Lock()
				var worst float64
				for _, p := range s.tl.Points {
					worst = max(worst, p[1])
				}
				s.mu.Unlock()
				time.Sleep(min(max(time.Duration(2*worst*1e6), 10*interval), 6*time.Second))
				conn.Close()
				<-recvDone
				mu.Lock()
				for _, sent := range pending {
					s.lost(sent)
				}
				mu.Unlock()
				s.mu.Lock()
				sortPoints(s.tl.Points)
				s.mu.Unlock()
				return
			case <-t.C:
			}
		}
	}()
	return s, nil
}

// startTCPSampler sends a write-write-read exchange (16 + 16 bytes, then a
// 32-byte reply) every interval over one connection, with Nagle on both ends
// or TCP_NODELAY on both, as the measured application does.
func startTCPSampler(ctx context.Context, ns *NS, addr string, interval time.Duration, nagle bool) (*sampler, error) {
	var conn *net.TCPConn
	if err := ns.Do(func() error {
		c, err := net.DialTimeout("tcp4", addr, 5*time.Second)
		if err != nil {
			return err
		}
		conn = c.(*net.TCPConn)
		return nil
	}); err != nil {
		return nil, err
	}
	_ = conn.SetNoDelay(!nagle)
	mode := []byte{0}
	if nagle {
		mode[0] = 1
	}
	if _, err := conn.Write(mode); err != nil {
		conn.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &sampler{start: time.Now(), cancel: cancel, done: make(chan struct{})}
	s.tl.Source = "tcp write-write-read every " + interval.String() + " (lab sampler)"
	if nagle {
		s.tl.Source += ", Nagle on"
	} else {
		s.tl.Source += ", TCP_NODELAY"
	}
	go func() {
		defer close(s.done)
		defer conn.Close()
		stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
		defer stop()
		buf := make([]byte, sampleSize)
		next := time.Now()
		for ctx.Err() == nil {
			if w := time.Until(next); w > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(w):
				}
			}
			next = next.Add(interval)
			sent := time.Now()
			_ = conn.SetDeadline(sent.Add(5 * time.Second))
			if _, err := conn.Write(buf[:sampleSize/2]); err != nil {
				return
			}
			if _, err := conn.Write(buf[sampleSize/2:]); err != nil {
				return
			}
			if _, err := io.ReadFull(conn, buf); err != nil {
				if ctx.Err() == nil {
					s.lost(sent)
				}
				return
			}
			s.add(sent, time.Since(sent))
		}
	}()
	return s, nil
}

func sortPoints(p [][2]float64) {
	// Replies arrive in order except under reordering: insertion sort.
	for i := 1; i < len(p); i++ {
		for j := i; j > 0 && p[j][0] < p[j-1][0]; j-- {
			p[j], p[j-1] = p[j-1], p[j]
		}
	}
}

func round3(x float64) float64 {
	return float64(int64(x*1000+0.5)) / 1000
}
