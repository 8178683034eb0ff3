package autorate

import (
	"fmt"
	"net/netip"
	"time"
)

// routeKey is what the kernel chooses a connection's route by: its remote
// address, and, under policy routing, its local address, its mark and its
// owner.
type routeKey struct {
	dst, src  netip.Addr
	mark, uid uint32
}

func (k routeKey) String() string {
	return fmt.Sprintf("%s from %s mark %#x uid %d", k.dst, k.src, k.mark, k.uid)
}

// routeLookup is the seam to the kernel's routing table: the index of the
// interface a connection's packets leave by.
type routeLookup func(routeKey) (ifindex int, err error)

// routeTTL is how long a connection's route is taken as known. The passive
// signal reads every connection five times a second; a route changes
// rarely, and a few seconds' lag after it does only delays a connection's
// joining or leaving the signal.
const routeTTL = 5 * time.Second

// routeCache keeps routes looked up for routeTTL, failures too, so each
// tick costs a lookup only per distinct new connection's route.
type routeCache struct {
	lookup routeLookup
	known  map[routeKey]routeEntry
}

type routeEntry struct {
	ifindex int // 0: the lookup failed
	at      time.Time
}

func newRouteCache(lookup routeLookup) *routeCache {
	return &routeCache{lookup: lookup, known: map[routeKey]routeEntry{}}
}

// out is the index of the interface k's packets leave by, 0 when the
// lookup failed (no route, or the kernel refused): such a connection is
// not known to cross the shaper.
func (c *routeCache) out(now time.Time, k routeKey) int {
	if e, ok := c.known[k]; ok && now.Sub(e.at) < routeTTL {
		return e.ifindex
	}
	i, err := c.lookup(k)
	if err != nil {
		i = 0
	}
	c.known[k] = routeEntry{ifindex: i, at: now}
	return i
}

// forget drops the routes older than routeTTL: the connections they were
// looked up for may be gone, and the cache must not grow with every
// connection the host ever had.
func (c *routeCache) forget(now time.Time) {
	for k, e := range c.known {
		if now.Sub(e.at) >= routeTTL {
			delete(c.known, k)
		}
	}
}

// connRoute is the routeKey of a connection from its "ADDR:PORT"
// addresses (IPv4-mapped IPv6 addresses are routed as IPv4, as the kernel
// does); false when they do not parse.
func connRoute(local, remote string, mark, uid uint32) (routeKey, bool) {
	l, err1 := netip.ParseAddrPort(local)
	r, err2 := netip.ParseAddrPort(remote)
	if err1 != nil || err2 != nil {
		return routeKey{}, false
	}
	return routeKey{dst: r.Addr().Unmap(), src: l.Addr().Unmap(), mark: mark, uid: uid}, true
}
