package autorate

import (
	"cmp"
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

// probeInterval spreads MaxProbeRate over n targets, each probed at most
// every 50 ms: a lone reflector gets four probes a tick, whose least is the
// reading (see readings.take); five or more targets share the rate and
// some ticks go without a sample of each.
func probeInterval(n int, maxRate float64) time.Duration {
	if n == 0 {
		return 0
	}
	return max(time.Duration(float64(n)/maxRate*float64(time.Second)), 50*time.Millisecond)
}

// readings gathers active probes' samples between two ticks. A signal
// without a sample in a tick is simply absent: a lost probe is not a delay.
type readings struct {
	mu   sync.Mutex
	low  map[string]time.Duration // the tick's least sample per signal
	seen map[string]time.Time     // last sample per signal, for health
}

func newReadings() *readings {
	return &readings{low: map[string]time.Duration{}, seen: map[string]time.Time{}}
}

func (r *readings) put(signal string, v time.Duration) {
	r.mu.Lock()
	if l, ok := r.low[signal]; !ok || v < l {
		r.low[signal] = v
	}
	r.seen[signal] = time.Now()
	r.mu.Unlock()
}

// take returns each signal's least sample over the tick and starts the
// next. The least, not the mean: a probe waits behind the packet being
// sent at the shaper and at the bottleneck, up to two MTU times at the
// rate (24 ms at 1 Mbit/s, more than the threshold leaves), so single
// samples scatter at low rates while a queue lifts every sample of the
// tick alike. Read with the mean, that scatter was taken for bloat, the
// rate cut, and the scatter grew: in the VM's capped-uplink-varying the
// rate sank to 0.55 Mbit/s under a 1 Mbit/s cap and stayed there after the
// cap rose to 3.
func (r *readings) take() []Reading {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Reading
	for s, v := range r.low {
		out = append(out, Reading{Signal: s, Value: v})
	}
	clear(r.low)
	slices.SortFunc(out, func(a, b Reading) int { return cmp.Compare(a.Signal, b.Signal) })
	return out
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
func reflectorSignal(target string) string { return oneWayPrefix + target }

// oneWayPrefix starts a reflector's signal name: the control law ranks
// one-way delays first.
const oneWayPrefix = "owd:"

// rttPrefix starts a reflector's round trip, read with its one-way delay:
// the pool tells a step of the reflector's clock from a queue by it (see
// reflector.correct). The control law does not see it.
const rttPrefix = "rtt:"

// icmpSignal names an echo target's signal.
func icmpSignal(host string) string { return "icmp:" + host }

// PassiveSignal is the name of the tcp_info signal.
const PassiveSignal = "passive"

// probeTimeout is how long a probe waits for its answer.
const probeTimeout = time.Second

// active runs the reflector and ICMP watches; they stop while the link is
// idle and start again when it is not. One reflector's watch may be swapped
// for another's (the pool's replacements) while they run.
type active struct {
	interval time.Duration
	out      *readings

	mu     sync.Mutex
	refl   []string
	icmp   []string
	ctx    context.Context // the watches' parent while they run
	cancel context.CancelFunc
	stops  map[string]context.CancelFunc // each reflector's watch
	wg     sync.WaitGroup
}

// newActive probes the reflectors and echo targets given, sharing maxRate.
func newActive(reflectors, icmp []string, maxRate float64, out *readings) *active {
	return &active{refl: slices.Clone(reflectors), icmp: icmp, interval: probeInterval(len(reflectors)+len(icmp), maxRate), out: out}
}

// start launches the watches if they are not running, and reports whether
// it did.
func (a *active) start(ctx context.Context) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cancel != nil || a.interval == 0 {
		return false
	}
	a.ctx, a.cancel = context.WithCancel(ctx)
	a.stops = map[string]context.CancelFunc{}
	for _, t := range a.refl {
		a.watchReflector(t)
	}
	// An echo target gives the RTT.
	for _, h := range a.icmp {
		ctx := a.ctx
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			cfg := probe.WatchConfig{Target: h, Interval: a.interval, Timeout: probeTimeout}
			_ = probe.WatchICMP(ctx, cfg, func(s probe.Sample) {
				if !s.Lost {
					a.out.put(icmpSignal(h), s.RTT)
				}
			})
		}()
	}
	return true
}

// watchReflector starts target's watch; a.mu is held. A reflector gives
// the one-way delay up, and the round trip with it.
func (a *active) watchReflector(target string) {
	ctx, cancel := context.WithCancel(a.ctx)
	a.stops[target] = cancel
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		cfg := probe.WatchConfig{Target: target, Interval: a.interval, Timeout: probeTimeout}
		_ = probe.WatchUDP(ctx, cfg, func(s probe.Sample) {
			if s.Lost || !s.HasUp {
				return
			}
			a.out.put(reflectorSignal(target), s.Up)
			a.out.put(rttPrefix+target, s.RTT)
		})
	}()
}

// swap probes next instead of old, at once when the watches run.
func (a *active) swap(old, next string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	i := slices.Index(a.refl, old)
	if i < 0 {
		return
	}
	a.refl[i] = next
	if a.cancel == nil {
		return
	}
	if stop := a.stops[old]; stop != nil {
		stop()
		delete(a.stops, old)
	}
	a.watchReflector(next)
}

// stop ends the watches and waits for them.
func (a *active) stop() {
	a.mu.Lock()
	c := a.cancel
	a.cancel, a.ctx, a.stops = nil, nil, nil
	a.mu.Unlock()
	if c != nil {
		c()
		a.wg.Wait()
	}
}

// passive reads the host's own busy TCP connections each tick: those whose
// packets leave through the shaped interface. A LAN connection (to a NAS,
// a backup server, another host on the switch) never meets the uplink's
// queue: counted, its small srtt pulled the median delay down and its bytes
// inflated what the connections got acknowledged, the estimate of the cap.
type passive struct {
	// conns is the seam: sockets.Connections on a live host.
	conns func() ([]sockets.Socket, error)
	// routes says which interface a connection leaves by; ifindex is the
	// shaped one. nil routes counts every connection (tests of the rest).
	routes  *routeCache
	ifindex int
	acked   map[string]uint64 // bytes_acked per connection at the last tick
	last    time.Time
	// own is the shaper's own queue at each recent tick, for what srtt
	// still carries of it (see srttMemory).
	own []point
}

// newPassive reads the connections routed out through iface.
func newPassive(iface string) (*passive, error) {
	i, lookup, err := kernelRoutes(iface)
	if err != nil {
		return nil, err
	}
	return &passive{conns: sockets.Connections, routes: newRouteCache(lookup), ifindex: i, acked: map[string]uint64{}}, nil
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
		if ti == nil || loopback(s.Remote) || !p.shaped(now, s) {
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
	if p.routes != nil {
		p.routes.forget(now)
	}
	if len(delays) == 0 {
		return 0, 0, false
	}
	slices.Sort(delays)
	slices.Sort(mss)
	m := float64(mss[(len(mss)-1)/2])
	if complete && secs > 0 {
		// Acknowledged bytes are payload; the shaper's rate counts whole
		// frames. Each segment of snd_mss bytes carries about 66 more on
		// the wire (Ethernet, IP, TCP with timestamps).
		wire := 1.0
		if m > 0 {
			wire = (m + 66) / m
		}
		delivered = float64(ackedBytes) * 8 / secs * wire
	}
	held := p.ownHeld(now, ownQueue, srttMemory(len(delays), m, delivered))
	delay = max(delays[(len(delays)-1)/2]-held, 0)
	return delay, delivered, true
}

// Bounds on srttMemory: a tick, and the longest window ownHeld keeps.
const (
	srttMemoryMin = 200 * time.Millisecond
	srttMemoryMax = 2 * time.Second
)

// srttMemory is how far back a connection's srtt still carries a delay: it
// moves 1/8 toward each ACK's RTT sample, and after 8 ACKs a third of a
// change is still to come (7/8 to the 8th). With delayed ACKs a connection
// gets one per two segments, so n busy connections sharing rate (bit/s)
// with segments of mss bytes get 8 ACKs each in 16·n·mss·8/rate: 0.74 s at
// 1 Mbit/s for the lab's 4 flows, 0.25 s at 3. Unknown rate: the longest.
func srttMemory(n int, mss, rate float64) time.Duration {
	if rate <= 0 || mss <= 0 {
		return srttMemoryMax
	}
	d := time.Duration(16 * float64(n) * mss * 8 / rate * float64(time.Second))
	return min(max(d, srttMemoryMin), srttMemoryMax)
}

// ownHeld is what the shaper's own queue adds to srtt: the most it was over
// the srtt's memory, not only now. srtt lags its RTT samples, so a queue
// the shaper has just drained (the rate rose) is still in it for a while,
// and taken off at its size now it read as a queue downstream: in the VM's
// capped-uplink-varying, passive alone, each probe 7 % over a ceiling at a
// third of the 3 Mbit/s cap read 24 ms within a tick, ended as if it had
// found the cap, and the rate stayed at 1 Mbit/s for the whole step. The
// most, not a weighted sum: a queue past the shaper, the one this signal
// is for, builds while the shaper's own stays empty (the cap drains slower
// than the shaper), so taking off too much of a past own queue only delays
// the verdict while srtt forgets it.
func (p *passive) ownHeld(now time.Time, own, memory time.Duration) time.Duration {
	p.own = append(p.own, point{now, own})
	i := 0
	for i < len(p.own) && now.Sub(p.own[i].at) > srttMemoryMax {
		i++
	}
	p.own = p.own[i:]
	held := own
	for _, o := range p.own {
		if now.Sub(o.at) <= memory {
			held = max(held, o.delay)
		}
	}
	return held
}

// shaped reports whether s's packets leave through the shaped interface.
// A connection whose route cannot be read is left out: a signal that goes
// quiet holds the rate, one that reads a LAN's delay moves it wrongly.
func (p *passive) shaped(now time.Time, s *sockets.Socket) bool {
	if p.routes == nil {
		return true
	}
	k, ok := connRoute(s.Local, s.Remote, s.Mark, s.UID)
	return ok && p.routes.out(now, k) == p.ifindex
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
