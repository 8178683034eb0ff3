package pathprobe

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"net/netip"
	"sync"
	"time"
)

// walkGapLimit is how many TTLs in a row may stay silent before the first
// round stops waiting for them (scamper's trace stops at five).
const walkGapLimit = 3

// probeRec is one probe sent.
type probeRec struct {
	ttl      int
	sent     time.Time
	answered bool
	rtt      time.Duration
}

// runDatagram sends UDP or ICMP echo probes in rounds, every TTL up to the
// destination's once per round, and reads replies as they come.
//
// The first round walks: each TTL leaves once the one before it has
// answered, so that no probe goes past the destination. Past it, a probe
// would reach the destination all the same and spend the allowance its ICMP
// rate limit gives (Linux: a burst of six, then one a second), leaving
// later rounds fewer answers than the limit allows. A TTL that stays silent
// is waited for up to the timeout, until the walk has waited one timeout in
// all on silent TTLs; after that, for twice the longest round trip seen,
// until walkGapLimit TTLs in a row have stayed silent (the destination
// does not answer, or is far), after which the rest go at the round's
// pace. A TTL that answers costs its round trip, so the first round takes
// about the sum of the hops' round trips, plus at most one timeout and a
// few round trips for silent ones; later rounds keep the interval from
// its end.
func runDatagram(ctx context.Context, cfg *Config, addr netip.Addr, port, flow int) ([]rawHop, int, runOut, error) {
	var nb [4]byte
	rand.Read(nb[:])
	nonce := binary.BigEndian.Uint32(nb[:])
	s, err := openSock(cfg.Proto, addr, port, flow, nonce)
	if err != nil {
		return nil, 0, runOut{}, err
	}
	defer s.close()

	var (
		mu      sync.Mutex
		probes  = map[uint32]*probeRec{}
		bySeq   = map[uint16]uint32{} // echo sequence → probe, for 8-byte quotes
		raw     = make([]rawHop, cfg.MaxHops)
		destTTL = 0
		pending = 0
		settled = make(chan struct{}, 1)
		// answered is signalled on every answer (the walk waits on it);
		// maxRTT is the longest round trip yet.
		answered = make(chan struct{}, 1)
		maxRTT   time.Duration
	)
	done := make(chan error, 1)
	go func() {
		done <- s.read(func(ev event) {
			mu.Lock()
			defer mu.Unlock()
			n, ok := ev.probe, ev.matched
			if !ok && ev.hasEchoSeq {
				n, ok = bySeq[ev.echoSeq]
			}
			p := probes[n]
			if !ok || p == nil || p.answered {
				return
			}
			rtt := ev.rx.Sub(p.sent)
			if rtt > cfg.Timeout {
				return // late: counted as lost, as mtr does
			}
			p.answered, p.rtt = true, rtt
			maxRTT = max(maxRTT, rtt)
			pending--
			select {
			case answered <- struct{}{}:
			default:
			}
			dest := ev.from == addr && (ev.icmpType == 0 || ev.icmpType == 3)
			if dest && (destTTL == 0 || p.ttl < destTTL) {
				destTTL = p.ttl
			}
			raw[p.ttl-1].replies = append(raw[p.ttl-1].replies, reply{addr: ev.from.String(), rtt: float64(rtt.Nanoseconds()) / 1e3, dest: dest})
			if pending == 0 {
				select {
				case settled <- struct{}{}:
				default:
				}
			}
		})
	}()

	var probe uint32
	var sendErr error
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	start := time.Now()
	next := start
	silentBudget, silentRun := cfg.Timeout, 0
	// walk waits, in the first round, for probe n's answer or the
	// destination's, or until its wait ends; at least gap after the send.
	// false when ctx ended.
	walk := func(n uint32, sent time.Time, gap time.Duration) bool {
		mu.Lock()
		wait := max(gap, min(cfg.Timeout, 2*maxRTT))
		mu.Unlock()
		switch {
		case silentBudget > 0:
			wait = max(gap, silentBudget)
		case silentRun >= walkGapLimit:
			wait = gap
		}
		deadline := sent.Add(wait)
		for {
			mu.Lock()
			done := probes[n].answered || destTTL > 0
			mu.Unlock()
			if done {
				silentRun = 0
				return sleep(ctx, t, time.Until(sent.Add(gap)))
			}
			left := time.Until(deadline)
			if left <= 0 {
				silentBudget -= min(silentBudget, time.Since(sent))
				silentRun++
				return true
			}
			t.Reset(left)
			select {
			case <-answered:
				if !t.Stop() {
					<-t.C
				}
			case <-t.C:
			case <-ctx.Done():
				if !t.Stop() {
					<-t.C
				}
				return false
			}
		}
	}
rounds:
	for round := 0; round < cfg.Count; round++ {
		mu.Lock()
		limit := cfg.MaxHops
		if destTTL > 0 {
			limit = destTTL
		}
		mu.Unlock()
		gap := min(cfg.Interval/time.Duration(limit+1), 20*time.Millisecond)
		for ttl := 1; ttl <= limit; ttl++ {
			mu.Lock()
			if destTTL > 0 && ttl > destTTL {
				mu.Unlock()
				break
			}
			// Sent under the lock: a reply read before the send time is
			// recorded (a first hop answers in tens of µs) would look late.
			// Its kernel receive time does not wait for the lock.
			probe++
			sent, err := s.send(probe, ttl)
			if err != nil {
				mu.Unlock()
				sendErr = err
				break rounds
			}
			probes[probe] = &probeRec{ttl: ttl, sent: sent}
			bySeq[uint16(probe)] = probe
			raw[ttl-1].sent++
			pending++
			mu.Unlock()
			if round == 0 {
				if !walk(probe, sent, gap) {
					break rounds
				}
				continue
			}
			if ttl < limit && !sleep(ctx, t, gap) {
				break rounds
			}
		}
		if cfg.Progress != nil {
			cfg.Progress(round+1, cfg.Count)
		}
		if round == 0 {
			// The walk takes what the path's round trips take: later
			// rounds keep the interval from its end.
			next = time.Now()
		}
		next = next.Add(cfg.Interval)
		if round < cfg.Count-1 && !sleep(ctx, t, time.Until(next)) {
			break
		}
	}
	// The last replies: until every probe is answered or the timeout. A
	// signal may be left from an earlier moment all were answered, so the
	// count is checked again after each.
	last := time.NewTimer(cfg.Timeout)
	defer last.Stop()
wait:
	for ctx.Err() == nil {
		mu.Lock()
		waiting := pending > 0
		mu.Unlock()
		if !waiting {
			break
		}
		select {
		case <-settled:
		case <-last.C:
			break wait
		case <-ctx.Done():
		}
	}
	s.f.SetReadDeadline(time.Now())
	<-done
	mu.Lock()
	defer mu.Unlock()
	// A send that fails half-way (the route went away) ends the run with
	// what was measured, as an unreachable destination does.
	if sendErr != nil && len(probes) == 0 {
		return nil, 0, runOut{}, sendErr
	}
	for n := uint32(1); n <= probe; n++ {
		p := probes[n]
		at := p.sent.Sub(start)
		raw[p.ttl-1].probes = append(raw[p.ttl-1].probes, probeOut{at: at, rx: at + p.rtt, answered: p.answered})
	}
	if destTTL > 0 {
		// Probes past the destination's TTL (its answer came after the
		// walk's wait): the destination answered them too, and they are
		// not hops.
		raw = raw[:destTTL]
	}
	kind := "recverr"
	if s.raw {
		kind = "raw"
	}
	return raw, destTTL, runOut{flow: s.flow, label: s.label, socket: kind}, nil
}
