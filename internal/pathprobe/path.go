// Package pathprobe measures a network path hop by hop, as mtr does, and says
// where along it delay or loss is added.
//
// Probes leave with a growing TTL (hop limit), and the routers they expire at
// answer with ICMP time exceeded. Every probe of a run keeps the fields
// balancers hash (Paris traceroute): one flow ID (source and destination
// port for UDP and TCP, the echo identifier for ICMP), one ICMP checksum (the
// payload makes up for the sequence number), and for IPv6 one flow label
// leased from the kernel, so equal-cost multipath keeps the whole run on one
// path. Replies are read with kernel timestamps from the probe socket's error
// queue (IP_RECVERR), which needs no privilege; ICMP echo uses the kernel's
// ping sockets, or a raw socket as root. The first round walks the path one
// TTL at a time, so that no probe goes past the destination and spends the
// allowance of its ICMP rate limit.
//
// The verdict looks for the first hop whose added delay or loss carries on to
// the destination. A hop that shows loss or delay that later hops do not is a
// router slow or rate-limited in answering (ICMP generation is a slow path,
// and rate-limited by default), not a problem on the forwarding path: mtr
// users' most common misreading. So is a hop whose answers come at a
// limiter's pace, even when every later hop's do too, the destination's
// included: its loss is the limiter's, and loss past such hops is reported
// as unreadable at that probe rate, not as none.
package pathprobe

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
)

// Protocols a path probe can use.
const (
	UDP  = "udp"
	ICMP = "icmp"
	TCP  = "tcp"
)

// DefaultPort is the UDP destination port (traceroute's first; nothing
// listens there, so the destination answers with port unreachable) and the
// TCP one (a web server's, which answers a SYN).
const (
	DefaultUDPPort = 33434
	DefaultTCPPort = 443
)

// Config is one path measurement.
type Config struct {
	// Target is HOST or HOST:PORT (the port for UDP and TCP).
	Target string `json:"target"`
	// Proto is udp (the default), icmp or tcp.
	Proto string `json:"proto"`
	// Count is the number of probes per hop (default 10).
	Count int `json:"count"`
	// Interval separates rounds; a round sends one probe to every hop
	// (default 1s).
	Interval time.Duration `json:"interval"`
	// MaxHops is the largest TTL (default 30, at most 255).
	MaxHops int `json:"max_hops"`
	// Timeout bounds the wait for one probe's reply (default 2s).
	Timeout time.Duration `json:"timeout"`
	// Names looks up each hop's reverse name.
	Names bool `json:"names"`
	// Flow is the flow ID: the source port (udp, tcp) or the echo
	// identifier (icmp). 0 derives it from the target, so that runs to the
	// same target take the same path.
	Flow int `json:"flow"`
	// Progress, when set, is called after every round.
	Progress func(round, rounds int) `json:"-"`
}

// Errors of bad input, for the caller to tell apart.
var (
	ErrConfig     = errors.New("probe path")
	ErrPermission = errors.New("not allowed")
)

// Check reports what Run would refuse in c, without resolving the target.
func (c Config) Check() error {
	_, err := c.normalize()
	return err
}

func (c *Config) normalize() (port int, err error) {
	if c.Proto == "" {
		c.Proto = UDP
	}
	switch c.Proto {
	case UDP, ICMP, TCP:
	default:
		return 0, fmt.Errorf("%w: unknown --proto %q (udp, icmp or tcp)", ErrConfig, c.Proto)
	}
	if c.Count == 0 {
		c.Count = 10
	}
	if c.Count < 1 || c.Count > 100000 {
		return 0, fmt.Errorf("%w: --count %d: want 1..100000", ErrConfig, c.Count)
	}
	if c.Interval == 0 {
		c.Interval = time.Second
	}
	if c.Interval < 10*time.Millisecond || c.Interval > time.Hour {
		return 0, fmt.Errorf("%w: --interval %s: want 10ms..1h", ErrConfig, c.Interval)
	}
	if c.MaxHops == 0 {
		c.MaxHops = 30
	}
	if c.MaxHops < 1 || c.MaxHops > 255 {
		return 0, fmt.Errorf("%w: --max-hops %d: a TTL is 1..255", ErrConfig, c.MaxHops)
	}
	if c.Timeout == 0 {
		c.Timeout = 2 * time.Second
	}
	if c.Timeout < time.Millisecond || c.Timeout > time.Minute {
		return 0, fmt.Errorf("%w: --timeout %s: want 1ms..1m", ErrConfig, c.Timeout)
	}
	if c.Flow < 0 || c.Flow > 65535 {
		return 0, fmt.Errorf("%w: --flow %d: want 1..65535", ErrConfig, c.Flow)
	}
	host, portStr, err := net.SplitHostPort(c.Target)
	if err != nil {
		host, portStr = c.Target, ""
	}
	if host == "" {
		return 0, fmt.Errorf("%w: no target host", ErrConfig)
	}
	switch {
	case portStr != "" && c.Proto == ICMP:
		return 0, fmt.Errorf("%w: %s: ICMP has no port", ErrConfig, c.Target)
	case portStr != "":
		port, err = strconv.Atoi(portStr)
		if err != nil || port < 1 || port > 65535 {
			return 0, fmt.Errorf("%w: %s: bad port %q", ErrConfig, c.Target, portStr)
		}
	case c.Proto == UDP:
		port = DefaultUDPPort
	case c.Proto == TCP:
		port = DefaultTCPPort
	}
	return port, nil
}

// Result is a path measurement: its hops, in order, and the verdict.
type Result struct {
	Target  string `json:"target"`
	Address string `json:"address"`
	Proto   string `json:"proto"`
	Port    int    `json:"port,omitempty"`
	// Flow is the source port or echo identifier every probe carried.
	Flow int `json:"flow"`
	// FlowLabel is the IPv6 flow label every UDP and TCP probe carried,
	// leased from the kernel's flow label manager; 0 for IPv4, ICMP (the
	// kernel's label, a hash of the addresses, is one per run), or when no
	// lease was given (then the kernel's choice).
	FlowLabel int `json:"flow_label,omitempty"`
	// Socket is how replies were read: "recverr" (the error queue of an
	// unprivileged socket) or "raw".
	Socket   string        `json:"socket"`
	Count    int           `json:"count"`
	Interval time.Duration `json:"interval_ns"`
	// Reached says whether the destination answered; when not, Hops end at
	// the last hop that did.
	Reached bool    `json:"reached"`
	Hops    []Hop   `json:"hops"`
	Verdict Verdict `json:"verdict"`
	// JitterFrom is the first hop from which jitter rises and stays up to
	// the destination, 0 when none does.
	JitterFrom int       `json:"jitter_from"`
	Seconds    float64   `json:"seconds"`
	Started    time.Time `json:"started"`
}

// Hop is one TTL's replies.
type Hop struct {
	// Index is the TTL, from 1.
	Index int `json:"index"`
	// Address is the address that answered most; "" when none did.
	Address string `json:"address"`
	Name    string `json:"name,omitempty"`
	// Others are further addresses that answered at this TTL (a path change
	// or per-packet load balancing), most frequent first.
	Others   []string `json:"others,omitempty"`
	Sent     int      `json:"sent"`
	Received int      `json:"received"`
	LossPct  float64  `json:"loss_pct"`
	RTT      RTT      `json:"rtt_us"`
	// JitterUS is the mean absolute difference of consecutive RTTs.
	JitterUS float64 `json:"jitter_us"`
	// AddedUS is this hop's p50 and p99 minus the previous responding hop's,
	// clamped at 0.
	AddedUS Added `json:"added_us"`
	// QueueUS estimates queueing on the way here: p99 − min.
	QueueUS float64 `json:"queue_us"`
	// RateLimited marks loss or delay that is this hop's own reply's:
	// seen here and not after it (the router answers slowly or
	// rate-limits its ICMP, and forwards fine), or answers that come at a
	// limited rate (ReplyEveryMS), the destination's included.
	RateLimited bool `json:"rate_limited"`
	// ReplyRateLimited marks a hop whose answers follow a limit on its
	// ICMP reply rate: a burst, then answers at even gaps, whatever the
	// probe rate. Its loss is its limiter's; its replies still time the
	// path (a limiter drops replies, it does not delay them).
	ReplyRateLimited bool `json:"reply_rate_limited,omitempty"`
	// ReplyEveryMS is, for such a hop, the median time between its
	// limited answers (Linux's default: 1000); 0 when they are too few to
	// time.
	ReplyEveryMS float64 `json:"reply_every_ms,omitempty"`
	// Destination marks the target's own replies.
	Destination bool     `json:"destination,omitempty"`
	Histogram   []Bucket `json:"histogram"`

	rtts   []float64  // µs, in send order
	probes []probeOut // every probe, in send order, when the runner kept them
}

// RTT summarises a hop's round trips, µs.
type RTT struct {
	Min float64 `json:"min"`
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Added is a hop's added delay, µs.
type Added struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

// Bucket counts the RTTs up to LeUS (and above the previous bucket's).
type Bucket struct {
	LeUS  float64 `json:"le_us"`
	Count int     `json:"count"`
}

// Verdict names the first hop whose added delay or loss carries on to the
// destination.
type Verdict struct {
	// Hop is that hop's index, 0 when the path adds nothing notable.
	Hop     int    `json:"hop"`
	Address string `json:"address,omitempty"`
	// Kind is "delay", "loss", "delay+loss" or "none".
	Kind string `json:"kind"`
	// DelayHop and LossHop are where delay and loss start, each 0 when it
	// does not; Hop is the earlier of the two.
	DelayHop int `json:"delay_hop,omitempty"`
	LossHop  int `json:"loss_hop,omitempty"`
	// LossHiddenFrom is the hop from which every hop that answered, the
	// last one included, limits its ICMP reply rate: loss from there on
	// cannot be read at this probe rate (unknown, not none). 0 when the
	// last hop's answers are not rate-limited.
	LossHiddenFrom int `json:"loss_hidden_from,omitempty"`
	// AddedUS is the delay added there (p50), LossPct the loss that starts
	// there.
	AddedUS float64 `json:"added_us,omitempty"`
	LossPct float64 `json:"loss_pct,omitempty"`
	// Text says it in one line.
	Text string `json:"text"`
}

// runOut is what a runner tells about how it probed.
type runOut struct {
	flow   int    // the flow ID the probes carried
	label  uint32 // the IPv6 flow label, 0 when the kernel's
	socket string // "recverr" or "raw"
}
