package passive

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/lowlat/lowlat/internal/nsthread"
	"github.com/lowlat/lowlat/internal/sockets"
)

// SampleInterval is how often OpenSampled reads tcp_info.
const SampleInterval = time.Second

// OpenSampled measures TCP RTT without BPF, for hosts where Open cannot
// load its programs: every SampleInterval it reads the smoothed RTT of each
// established connection on cfg's TCP ports (local or remote) from tcp_info
// through sock_diag. Its series are marked Sampled: one value per connection
// per interval, the kernel's smoothed estimate, not every ACK's sample, and
// retransmits are tcp_info's running total, not counted as they happen.
// Egress, the receive path and first bytes need BPF and are not measured.
func OpenSampled(cfg Config) (*Session, error) {
	var ports []uint16
	s := &Session{cfg: cfg, stop: make(chan struct{}), sampledIdx: map[uint16]int{}}
	for _, p := range cfg.Ports {
		if p.Proto == "tcp" {
			s.sampledIdx[p.Port] = len(s.layout)
			s.layout = append(s.layout, Series{Measure: RTT, Proto: "tcp", Port: p.Port, Queue: -1, Sampled: true})
			ports = append(ports, p.Port)
		}
	}
	if len(ports) == 0 {
		return nil, fmt.Errorf("passive: sampling from tcp_info covers TCP RTT only: name a TCP port")
	}
	ns, err := nsthread.Current()
	if err != nil {
		return nil, err
	}
	s.sampled = make([]Series, len(s.layout))
	copy(s.sampled, s.layout)
	// A first read, so a sock_diag that fails does so here, in one line.
	if _, err := sockets.Connections(); err != nil {
		ns.Close()
		return nil, fmt.Errorf("passive: read tcp_info (sock_diag): %w", err)
	}
	s.Hooks = []string{"tcp_info via sock_diag, sampled every " + SampleInterval.String()}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer ns.Close()
		// The sock_diag socket must be opened in the caller's namespace.
		if err := ns.Join(); err != nil {
			return
		}
		t := time.NewTicker(SampleInterval)
		defer t.Stop()
		retrans := map[string]uint32{}
		for {
			s.sample(retrans)
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s, nil
}

// sample reads every connection once.
func (s *Session) sample(retrans map[string]uint32) {
	conns, err := sockets.Connections()
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for _, c := range conns {
		if c.TCPInfo == nil {
			continue
		}
		i, ok := s.sampledIdx[portOf(c.Local)]
		if !ok {
			if i, ok = s.sampledIdx[portOf(c.Remote)]; !ok {
				continue
			}
		}
		ser := &s.sampled[i]
		ns := uint64(c.TCPInfo.RTTus) * 1000
		ser.Hist.Counts[Bucket(ns)]++
		ser.Hist.SumNs += ns
		id := c.Local + " " + c.Remote
		seen[id] = true
		prev, known := retrans[id]
		if !known {
			ser.Conns++
		}
		if cur := c.TCPInfo.TotalRetrans; cur > prev {
			if known {
				ser.Retransmits += uint64(cur - prev)
			}
			retrans[id] = cur
		} else if !known {
			retrans[id] = cur
		}
	}
	for id := range retrans {
		if !seen[id] {
			delete(retrans, id)
		}
	}
}

func portOf(addr string) uint16 {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(p, 10, 16)
	return uint16(n)
}

// sampledSnapshot copies the sampler's series.
func (s *Session) sampledSnapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := Snapshot{At: time.Now(), Series: make([]Series, len(s.sampled))}
	copy(snap.Series, s.sampled)
	return snap
}
