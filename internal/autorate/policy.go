// Package autorate runs an adaptive egress shaper: it measures the delay that
// queueing behind a provider's rate cap adds (reflectors, ICMP echo, the
// host's own TCP connections, the shaper's backlog), and moves the rate of
// the shaper lowlat's capped-uplink profile installed so the queue stays on
// this host, under its AQM, even when the cap moves.
//
// The package is split the way data flows: policy.go is what the user asked
// for (journaled as the knob autorate/<iface>), control.go is the control
// law (pure: signal samples in, rate decisions out, tested on scripted
// traces), signals*.go gather the samples, daemon*.go runs the loop against
// the kernel and state.go is what it publishes for the monitor.
package autorate

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lowlat/lowlat/internal/qdisc"
)

// Policy is what autorate may do on one interface. Its String form is the
// value of the journaled knob autorate/<iface> and the content of its policy
// file, so a rollback removes it and status can tell a moving rate from drift.
type Policy struct {
	Iface string
	// Min, Base and Max are rates in bits per second: the shaper never goes
	// below Min or above Max, starts at Base and returns to Base when the
	// daemon stops.
	Min, Base, Max uint64
	// Reflectors are lowlat reflectors (host:port) probed for one-way delay
	// and RTT; ICMP are hosts probed with echo requests.
	Reflectors []string
	ICMP       []string
	// Active is how many of Reflectors are probed at a time; the others
	// stand by to replace one that stops answering or whose clock keeps
	// stepping (see pool). 0 probes them all.
	Active int
	// Passive uses tcp_info (srtt - min_rtt) of the host's own busy
	// connections: a signal that needs no reflector at all.
	Passive bool
	// Threshold is the delay over baseline a sample must exceed to count as
	// bloat (one MTU's serialization time at the current rate is added).
	Threshold time.Duration
}

// DefaultThreshold is the delay over baseline that counts as bloat. It is
// half of cake-autorate's 30 ms: lowlat's target is an added p99 within
// 30 ms, so bloat must be seen well before that.
const DefaultThreshold = 15 * time.Millisecond

// String is the canonical text form, one line of space-separated key=value
// pairs with rates in bit/s:
//
//	iface=eth0 min=1000000 base=1800000 max=3000000 reflectors=10.0.0.2:7431 icmp= passive=on threshold=15ms
//
// with active=N after the reflectors when only N of them are probed at a
// time.
func (p Policy) String() string {
	onoff := "off"
	if p.Passive {
		onoff = "on"
	}
	th := p.Threshold
	if th == 0 {
		th = DefaultThreshold
	}
	// active= only when some reflectors stand by: a policy journaled
	// before it existed keeps its exact text.
	active := ""
	if p.standingBy() {
		active = " active=" + strconv.Itoa(p.Active)
	}
	return fmt.Sprintf("iface=%s min=%d base=%d max=%d reflectors=%s%s icmp=%s passive=%s threshold=%s",
		p.Iface, p.Min, p.Base, p.Max, strings.Join(p.Reflectors, ","), active, strings.Join(p.ICMP, ","), onoff, th)
}

// standingBy reports whether some reflectors stand by (Active is fewer than
// all of them).
func (p Policy) standingBy() bool { return p.Active > 0 && p.Active < len(p.Reflectors) }

// Describe is the policy for people: rates in tc's units.
func (p Policy) Describe() string {
	var sig []string
	if p.standingBy() {
		sig = append(sig, fmt.Sprintf("reflectors %s (%d probed at a time, the others standing by)", strings.Join(p.Reflectors, ", "), p.Active))
	} else {
		for _, r := range p.Reflectors {
			sig = append(sig, "reflector "+r)
		}
	}
	for _, h := range p.ICMP {
		sig = append(sig, "icmp "+h)
	}
	if p.Passive {
		sig = append(sig, "passive tcp_info")
	}
	return fmt.Sprintf("%s: rate %s..%s, base %s, signals: %s", p.Iface,
		qdisc.FormatRate(p.Min), qdisc.FormatRate(p.Max), qdisc.FormatRate(p.Base), strings.Join(sig, ", "))
}

// ParsePolicy reads the canonical form back, and checks it.
func ParsePolicy(s string) (Policy, error) {
	var p Policy
	seen := map[string]bool{}
	for _, f := range strings.Fields(s) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return p, fmt.Errorf("autorate policy: %q is not key=value", f)
		}
		if seen[k] {
			return p, fmt.Errorf("autorate policy: %s given twice", k)
		}
		seen[k] = true
		var err error
		switch k {
		case "iface":
			p.Iface = v
		case "min":
			p.Min, err = strconv.ParseUint(v, 10, 64)
		case "base":
			p.Base, err = strconv.ParseUint(v, 10, 64)
		case "max":
			p.Max, err = strconv.ParseUint(v, 10, 64)
		case "reflectors":
			p.Reflectors = splitList(v)
		case "active":
			p.Active, err = strconv.Atoi(v)
		case "icmp":
			p.ICMP = splitList(v)
		case "passive":
			if v != "on" && v != "off" {
				return p, fmt.Errorf("autorate policy: passive=%q: want on or off", v)
			}
			p.Passive = v == "on"
		case "threshold":
			p.Threshold, err = time.ParseDuration(v)
		default:
			return p, fmt.Errorf("autorate policy: unknown key %q", k)
		}
		if err != nil {
			return p, fmt.Errorf("autorate policy: %s=%q: %v", k, v, err)
		}
	}
	for _, k := range []string{"iface", "min", "base", "max"} {
		if !seen[k] {
			return p, fmt.Errorf("autorate policy: %s missing", k)
		}
	}
	return p, p.Check()
}

func splitList(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// MinRate is the lowest rate a policy may name: below it one MTU takes more
// than 100 ms to serialize and no delay threshold means anything.
const MinRate = 128_000

// Check reports the first thing wrong with a policy, in one line naming it.
func (p Policy) Check() error {
	switch {
	case p.Iface == "" || len(p.Iface) > 15 || strings.ContainsAny(p.Iface, "/ "):
		return fmt.Errorf("autorate: bad interface name %q", p.Iface)
	case p.Min < MinRate:
		return fmt.Errorf("autorate %s: --min %s is below %s", p.Iface, qdisc.FormatRate(p.Min), qdisc.FormatRate(MinRate))
	case p.Min > p.Max:
		return fmt.Errorf("autorate %s: --min %s is above --max %s", p.Iface, qdisc.FormatRate(p.Min), qdisc.FormatRate(p.Max))
	case p.Base < p.Min || p.Base > p.Max:
		return fmt.Errorf("autorate %s: --base %s is outside --min %s .. --max %s", p.Iface, qdisc.FormatRate(p.Base), qdisc.FormatRate(p.Min), qdisc.FormatRate(p.Max))
	case len(p.Reflectors) == 0 && len(p.ICMP) == 0 && !p.Passive:
		return fmt.Errorf("autorate %s: no signal: give --reflector, --icmp or leave --passive on", p.Iface)
	case p.Threshold < 0 || p.Threshold > time.Second:
		return fmt.Errorf("autorate %s: --threshold %s: want 0..1s", p.Iface, p.Threshold)
	case p.Active < 0 || p.Active > len(p.Reflectors):
		return fmt.Errorf("autorate %s: --active-reflectors %d: want 1..%d, the reflectors given (0: all)", p.Iface, p.Active, len(p.Reflectors))
	}
	for _, r := range p.Reflectors {
		if _, port, err := net.SplitHostPort(r); err != nil || port == "" {
			return fmt.Errorf("autorate %s: reflector %q: want host:port", p.Iface, r)
		}
	}
	seen := append([]string(nil), p.Reflectors...)
	slices.Sort(seen)
	if len(slices.Compact(seen)) != len(p.Reflectors) {
		return fmt.Errorf("autorate %s: a reflector is named twice", p.Iface)
	}
	return nil
}

// Contains reports whether a rate (bit/s) is one the policy allows: status
// takes any such rate of the shaper as no drift.
func (p Policy) Contains(rate uint64) bool {
	// The kernel keeps tbf's rate in bytes per second: allow its rounding.
	return rate+8 >= p.Min && rate <= p.Max+8
}

// Paths of a policy's files. The policy file is the knob's value (and the
// systemd unit's configuration); the state and pid files live on tmpfs and
// die with the daemon.
const (
	PolicyDir = "/etc/lowlat/autorate"
	RunDir    = "/run/lowlat/autorate"
)

// PolicyDirEnv, when set, moves the policy files out of PolicyDir. The
// tests that run beside the package tests use it: those own /etc/lowlat
// while they run (they move it away and back).
const PolicyDirEnv = "LOWLAT_AUTORATE_POLICIES"

// PolicyPath is the policy file of iface.
func PolicyPath(iface string) string {
	dir := PolicyDir
	if d := os.Getenv(PolicyDirEnv); d != "" {
		dir = d
	}
	return dir + "/" + iface + ".policy"
}

// StatePath is the state file the daemon of iface rewrites after every tick.
func StatePath(iface string) string { return RunDir + "/" + iface + ".json" }

// PIDPath is the daemon's pid file: removing the policy stops the daemon
// named there before the qdisc is restored.
func PIDPath(iface string) string { return RunDir + "/" + iface + ".pid" }

// ParsePolicyFor reads a policy as a profile or a command line gives it,
// for iface: the canonical form, where rates may also carry tc's units
// ("min=1mbit base=1800kbit max=3mbit passive=on") and iface= may be left
// out (it is iface then; given, it must be iface). Rates are kept in bit/s,
// so the result's String is the knob value whatever units s used.
func ParsePolicyFor(iface, s string) (Policy, error) {
	fields := strings.Fields(s)
	hasIface := false
	for i, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue // ParsePolicy names it
		}
		switch k {
		case "iface":
			if v != iface {
				return Policy{}, fmt.Errorf("autorate policy: iface=%s, but the policy is for %s", v, iface)
			}
			hasIface = true
		case "min", "base", "max":
			r, err := qdisc.ParseRate(v)
			if err != nil {
				return Policy{}, fmt.Errorf("autorate policy: %s=%q: %v", k, v, err)
			}
			fields[i] = k + "=" + strconv.FormatUint(r, 10)
		}
	}
	if !hasIface {
		fields = append([]string{"iface=" + iface}, fields...)
	}
	return ParsePolicy(strings.Join(fields, " "))
}
