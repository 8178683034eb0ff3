package probe

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// One address may hold MaxSessionsPerIP UDP sessions and MaxConnsPerIP TCP
// connections; past that it is refused clearly, and other addresses are not.
func TestIntegrationPerIPCap(t *testing.T) {
	r := startReflectorAt(t, ReflectorConfig{MaxSessionsPerIP: 2, MaxConnsPerIP: 3}, "[::]:0")
	_, port, _ := net.SplitHostPort(r.Addr())
	v4 := net.JoinHostPort("127.0.0.1", port)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = UDP(ctx, UDPConfig{Target: v4, Interval: Duration(10 * time.Millisecond), Duration: Duration(10 * time.Second)})
		}()
	}
	defer wg.Wait()
	defer cancel()
	for deadline := time.Now().Add(5 * time.Second); r.Stats().UDPSessions < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("the two sessions did not open: %+v", r.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, err := UDP(testCtx(t, 10*time.Second), UDPConfig{Target: v4, Duration: Duration(time.Second)})
	var re *RefusedError
	if !errors.As(err, &re) || re.Code != refusePerIP || !strings.Contains(err.Error(), "(reflector --max-sessions-per-ip 2)") {
		t.Fatalf("third session from 127.0.0.1: err = %v, want a per-IP refusal", err)
	}
	// Another source address still gets a session.
	if c, err := net.ListenPacket("udp6", "[::1]:0"); err == nil {
		c.Close()
		res, err := UDP(testCtx(t, 10*time.Second), UDPConfig{Target: net.JoinHostPort("::1", port), Interval: Duration(10 * time.Millisecond), Duration: Duration(200 * time.Millisecond)})
		if err != nil || res.Received == 0 {
			t.Errorf("session from ::1 while 127.0.0.1 is at its cap: %v", err)
		}
	}
	// TCP connections have their own cap.
	if _, err := TCP(testCtx(t, 10*time.Second), TCPConfig{Target: v4, Connections: 3, Rate: 300, Duration: Duration(200 * time.Millisecond)}); err != nil {
		t.Errorf("three TCP connections (the cap): %v", err)
	}
	// The reflector frees a connection's slot when it sees it close.
	for deadline := time.Now().Add(5 * time.Second); r.ipCount(netip.MustParseAddr("127.0.0.1"), true) != 0; {
		if time.Now().After(deadline) {
			t.Fatal("the reflector still counts TCP connections from 127.0.0.1")
		}
		time.Sleep(5 * time.Millisecond)
	}
	_, err = TCP(testCtx(t, 10*time.Second), TCPConfig{Target: v4, Connections: 4, Rate: 400, Duration: Duration(200 * time.Millisecond)})
	if !errors.As(err, &re) || re.Code != refuseConnsIP || !strings.Contains(err.Error(), "(reflector --max-conns-per-ip 3)") {
		t.Fatalf("four TCP connections: err = %v, want a per-IP refusal", err)
	}
	if st := r.Stats(); st.Refused < 2 {
		t.Errorf("refusals counted: %+v", st)
	}
}

// waitClients waits (bounded) until the reflector holds n clients: it frees a
// slot when it sees the connection go, a moment after the client closed it.
func waitClients(t *testing.T, r *Reflector, n int64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); r.Stats().Clients != n; {
		if time.Now().After(deadline) {
			t.Fatalf("reflector holds %d clients, want %d", r.Stats().Clients, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (r *Reflector) ipCount(addr netip.Addr, tcp bool) int {
	r.perIPMu.Lock()
	defer r.perIPMu.Unlock()
	return r.perIP[perIPKey{clientOf(addr), tcp}]
}

// Sessions that closed give their address's slot back at once, so probes run
// back to back from one host never meet the cap.
func TestIntegrationPerIPCapBackToBack(t *testing.T) {
	r := startReflector(t, ReflectorConfig{MaxSessionsPerIP: 2})
	for i := range 5 {
		res, err := UDP(testCtx(t, 10*time.Second), UDPConfig{Target: r.Addr(), Interval: Duration(5 * time.Millisecond), Duration: Duration(20 * time.Millisecond)})
		if err != nil {
			t.Fatalf("probe %d of 5 with a cap of 2: %v", i+1, err)
		}
		if res.Loss.Split != "final" {
			t.Fatalf("probe %d: the close went unanswered", i+1)
		}
	}
	if n := r.ipCount(netip.MustParseAddr("127.0.0.1"), false); n != 0 {
		t.Errorf("slots still held after all sessions closed: %d", n)
	}
}

// IPv6 addresses count per /64: a host holding a whole prefix cannot multiply
// its slots by source address; IPv4 addresses and other /64s count apart.
func TestPerIPCapIPv6Prefix(t *testing.T) {
	r := NewReflector(ReflectorConfig{})
	take := func(a string) bool { return r.takeIP(netip.MustParseAddr(a), false, 2) }
	for _, a := range []string{"2001:db8:1:2::10", "2001:db8:1:2:ffff::99"} {
		if !take(a) {
			t.Fatalf("%s refused below the cap", a)
		}
	}
	if take("2001:db8:1:2:aaaa::1") {
		t.Error("a third address of the same /64 got a slot over a cap of 2")
	}
	for _, a := range []string{"2001:db8:1:3::10", "192.0.2.1", "192.0.2.2"} {
		if !take(a) {
			t.Errorf("%s is another client, yet was refused", a)
		}
	}
	r.releaseIP(netip.MustParseAddr("2001:db8:1:2::77"), false)
	if !take("2001:db8:1:2::78") {
		t.Error("a released slot of the /64 was not given back")
	}
}
