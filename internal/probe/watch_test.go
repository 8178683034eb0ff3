package probe

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// tally collects a watch's samples.
type tally struct {
	mu      sync.Mutex
	samples []Sample
	states  []string
}

func (t *tally) sink(s Sample) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.samples = append(t.samples, s)
}

func (t *tally) state(failing bool, line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.states = append(t.states, fmt.Sprintf("%v %s", failing, line))
}

// between counts replies and losses among samples sent in [from, to).
func (t *tally) between(from, to time.Time) (ok, lost int, dirs map[LossDir]int, fb int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	dirs = map[LossDir]int{}
	for _, s := range t.samples {
		if s.Sent.Before(from) || !s.Sent.Before(to) {
			continue
		}
		if s.Lost {
			lost++
			dirs[s.Dir]++
			continue
		}
		if s.RTT <= 0 || s.RTT > time.Second {
			panic(fmt.Sprintf("sample RTT %v", s.RTT))
		}
		if s.FirstByte > 0 {
			fb++
		}
		ok++
	}
	return
}

// serveOn serves on addr ("127.0.0.1:0" for any port) until the
// returned stop is called.
func serveOn(t *testing.T, addr string) (string, func()) {
	t.Helper()
	r := NewReflector(ReflectorConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	var err error
	for i := 0; i < 50; i++ { // the old socket's port may take a moment to free
		if err = r.Listen(ctx, addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = r.Serve(ctx); close(done) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return r.Addr(), stop
}

// A watch measures while the reflector lives, counts every probe lost
// while it is gone, and measures again once it is back: no probe is
// unaccounted for, and the watch never returns on its own.
func TestWatchSurvivesReflectorRestart(t *testing.T) {
	// A span longer than the test: the udp watch must notice the dead
	// session by its silence, not wait for the span's end.
	defer func(s time.Duration) { sessionSpan = s }(sessionSpan)
	sessionSpan = time.Minute
	for _, kind := range []string{"udp", "tcp", "crr"} {
		t.Run(kind, func(t *testing.T) {
			addr, stop := serveOn(t, "127.0.0.1:0")
			var tl tally
			cfg := WatchConfig{Target: addr, Interval: 20 * time.Millisecond, Timeout: 300 * time.Millisecond, State: tl.state}
			watch := map[string]func(context.Context, WatchConfig, Sink) error{"udp": WatchUDP, "tcp": WatchTCP, "crr": WatchCRR}[kind]
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- watch(ctx, cfg, tl.sink) }()

			time.Sleep(1500 * time.Millisecond)
			killed := time.Now()
			stop()
			time.Sleep(1500 * time.Millisecond)
			revived := time.Now()
			serveOn(t, addr)
			time.Sleep(2500 * time.Millisecond)
			end := time.Now()
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("watch returned %v", err)
			}

			ok, lost, _, fb := tl.between(start, killed)
			if ok < 60 || lost > 2 {
				t.Errorf("alive: %d replies, %d lost; want ~75 replies, no loss", ok, lost)
			}
			if kind == "crr" && fb != ok {
				t.Errorf("crr: %d of %d samples carry a first-byte time", fb, ok)
			}
			ok, lost, dirs, _ := tl.between(killed.Add(cfg.Timeout), revived)
			if ok != 0 || lost < 50 {
				t.Errorf("dead: %d replies, %d lost (%v); want none, ~60 lost", ok, lost, dirs)
			}
			ok, lost, _, _ = tl.between(revived.Add(time.Second), end.Add(-cfg.Timeout))
			if ok < 40 || lost > 2 {
				t.Errorf("revived: %d replies, %d lost; want ~60 replies, no loss", ok, lost)
			}
			// Every tick produced exactly one sample.
			all, allLost, _, _ := tl.between(start, end.Add(-cfg.Timeout-600*time.Millisecond))
			want := int(end.Add(-cfg.Timeout-600*time.Millisecond).Sub(start) / cfg.Interval)
			if d := all + allLost - want; d < -want/10 || d > want/10 {
				t.Errorf("%d samples for ~%d ticks", all+allLost, want)
			}
			tl.mu.Lock()
			t.Logf("states: %q", tl.states)
			if len(tl.states) < 2 || tl.states[0][:4] != "true" || tl.states[len(tl.states)-1][:5] != "false" {
				t.Errorf("state changes %q: want failing, then healthy", tl.states)
			}
			tl.mu.Unlock()
		})
	}
}

// Loss on the way up and on the way down is told apart from the
// reflector's count.
func TestWatchUDPLossDirection(t *testing.T) {
	defer func(s time.Duration) { sessionSpan = s }(sessionSpan)
	sessionSpan = 400 * time.Millisecond
	w := &udpWatch{cfg: &WatchConfig{Timeout: time.Second}}
	var tl tally
	w.sink = tl.sink
	now := time.Now().UnixNano()
	s := &udpWatchSession{sentAt: make([]int64, 10), answered: make([]bool, 10), sent: 10, final: 7, echoQ: -1}
	for i := range s.sentAt {
		s.sentAt[i] = now + int64(i)
		s.answered[i] = i%2 == 0 || i == 1 // 6 answered, 4 lost
	}
	s.received = 6
	w.settle(s)
	_, lost, dirs, _ := tl.between(time.Unix(0, now), time.Unix(0, now+100))
	if lost != 4 || dirs[LossUp] != 3 || dirs[LossDown] != 1 {
		t.Errorf("final count 7 of 10, 6 replies: lost %d %v; want 3 up, 1 down", lost, dirs)
	}
	// No final count: the echoed one covers probes up to the last reply.
	tl = tally{}
	w.sink = tl.sink
	s.final, s.echoQ, s.echoRecv = -1, 6, 5 // up to seq 6: 7 sent, 5 reached it, 5 answered (0,1,2,4,6)
	w.settle(s)
	_, lost, dirs, _ = tl.between(time.Unix(0, now), time.Unix(0, now+100))
	if lost != 4 || dirs[LossUp] != 2 || dirs[LossUnknown] != 2 {
		t.Errorf("echoed: lost %d %v; want 2 up (3, 5), 2 unknown (7, 9)", lost, dirs)
	}
}
