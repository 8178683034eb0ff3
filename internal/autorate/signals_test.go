package autorate

import (
	"fmt"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/sockets"
)

// A tick's reading of an active signal is its least sample: serialization
// scatter lifts single samples, a queue lifts them all.
func TestReadingsTakeLeast(t *testing.T) {
	r := newReadings()
	for _, v := range []time.Duration{31, 9, 24, 17} {
		r.put("owd:a", v*time.Millisecond)
	}
	r.put("icmp:b", 50*time.Millisecond)
	got := r.take()
	if len(got) != 2 || got[0] != (Reading{Signal: "icmp:b", Value: 50 * time.Millisecond}) || got[1] != (Reading{Signal: "owd:a", Value: 9 * time.Millisecond}) {
		t.Errorf("take: %+v, want icmp:b 50ms and owd:a's least, 9ms", got)
	}
	if got := r.take(); len(got) != 0 {
		t.Errorf("a tick with no samples read %+v, want nothing (a lost probe is no delay)", got)
	}
	if r.lastSeen("owd:a").IsZero() {
		t.Errorf("owd:a's last sample forgotten by take")
	}
}

// The probe budget: all targets together within the rate, no target more
// often than every 50 ms.
func TestProbeInterval(t *testing.T) {
	for _, c := range []struct {
		n    int
		want time.Duration
	}{{0, 0}, {1, 50 * time.Millisecond}, {2, 100 * time.Millisecond}, {5, 250 * time.Millisecond}} {
		got := probeInterval(c.n, MaxProbeRate)
		if got != c.want {
			t.Errorf("%d targets: every %v, want %v", c.n, got, c.want)
		}
		if c.n > 0 && float64(c.n)/got.Seconds() > MaxProbeRate+1e-9 {
			t.Errorf("%d targets every %v: over %v Hz together", c.n, got, MaxProbeRate)
		}
	}
}

// srtt − min_rtt grows by two MTU times' difference when the rate falls
// under the one min_rtt was seen at, and the controller takes that out; once
// the higher rate is older than the kernel's min_rtt window, nothing is.
func TestSerialRise(t *testing.T) {
	p := policy()
	c := NewController(p, DefaultConfig())
	t0 := time.Unix(1_700_000_000, 0)
	c.rates = []safeRate{{rate: 2_000_000, at: t0}, {rate: 1_000_000, at: t0.Add(10 * time.Second)}}
	c.rate = 1_000_000
	want := 2 * (c.mtuTime(1_000_000) - c.mtuTime(2_000_000))
	if got := c.serialRise(t0.Add(20 * time.Second)); got != want {
		t.Errorf("at 1 Mbit/s, 2 Mbit/s 20 s ago: rise %v, want %v", got, want)
	}
	if got := c.serialRise(t0.Add(10*time.Second + MinRTTWindow)); got != 0 {
		t.Errorf("2 Mbit/s last in force %v ago: rise %v, want 0", MinRTTWindow, got)
	}
	// A passive reading is taken as delay over the floor less that rise.
	c2 := NewController(p, DefaultConfig())
	c2.rates, c2.rate = []safeRate{{rate: 2_000_000, at: t0}}, 1_000_000
	d, _ := c2.delay(Input{At: t0.Add(time.Second), Readings: []Reading{{Signal: PassiveSignal, Value: want + 3*time.Millisecond, Relative: true}}})
	if d != 3*time.Millisecond {
		t.Errorf("passive %v at half the rate of its min_rtt: delay %v, want 3ms", want+3*time.Millisecond, d)
	}
}

// The shaper's own queue comes off a probe's delay, not off its baseline: a
// baseline that learnt value − own would sink under the path's floor each
// time a probe found the FIFO shorter than the tick's most.
func TestOwnQueueSparesBaseline(t *testing.T) {
	c := NewController(policy(), DefaultConfig())
	t0 := time.Unix(1_700_000_000, 0)
	floor := 20 * time.Millisecond
	_, _ = c.delay(Input{At: t0, Readings: []Reading{{Signal: "owd:a", Value: floor}}})
	// The probe waited 5 ms in the FIFO; the tick's largest backlog was 30.
	d, _ := c.delay(Input{At: t0.Add(200 * time.Millisecond), Readings: []Reading{{Signal: "owd:a", Value: floor + 5*time.Millisecond, Own: 30 * time.Millisecond}}})
	if d != 0 {
		t.Errorf("delay %v, want 0 (all of it the host's own queue)", d)
	}
	if b := c.baselines["owd:a"].Baseline; b < floor {
		t.Errorf("baseline %v fell under the path's floor %v", b, floor)
	}
}

// The rate history serialRise reads stays within its window even with no
// passive signal to read it: a daemon runs for months.
func TestRateHistoryBounded(t *testing.T) {
	p := policy()
	p.Passive = false
	c := NewController(p, DefaultConfig())
	tr := run(t, c, newLink(3, false), 20*time.Minute, stepSchedule)
	changes := 0
	for _, d := range tr.dec {
		if d.Changed() {
			changes++
		}
	}
	// Five minutes of 200 ms ticks at most, of the run's many changes.
	if n := len(c.rates); n > int(MinRTTWindow/c.cfg.Tick)+1 || n >= changes {
		t.Errorf("%d rates kept after %d changes in 20 min, want those of the last %v only", n, changes, MinRTTWindow)
	}
}

// srtt still carries the shaper's own queue for a while after the shaper
// has drained it: the passive signal takes off the most that queue was over
// srtt's memory, so a rate that rises and drains it reads no queue past the
// shaper; once srtt has forgotten it, it is taken off at its size now.
func TestPassiveOwnQueueAsSrttRemembers(t *testing.T) {
	acked := uint64(0)
	rtt := uint32(0)
	p := &passive{acked: map[string]uint64{}, conns: func() ([]sockets.Socket, error) {
		var ss []sockets.Socket
		for i := range 4 {
			b := acked
			ss = append(ss, sockets.Socket{
				Local: fmt.Sprintf("10.0.0.1:%d", 40000+i), Remote: "10.0.0.2:5201",
				SendQ:   30000,
				TCPInfo: &sockets.TCPInfo{RTTus: rtt, MinRTTus: 40000, SndMSS: 1448, Unacked: 10, BytesAcked: &b},
			})
		}
		return ss, nil
	}}
	t0 := time.Unix(1_700_000_000, 0)
	// 1 Mbit/s over 4 connections, acknowledged at that rate: 8 ACKs a
	// connection take 0.74 s (srttMemory).
	step := func(at time.Duration, srttOver, own time.Duration) time.Duration {
		t.Helper()
		acked += 1_000_000 / 8 / 4 * 200 / 1000 * 1448 / (1448 + 66)
		rtt = uint32((40*time.Millisecond + srttOver).Microseconds())
		d, delivered, ok := p.read(t0.Add(at), own)
		if !ok {
			t.Fatalf("at %v: no reading", at)
		}
		if at > 0 && (delivered < 0.95e6 || delivered > 1.05e6) {
			t.Fatalf("at %v: delivered %.0f bit/s, want 1 Mbit/s", at, delivered)
		}
		return d
	}
	if d := step(0, 30*time.Millisecond, 25*time.Millisecond); d != 5*time.Millisecond {
		t.Errorf("srtt 30 ms over min_rtt, own queue 25: delay %v, want 5ms", d)
	}
	// The rate rose: the shaper drained its queue to 3 ms within the tick,
	// srtt still holds most of it.
	if d := step(200*time.Millisecond, 28*time.Millisecond, 3*time.Millisecond); d != 3*time.Millisecond {
		t.Errorf("own queue drained from 25 to 3 ms, srtt 28 over: delay %v, want 3ms (28 less the 25 srtt still carries)", d)
	}
	for at := 400 * time.Millisecond; at < 2*time.Second; at += 200 * time.Millisecond {
		step(at, 8*time.Millisecond, 3*time.Millisecond)
	}
	if d := step(2*time.Second, 9*time.Millisecond, 3*time.Millisecond); d != 6*time.Millisecond {
		t.Errorf("1.8 s after the drain, srtt 9 over, own 3: delay %v, want 6ms", d)
	}
}

func TestSrttMemory(t *testing.T) {
	for _, c := range []struct {
		n         int
		rate      float64
		want      time.Duration
		tolerance time.Duration
	}{
		{4, 1e6, 741 * time.Millisecond, 2 * time.Millisecond},
		{4, 3e6, 247 * time.Millisecond, 2 * time.Millisecond},
		{1, 100e6, srttMemoryMin, 0},
		{4, 0, srttMemoryMax, 0},
		{16, 0.5e6, srttMemoryMax, 0},
	} {
		got := srttMemory(c.n, 1448, c.rate)
		if got < c.want-c.tolerance || got > c.want+c.tolerance {
			t.Errorf("%d connections at %.0f bit/s: memory %v, want %v", c.n, c.rate, got, c.want)
		}
	}
}
