package probe

import (
	"context"
	"fmt"
	"net"
	"time"
)

// A watch probes one target without end (lowlat monitor): probes leave on a
// fixed schedule, each one's fate is handed to a Sink as it is known, and
// trouble on the path (a dead reflector, a refused connection, an unreachable
// host) is counted as loss and retried, never returned. A watch returns only
// when its context ends or its configuration is unusable.

// LossDir says which way a lost probe was lost.
type LossDir string

// Loss directions. A reflector's per-session count tells "up" (the probe
// never reached it) from "down" (its reply never came back); ICMP, a probe
// whose session died with the reflector, and a TCP exchange cut by a reset
// cannot say, and report "unknown".
const (
	LossUp      LossDir = "up"
	LossDown    LossDir = "down"
	LossUnknown LossDir = "unknown"
)

// Sample is the fate of one probe of a watch.
type Sample struct {
	// Sent is when the probe left (for crr: when the connect began).
	Sent time.Time
	// RTT is the round trip (udp, tcp, icmp) or the whole transaction,
	// connect to last response byte (crr); 0 when Lost.
	RTT time.Duration
	// FirstByte is, for crr, connect start to the first response byte.
	FirstByte time.Duration
	// Up is, for udp, the one-way delay to the reflector: its receive
	// time less the send time. The two wall clocks differ by an unknown
	// offset, so only changes of Up mean anything (autorate compares it
	// with its own baseline); HasUp says the reply carried it.
	Up    time.Duration
	HasUp bool
	// Lost means no reply came within the watch's Timeout (or the exchange
	// failed); Dir says which way when that is known.
	Lost bool
	Dir  LossDir
}

// Sink receives samples, in no particular order across probes, from the
// watch's own goroutines. It must not block: the schedule waits for it.
type Sink func(Sample)

// WatchConfig is one watched target.
type WatchConfig struct {
	// Target is host:port for udp, tcp and crr; a host name or address
	// for icmp.
	Target string
	// Interval is the time between probes (the isochronous stream for udp).
	Interval time.Duration
	// Size is the probe's payload in bytes (udp, tcp, icmp), the request
	// for crr; 0: the probe's default.
	Size int
	// Response is crr's response size in bytes; 0: 1 KiB.
	Response int
	// DSCP (0..63) marks the probes.
	DSCP int
	// Timeout is how long a probe waits for its reply before it counts as
	// lost; 0: 2 s.
	Timeout time.Duration
	// Key authenticates to a reflector that wants one (udp, tcp, crr).
	Key []byte
	// Resolver looks up an icmp target's name; nil: the system's.
	Resolver *net.Resolver
	// State, when set, is called when the target's state changes, never
	// once per probe: failing with the reason ("udp 10.0.0.2:7431: no
	// replies since 12:01:05"), then healthy again (failing false, a line
	// saying so).
	State func(failing bool, line string)
}

// Watch limits.
const (
	// MinWatchInterval keeps a watch within a reflector's default session
	// rate (10 ms, like irtt's) and the monitor's CPU budget.
	MinWatchInterval = 10 * time.Millisecond
	MaxWatchInterval = 10 * time.Minute
	defaultTimeout   = 2 * time.Second
)

// Check validates c and fills its defaults; kind is "udp", "tcp", "crr" or
// "icmp". Errors name the field.
func (c *WatchConfig) Check(kind string) error {
	if c.Timeout == 0 {
		c.Timeout = defaultTimeout
	}
	if c.Response == 0 && kind == "crr" {
		c.Response = 1 << 10
	}
	switch {
	case c.Target == "":
		return fmt.Errorf("address: missing")
	case c.Interval < MinWatchInterval:
		return fmt.Errorf("interval %s: must be at least %s", c.Interval, MinWatchInterval)
	case c.Interval > MaxWatchInterval:
		return fmt.Errorf("interval %s: must be at most %s", c.Interval, MaxWatchInterval)
	case c.Size < 0 || c.Size > MaxMessage:
		return fmt.Errorf("size %d: must be 0..%d bytes", c.Size, MaxMessage)
	case c.Response < 0 || c.Response > 1<<20:
		return fmt.Errorf("response %d: must be 0..%d bytes", c.Response, 1<<20)
	case c.DSCP < 0 || c.DSCP > 63:
		return fmt.Errorf("dscp %d: must be 0..63", c.DSCP)
	case c.Timeout < time.Millisecond || c.Timeout > time.Minute:
		return fmt.Errorf("timeout %s: must be 1ms..1m", c.Timeout)
	}
	return nil
}

func (c *WatchConfig) state(failing bool, format string, args ...any) {
	if c.State != nil {
		c.State(failing, fmt.Sprintf(format, args...))
	}
}

// firstTick is when a watch sends its first probe: the next multiple of
// its interval on the wall clock. Watches with the same interval (or
// multiples of it) then tick together, and one wake-up of the process
// sends all their probes and, a round trip later, reads all their
// replies: twenty targets at 10 Hz cost the CPU of one, where staggered
// schedules would wake the process 400 times a second (each wake-up is
// most of a probe's cost, and more so in a VM).
func firstTick(now time.Time, interval time.Duration) time.Time {
	return now.Truncate(interval).Add(interval)
}

// runSchedule is a watch's loop until ctx ends: tick at each tick time,
// and housekeep (time probes out, resend, settle) at every wake-up, before
// the tick and after it. housekeep returns when it next has work (zero:
// nothing pending) and may be nil.
func runSchedule(ctx context.Context, interval time.Duration, tick func(now time.Time), housekeep func(now time.Time) time.Time) {
	next := firstTick(time.Now(), interval)
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	keep := func(now time.Time) time.Time {
		if housekeep == nil {
			return time.Time{}
		}
		return housekeep(now)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		now := time.Now()
		wake := keep(now)
		if !now.Before(next) {
			tick(now)
			next = next.Add(interval)
			if now.Sub(next) > interval { // the machine stalled: skip, do not burst
				next = firstTick(now, interval)
			}
			wake = keep(time.Now())
		}
		timer.Reset(time.Until(minTime(next, wake)))
	}
}

// minTime is the earlier of a and b, where a zero b is "never".
func minTime(a, b time.Time) time.Time {
	if b.IsZero() || a.Before(b) {
		return a
	}
	return b
}
