package passive

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/lowlat/lowlat/internal/probe"
)

// ErrUnsupported marks what this kernel or process cannot do: no BPF, no
// BTF, a hook the kernel lacks, no privilege. Errors of all kinds wrap it.
var ErrUnsupported = errors.New("passive measurement not supported here")

// ErrBadConfig marks a configuration that cannot be measured as given: a
// check that failed, a device that does not exist.
var ErrBadConfig = errors.New("bad passive configuration")

// Port is one protocol and local port to measure.
type Port struct {
	Proto string // "tcp" or "udp"
	Port  uint16
}

func (p Port) String() string { return fmt.Sprintf("%s/%d", p.Proto, p.Port) }

// ParsePorts reads a port as watch's --port takes it: "7777" (TCP and UDP),
// "tcp/443", "udp/7777", "443/tcp".
func ParsePorts(s string) ([]Port, error) {
	proto, num := "", s
	if a, b, ok := strings.Cut(s, "/"); ok {
		switch {
		case a == "tcp" || a == "udp":
			proto, num = a, b
		case b == "tcp" || b == "udp":
			proto, num = b, a
		default:
			return nil, fmt.Errorf("port %q: the protocol is tcp or udp", s)
		}
	}
	n, err := strconv.ParseUint(num, 10, 16)
	if err != nil || n == 0 {
		return nil, fmt.Errorf("port %q: want a port number 1-65535, optionally tcp/N or udp/N", s)
	}
	if proto != "" {
		return []Port{{proto, uint16(n)}}, nil
	}
	return []Port{{"tcp", uint16(n)}, {"udp", uint16(n)}}, nil
}

// MaxFirstBytes is how many first-bytes thresholds one session keeps.
const MaxFirstBytes = 4

// MaxQueues is how many TX queues of one device get a histogram each; the
// device's higher queues share one more ("other").
const MaxQueues = 64

// Config says what a session measures. The zero Config measures nothing.
type Config struct {
	// Egress measures the egress queueing of Devices, or of every device
	// of the network namespace that is up, loopback aside, when Devices is
	// empty.
	Egress  bool
	Devices []string
	// Ports to measure: the receive path of each, and for TCP ports the
	// RTT samples, retransmits and connections (and first bytes).
	Ports []Port
	// RX measures the receive path of Ports; TCP their TCP measurements.
	RX, TCP bool
	// FirstBytes are the N of "time to deliver the first N bytes" of a
	// connection accepted on a TCP port, ascending, at most MaxFirstBytes.
	FirstBytes []uint64
	// AllNamespaces measures every network namespace; by default only the
	// caller's (its OS thread's) is.
	AllNamespaces bool
	// Cgroup is a cgroup v2 directory (absolute) whose sockets' TCP (RTT,
	// retransmits, connections) is measured together, whatever their
	// ports: a service's; CgroupName is what series call it ("" : Cgroup).
	Cgroup, CgroupName string
	// DSCP splits egress by class: each value named here (0-63, at most
	// MaxDSCPClasses) gets its own histogram per queue, every other value
	// one more ("other"). Empty: no split, and no header read per packet.
	DSCP []int
}

// MaxDSCPClasses is how many DSCP values a session splits egress by.
const MaxDSCPClasses = 8

// Check says what is wrong with a configuration, in one line (wrapping
// ErrBadConfig).
func (c Config) Check() error {
	if err := c.check(); err != nil {
		return fmt.Errorf("%w%.0w", err, ErrBadConfig)
	}
	return nil
}

func (c Config) check() error {
	if !c.Egress && !((c.RX || c.TCP) && (len(c.Ports) > 0 || c.Cgroup != "")) {
		return errors.New("nothing to measure: egress of a device, or the receive path or TCP of a port or cgroup")
	}
	if c.RX && len(c.Ports) == 0 {
		return errors.New("the receive path is measured per port: name at least one")
	}
	if c.TCP && len(c.Ports) == 0 && c.Cgroup == "" {
		return errors.New("TCP is measured per port or cgroup: name one")
	}
	if len(c.FirstBytes) > MaxFirstBytes {
		return fmt.Errorf("first bytes: at most %d sizes, got %d", MaxFirstBytes, len(c.FirstBytes))
	}
	for i, n := range c.FirstBytes {
		if n == 0 || (i > 0 && n <= c.FirstBytes[i-1]) {
			return fmt.Errorf("first bytes: sizes must be positive and ascending, got %v", c.FirstBytes)
		}
	}
	if len(c.FirstBytes) > 0 && !c.TCP {
		return errors.New("first bytes are measured on TCP ports: enable TCP")
	}
	if len(c.DSCP) > 0 && !c.Egress {
		return errors.New("dscp classes split egress: measure a device's egress")
	}
	if len(c.DSCP) > MaxDSCPClasses {
		return fmt.Errorf("dscp: at most %d classes, got %d", MaxDSCPClasses, len(c.DSCP))
	}
	dscp := map[int]bool{}
	for _, d := range c.DSCP {
		if d < 0 || d > 63 {
			return fmt.Errorf("dscp %d: want 0-63", d)
		}
		if dscp[d] {
			return fmt.Errorf("dscp %s named twice", probe.DSCPName(d))
		}
		dscp[d] = true
	}
	seen := map[Port]bool{}
	for _, p := range c.Ports {
		if p.Proto != "tcp" && p.Proto != "udp" {
			return fmt.Errorf("port %d: protocol %q, want tcp or udp", p.Port, p.Proto)
		}
		if seen[p] {
			return fmt.Errorf("port %s named twice", p)
		}
		seen[p] = true
	}
	return nil
}

// ParseBytes reads a size: 300000, 300KB, 1MB, 1MiB (KB = 1000 bytes).
func ParseBytes(s string) (uint64, error) {
	units := []struct {
		suffix string
		mult   uint64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"K", 1e3}, {"M", 1e6}, {"B", 1}}
	num, mult := s, uint64(1)
	for _, u := range units {
		if strings.HasSuffix(strings.ToUpper(s), strings.ToUpper(u.suffix)) {
			num, mult = s[:len(s)-len(u.suffix)], u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || n <= 0 || n*float64(mult) > 1<<50 {
		return 0, fmt.Errorf("size %q: want a number of bytes such as 300KB or 1MB", s)
	}
	return uint64(n * float64(mult)), nil
}

// FormatBytes writes a size as ParseBytes reads it, in the largest unit
// that divides it.
func FormatBytes(n uint64) string {
	switch {
	case n%1e9 == 0:
		return fmt.Sprintf("%dGB", n/1e9)
	case n%1e6 == 0:
		return fmt.Sprintf("%dMB", n/1e6)
	case n%1e3 == 0:
		return fmt.Sprintf("%dKB", n/1e3)
	}
	return fmt.Sprintf("%dB", n)
}

// ParseDSCP reads DSCP classes as watch's --dscp and the monitor's dscp
// take them: names (EF, AF41, CS1, VA) or numbers 0-63.
func ParseDSCP(names []string) ([]int, error) {
	var out []int
	for _, n := range names {
		if strings.TrimSpace(n) == "" {
			return nil, errors.New("dscp: an empty class name")
		}
		d, err := probe.ParseDSCP(n)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// DSCPClass is the name of egress class i of a session split by dscp: 0 is
// "other", i > 0 is dscp[i-1]'s name (EF, AF41, CS1, or its number).
func DSCPClass(dscp []int, i int) string {
	if i == 0 {
		return "other"
	}
	return probe.DSCPName(dscp[i-1])
}
