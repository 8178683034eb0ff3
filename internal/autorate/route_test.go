package autorate

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/sockets"
)

// busyConn is a busy connection from local to remote whose srtt is over
// over min_rtt and which has had acked bytes acknowledged.
func busyConn(local, remote string, over time.Duration, acked uint64, mark uint32) sockets.Socket {
	return sockets.Socket{
		Local: local, Remote: remote, SendQ: 30000, Mark: mark,
		TCPInfo: &sockets.TCPInfo{RTTus: uint32((time.Millisecond + over).Microseconds()), MinRTTus: 1000, SndMSS: 1448, Unacked: 10, BytesAcked: &acked},
	}
}

// The passive signal counts only the connections routed out through the
// shaped interface: a LAN connection's small delay and large rate are not
// the uplink's.
func TestPassiveCountsOnlyTheShapedLink(t *testing.T) {
	const uplink, lan = 2, 3
	var asked []routeKey
	lookup := func(k routeKey) (int, error) {
		asked = append(asked, k)
		switch {
		case k.mark == 7:
			// Policy routing: the marked connection to the LAN's
			// address goes out the uplink (a VPN's fwmark, say).
			return uplink, nil
		case k.dst == netip.MustParseAddr("192.168.1.5"):
			return lan, nil
		case k.dst == netip.MustParseAddr("203.0.113.9"):
			return 0, errors.New("no route")
		}
		return uplink, nil
	}
	var up, local, marked uint64
	p := &passive{acked: map[string]uint64{}, routes: newRouteCache(lookup), ifindex: uplink, conns: func() ([]sockets.Socket, error) {
		return []sockets.Socket{
			busyConn("10.0.0.1:40000", "198.51.100.7:443", 40*time.Millisecond, up, 0),
			busyConn("[::ffff:10.0.0.1]:40001", "[::ffff:198.51.100.8]:443", 30*time.Millisecond, up, 0),
			busyConn("192.168.1.2:40002", "192.168.1.5:445", 200*time.Microsecond, local, 0),
			busyConn("192.168.1.2:40003", "192.168.1.5:446", 300*time.Microsecond, local, 0),
			busyConn("192.168.1.2:40004", "192.168.1.5:447", 35*time.Millisecond, marked, 7),
			busyConn("10.0.0.1:40005", "203.0.113.9:443", 0, local, 0),
		}, nil
	}}
	t0 := time.Unix(1_700_000_000, 0)
	if _, _, ok := p.read(t0, 0); !ok {
		t.Fatal("no reading")
	}
	// Over a second: each uplink connection gets 100 kB acknowledged,
	// each LAN one 5 MB.
	up, local, marked = 100_000, 5_000_000, 100_000
	d, delivered, ok := p.read(t0.Add(time.Second), 0)
	if !ok {
		t.Fatal("no reading")
	}
	if d != 35*time.Millisecond {
		t.Errorf("delay %v, want 35ms: the median of the three uplink connections (30, 35, 40 ms), not of the LAN's too", d)
	}
	wantBits := 3 * 100_000 * 8 * (1448.0 + 66) / 1448
	if delivered < 0.99*wantBits || delivered > 1.01*wantBits {
		t.Errorf("delivered %.0f bit/s, want %.0f: the uplink connections' bytes alone", delivered, wantBits)
	}
	// Routes were looked up as the kernel chooses them: by local address
	// (IPv4-mapped addresses as IPv4), mark and owner; once per
	// route within routeTTL (the two LAN connections from the same
	// address share one).
	if len(asked) != 5 {
		t.Errorf("%d route lookups over two reads of 5 routes, want 5 (cached)", len(asked))
	}
	want := routeKey{dst: netip.MustParseAddr("198.51.100.8"), src: netip.MustParseAddr("10.0.0.1")}
	found := false
	for _, k := range asked {
		found = found || k == want
	}
	if !found {
		t.Errorf("lookups %+v, want one for %+v", asked, want)
	}
	// After routeTTL a route is looked up again: it may have changed.
	p.read(t0.Add(time.Second+routeTTL), 0)
	if len(asked) != 10 {
		t.Errorf("%d route lookups after routeTTL, want 10", len(asked))
	}
}
