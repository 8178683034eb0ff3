//go:build linux

package testnet

import (
	"net"
	"os"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Routed is three namespaces in a row: a client behind a router whose
// uplink up0 leads to a server, the shape of a host that shapes its
// uplink for a LAN behind it. The router forwards, and has connections of
// its own.
//
//	Client lan0 10.88.1.2 — lan1 10.88.1.1 Router up0 10.88.2.1 — up1 10.88.2.2 Server
type Routed struct {
	Client, Router, Server *NS
}

// Addresses of a Routed.
const (
	RoutedServer   = "10.88.2.2"
	RoutedRouterUp = "10.88.2.1"
)

// NewRouted builds a Routed; everything goes with the test.
func NewRouted(t testing.TB) *Routed {
	t.Helper()
	r := &Routed{Client: New(t), Router: New(t), Server: New(t)}
	r.Client.Veth(t, "lan0", "lan1", r.Router, 1)
	r.Router.Veth(t, "up0", "up1", r.Server, 1)
	addr := func(ns *NS, dev, cidr, gw, dst string) {
		t.Helper()
		if err := ns.Do(func() error {
			l, err := netlink.LinkByName(dev)
			if err != nil {
				return err
			}
			a, _ := netlink.ParseAddr(cidr)
			if err := netlink.AddrAdd(l, a); err != nil {
				return err
			}
			if gw == "" {
				return nil
			}
			_, d, _ := net.ParseCIDR(dst)
			return netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: d, Gw: net.ParseIP(gw)})
		}); err != nil {
			t.Fatal(err)
		}
	}
	addr(r.Client, "lan0", "10.88.1.2/24", "10.88.1.1", "0.0.0.0/0")
	addr(r.Router, "lan1", "10.88.1.1/24", "", "")
	addr(r.Router, "up0", RoutedRouterUp+"/24", RoutedServer, "0.0.0.0/0")
	addr(r.Server, "up1", RoutedServer+"/24", RoutedRouterUp, "10.88.1.0/24")
	if err := r.Router.Do(func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0)
	}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []*NS{r.Client, r.Router, r.Server} {
		ns.awaitOperUp(t)
	}
	return r
}

// awaitOperUp waits (up to 5 s) until every link but lo in the namespace
// reports operstate up. A veth reads "unknown" for a moment after its peer
// comes up: a snapshot taken then differs from one taken later (in the VM,
// the clamp test's "bad input changed the router" was lan1 going from
// unknown to up), though nothing changed it.
func (n *NS) awaitOperUp(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var down []string
		if err := n.Do(func() error {
			ls, err := netlink.LinkList()
			for _, l := range ls {
				if a := l.Attrs(); a.Name != "lo" && a.OperState != netlink.OperUp {
					down = append(down, a.Name+" "+a.OperState.String())
				}
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if len(down) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("links not up after 5 s: %v", down)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// MSS is both ends' snd_mss (tcp_info) of one connection: what the end
// that opened it sends (its peer's MSS option as it reached it, less
// TCP options) and what the server sends back.
type MSS struct{ Opener, Server uint32 }

// Connect opens a TCP connection from ns (the client's or the router's)
// to the server and returns both ends' snd_mss.
func (r *Routed) Connect(t testing.TB, from *NS) MSS {
	t.Helper()
	var ln net.Listener
	if err := r.Server.Do(func() (err error) { ln, err = net.Listen("tcp4", RoutedServer+":0"); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		s, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- s
	}()
	var cl net.Conn
	if err := from.Do(func() (err error) {
		cl, err = net.DialTimeout("tcp4", ln.Addr().String(), 5*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var s net.Conn
	select {
	case s = <-accepted:
	case <-time.After(5 * time.Second):
	}
	if s == nil {
		t.Fatal("the server accepted nothing")
	}
	defer s.Close()
	return MSS{Opener: SndMSS(t, cl), Server: SndMSS(t, s)}
}

// SndMSS is a TCP connection's tcp_info snd_mss.
func SndMSS(t testing.TB, c net.Conn) uint32 {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ti *unix.TCPInfo
	var serr error
	if err := rc.Control(func(fd uintptr) { ti, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil || serr != nil {
		t.Fatalf("TCP_INFO: %v %v", err, serr)
	}
	return ti.Snd_mss
}
