//go:build linux

package lab

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/vishvananda/netlink"
)

// The chain's addresses: the client's and the server's links keep the
// usual ones (the provider is router 1, router 4 the server's gateway), the
// links between routers get their own /24s.
const (
	chainE1R1, chainE1R2 = "10.231.11.1", "10.231.11.2" // router 1 ↔ 2, first equal-cost link
	chainE2R1, chainE2R2 = "10.231.12.1", "10.231.12.2" // second equal-cost link
	chainQR2, chainQR3   = "10.231.13.1", "10.231.13.2" // router 2 ↔ 3, the queue on router 2's side
	chainR3, chainR4     = "10.231.14.1", "10.231.14.2" // router 3 ↔ 4
	chainQueueIf         = "lab-q"                      // router 2's interface toward router 3
	chainE2If            = "lab-e2"                     // router 1's second equal-cost link
)

// ChainHops are the addresses the chain's hops answer from: each router
// from its interface toward the client (router 2 from the first equal-cost
// link, its route back), then the server.
var ChainHops = []string{ProviderCAddr, chainE1R2, chainQR3, chainR4, ServerAddr}

// buildChain creates the path-hops network: client, router 1 (the
// provider), routers 2 to 4, server. On error everything it made is
// removed again.
func buildChain(ctx context.Context, st *state, spec TopoSpec) (t *Topology, err error) {
	t = &Topology{ID: st.ID, Spec: spec, st: st}
	chainRoles := []string{"client", "provider", "r2", "r3", "r4", "server"}
	if err := namesFree(st, chainRoles); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			t.close()
			t = nil
		}
	}()
	ns := map[string]*NS{}
	for _, r := range chainRoles {
		n, err := makeNS(st, r)
		if err != nil {
			return t, err
		}
		ns[r] = n
		switch r {
		case "client":
			t.Client = n
		case "provider":
			t.Provider = n
		case "server":
			t.Server = n
		default:
			t.Routers = append(t.Routers, n)
		}
		if err := ctx.Err(); err != nil {
			return t, err
		}
	}
	r1, r2, r3, r4 := t.Provider, ns["r2"], ns["r3"], ns["r4"]
	for _, n := range t.all() {
		if err := n.Do(baseSysctls); err != nil {
			return t, fmt.Errorf("lab: %s: %w", n.Name, err)
		}
	}
	// Forwarding everywhere; Linux rate-limits time exceeded and
	// unreachable to one a second per peer by default, so every node but
	// router 2 answers every probe, and router 2 keeps the default.
	sysctls := map[*NS][][2]string{
		r1:       {{"net.ipv4.ip_forward", "1"}, {"net.ipv4.icmp_ratelimit", "0"}, {"net.ipv4.fib_multipath_hash_policy", "1"}},
		r2:       {{"net.ipv4.ip_forward", "1"}, {"net.ipv4.icmp_ratelimit", "1000"}, {"net.ipv4.icmp_ratemask", "6168"}},
		r3:       {{"net.ipv4.ip_forward", "1"}, {"net.ipv4.icmp_ratelimit", "0"}},
		r4:       {{"net.ipv4.ip_forward", "1"}, {"net.ipv4.icmp_ratelimit", "0"}},
		t.Server: {{"net.ipv4.icmp_ratelimit", "0"}},
	}
	for n, kvs := range sysctls {
		if err := n.Do(func() error {
			for _, kv := range append(kvs, [2]string{"net.ipv4.conf.all.rp_filter", "0"}, [2]string{"net.ipv4.conf.default.rp_filter", "0"}) {
				if err := writeSysctl(kv[0], kv[1]); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return t, fmt.Errorf("lab: %s: %w", n.Name, err)
		}
	}
	links := []struct {
		a      *NS
		aIf    string
		aAddr  string
		b      *NS
		bIf    string
		bAddr  string
		prefix string
	}{
		{t.Client, ClientIf, ClientAddr, r1, ProviderCIf, ProviderCAddr, "/24"},
		{r1, "lab-e1", chainE1R1, r2, "lab-e1", chainE1R2, "/24"},
		{r1, chainE2If, chainE2R1, r2, "lab-e2", chainE2R2, "/24"},
		{r2, chainQueueIf, chainQR2, r3, "lab-in", chainQR3, "/24"},
		{r3, "lab-out", chainR3, r4, "lab-in", chainR4, "/24"},
		{r4, ProviderSIf, ProviderSAddr, t.Server, ServerIf, ServerAddr, "/24"},
	}
	for _, l := range links {
		if err := veth(l.a, l.aIf, l.b, l.bIf); err != nil {
			return t, err
		}
		if err := l.a.Do(func() error { return addrRoute(l.aIf, l.aAddr+l.prefix, "") }); err != nil {
			return t, fmt.Errorf("lab: %s: %w", l.a.Name, err)
		}
		if err := l.b.Do(func() error { return addrRoute(l.bIf, l.bAddr+l.prefix, "") }); err != nil {
			return t, fmt.Errorf("lab: %s: %w", l.b.Name, err)
		}
	}
	routes := []struct {
		n   *NS
		dst string
		gws []string
	}{
		{t.Client, "0.0.0.0/0", []string{ProviderCAddr}},
		{r1, "10.231.13.0/24", []string{chainE1R2, chainE2R2}},
		{r1, "10.231.14.0/24", []string{chainE1R2, chainE2R2}},
		{r1, "10.231.2.0/24", []string{chainE1R2, chainE2R2}},
		{r2, "10.231.1.0/24", []string{chainE1R1}},
		{r2, "10.231.14.0/24", []string{chainQR3}},
		{r2, "10.231.2.0/24", []string{chainQR3}},
		{r3, "10.231.2.0/24", []string{chainR4}},
		{r3, "0.0.0.0/0", []string{chainQR2}},
		{r4, "0.0.0.0/0", []string{chainR3}},
		{t.Server, "0.0.0.0/0", []string{ProviderSAddr}},
	}
	for _, r := range routes {
		if err := r.n.Do(func() error { return chainRoute(r.dst, r.gws...) }); err != nil {
			return t, fmt.Errorf("lab: %s: route %s: %w", r.n.Name, r.dst, err)
		}
	}
	c := spec.Chain
	if err := r2.Do(func() error { return probeQdisc(chainQueueIf, "netem") }); err == nil {
		t.Netem = true
		queue := fmt.Sprintf("netem delay %s %s", time.Duration(c.QueueDelay), time.Duration(c.QueueJitter))
		if err := r2.Do(func() error { return applyQdisc(chainQueueIf, queue) }); err != nil {
			return t, fmt.Errorf("lab: %s: %w", r2.Name, err)
		}
		if err := r1.Do(func() error { return applyQdisc(chainE2If, fmt.Sprintf("netem delay %s", time.Duration(c.ECMPDelay))) }); err != nil {
			return t, fmt.Errorf("lab: %s: %w", r1.Name, err)
		}
	} else {
		t.Missing = append(t.Missing, "netem")
		t.Notes = append(t.Notes, fmt.Sprintf("no netem on this kernel (%v): hop 3's queue is a tbf at %s with %s of FIFO kept full by 4 upload flows, and the equal-cost links have the same delay", err, c.QueueRate, c.QueueLimit))
		queue := fmt.Sprintf("tbf rate %s burst 16kb limit %s", c.QueueRate, c.QueueLimit)
		if err := r2.Do(func() error { return applyQdisc(chainQueueIf, queue) }); err != nil {
			return t, fmt.Errorf("lab: %s: %w", r2.Name, err)
		}
	}
	if err := t.setCongestion(spec.Congestion); err != nil {
		return t, err
	}
	return t, nil
}

// chainRoute adds a route through one gateway, or through several with
// equal cost.
func chainRoute(dst string, gws ...string) error {
	_, d, err := net.ParseCIDR(dst)
	if err != nil {
		return err
	}
	r := &netlink.Route{Dst: d}
	if len(gws) == 1 {
		r.Gw = net.ParseIP(gws[0])
	} else {
		for _, g := range gws {
			r.MultiPath = append(r.MultiPath, &netlink.NexthopInfo{Gw: net.ParseIP(g)})
		}
	}
	return netlink.RouteAdd(r)
}
