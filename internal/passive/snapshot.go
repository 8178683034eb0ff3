package passive

import (
	"fmt"
	"time"
)

// Measure names what a Series holds.
type Measure string

const (
	// Egress: the time from a packet (an skb: a GSO packet counts once)
	// entering a device's queueing layer to its handover to the driver.
	Egress Measure = "egress"
	// Receive: from the kernel's receive timestamp to a stage (Stage).
	Receive Measure = "rx"
	// RTT: the kernel's RTT samples from the ACKs of a TCP port's
	// connections.
	RTT Measure = "rtt"
	// FirstBytes: from a connection's SYN arriving to the ACK of its first
	// Bytes bytes, on a listening TCP port.
	FirstBytes Measure = "first_bytes"
)

// Stages of Receive.
const (
	// StageStack: the packet enters the protocol stack (netif_receive_skb),
	// after the backlog and softirq wait of the CPU that received it.
	StageStack = "stack"
	// StageSocket (TCP): TCP processes the segment on its socket, after
	// the socket's backlog (while the application held its lock).
	StageSocket = "socket"
	// StageRead: the application copies the packet out of its socket.
	StageRead = "read"
)

// Series is one key's histogram.
type Series struct {
	Measure Measure `json:"measure"`
	// Egress: the device and TX queue; Queue -1 holds the queues from
	// MaxQueues up.
	Device string `json:"device,omitempty"`
	Queue  int    `json:"queue"`
	// DSCP is the egress class (Config.DSCP): a DSCP name, or "other";
	// "" when egress is not split.
	DSCP string `json:"dscp,omitempty"`
	// Receive, RTT, FirstBytes: protocol and port.
	Proto string `json:"proto,omitempty"`
	Port  uint16 `json:"port,omitempty"`
	Stage string `json:"stage,omitempty"`
	Bytes uint64 `json:"bytes,omitempty"`
	// Cgroup: an RTT series of a cgroup's sockets (Config.Cgroup).
	Cgroup string `json:"cgroup,omitempty"`

	Hist Hist `json:"hist"`
	// RTT series also count a port's retransmits and the connections that
	// reached ESTABLISHED.
	Retransmits uint64 `json:"retransmits,omitempty"`
	Conns       uint64 `json:"connections,omitempty"`
	// ClockFaults counts the receive series' packets left out because the
	// clock offset was wrong when they came (a realtime step not yet
	// followed, a time namespace): their delay read further below zero
	// than the offset's error allows. Not 0: the series saw fewer packets
	// than arrived.
	ClockFaults uint64 `json:"clock_faults,omitempty"`
	// Unavailable says why this kernel cannot measure the series (its
	// hook was refused); its histogram stays empty. Unknown, not zero.
	Unavailable string `json:"unavailable,omitempty"`
	// Sampled marks a series read from tcp_info at intervals
	// (OpenSampled), not from every ACK.
	Sampled bool `json:"sampled,omitempty"`
}

// Key identifies a series across snapshots.
func (s *Series) Key() string {
	switch s.Measure {
	case Egress:
		if s.DSCP != "" {
			return fmt.Sprintf("egress %s q%d dscp:%s", s.Device, s.Queue, s.DSCP)
		}
		return fmt.Sprintf("egress %s q%d", s.Device, s.Queue)
	case Receive:
		return fmt.Sprintf("rx %s/%d %s", s.Proto, s.Port, s.Stage)
	case FirstBytes:
		return fmt.Sprintf("first_bytes %s/%d %s", s.Proto, s.Port, FormatBytes(s.Bytes))
	}
	if s.Cgroup != "" {
		return fmt.Sprintf("%s cgroup:%s", s.Measure, s.Cgroup)
	}
	return fmt.Sprintf("%s %s/%d", s.Measure, s.Proto, s.Port)
}

// Snapshot is every series of a session at one moment, counted since the
// session opened.
type Snapshot struct {
	At     time.Time `json:"at"`
	Series []Series  `json:"series"`
}

// Sub returns the values recorded between an earlier snapshot and s.
func (s Snapshot) Sub(earlier Snapshot) Snapshot {
	prev := map[string]*Series{}
	for i := range earlier.Series {
		prev[earlier.Series[i].Key()] = &earlier.Series[i]
	}
	out := Snapshot{At: s.At, Series: make([]Series, len(s.Series))}
	for i, cur := range s.Series {
		d := cur
		if p := prev[cur.Key()]; p != nil {
			d.Hist = cur.Hist.Sub(&p.Hist)
			d.Retransmits = sub(cur.Retransmits, p.Retransmits)
			d.Conns = sub(cur.Conns, p.Conns)
			d.ClockFaults = sub(cur.ClockFaults, p.ClockFaults)
		}
		out.Series[i] = d
	}
	return out
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// Find returns the series with a key, or nil.
func (s Snapshot) Find(key string) *Series {
	for i := range s.Series {
		if s.Series[i].Key() == key {
			return &s.Series[i]
		}
	}
	return nil
}
