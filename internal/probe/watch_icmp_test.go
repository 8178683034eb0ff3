package probe

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// hangingResolver never answers: each query waits for its context, as a
// resolver behind a dead nameserver does. It counts the queries.
func hangingResolver(queries *atomic.Int64) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		queries.Add(1)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
}

// TestWatchICMPSlowResolver: an icmp target whose name lookup hangs holds
// nothing. Its ticks keep their schedule and each counts a lost probe (one
// that cannot leave is lost, never silence); the lookup gives up at its
// timeout and the state says so; it is retried no sooner than resolveRetry
// later, not on every tick; and the watch returns at once when its context
// ends. It needs no socket: there is never an address to ping.
func TestWatchICMPSlowResolver(t *testing.T) {
	defer func(to, re time.Duration) { resolveTimeout, resolveRetry = to, re }(resolveTimeout, resolveRetry)
	resolveTimeout, resolveRetry = 300*time.Millisecond, 400*time.Millisecond
	var queries atomic.Int64
	var tl tally
	cfg := WatchConfig{Target: "slow.lowlat.test", Interval: 20 * time.Millisecond, Timeout: 100 * time.Millisecond, State: tl.state, Resolver: hangingResolver(&queries)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- WatchICMP(ctx, cfg, tl.sink) }()
	time.Sleep(time.Second)
	cancel()
	stopped := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("WatchICMP has not returned 2 s after its context ended: the name lookup holds it")
	}
	t.Logf("returned %s after its context ended; %d DNS queries in 1 s", time.Since(stopped).Round(time.Millisecond), queries.Load())
	ok, lost, dirs, _ := tl.between(start, stopped)
	if ok != 0 || lost < 35 || dirs[LossUnknown] != lost { // 50 ticks in the second
		t.Errorf("while the name does not resolve: %d replies, %d lost %v; want ~50 lost, direction unknown", ok, lost, dirs)
	}
	tl.mu.Lock()
	states := append([]string(nil), tl.states...)
	tl.mu.Unlock()
	if want := "true icmp slow.lowlat.test: resolve: no answer in 300ms"; len(states) != 1 || states[0] != want {
		t.Errorf("states %q, want [%q]", states, want)
	}
	// Lookups at 0, 0.4 and 0.8 s, each a few queries (A and AAAA, the
	// search list); one per tick would be 50 lookups.
	if n := queries.Load(); n == 0 || n > 24 {
		t.Errorf("%d DNS queries in 1 s: want the lookups of 3 tries", n)
	}
}
