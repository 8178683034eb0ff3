package autorate

import (
	"context"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/lowlat/lowlat/internal/probe"
	"github.com/lowlat/lowlat/internal/sockets"
)

// MaxProbeRate is the default bound on active probes, all targets together
// (cake-autorate's users found more costs CPU on small boxes and gets ICMP
// rate-limited by hops).
const MaxProbeRate = 20.0

// probeInterval spreads MaxProbeRate over n targets, at least one probe
// every 100 ms each so every 200 ms tick sees a sample.
func probeInterval(n int, maxRate float64) time.Duration {
	if n == 0 {
		return 0
	}
	return max(time.Duration(float64(n)/maxRate*float64(time.Second)), 100*time.Millisecond)
}

// readings gathers active probes' samples between two ticks. A signal
// without a sample in a tick is simply absent: a lost probe is not a delay.
type readings struct {
	mu   sync.Mutex
	sum  map[string]time.Duration
	n    map[string]int
	seen map[string]time.Time // last sample per signal, for health
}

func newReadings() *readings {
	return &readings{sum: map[string]time.Duration{}, n: map[string]int{}, seen: map[string]time.Time{}}
}

func (r *readings) put(signal string, v time.Duration) {
	r.mu.Lock()
	r.sum[signal] += v
	r.n[signal]++
	r.seen[signal] = time.Now()
	r.mu.Unlock()
}

// take returns each signal's mean over the tick and starts the next.
func (r *readings) take() []Reading {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Reading
	for s, sum := range r.sum {
		out = append(out, Reading{Signal: s, Value: sum / time.Duration(r.n[s])})
	}
	clear(r.sum)
	clear(r.n)
	slices.SortFunc(out, func(a, b Reading) int { return cmpString(a.Signal, b.Signal) })
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// lastSeen is when a signal last gave a sample (zero: never).
func (r *readings) lastSeen(signal string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[signal]
}

// reflectorSignal names a reflector's signal: its one-way delay up, which
// only this host's egress queue and the uplink add to (an RTT would count
// the downlink's queue too, which the egress shaper cannot drain).
func reflectorSignal(target string) string { return "owd:" + target }

// icmpSignal names an echo target's signal.
func icmpSignal(host string) string { return "icmp:" + host }

// PassiveSignal is the name of the tcp_info signal.
const PassiveSignal = "passive"

// active runs the reflector and ICMP watches; they stop while the link is
// idle and start again when it is not.
type active struct {
	pol      Policy
	interval time.Duration
	out      *readings

	mu     sync.Mutex
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newActive(p Policy, maxRate float64, out *readings) *active {
	return &active{pol: p, interval: probeInterval(len(p.Reflectors)+len(p.ICMP), maxRate), out: out}
}

// start launches the watches if they are not running.
func (a *active) start(ctx context.Context) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cancel != nil || a.interval == 0 {
		return
	}
	ctx, a.cancel = context.WithCancel(ctx)
	for _, t := range a.pol.Reflectors {
		sig := reflectorSignal(t)
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			cfg := probe.WatchConfig{Target: t, Interval: a.interval, Timeout: time.Second}
			_ = probe.WatchUDP(ctx, cfg, func(s probe.Sample) {
				if !s.Lost && s.HasUp {
					a.out.put(sig, s.Up)
				}
			})
		}()
	}
	for _, h := range a.pol.ICMP {
		sig := icmpSignal(h)
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			cfg := probe.WatchConfig{Target: h, Interval: a.interval, Timeout: time.Second}
			_ = probe.WatchICMP(ctx, cfg, func(s probe.Sample) {
				if !s.Lost {
					a.out.put(sig, s.RTT)
				}
			})
		}()
	}
}

// stop ends the watches and waits for them.
func (a *active) stop() {
	a.mu.Lock()
	c := a.cancel
	a.cancel = nil
	a.mu.Unlock()
	if c != nil {
		c()
		a.wg.Wait()
	}
}

// passive reads the host's own busy TCP connections each tick.
type passive struct {
	// conns is the seam: sockets.Connections on a live host.
	conns func() ([]sockets.Socket, error)
	acked map[string]uint64 // bytes_acked per connection at the last tick
	last  time.Time
}

func newPassive() *passive {
	return &passive{conns: sockets.Connections, acked: map[string]uint64{}}
}

// busyWithin is how recently a connection must have sent data to count.
const busyWithin = time.Second

// read returns the passive delay (the median over busy connections of
// srtt - min_rtt, less what this host's own shaper queue adds to it) and the
// rate those connections had acknowledged since the last read (bit/s).
// ok is false when no connection is busy.
func (p *passive) read(now time.Time, ownQueue time.Duration) (delay time.Duration, delivered float64, ok bool) {
	ss, err := p.conns()
	if err != nil {
		return 0, 0, false
	}
	var delays []time.Duration
	var mss []uint32
	var ackedBytes uint64
	complete := !p.last.IsZero()
	next := make(map[string]uint64, len(p.acked))
	for i := range ss {
		s := &ss[i]
		ti := s.TCPInfo
		if ti == nil || loopback(s.Remote) {
			continue
		}
		key := s.Local + ">" + s.Remote
		if ti.BytesAcked != nil {
			next[key] = *ti.BytesAcked
			// A connection new since the last tick has no count yet:
			// its bytes before now are not this tick's.
			if prev, seen := p.acked[key]; seen && *ti.BytesAcked >= prev {
				ackedBytes += *ti.BytesAcked - prev
			}
		} else {
			complete = false
		}
		if ti.MinRTTus == 0 || ti.LastDataSentMs > uint32(busyWithin/time.Millisecond) || (ti.Unacked == 0 && s.SendQ == 0) {
			continue
		}
		delays = append(delays, time.Duration(int64(ti.RTTus)-int64(ti.MinRTTus))*time.Microsecond)
		mss = append(mss, ti.SndMSS)
	}
	secs := now.Sub(p.last).Seconds()
	p.acked, p.last = next, now
	if len(delays) == 0 {
		return 0, 0, false
	}
	slices.Sort(delays)
	delay = max(delays[(len(delays)-1)/2]-ownQueue, 0)
	if complete && secs > 0 {
		// Acknowledged bytes are payload; the shaper's rate counts whole
		// frames. Each segment of snd_mss bytes carries about 66 more on
		// the wire (Ethernet, IP, TCP with timestamps).
		slices.Sort(mss)
		m := float64(mss[(len(mss)-1)/2])
		wire := 1.0
		if m > 0 {
			wire = (m + 66) / m
		}
		delivered = float64(ackedBytes) * 8 / secs * wire
	}
	return delay, delivered, true
}

// loopback reports whether an "ADDR:PORT" is on the loopback network: such
// connections never cross the shaper.
func loopback(hostport string) bool {
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
