//go:build linux

package route

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

var native = nl.NativeEndian()

// Dump returns the routes of every table for both families.
func Dump() ([]Route, error) {
	var out []Route
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		rs, err := dumpFamily(fam)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

func dumpFamily(family int) ([]Route, error) {
	for attempt := 0; ; attempt++ {
		req := nl.NewNetlinkRequest(unix.RTM_GETROUTE, unix.NLM_F_DUMP)
		req.AddData(&nl.RtMsg{RtMsg: unix.RtMsg{Family: uint8(family)}})
		msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWROUTE)
		if errors.Is(err, netlink.ErrDumpInterrupted) && attempt < 5 {
			continue
		}
		if errors.Is(err, unix.EAFNOSUPPORT) && family == unix.AF_INET6 {
			return nil, nil // IPv6 disabled
		}
		if err != nil {
			return nil, fmt.Errorf("dump routes (family %d): %w", family, err)
		}
		var out []Route
		for _, m := range msgs {
			r, err := decode(m)
			if err != nil {
				return nil, fmt.Errorf("dump routes: %w", err)
			}
			out = append(out, r)
		}
		return out, nil
	}
}

func decode(m []byte) (Route, error) {
	if len(m) < unix.SizeofRtMsg {
		return Route{}, fmt.Errorf("short rtmsg")
	}
	msg := nl.DeserializeRtMsg(m)
	r := Route{
		Family: int(msg.Family), Type: int(msg.Type), Protocol: int(msg.Protocol),
		Scope: int(msg.Scope), Tos: int(msg.Tos), Table: int(msg.Table),
		raw: append([]byte(nil), m...),
	}
	attrs, err := nl.ParseRouteAttr(m[unix.SizeofRtMsg:])
	if err != nil {
		return Route{}, err
	}
	var dst netip.Addr
	for _, a := range attrs {
		switch a.Attr.Type {
		case unix.RTA_DST:
			dst, _ = netip.AddrFromSlice(a.Value)
		case unix.RTA_TABLE:
			r.Table = int(native.Uint32(a.Value))
		case unix.RTA_PRIORITY:
			r.Priority = int(native.Uint32(a.Value))
		case unix.RTA_OIF:
			r.Oif = int(native.Uint32(a.Value))
		case unix.RTA_GATEWAY:
			r.Gateway, _ = netip.AddrFromSlice(a.Value)
		case unix.RTA_PREFSRC:
			r.PrefSrc, _ = netip.AddrFromSlice(a.Value)
		case unix.RTA_METRICS:
			r.Metrics, r.Congctl = decodeMetrics(a.Value)
		}
	}
	if !dst.IsValid() {
		if r.Family == unix.AF_INET6 {
			dst = netip.IPv6Unspecified()
		} else {
			dst = netip.IPv4Unspecified()
		}
	}
	r.Dst = netip.PrefixFrom(dst.Unmap(), int(msg.Dst_len))
	return r, nil
}

func decodeMetrics(b []byte) (map[int]uint32, string) {
	attrs, err := nl.ParseRouteAttr(b)
	if err != nil {
		return nil, ""
	}
	m := map[int]uint32{}
	cc := ""
	for _, a := range attrs {
		if int(a.Attr.Type) == RTAXCCAlgo {
			cc = strings.TrimRight(string(a.Value), "\x00")
			continue
		}
		if len(a.Value) >= 4 {
			m[int(a.Attr.Type)] = native.Uint32(a.Value)
		}
	}
	return m, cc
}

// Find returns the routes k names, dumping only k's address family.
func Find(k Key) ([]Route, error) {
	fam := unix.AF_INET6
	if k.Dst.Addr().Is4() {
		fam = unix.AF_INET
	}
	routes, err := dumpFamily(fam)
	if err != nil {
		return nil, err
	}
	var out []Route
	for _, r := range routes {
		if k.Matches(r) {
			out = append(out, r)
		}
	}
	return out, nil
}

// SetMetric changes one metric of the route k names (0 removes it, restoring the
// kernel default) and leaves every other attribute as the kernel reported it.
func SetMetric(k Key, metric int, value uint32) error {
	match, err := Find(k)
	if err != nil {
		return err
	}
	switch len(match) {
	case 0:
		return fmt.Errorf("route %s table %s: %w", k.Dst, TableName(k.Table), unix.ESRCH)
	case 1:
	default:
		return fmt.Errorf("route %s table %s: %d routes match; name one as dst@metric", k.Dst, TableName(k.Table), len(match))
	}
	body, err := withMetric(match[0].raw, metric, value)
	if err != nil {
		return err
	}
	req := nl.NewNetlinkRequest(unix.RTM_NEWROUTE, unix.NLM_F_REPLACE|unix.NLM_F_ACK)
	req.AddRawData(body)
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("route %s table %s: replace: %w", k.Dst, TableName(k.Table), err)
	}
	return nil
}

// withMetric rebuilds a dumped route message with RTA_METRICS edited. Dump-only
// attributes (cache info) are dropped; the rtmsg header and everything else are
// copied byte for byte.
func withMetric(raw []byte, metric int, value uint32) ([]byte, error) {
	hdr := append([]byte(nil), raw[:unix.SizeofRtMsg]...)
	attrs, err := nl.ParseRouteAttr(raw[unix.SizeofRtMsg:])
	if err != nil {
		return nil, err
	}
	out := hdr
	var metrics []syscall.NetlinkRouteAttr
	for _, a := range attrs {
		switch a.Attr.Type {
		case unix.RTA_METRICS:
			metrics, err = nl.ParseRouteAttr(a.Value)
			if err != nil {
				return nil, err
			}
			continue
		case unix.RTA_CACHEINFO:
			continue
		}
		out = append(out, nl.NewRtAttr(int(a.Attr.Type), a.Value).Serialize()...)
	}
	nest := nl.NewRtAttr(unix.RTA_METRICS, nil)
	n, set := 0, false
	for _, m := range metrics {
		if int(m.Attr.Type) == metric {
			if value != 0 {
				nest.AddRtAttr(metric, nl.Uint32Attr(value))
				n, set = n+1, true
			}
			continue
		}
		nest.AddRtAttr(int(m.Attr.Type), m.Value)
		n++
	}
	if !set && value != 0 {
		nest.AddRtAttr(metric, nl.Uint32Attr(value))
		n++
	}
	if n > 0 {
		out = append(out, nest.Serialize()...)
	}
	return out, nil
}
