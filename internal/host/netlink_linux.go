//go:build linux

package host

import (
	"fmt"
	"net"

	"github.com/lowlat/lowlat/internal/qdisc"
	"github.com/lowlat/lowlat/internal/route"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// LiveNetlink reads links, qdiscs and routes from the kernel over rtnetlink, in
// the calling thread's network namespace. Qdiscs and routes are decoded by the
// same packages the knobs use, so facts and knob reads agree value for value.
type LiveNetlink struct {
	links []netlink.Link
}

// NewLiveNetlink returns the live reader.
func NewLiveNetlink() *LiveNetlink { return &LiveNetlink{} }

func (n *LiveNetlink) linkList() ([]netlink.Link, error) {
	if n.links != nil {
		return n.links, nil
	}
	ls, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	n.links = ls
	return ls, nil
}

// Links lists every interface.
func (n *LiveNetlink) Links() ([]Link, error) {
	ls, err := n.linkList()
	if err != nil {
		return nil, err
	}
	out := make([]Link, 0, len(ls))
	for _, l := range ls {
		a := l.Attrs()
		kind := l.Type()
		if kind == "device" {
			kind = "" // hardware, or a driver without a netlink kind
		}
		out = append(out, Link{
			Name: a.Name, Index: a.Index, Kind: kind, MTU: a.MTU, TxQueueLen: a.TxQLen,
			NumTxQueues: a.NumTxQueues, NumRxQueues: a.NumRxQueues,
			OperState: a.OperState.String(), Up: a.Flags&net.FlagUp != 0,
			Loopback: a.Flags&net.FlagLoopback != 0, MAC: a.HardwareAddr.String(),
		})
	}
	return out, nil
}

// Qdiscs lists every qdisc. Root entries carry the assembled Spec (with mq
// children, shaper class and leaf), read the way the qdisc knob reads it.
func (n *LiveNetlink) Qdiscs() ([]LinkQdisc, error) {
	entries, err := qdisc.Dump(0)
	if err != nil {
		return nil, err
	}
	ls, err := n.linkList()
	if err != nil {
		return nil, err
	}
	byIndex := map[int][]qdisc.Entry{}
	for _, e := range entries {
		byIndex[e.Ifindex] = append(byIndex[e.Ifindex], e)
	}
	up := map[int]bool{}
	for _, l := range ls {
		up[l.Attrs().Index] = l.Attrs().Flags&net.FlagUp != 0
	}
	specs := map[int]string{}
	for idx, es := range byIndex {
		var classes []qdisc.Class
		if hasHTBRoot(es) {
			t, err := qdisc.Read(idx)
			if err != nil {
				return nil, err
			}
			specs[idx] = t.Root.String()
			continue
		}
		specs[idx] = qdisc.Assemble(es, classes, up[idx]).Root.String()
	}
	out := make([]LinkQdisc, 0, len(entries))
	for _, e := range entries {
		q := Qdisc{
			Kind: e.Spec.Kind, Handle: qdisc.FormatHandle(e.Handle), Parent: qdisc.FormatHandle(e.Parent),
			Options: e.Spec.Opts,
			Stats: QdiscStats{Bytes: e.Stats.Bytes, Packets: e.Stats.Packets, Drops: e.Stats.Drops, Overlimits: e.Stats.Overlimits,
				Requeues: e.Stats.Requeues, Backlog: e.Stats.Backlog, Qlen: e.Stats.Qlen},
		}
		if e.Parent == qdisc.HandleRoot {
			q.Spec = specs[e.Ifindex]
		}
		out = append(out, LinkQdisc{Ifindex: e.Ifindex, Qdisc: q})
	}
	return out, nil
}

func hasHTBRoot(es []qdisc.Entry) bool {
	for _, e := range es {
		if e.Parent == qdisc.HandleRoot && e.Spec.Kind == "htb" {
			return true
		}
	}
	return false
}

// Routes lists the routes of every table, both families.
func (n *LiveNetlink) Routes() ([]Route, error) {
	rs, err := route.Dump()
	if err != nil {
		return nil, err
	}
	ls, _ := n.linkList()
	names := map[int]string{}
	for _, l := range ls {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	out := make([]Route, 0, len(rs))
	for _, r := range rs {
		hr := Route{
			Family: "inet", Dst: r.Dst.String(), Table: r.Table, Type: rtnType(r.Type),
			Protocol: rtProto(r.Protocol), Scope: rtScope(r.Scope), Dev: names[r.Oif], Priority: r.Priority,
			InitCwnd: int(r.Metrics[route.RTAXInitCwnd]), InitRwnd: int(r.Metrics[route.RTAXInitRwnd]),
			QuickACK: int(r.Metrics[route.RTAXQuickACK]), Congctl: r.Congctl,
		}
		if r.Family == unix.AF_INET6 {
			hr.Family = "inet6"
		}
		if r.Dst.Bits() == 0 {
			hr.Dst = "default" // as ip(8) prints it, for both families
		} else if r.Dst.Bits() == r.Dst.Addr().BitLen() {
			hr.Dst = r.Dst.Addr().String()
		}
		if r.Gateway.IsValid() {
			hr.Gateway = r.Gateway.String()
		}
		if r.PrefSrc.IsValid() {
			hr.Src = r.PrefSrc.String()
		}
		out = append(out, hr)
	}
	SortRoutes(out)
	return out, nil
}

func rtnType(t int) string {
	names := []string{"unspec", "unicast", "local", "broadcast", "anycast", "multicast", "blackhole", "unreachable", "prohibit", "throw", "nat", "xresolve"}
	if t >= 0 && t < len(names) {
		return names[t]
	}
	return fmt.Sprint(t)
}

func rtProto(p int) string {
	switch p {
	case 0:
		return ""
	case 1:
		return "redirect"
	case 2:
		return "kernel"
	case 3:
		return "boot"
	case 4:
		return "static"
	case 9:
		return "ra"
	case 16:
		return "dhcp"
	case 186:
		return "bgp"
	case 188:
		return "ospf"
	}
	return fmt.Sprint(p)
}

func rtScope(s int) string {
	switch s {
	case 0:
		return ""
	case 200:
		return "site"
	case 253:
		return "link"
	case 254:
		return "host"
	case 255:
		return "nowhere"
	}
	return fmt.Sprint(s)
}
