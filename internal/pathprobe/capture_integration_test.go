package pathprobe

import (
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/testnet"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// sentPkt is an IP packet a namespace sent, as it left.
type sentPkt struct {
	v6    bool
	ttl   int    // TTL or hop limit
	label uint32 // IPv6 flow label
	proto int    // the transport: after IPv6's fixed header, no extension headers
	l4    []byte // the transport header and on
}

// capture records the IP packets leaving dev in n (an AF_PACKET socket
// sees outgoing packets as PACKET_OUTGOING) until the returned function is
// called, which returns them.
func capture(t *testing.T, n *testnet.NS, dev string) func() []sentPkt {
	t.Helper()
	htons := func(v uint16) uint16 { return v<<8 | v>>8 }
	var fd int
	if err := n.Do(func() error {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return err
		}
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: l.Attrs().Index}); err != nil {
			unix.Close(fd)
			return err
		}
		tv := unix.NsecToTimeval((50 * time.Millisecond).Nanoseconds())
		return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	}); err != nil {
		t.Fatalf("capture on %s in %s: %v", dev, n.Name, err)
	}
	var (
		mu   sync.Mutex
		out  []sentPkt
		stop = make(chan struct{})
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			m, from, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				// The timeout: nothing queued. Stop when asked, only
				// now, so that what was queued is read first.
				select {
				case <-stop:
					return
				default:
					continue
				}
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); !ok || ll.Pkttype != unix.PACKET_OUTGOING || m < 14 {
				continue
			}
			if p, ok := parseFrame(buf[:m]); ok {
				mu.Lock()
				out = append(out, p)
				mu.Unlock()
			}
		}
	}()
	var once sync.Once
	finish := func() []sentPkt {
		once.Do(func() { close(stop); <-done; unix.Close(fd) })
		mu.Lock()
		defer mu.Unlock()
		return out
	}
	t.Cleanup(func() { finish() })
	return finish
}

// parseFrame reads an Ethernet frame's IPv4 or IPv6 packet.
func parseFrame(b []byte) (sentPkt, bool) {
	ip := b[14:]
	switch binary.BigEndian.Uint16(b[12:]) {
	case unix.ETH_P_IP:
		if len(ip) < 20 {
			return sentPkt{}, false
		}
		hl := int(ip[0]&0x0f) * 4
		if len(ip) < hl {
			return sentPkt{}, false
		}
		return sentPkt{ttl: int(ip[8]), proto: int(ip[9]), l4: append([]byte(nil), ip[hl:]...)}, true
	case unix.ETH_P_IPV6:
		if len(ip) < 40 {
			return sentPkt{}, false
		}
		return sentPkt{v6: true, ttl: int(ip[7]), label: binary.BigEndian.Uint32(ip) & 0xfffff, proto: int(ip[6]), l4: append([]byte(nil), ip[40:]...)}, true
	}
	return sentPkt{}, false
}

// shortPath is a client, one router and a server: probes expire at the
// router and reach the server.
//
//	c c0 ─ a0 r b0 ─ s0 s
type shortPath struct {
	c, r, s *testnet.NS
}

const (
	shortServer  = "10.71.1.2"
	shortServer6 = "fd71:1::2"
)

func newShortPath(t *testing.T) *shortPath {
	t.Helper()
	p := &shortPath{c: testnet.New(t), r: testnet.New(t), s: testnet.New(t)}
	for _, n := range []*testnet.NS{p.c, p.r, p.s} {
		sysctl(t, n, "net/ipv6/conf/default/addr_gen_mode", "0")
		sysctl(t, n, "net/ipv4/icmp_ratelimit", "0")
		sysctl(t, n, "net/ipv6/icmp/ratelimit", "0")
	}
	p.c.Veth(t, "c0", "sp0", p.r, 1)
	rename(t, p.r, "sp0", "a0")
	p.r.Veth(t, "b0", "sp1", p.s, 1)
	rename(t, p.s, "sp1", "s0")
	addr(t, p.c, "c0", "10.71.0.2/24", "fd71::2/64")
	addr(t, p.r, "a0", "10.71.0.1/24", "fd71::1/64")
	addr(t, p.r, "b0", "10.71.1.1/24", "fd71:1::1/64")
	addr(t, p.s, "s0", shortServer+"/24", shortServer6+"/64")
	sysctl(t, p.r, "net/ipv4/ip_forward", "1")
	sysctl(t, p.r, "net/ipv6/conf/all/forwarding", "1")
	route(t, p.c, "0.0.0.0/0", "10.71.0.1")
	route(t, p.c, "::/0", "fd71::1")
	route(t, p.s, "0.0.0.0/0", "10.71.1.1")
	route(t, p.s, "::/0", "fd71:1::1")
	return p
}

func (p *shortPath) probe(t *testing.T, cfg Config) *Result {
	t.Helper()
	res := probeFrom(t, p.c, cfg)
	if !res.Reached || len(res.Hops) != 2 {
		t.Fatalf("path probe %+v: reached %v in %d hops, want the server at hop 2", cfg, res.Reached, len(res.Hops))
	}
	return res
}

// probesSent is how many probes the runs sent.
func probesSent(runs ...*Result) int {
	n := 0
	for _, r := range runs {
		for _, h := range r.Hops {
			n += h.Sent
		}
	}
	return n
}

// listen answers SYNs on the server at addr until the test ends.
func (p *shortPath) listen(t *testing.T, network, addr string) {
	t.Helper()
	var ln net.Listener
	if err := p.s.Do(func() error {
		var err error
		ln, err = net.Listen(network, addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
}

// Every probe of a run keeps the fields balancers hash, so the run keeps
// one path, over one router to a server: see icmpParis and flowLabel. One
// test, for one topology (the stock-kernel VM runs it too).
func TestIntegrationPathOneFlow(t *testing.T) {
	p := newShortPath(t)
	t.Run("ICMP checksum", func(t *testing.T) { icmpParis(t, p) })
	t.Run("IPv6 flow label", func(t *testing.T) { flowLabel(t, p) })
}

// icmpParis: ICMP mode is Paris traceroute's. Every echo request of a run,
// and of a second run to the same target, has the same type, code, checksum
// and identifier, the first four bytes a balancer may hash on included,
// whether from a ping socket or a raw one, over IPv4 and IPv6. Only the
// sequence number and the payload change.
func icmpParis(t *testing.T, p *shortPath) {
	for _, tc := range []struct {
		name, target, pingGroups, socket string
	}{
		{"IPv4, ping socket", shortServer, "0 2147483647", "recverr"},
		{"IPv4, raw socket", shortServer, "1 0", "raw"},
		{"IPv6, ping socket", shortServer6, "0 2147483647", "recverr"},
		{"IPv6, raw socket", shortServer6, "1 0", "raw"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sysctl(t, p.c, "net/ipv4/ping_group_range", tc.pingGroups)
			stop := capture(t, p.c, "c0")
			cfg := Config{Target: tc.target, Proto: ICMP, Count: 6, Interval: 20 * time.Millisecond, Timeout: 500 * time.Millisecond}
			a, b := p.probe(t, cfg), p.probe(t, cfg)
			pkts := stop()
			if a.Socket != tc.socket {
				t.Errorf("socket %q, want %q", a.Socket, tc.socket)
			}
			echo := uint8(8)
			if a.Address != shortServer {
				echo = 128
			}
			type head struct {
				typ, code uint8
				sum, id   uint16
			}
			heads := map[head]int{}
			seqs, ttls := map[uint16]bool{}, map[int]bool{}
			n := 0
			for _, q := range pkts {
				if (q.proto != unix.IPPROTO_ICMP && q.proto != unix.IPPROTO_ICMPV6) || len(q.l4) < 8 || q.l4[0] != echo {
					continue
				}
				n++
				heads[head{q.l4[0], q.l4[1], binary.BigEndian.Uint16(q.l4[2:]), binary.BigEndian.Uint16(q.l4[4:])}]++
				seqs[binary.BigEndian.Uint16(q.l4[6:])] = true
				ttls[q.ttl] = true
			}
			sent := probesSent(a, b)
			if n != sent {
				t.Errorf("captured %d echo requests, the runs sent %d", n, sent)
			}
			if len(heads) != 1 {
				t.Errorf("echo requests of two runs to one target carry %d (type, code, checksum, identifier) combinations, want 1: %v", len(heads), fmt.Sprint(heads))
			}
			if len(seqs) < n/2 || len(ttls) != 2 {
				t.Errorf("%d sequence numbers and TTLs %v over %d probes: the probes must differ in sequence and TTL", len(seqs), ttls, n)
			}
		})
	}
}

// flowLabel: IPv6 probes carry one flow label per flow: every probe of a
// run, and of a second run to the same target, whether UDP datagrams from one socket or
// TCP SYNs from one socket each. RFC 6438 balancers hash the label; left to
// Linux, a socket gets a random one (net.ipv6.auto_flowlabels), and each
// TCP probe is a socket of its own. UDP and TCP carry the label the run
// leased (flow_label), also where the kernel forces its own labels
// (auto_flowlabels 3); ICMP the kernel's, one per pair of addresses.
func flowLabel(t *testing.T, p *shortPath) {
	p.listen(t, "tcp6", "["+shortServer6+"]:7000")
	sysctl(t, p.c, "net/ipv4/ping_group_range", "0 2147483647")
	type labelCase struct {
		name  string
		cfg   Config
		proto int
		auto  string // net.ipv6.auto_flowlabels
	}
	var cases []labelCase
	for _, auto := range []string{"1", "3"} {
		cases = append(cases,
			labelCase{"UDP", Config{Target: shortServer6, Proto: UDP}, unix.IPPROTO_UDP, auto},
			labelCase{"TCP, answered by SYN-ACK", Config{Target: "[" + shortServer6 + "]:7000", Proto: TCP}, unix.IPPROTO_TCP, auto},
			labelCase{"TCP, refused", Config{Target: "[" + shortServer6 + "]:7001", Proto: TCP}, unix.IPPROTO_TCP, auto},
			labelCase{"ICMP echo", Config{Target: shortServer6, Proto: ICMP}, unix.IPPROTO_ICMPV6, auto})
	}
	for _, tc := range cases {
		t.Run(tc.name+", auto_flowlabels "+tc.auto, func(t *testing.T) {
			sysctl(t, p.c, "net/ipv6/auto_flowlabels", tc.auto)
			tc.cfg.Count, tc.cfg.Interval, tc.cfg.Timeout = 6, 20*time.Millisecond, 500*time.Millisecond
			stop := capture(t, p.c, "c0")
			a, b := p.probe(t, tc.cfg), p.probe(t, tc.cfg)
			pkts := stop()
			labels := map[uint32]int{}
			n := 0
			for _, q := range pkts {
				// The probes: TCP SYNs only (not the resets that follow).
				if !q.v6 || q.proto != tc.proto || (tc.proto == unix.IPPROTO_TCP && (len(q.l4) < 14 || q.l4[13] != 0x02)) {
					continue
				}
				if tc.proto == unix.IPPROTO_ICMPV6 && (len(q.l4) < 1 || q.l4[0] != 128) {
					continue
				}
				n++
				labels[q.label]++
			}
			sent := probesSent(a, b)
			if n != sent {
				var seen []string
				for _, q := range pkts {
					if q.v6 && len(q.l4) >= 14 {
						seen = append(seen, fmt.Sprintf("proto %d ttl %d label %#x l4[0:14] %x", q.proto, q.ttl, q.label, q.l4[:14]))
					}
				}
				t.Errorf("captured %d probes, the runs sent %d; every IPv6 packet seen:\n%s", n, sent, strings.Join(seen, "\n"))
			}
			if len(labels) != 1 {
				t.Errorf("probes of two runs to one target (flow %d, %d) carry %d flow labels, want 1: %v", a.Flow, b.Flow, len(labels), labels)
			}
			if tc.proto == unix.IPPROTO_ICMPV6 {
				if a.FlowLabel != 0 {
					t.Errorf("ICMP: flow_label %#x, want 0 (the kernel's)", a.FlowLabel)
				}
				return
			}
			if a.FlowLabel == 0 || b.FlowLabel != a.FlowLabel || labels[uint32(a.FlowLabel)] != n {
				t.Errorf("flow_label %#x then %#x, on the wire %v: want the run's leased label on every probe", a.FlowLabel, b.FlowLabel, labels)
			}
		})
	}
}
