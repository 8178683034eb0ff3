//go:build linux

package autorate

import (
	"fmt"

	"github.com/vishvananda/netlink"
)

// kernelRoutes is the index of iface and the lookup of a connection's route
// in the caller's network namespace: RTM_GETROUTE, as 'ip route get ADDR
// from SRC mark MARK uid UID' asks it, so policy routing by source, mark
// or owner is honoured.
func kernelRoutes(iface string) (int, routeLookup, error) {
	l, err := netlink.LinkByName(iface)
	if err != nil {
		return 0, nil, fmt.Errorf("interface %s: %w", iface, err)
	}
	return l.Attrs().Index, kernelRoute, nil
}

func kernelRoute(k routeKey) (int, error) {
	uid := k.uid
	opts := &netlink.RouteGetOptions{Mark: k.mark, UID: &uid}
	if k.src.IsValid() && !k.src.IsUnspecified() {
		opts.SrcAddr = k.src.AsSlice()
	}
	rs, err := netlink.RouteGetWithOptions(k.dst.AsSlice(), opts)
	if err != nil {
		return 0, fmt.Errorf("route to %s: %w", k, err)
	}
	if len(rs) == 0 {
		return 0, fmt.Errorf("route to %s: none", k)
	}
	return rs[0].LinkIndex, nil
}
