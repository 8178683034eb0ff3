//go:build linux

package autorate

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lowlat/lowlat/internal/testnet"
)

// TestIntegrationPassiveReadsTheShapedLinkOnly: a host with two links, the
// shaped uplink up0 (8 Mbit/s under a tbf whose queue holds 100 ms) and a
// LAN link lan0 (40 Mbit/s, 2 ms), one busy upload over each. The passive
// signal read for up0 counts the uplink's connection alone: its delay, and
// its rate. The same read with every connection counted is the control:
// the LAN's flow is busy and would be seen.
func TestIntegrationPassiveReadsTheShapedLinkOnly(t *testing.T) {
	host, upPeer, lanPeer := testnet.New(t), testnet.New(t), testnet.New(t)
	host.Veth(t, "up0", "up1", upPeer, 1)
	host.Veth(t, "lan0", "lan1", lanPeer, 1)
	addr(t, host, "up0", "10.91.0.1/24")
	addr(t, upPeer, "up1", "10.91.0.2/24")
	addr(t, host, "lan0", "10.92.0.1/24")
	addr(t, lanPeer, "lan1", "10.92.0.2/24")
	// The uplink's far end: an address past the default route, as a
	// server on the internet is.
	addr(t, upPeer, "lo", "198.51.100.1/32")
	if err := host.Do(func() error {
		return netlink.RouteAdd(&netlink.Route{Dst: nil, Gw: net.ParseIP("10.91.0.2")})
	}); err != nil {
		t.Fatalf("default route: %v", err)
	}
	tbf(t, host, "up0", 8e6/8, 3000, 8e6/8/10)
	tbf(t, host, "lan0", 40e6/8, 6000, 40e6/8/500)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(cancel)
	upload(ctx, t, &wg, host, upPeer, "198.51.100.1:5201")
	upload(ctx, t, &wg, host, lanPeer, "10.92.0.2:5201")
	// Past slow start: the uplink's queue has filled.
	time.Sleep(1500 * time.Millisecond)

	var shaped, all struct {
		delay     time.Duration
		delivered float64
		ok        bool
	}
	if err := host.Do(func() error {
		p, err := newPassive("up0")
		if err != nil {
			return err
		}
		every := *p
		every.routes, every.acked = nil, map[string]uint64{}
		t0 := time.Now()
		p.read(t0, 0)
		every.read(t0, 0)
		time.Sleep(time.Second)
		t1 := time.Now()
		shaped.delay, shaped.delivered, shaped.ok = p.read(t1, 0)
		all.delay, all.delivered, all.ok = every.read(t1, 0)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("up0's connections: delay %v, delivered %.2f Mbit/s; every connection: delay %v, delivered %.2f Mbit/s",
		shaped.delay, shaped.delivered/1e6, all.delay, all.delivered/1e6)
	if !shaped.ok || !all.ok {
		t.Fatalf("no reading (up0's: %v, every connection's: %v)", shaped.ok, all.ok)
	}
	if all.delivered < 20e6 {
		t.Fatalf("the control: every connection together got %.2f Mbit/s acknowledged, want the LAN's 40 too: the LAN's flow is not busy, the test shows nothing", all.delivered/1e6)
	}
	if shaped.delivered < 4e6 || shaped.delivered > 10e6 {
		t.Errorf("up0's connections got %.2f Mbit/s acknowledged, want up0's 8 alone", shaped.delivered/1e6)
	}
	if shaped.delay < 20*time.Millisecond {
		t.Errorf("up0's delay %v, want its tbf's queue (up to 100 ms), not the LAN's", shaped.delay)
	}
}

// addr adds a (CIDR) to dev in ns.
func addr(t *testing.T, ns *testnet.NS, dev, a string) {
	t.Helper()
	if err := ns.Do(func() error {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return err
		}
		x, err := netlink.ParseAddr(a)
		if err != nil {
			return err
		}
		x.Flags = unix.IFA_F_NODAD
		return netlink.AddrAdd(l, x)
	}); err != nil {
		t.Fatalf("address %s on %s: %v", a, dev, err)
	}
}

// tbf shapes dev's egress in ns: rate in bytes/s, burst and limit in bytes.
func tbf(t *testing.T, ns *testnet.NS, dev string, rate uint64, burst, limit uint32) {
	t.Helper()
	if err := ns.Do(func() error {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return err
		}
		return netlink.QdiscAdd(&netlink.Tbf{
			QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
			Rate:       rate, Limit: limit, Buffer: netlink.Xmittime(rate, burst),
		})
	}); err != nil {
		t.Fatalf("tbf on %s: %v", dev, err)
	}
}

// uploadBytes bounds each test upload, as ctx bounds its time.
const uploadBytes = 40 << 20

// upload sends to a sink at hostport in peer from a connection in host,
// until ctx ends or uploadBytes are sent.
func upload(ctx context.Context, t *testing.T, wg *sync.WaitGroup, host, peer *testnet.NS, hostport string) {
	t.Helper()
	var ln net.Listener
	if err := peer.Do(func() (err error) {
		ln, err = net.Listen("tcp", hostport)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var c net.Conn
	if err := host.Do(func() (err error) {
		// cubic fills a queue whatever the host's default (BBR keeps
		// it near empty, and the test would read less of up0's).
		d := &net.Dialer{Timeout: 3 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, "cubic")
			}); err != nil {
				return err
			}
			return serr
		}}
		c, err = d.DialContext(ctx, "tcp", hostport)
		return err
	}); err != nil {
		ln.Close()
		t.Fatal(err)
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer ln.Close()
		s, err := ln.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		go func() { <-ctx.Done(); s.Close() }()
		_, _ = io.Copy(io.Discard, s)
	}()
	go func() {
		defer wg.Done()
		defer c.Close()
		go func() { <-ctx.Done(); c.Close() }()
		buf := make([]byte, 64<<10)
		for sent := 0; sent < uploadBytes; sent += len(buf) {
			if _, err := c.Write(buf); err != nil {
				if !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
					t.Errorf("upload to %s: %v", hostport, err)
				}
				return
			}
		}
	}()
}
