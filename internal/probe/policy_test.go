package probe

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// Each refusal of a peer without a key reaches the client as a RefusedError
// whose one-line text names the reason, and arrives at once.
func TestIntegrationUnauthRefusals(t *testing.T) {
	open := startReflector(t, ReflectorConfig{})
	load := startReflector(t, ReflectorConfig{AllowLoad: true, LoadRate: 8e6, LoadDuration: time.Second})
	loadCfg := func(addr string, up, down bool) LoadConfig {
		return LoadConfig{Target: addr, Upload: up, Download: down, Flows: 1, Idle: Duration(time.Second), Duration: Duration(time.Second), Interval: Duration(10 * time.Millisecond)}
	}
	for _, tt := range []struct {
		name string
		code int
		want string
		run  func(ctx context.Context) error
	}{
		{"bulk source", refuseLoad, "reflector refused load: bulk modes need a key or --allow-load on the reflector", func(ctx context.Context) error {
			_, err := Load(ctx, loadCfg(open.Addr(), false, true))
			return err
		}},
		{"bulk sink", refuseLoad, "reflector refused load: bulk modes need a key or --allow-load on the reflector", func(ctx context.Context) error {
			_, err := Load(ctx, loadCfg(open.Addr(), true, false))
			return err
		}},
		{"large CRR response", refuseOpenSize, "reflector refused: CRR requests and responses above 64 KiB are bulk; they need a key or --allow-load on the reflector", func(ctx context.Context) error {
			_, err := CRR(ctx, CRRConfig{Target: open.Addr(), Request: 100, Response: 64<<10 + 1, Count: 1})
			return err
		}},
		{"large CRR request", refuseOpenSize, "reflector refused: CRR requests and responses above 64 KiB are bulk", func(ctx context.Context) error {
			_, err := CRR(ctx, CRRConfig{Target: open.Addr(), Request: 64<<10 + 1, Response: 100, Count: 1})
			return err
		}},
		{"rr response larger than its request", refuseEcho, "reflector refused: without a key an rr response may not be larger than its request (1 bytes)", func(ctx context.Context) error {
			c, _, err := dialHello(ctx, &net.Dialer{}, open.Addr(), &hello{Mode: modeRR, ReqSize: 1, RespSize: 60000, Nonce: randUint64(), Duration: int64(time.Second)}, nil, 5*time.Second)
			if err == nil {
				c.Close()
			}
			return err
		}},
		{"allow-load duration cap", refuseLoadDuration, "reflector refused load: longer than its maximum of 1s for peers without a key (reflector --load-duration)", func(ctx context.Context) error {
			_, err := Load(ctx, loadCfg(load.Addr(), true, true))
			return err
		}},
		{"allow-load rate cap", refuseRate, "reflector refused: this address is over the reflector's rate of 8 Mbit/s for peers without a key; lower --rate, or use a key", func(ctx context.Context) error {
			// 1 MiB a transaction against 1 MB/s: the first passes
			// on the full bucket, the next finds the client in debt.
			_, err := CRR(ctx, CRRConfig{Target: load.Addr(), Request: 100, Response: 1 << 20, Count: 3})
			return err
		}},
		{"open CRR rate cap", refuseRate, "reflector refused: this address is over the reflector's rate of 1 Mbit/s for peers without a key", func(ctx context.Context) error {
			// 60 kB a transaction against 125 kB/s with a 64 KiB bucket.
			_, err := CRR(ctx, CRRConfig{Target: open.Addr(), Request: 100, Response: 60000, Count: 20})
			return err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			err := tt.run(testCtx(t, 10*time.Second))
			var re *RefusedError
			if !errors.As(err, &re) || re.Code != tt.code {
				t.Fatalf("err = %v, want refusal code %d", err, tt.code)
			}
			if !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %q, want one line containing %q", err, tt.want)
			}
			if el := time.Since(start); el > 2*time.Second {
				t.Errorf("refused after %s, want at once", el)
			}
		})
	}
	// The client's rate bucket refills: after a pause the same transaction
	// passes again (1 MiB of debt at 1 MB/s).
	time.Sleep(1100 * time.Millisecond)
	if _, err := CRR(testCtx(t, 10*time.Second), CRRConfig{Target: load.Addr(), Request: 100, Response: 1 << 20, Count: 1}); err != nil {
		t.Errorf("CRR after the debt was paid: %v", err)
	}
}

// What stays open to everyone: small CRR, echo-sized rr, UDP; and with the
// key every mode, with no rate cap.
func TestIntegrationUnauthAllowed(t *testing.T) {
	open := startReflector(t, ReflectorConfig{})
	if _, err := CRR(testCtx(t, 10*time.Second), CRRConfig{Target: open.Addr(), Request: 1000, Response: 64 << 10, Count: 1}); err != nil {
		t.Errorf("CRR of 64 KiB without a key: %v", err)
	}
	if _, err := TCP(testCtx(t, 10*time.Second), TCPConfig{Target: open.Addr(), Size: 1400, Rate: 100, Duration: Duration(200 * time.Millisecond)}); err != nil {
		t.Errorf("rr echo without a key: %v", err)
	}

	key := []byte("k")
	keyed := startReflector(t, ReflectorConfig{Key: key, LoadDuration: time.Second})
	if _, err := CRR(testCtx(t, 10*time.Second), CRRConfig{Target: keyed.Addr(), Key: key, Request: 100, Response: 1 << 20, Count: 5}); err != nil {
		t.Errorf("CRR of 1 MiB with the key: %v", err)
	}
	c, _, err := dialHello(testCtx(t, 10*time.Second), &net.Dialer{}, keyed.Addr(), &hello{Mode: modeRR, ReqSize: 1, RespSize: 60000, Nonce: randUint64(), Duration: int64(time.Second)}, newMAC(key), 5*time.Second)
	if err != nil {
		t.Errorf("rr of 1 B requests and 60000 B responses with the key: %v", err)
	} else {
		c.Close()
	}
	res, err := Load(testCtx(t, 20*time.Second), LoadConfig{Target: keyed.Addr(), Key: key, Flows: 1, Idle: Duration(500 * time.Millisecond), Duration: Duration(2 * time.Second), Interval: Duration(10 * time.Millisecond)})
	if err != nil {
		t.Fatalf("load with the key, longer than LoadDuration: %v", err)
	}
	if res.ReflectorCap != 0 || strings.Contains(res.Diagnosis, "cap") {
		t.Errorf("key holder's load: cap %v, diagnosis %q; want no cap", res.ReflectorCap, res.Diagnosis)
	}
}

// With --allow-load, a client's load flows are paced to LoadRate per
// direction, together, and the client says its goodput was the reflector's.
func TestIntegrationAllowLoadPaced(t *testing.T) {
	const mbit = 16
	r := startReflector(t, ReflectorConfig{AllowLoad: true, LoadRate: mbit * 1e6})
	res, err := Load(testCtx(t, 30*time.Second), LoadConfig{Target: r.Addr(), Flows: 2, Idle: Duration(500 * time.Millisecond), Duration: Duration(3 * time.Second), Interval: Duration(10 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("goodput %+v, cap %v, %s", res.Goodput, res.ReflectorCap, res.Diagnosis)
	if res.ReflectorCap != mbit {
		t.Errorf("reflector cap in the result = %v, want %d", res.ReflectorCap, mbit)
	}
	// Two flows a direction share one cap. Loopback carries Gbit/s, so
	// anything near the cap is the pacing; the buffers a paced sink
	// still fills arrive unpaced, hence the margin above, and a machine
	// busy elsewhere can pace late, hence the one below.
	for dir, g := range map[string]float64{"up": res.Goodput.Up, "down": res.Goodput.Down} {
		if g < 0.5*mbit || g > 1.25*mbit {
			t.Errorf("goodput %s %.1f Mbit/s, want about the cap of %d", dir, g, mbit)
		}
	}
	if want := capNote(res.Goodput, mbit*1000); want == "" || !strings.HasSuffix(res.Diagnosis, want) {
		t.Errorf("diagnosis %q, want it to end with the cap note %q", res.Diagnosis, want)
	}
}

func TestCapNote(t *testing.T) {
	const note = "; goodput held at the reflector's cap of 16 Mbit/s per direction for peers without a key (reflector --load-rate): the flows may not have filled the path"
	for _, tt := range []struct {
		name    string
		g       Goodput
		capKbit uint32
		want    string
	}{
		{"no cap", Goodput{Up: 900, Down: 900}, 0, ""},
		{"below 90 %", Goodput{Up: 14.3, Down: 10}, 16000, ""},
		{"upload at the cap", Goodput{Up: 14.4, Down: 3}, 16000, note},
		{"download at the cap", Goodput{Up: 0, Down: 16.4}, 16000, note},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := capNote(tt.g, tt.capKbit); got != tt.want {
				t.Errorf("capNote(%+v, %d) = %q, want %q", tt.g, tt.capKbit, got, tt.want)
			}
		})
	}
}

// The per-address TCP cap is on by default, and counts connections from
// accept: silent ones, which never send a hello, hold slots too.
func TestIntegrationConnsPerIPDefault(t *testing.T) {
	r := startReflector(t, ReflectorConfig{})
	if got := r.cfg.MaxConnsPerIP; got != 64 {
		t.Fatalf("default MaxConnsPerIP = %d, want 64", got)
	}
	var silent []net.Conn
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()
	for range 64 {
		c, err := net.Dial("tcp", r.Addr())
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
	}
	waitClients(t, r, 64)
	_, err := TCP(testCtx(t, 10*time.Second), TCPConfig{Target: r.Addr(), Duration: Duration(200 * time.Millisecond)})
	var re *RefusedError
	if !errors.As(err, &re) || re.Code != refuseConnsIP || !strings.Contains(err.Error(), "reflector refused: 64 TCP connections already open from this address (reflector --max-conns-per-ip 64)") {
		t.Fatalf("65th connection: err = %v, want the per-address refusal", err)
	}
	for _, c := range silent {
		c.Close()
	}
	silent = nil
	waitClients(t, r, 0)
	if _, err := TCP(testCtx(t, 10*time.Second), TCPConfig{Target: r.Addr(), Connections: 64, Rate: 640, Duration: Duration(200 * time.Millisecond)}); err != nil {
		t.Errorf("64 connections once the silent ones closed: %v", err)
	}
}

// The start-up line says what a peer may do, for each kind of reflector.
func TestReflectorPolicy(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  ReflectorConfig
		want string
	}{
		{"defaults", ReflectorConfig{},
			"unauthenticated peers may: UDP echo ≤ 100 packets/s per session, 16 sessions per address; TCP rr echo (replies no larger than requests); " +
				"CRR ≤ 64 KiB each way at ≤ 1 Mbit/s per address; 64 TCP connections per address; tests ≤ 24h; bulk load (sink, source, larger CRR): refused (no --allow-load)"},
		{"allow-load", ReflectorConfig{AllowLoad: true},
			"unauthenticated peers may: UDP echo ≤ 100 packets/s per session, 16 sessions per address; TCP rr echo (replies no larger than requests); " +
				"CRR ≤ 64 MiB each way; 64 TCP connections per address; tests ≤ 24h; bulk load (sink, source, CRR): allowed (--allow-load) at ≤ 100 Mbit/s per address and direction, ≤ 2m per load flow"},
		{"allow-load tuned", ReflectorConfig{AllowLoad: true, LoadRate: 2.5e6, LoadDuration: 90 * time.Second, MinInterval: time.Millisecond, MaxSessionsPerIP: -1, MaxConnsPerIP: -1, MaxDuration: time.Hour},
			"unauthenticated peers may: UDP echo ≤ 1000 packets/s per session, sessions per address uncapped; TCP rr echo (replies no larger than requests); " +
				"CRR ≤ 64 MiB each way; TCP connections per address uncapped; tests ≤ 1h; bulk load (sink, source, CRR): allowed (--allow-load) at ≤ 2.5 Mbit/s per address and direction, ≤ 1m30s per load flow"},
		{"lab", ReflectorConfig{AllowLoad: true, LoadRate: -1, LoadDuration: -1},
			"unauthenticated peers may: UDP echo ≤ 100 packets/s per session, 16 sessions per address; TCP rr echo (replies no larger than requests); " +
				"CRR ≤ 64 MiB each way; 64 TCP connections per address; tests ≤ 24h; bulk load (sink, source, CRR): allowed (--allow-load) with no rate cap, ≤ 24h per load flow"},
		{"key", ReflectorConfig{Key: []byte("k")},
			"peers without the key get no answer; key holders may use every mode, with no rate cap: UDP echo ≤ 100 packets/s per session, 16 sessions per address; " +
				"64 TCP connections per address; CRR ≤ 64 MiB each way; tests ≤ 24h"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := NewReflector(tt.cfg).Policy(); got != tt.want {
				t.Errorf("Policy():\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}
