// Package route reads the kernel's routing tables over rtnetlink and changes one
// route metric (initcwnd, initrwnd, congctl, ...) in place. A change resends the
// route's own dumped attributes with only RTA_METRICS edited, so every attribute
// lowlat does not know about (preference, nexthop objects, locks, encap) is kept,
// which a decode-and-re-encode through a route struct cannot promise.
package route

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Route is one routing table entry: the fields lowlat reports plus the raw
// message it came from.
type Route struct {
	Family   int // unix.AF_INET or AF_INET6
	Dst      netip.Prefix
	Table    int
	Type     int
	Protocol int
	Scope    int
	Tos      int
	Priority int
	Oif      int
	Gateway  netip.Addr
	PrefSrc  netip.Addr
	// Metrics by RTAX_* number (see the RTAX constants); congctl is separate.
	Metrics map[int]uint32
	Congctl string

	raw []byte // rtmsg + attributes as dumped
}

// Metric numbers (linux/rtnetlink.h RTAX_*).
const (
	RTAXInitCwnd = 11
	RTAXInitRwnd = 14
	RTAXQuickACK = 15
	RTAXCCAlgo   = 16
)

// MetricByName maps knob metric names to RTAX numbers.
var MetricByName = map[string]int{"initcwnd": RTAXInitCwnd, "initrwnd": RTAXInitRwnd, "quickack": RTAXQuickACK}

// TableName renders a table number as ip(8) does for the well-known ones.
func TableName(t int) string {
	switch t {
	case 254:
		return "main"
	case 255:
		return "local"
	case 253:
		return "default"
	}
	return strconv.Itoa(t)
}

// ParseTable is the inverse of TableName.
func ParseTable(s string) (int, error) {
	switch s {
	case "main":
		return 254, nil
	case "local":
		return 255, nil
	case "default":
		return 253, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > 0xffffffff-1 {
		return 0, fmt.Errorf("bad routing table %q (want main, local, default or a number)", s)
	}
	return n, nil
}

// DstString renders the destination: "default" for the IPv4 default route,
// the prefix otherwise ("::/0" for the IPv6 default, so the two never collide).
func (r Route) DstString() string {
	if r.Family == afInet && r.Dst.Bits() == 0 {
		return "default"
	}
	return r.Dst.String()
}

// Key identifies a route for lowlat's knob IDs: "dst" or "dst@priority" when
// several routes of the table share the destination.
type Key struct {
	Dst      netip.Prefix
	Table    int
	Priority int // -1: any
}

// ParseKey parses "default", "10.0.0.0/24", "::/0", "fd00::/64@256".
func ParseKey(dst string, table int) (Key, error) {
	k := Key{Table: table, Priority: -1}
	if d, p, ok := strings.Cut(dst, "@"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return Key{}, fmt.Errorf("bad route metric in %q", dst)
		}
		k.Priority = n
		dst = d
	}
	switch dst {
	case "default":
		k.Dst = netip.MustParsePrefix("0.0.0.0/0")
		return k, nil
	case "default6":
		k.Dst = netip.MustParsePrefix("::/0")
		return k, nil
	}
	p, err := netip.ParsePrefix(dst)
	if err != nil {
		a, err2 := netip.ParseAddr(dst)
		if err2 != nil {
			return Key{}, fmt.Errorf("bad route destination %q (want default, a CIDR or an address)", dst)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	k.Dst = p.Masked()
	return k, nil
}

// Matches reports whether r is the route k names.
func (k Key) Matches(r Route) bool {
	return r.Table == k.Table && r.Dst == k.Dst && (k.Priority < 0 || k.Priority == r.Priority)
}

const (
	afInet  = 2
	afInet6 = 10
)

// Tunable reports whether lowlat may change metrics on r: unicast routes in
// non-local tables, except those the kernel maintains itself from router
// advertisements (it would rewrite them).
func (r Route) Tunable() (bool, string) {
	switch {
	case r.Type != 1: // RTN_UNICAST
		return false, "not a unicast route"
	case r.Table == 255:
		return false, "local table"
	case r.Protocol == 9: // RTPROT_RA
		return false, "learned from router advertisements; the kernel rewrites it"
	case r.Family == afInet6 && r.Dst.Addr().IsLinkLocalUnicast():
		return false, "link-local"
	}
	return true, ""
}
