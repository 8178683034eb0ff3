package probe

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// bulkOK is a reflector without a key that allows the bulk modes with no
// rate cap: for tests of the modes themselves, not of the limits.
var bulkOK = ReflectorConfig{AllowLoad: true, LoadRate: -1}

// startReflector runs a reflector on a free loopback port for the test.
func startReflector(t *testing.T, cfg ReflectorConfig) *Reflector {
	t.Helper()
	return startReflectorAt(t, cfg, "127.0.0.1:0")
}

// startReflectorAt runs a reflector on addr for the test.
func startReflectorAt(t *testing.T, cfg ReflectorConfig, addr string) *Reflector {
	t.Helper()
	if cfg.MinInterval == 0 {
		cfg.MinInterval = time.Millisecond
	}
	r := NewReflector(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.Listen(ctx, addr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("reflector did not shut down within 10s")
		}
	})
	return r
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestIntegrationUDP(t *testing.T) {
	r := startReflector(t, ReflectorConfig{})
	res, err := UDP(testCtx(t, 30*time.Second), UDPConfig{Target: r.Addr(), Interval: Duration(5 * time.Millisecond), Duration: Duration(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 200 {
		t.Errorf("sent = %d, want 200", res.Sent)
	}
	if res.Received != res.Sent || res.Loss.Up != 0 || res.Loss.Down != 0 || res.Loss.Split != "final" {
		t.Errorf("received %d of %d, loss %+v", res.Received, res.Sent, res.Loss)
	}
	if res.Timestamps != "kernel" {
		t.Errorf("timestamps = %q, want kernel", res.Timestamps)
	}
	if res.RTT.P50 <= 0 || res.RTT.P50 > 2000 || res.RTT.Min > res.RTT.P50 || res.RTT.P99 > res.RTT.Max {
		t.Errorf("implausible loopback RTT %+v", res.RTT)
	}
	if res.Duplicates != 0 || res.Reordered != 0 {
		t.Errorf("duplicates %d reordered %d on loopback", res.Duplicates, res.Reordered)
	}
	if res.Histograms["rtt_ns"] == "" {
		t.Error("no raw histogram")
	}
	h, err := DecodeHistogram(res.Histograms["rtt_ns"])
	if err != nil || h.TotalCount() != res.Received {
		t.Errorf("histogram round trip: %v, count %d", err, h.TotalCount())
	}
	// 200 probes in five blocks of 40, none lost.
	if b := res.Batches; b == nil || len(b.Count) != Blocks || len(b.P99) != Blocks || len(b.Loss) != Blocks || sum(b.Count) != res.Received || b.Loss[0] != 0 {
		t.Errorf("batches %+v, want %d blocks adding up to %d replies", res.Batches, Blocks, res.Received)
	}
	t.Logf("rtt %+v jitter %.1f ipdv %+v pdv %.1f lag %+v", res.RTT, res.Jitter, res.IPDV, res.PDV, res.SendLag)
	if st := r.Stats(); st.UDPSessions != 1 {
		t.Errorf("reflector sessions = %d", st.UDPSessions)
	}
}

func TestIntegrationUDPWrongKey(t *testing.T) {
	r := startReflector(t, ReflectorConfig{Key: []byte("right")})
	start := time.Now()
	_, err := UDP(testCtx(t, 30*time.Second), UDPConfig{Target: r.Addr(), Key: []byte("wrong"), Interval: Duration(10 * time.Millisecond), Duration: Duration(time.Second)})
	if !errors.Is(err, ErrNoReplies) {
		t.Fatalf("err = %v, want ErrNoReplies", err)
	}
	if !strings.Contains(err.Error(), "no replies: wrong key or unreachable") || strings.Contains(err.Error(), "\n") {
		t.Errorf("error is not one clear line: %q", err)
	}
	if time.Since(start) > 6*time.Second {
		t.Errorf("took %s to give up", time.Since(start))
	}
	// No key at all against a keyed reflector: same silence.
	_, err = UDP(testCtx(t, 30*time.Second), UDPConfig{Target: r.Addr(), Interval: Duration(10 * time.Millisecond), Duration: Duration(time.Second)})
	if !errors.Is(err, ErrNoReplies) {
		t.Fatalf("no key: err = %v, want ErrNoReplies", err)
	}
	if st := r.Stats(); st.UDPReplied != 0 || st.UDPSessions != 0 {
		t.Errorf("reflector answered unauthenticated packets: %+v", st)
	}
	// The right key works.
	res, err := UDP(testCtx(t, 30*time.Second), UDPConfig{Target: r.Addr(), Key: []byte("right"), Interval: Duration(10 * time.Millisecond), Duration: Duration(500 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Received != res.Sent || !res.Config.Authenticated || res.Config.Size != 80 {
		t.Errorf("keyed run: received %d/%d, config %+v", res.Received, res.Sent, res.Config)
	}
}

func sum(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}
