//go:build linux

package autorate

import (
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/lowlat/lowlat/internal/qdisc"
)

// kernelShaper is an interface's root shaper on the live host (the caller's
// network namespace).
type kernelShaper struct{ ifindex int }

// KernelShaper returns iface's root shaper; Read fails with qdisc.ErrNoShaper
// when the root is not cake or tbf.
func KernelShaper(iface string) (Shaper, error) {
	l, err := netlink.LinkByName(iface)
	if err != nil {
		return nil, fmt.Errorf("autorate: interface %s: %w", iface, err)
	}
	return kernelShaper{ifindex: l.Attrs().Index}, nil
}

func (k kernelShaper) Read() (qdisc.Shaper, error) { return qdisc.ReadShaper(k.ifindex) }

func (k kernelShaper) SetRate(bps uint64) error {
	_, err := qdisc.SetShaperRate(k.ifindex, bps)
	return err
}

// counterShaper stands in for a shaper in a dry run on an interface that has
// none yet (observing a path before shaping it): its counters are the
// interface's, its rate the one autorate would have set.
type counterShaper struct {
	iface string
	rate  *uint64
}

// CounterShaper is a dry run's shaper on an interface without one.
func CounterShaper(iface string, base uint64) Shaper {
	r := base
	return counterShaper{iface: iface, rate: &r}
}

func (c counterShaper) Read() (qdisc.Shaper, error) {
	l, err := netlink.LinkByName(c.iface)
	if err != nil {
		return qdisc.Shaper{}, fmt.Errorf("interface %s: %w", c.iface, err)
	}
	s := qdisc.Shaper{Kind: "none", RateBps: *c.rate}
	if st := l.Attrs().Statistics; st != nil {
		s.Bytes, s.Packets, s.Drops = st.TxBytes, st.TxPackets, st.TxDropped
	}
	return s, nil
}

func (c counterShaper) SetRate(bps uint64) error {
	*c.rate = bps
	return nil
}
