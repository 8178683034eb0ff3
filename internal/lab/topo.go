package lab

import (
	"fmt"
	"strings"
	"time"

	"github.com/lowlat/lowlat/internal/profile"
	"github.com/lowlat/lowlat/internal/qdisc"
)

// Interface names inside the lab namespaces. They are chosen so they never
// equal a host interface name: lowlat's fact readers look some interface
// details up in /sys, which shows the host's devices.
const (
	ClientIf    = "lab-up"  // the client's uplink, toward the provider
	ProviderCIf = "lab-c"   // the provider's side facing the client
	ProviderSIf = "lab-s"   // the provider's side facing the server
	ServerIf    = "lab-nic" // the server's NIC, toward the provider
)

// Addresses (the same in every run: each run has its own namespaces).
const (
	ClientAddr    = "10.231.1.2"
	ProviderCAddr = "10.231.1.1"
	ProviderSAddr = "10.231.2.1"
	ServerAddr    = "10.231.2.2"
)

// ReflectorPort is the port of the reflector every scenario measures
// against in the server namespace: fixed, so a fix may select its
// connections by port (sockets --fix ... --port).
const ReflectorPort = 7431

// Path is what the provider does to one direction of traffic: a rate limit
// with a buffer of a given depth (tbf), and delay, jitter and loss (netem).
type Path struct {
	// Rate in tc units ("2mbit"); empty means unlimited.
	Rate string `json:"rate,omitempty"`
	// Buffer is the queue depth at Rate, as time (tbf latency): a 5 s buffer
	// at 2 Mbit/s holds 1.25 MB.
	Buffer Duration `json:"buffer,omitempty"`
	Delay  Duration `json:"delay,omitempty"`
	Jitter Duration `json:"jitter,omitempty"`
	// Loss in percent.
	Loss float64 `json:"loss_pct,omitempty"`
	// Steps move Rate during the measurement (capped-uplink-varying): the
	// provider's cap changes in place, its buffer keeps what it holds.
	Steps []RateStep `json:"steps,omitempty"`
}

// RateStep is one change of a path's rate, Every after the previous one
// (the first Every after the load starts).
type RateStep struct {
	Every Duration `json:"every"`
	Rate  string   `json:"rate"`
}

// stepSpec is the provider's rate limiter moved to rate by a step: the
// tbf alone (a netem leaf stays as it is), with the bucket the new rate
// gets and the byte limit of the path's first rate. A provider's buffer is
// memory and keeps its size when the cap moves: 5 s at 2 Mbit/s is 10 s at
// 1 Mbit/s. (A limit cut to 5 s of the lower rate would drop every packet
// until the queue drained below it, and stall the flows for seconds.)
func (p Path) stepSpec(rate string) (qdisc.Spec, error) {
	first, err := p.spec(true)
	if err != nil {
		return qdisc.Spec{}, err
	}
	s, err := qdisc.Parse(first)
	if err != nil {
		return qdisc.Spec{}, err
	}
	limit := qdisc.Normalized(s).Opts["limit"]
	bits, err := qdisc.ParseRate(rate)
	if err != nil || bits == 0 {
		return qdisc.Spec{}, fmt.Errorf("step rate %q: %v", rate, err)
	}
	// The bucket is the one of the path's highest rate at every step: tbf lets whole GSO
	// packets up to its bucket into its queue, and one larger than a new,
	// smaller bucket would wait at the head for tokens that never add up
	// (the provider then sends nothing until its cap rises again).
	burst := providerBurst(first0(p.Rate))
	for _, st := range p.Steps {
		burst = max(burst, providerBurst(first0(st.Rate)))
	}
	return qdisc.Parse(fmt.Sprintf("tbf rate %s burst %d limit %s", qdisc.FormatRate(bits), burst, limit))
}

func (p Path) needsNetem() bool { return p.Delay > 0 || p.Jitter > 0 || p.Loss > 0 }

// String describes the path for reports.
func (p Path) String() string {
	var parts []string
	if p.Rate != "" {
		parts = append(parts, fmt.Sprintf("%s with a %s buffer", p.Rate, time.Duration(p.Buffer)))
	}
	if p.Delay > 0 {
		s := "+" + time.Duration(p.Delay).String()
		if p.Jitter > 0 {
			s += " ± " + time.Duration(p.Jitter).String()
		}
		parts = append(parts, s)
	}
	if p.Loss > 0 {
		parts = append(parts, fmt.Sprintf("%g%% loss", p.Loss))
	}
	for _, st := range p.Steps {
		parts = append(parts, fmt.Sprintf("then %s after %s", st.Rate, time.Duration(st.Every)))
	}
	if len(parts) == 0 {
		return "unlimited"
	}
	return strings.Join(parts, ", ")
}

// spec builds the provider qdisc for the path: tbf for the rate, netem for
// delay/jitter/loss, netem as tbf's leaf for both (its packet limit is then
// the buffer). noNetem drops the netem part.
func (p Path) spec(noNetem bool) (string, error) {
	var netem string
	if p.needsNetem() && !noNetem {
		netem = "netem"
		if p.Delay > 0 || p.Jitter > 0 {
			netem += " delay " + qdisc.FormatTime(time.Duration(p.Delay))
			if p.Jitter > 0 {
				netem += " jitter " + qdisc.FormatTime(time.Duration(p.Jitter))
			}
		}
		if p.Loss > 0 {
			netem += fmt.Sprintf(" loss %g%%", p.Loss)
		}
	}
	if p.Rate == "" {
		if netem == "" {
			return "", nil
		}
		return netem + " limit 100000", nil
	}
	bits, err := qdisc.ParseRate(p.Rate)
	if err != nil || bits == 0 {
		return "", fmt.Errorf("path rate %q: %v", p.Rate, err)
	}
	buf := time.Duration(p.Buffer)
	if buf <= 0 {
		buf = 100 * time.Millisecond
	}
	// The provider's limiter keeps its rate whatever the lab's machine is
	// doing: its tbf is driven by timers, and a bucket of two packets loses
	// the link whatever time a late timer (an emulated guest on a busy
	// machine) costs beyond them. 50 ms of tokens bridge such stalls; a
	// shaper 2.5 % below the rate (runbook 003's tbf) would otherwise see
	// the provider fall below it and fill its seconds of buffer.
	tbf := fmt.Sprintf("tbf rate %s burst %d latency %s", qdisc.FormatRate(bits), providerBurst(bits), qdisc.FormatTime(buf))
	if netem == "" {
		return tbf, nil
	}
	// netem holds the queue: its limit, in full-size packets, is the buffer.
	pkts := max(int(float64(bits)/8*buf.Seconds()/1514), 16)
	return fmt.Sprintf("%s leaf { %s limit %d }", tbf, netem, pkts), nil
}

// first0 is a rate in bit/s, 0 when it does not parse (Path.spec has
// checked it).
func first0(rate string) uint64 {
	b, _ := qdisc.ParseRate(rate)
	return b
}

// providerBurst is the bucket of the provider's limiter at bits/s (see
// Path.spec).
func providerBurst(bits uint64) uint64 { return max(profile.TbfBurst(bits), bits/8/20) }

// NIC emulates a network card of a fixed rate on the server: a tbf at the
// root of its interface plays the wire, and whatever queue the host
// configures sits below it as the tbf's leaf, which is where a real NIC's
// queue forms (the veth itself never pushes back).
type NIC struct {
	Rate string `json:"rate"`
	// Queue is the qdisc the NIC starts with; "pfifo limit 1000" (a FIFO of
	// the default txqueuelen) when empty.
	Queue string `json:"queue"`
}

// nicBurst is the bucket of the tbf playing a NIC's wire: one full frame
// (1514 bytes) fits, a burst of two (3028) does not.
const nicBurst = 3000

// mbps is the NIC's rate in Mbit/s (0 when it does not parse).
func (n *NIC) mbps() float64 {
	if n == nil {
		return 0
	}
	bits, err := qdisc.ParseRate(n.Rate)
	if err != nil {
		return 0
	}
	return float64(bits) / 1e6
}

func (n NIC) spec(leaf string) (string, error) {
	bits, err := qdisc.ParseRate(n.Rate)
	if err != nil || bits == 0 {
		return "", fmt.Errorf("nic rate %q: %v", n.Rate, err)
	}
	if leaf == "" {
		leaf = n.Queue
	}
	if leaf == "" {
		leaf = "pfifo limit 1000"
	}
	// A wire sends one frame at a time, and a NIC splits a TSO burst into
	// frames. tbf's largest packet is its bucket: a bucket just under two
	// full frames (nicBurst) makes it split every send burst into frames as
	// they arrive, so a packet the queue serves first waits for at most one
	// frame on the wire (1.2 ms at 10 Mbit/s), not for a burst of them.
	return fmt.Sprintf("tbf rate %s burst %d latency 1s leaf { %s }", qdisc.FormatRate(bits), nicBurst, leaf), nil
}

// TopoSpec describes one lab network.
type TopoSpec struct {
	// Up is client → server, applied at the provider's egress toward the
	// server; Down is server → client.
	Up   Path `json:"up"`
	Down Path `json:"down"`
	// ServerNIC, when set, makes the server's interface a NIC of that rate.
	ServerNIC *NIC `json:"server_nic,omitempty"`
	// Congestion is the congestion control the namespaces start with
	// ("cubic", the stock default, when empty). When the host does not let
	// namespaces choose it, "reno" (also loss-based) stands in and a note
	// says so.
	Congestion string `json:"congestion,omitempty"`
	// Chain, when set, replaces the provider with a chain of four routers
	// (path-hops): the provider is the first, and the server sits behind
	// the fourth. Up, Down and ServerNIC do not apply.
	Chain *Chain `json:"chain,omitempty"`
}

// Chain is the router chain of the path-hops scenario: two equal-cost links
// from router 1 to router 2 (hashed on ports), router 2 rate-limiting its
// ICMP errors, and a queue on router 2's link toward router 3.
type Chain struct {
	// QueueDelay and QueueJitter are the queue's netem delay; on a kernel
	// without netem the queue is a tbf of QueueRate with QueueLimit bytes
	// of FIFO, kept full by bulk flows.
	QueueDelay  Duration `json:"queue_delay"`
	QueueJitter Duration `json:"queue_jitter"`
	QueueRate   string   `json:"queue_rate"`
	QueueLimit  string   `json:"queue_limit"`
	// ECMPDelay is the second equal-cost link's extra delay (netem only).
	ECMPDelay Duration `json:"ecmp_delay"`
}

// Duration is a time.Duration that reads and writes as "300ms" in JSON.
type Duration time.Duration

func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}
