package passive

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lowlat/lowlat/internal/probe"
	"github.com/lowlat/lowlat/internal/version"
)

// GateTarget is what a passive gate judges (apply --prove "passive ..."):
// one histogram of the host's real traffic.
type GateTarget struct {
	// Text is the target as given: "port:443", "egress eth0", "rx port:7777".
	Text    string
	Measure Measure // RTT, Egress or Receive
	Port    uint16
	Device  string
}

// ParseGateTarget reads a passive gate's target: "port:N" (the RTT samples
// of TCP port N's connections), "egress IF" (the egress queueing of device
// IF, all its queues) or "rx port:N" (the receive path of port N, TCP and
// UDP, to the application's read).
func ParseGateTarget(args []string) (GateTarget, error) {
	t := GateTarget{Text: strings.Join(args, " ")}
	port := func(s string) (uint16, error) {
		p, ok := strings.CutPrefix(s, "port:")
		n, err := strconv.ParseUint(p, 10, 16)
		if !ok || err != nil || n == 0 {
			return 0, fmt.Errorf("%q: want port:N, N a port number 1-65535", s)
		}
		return uint16(n), nil
	}
	var err error
	switch {
	case len(args) == 1 && strings.HasPrefix(args[0], "port:"):
		t.Measure = RTT
		t.Port, err = port(args[0])
	case len(args) == 2 && args[0] == "egress":
		t.Measure, t.Device = Egress, args[1]
	case len(args) == 2 && args[0] == "rx":
		t.Measure = Receive
		t.Port, err = port(args[1])
	default:
		err = fmt.Errorf("want port:N (TCP RTT of port N), egress IF, or rx port:N, got %q", t.Text)
	}
	return t, err
}

// Config is the session the target needs.
func (t GateTarget) Config() Config {
	switch t.Measure {
	case Egress:
		return Config{Egress: true, Devices: []string{t.Device}}
	case Receive:
		return Config{RX: true, Ports: []Port{{"tcp", t.Port}, {"udp", t.Port}}}
	}
	return Config{TCP: true, Ports: []Port{{"tcp", t.Port}}}
}

// pick merges the series of snap the target judges: every queue of the
// device; the TCP port's RTT; the port's receive path to the read, per
// protocol, or to the stack where this kernel cannot see the read.
func (t GateTarget) pick(snap Snapshot) (h Hist, conns uint64, keys []string) {
	add := func(s *Series) {
		h.Add(&s.Hist)
		conns += s.Conns
		keys = append(keys, s.Key())
	}
	for i := range snap.Series {
		s := &snap.Series[i]
		switch {
		case t.Measure == Egress && s.Measure == Egress && s.Device == t.Device:
			add(s)
		case t.Measure == RTT && s.Measure == RTT && s.Port == t.Port:
			add(s)
		case t.Measure == Receive && s.Measure == Receive && s.Port == t.Port:
			read := snap.Find(fmt.Sprintf("rx %s/%d %s", s.Proto, s.Port, StageRead))
			useRead := read != nil && read.Unavailable == ""
			if (useRead && s.Stage == StageRead) || (!useRead && s.Stage == StageStack) {
				add(s)
			}
		}
	}
	return h, conns, keys
}

// GateBlocks is how many consecutive blocks a gate's window is split into,
// for the run-to-run noise (as the probes' fifths).
const GateBlocks = 5

// GateResult is one window of a passive gate.
type GateResult struct {
	probe.Meta
	// Series are the keys merged into Hist.
	Series  []string `json:"series"`
	Seconds float64  `json:"seconds"`
	// Hist is the window's histogram, with its volume (count per second,
	// new connections per second).
	Hist Row `json:"hist"`
	// Blocks are the window's consecutive fifths.
	Blocks []Row `json:"blocks"`
	// Notes say what the figures mean and cannot tell.
	Notes []string `json:"notes,omitempty"`
}

// Samples is how many values the window holds.
func (r *GateResult) Samples() uint64 { return r.Hist.Count }

// RunGate measures t's traffic for d, in the calling thread's network
// namespace, and returns the window's histogram and its blocks. Nothing
// stays attached after it returns.
func RunGate(ctx context.Context, t GateTarget, d time.Duration) (*GateResult, error) {
	cfg := t.Config()
	s, err := Open(cfg)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	start := time.Now()
	snaps := make([]Snapshot, 0, GateBlocks+1)
	first, err := s.Snapshot()
	if err != nil {
		return nil, err
	}
	snaps = append(snaps, first)
	for i := 1; i <= GateBlocks; i++ {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Until(start.Add(d * time.Duration(i) / GateBlocks))):
		}
		snap, err := s.Snapshot()
		if err != nil {
			return nil, err
		}
		snaps = append(snaps, snap)
	}
	row := func(from, to Snapshot) (Row, []string) {
		h, conns, keys := t.pick(to.Sub(from))
		rows := Summarize(Snapshot{Series: []Series{{Measure: t.Measure, Device: t.Device, Port: t.Port, Queue: -1, Hist: h, Conns: conns}}}, to.At.Sub(from.At))
		rows[0].Key = t.Text
		return rows[0], keys
	}
	res := &GateResult{
		Meta:    probe.Meta{Type: "passive", Version: version.String(), Target: t.Text, Start: start.UTC(), End: time.Now().UTC(), Host: probe.ReadHostInfo()},
		Seconds: snaps[GateBlocks].At.Sub(first.At).Seconds(),
	}
	res.Hist, res.Series = row(first, snaps[GateBlocks])
	for i := 1; i <= GateBlocks; i++ {
		b, _ := row(snaps[i-1], snaps[i])
		b.Buckets = nil
		res.Blocks = append(res.Blocks, b)
	}
	for _, ser := range snaps[GateBlocks].Series {
		if ser.Unavailable != "" {
			res.Notes = append(res.Notes, fmt.Sprintf("%s not measured: %s", ser.Key(), ser.Unavailable))
		}
	}
	return res, nil
}

// GateNotes are the window's notes, for the gate's report.
func (r *GateResult) GateNotes() []string { return r.Notes }
