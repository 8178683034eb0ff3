//go:build linux

package knob

import (
	"context"
	"errors"
	"fmt"

	"github.com/lowlat/lowlat/internal/qdisc"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// qdiscKnob is the root qdisc of an interface ("qdisc/eth0/root"), or its ingress
// shaping through an IFB device ("qdisc/eth0/ingress").
type qdiscKnob struct {
	sys     *System
	iface   string
	ingress bool
}

func newQdisc(sys *System, rest string) (Knob, error) {
	iface, where, err := parseQdiscID(rest)
	if err != nil {
		return nil, err
	}
	return &qdiscKnob{sys: sys, iface: iface, ingress: where == "ingress"}, nil
}

func (k *qdiscKnob) ID() string {
	if k.ingress {
		return "qdisc/" + k.iface + "/ingress"
	}
	return "qdisc/" + k.iface + "/root"
}

// Satisfied compares qdisc specs; the root also takes a rate lowlat
// autorate moved within its policy (QdiscRootSatisfied).
func (k *qdiscKnob) Satisfied(live, desired string) bool {
	if k.ingress {
		return QdiscSatisfied(live, desired)
	}
	return QdiscRootSatisfied(k.sys, k.iface, live, desired)
}

func (k *qdiscKnob) Same(a, b string) bool   { return QdiscSame(a, b) }
func (k *qdiscKnob) Validate(v string) error { return ValidateQdisc(v, k.ingress) }

// Restorable says why a value read from the kernel cannot be recreated.
func (k *qdiscKnob) Restorable(v string) error {
	if v == Absent {
		return nil
	}
	return ValidateQdisc(v, k.ingress)
}

// Fallback is the kernel's own state: its default root qdisc (whatever
// net.core.default_qdisc names), or no ingress shaping.
func (k *qdiscKnob) Fallback(string) string {
	if k.ingress {
		return Absent
	}
	return "pfifo_fast @default"
}

func (k *qdiscKnob) link() (netlink.Link, error) {
	l, err := netlink.LinkByName(k.iface)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) || errors.Is(err, unix.ENODEV) {
			return nil, fmt.Errorf("%s: no interface %q: %w", k.ID(), k.iface, ErrNotSupported)
		}
		return nil, fmt.Errorf("%s: look up %s: %w", k.ID(), k.iface, err)
	}
	return l, nil
}

func (k *qdiscKnob) Read(ctx context.Context) (string, error) {
	l, err := k.link()
	if err != nil {
		return "", err
	}
	if k.ingress {
		return readIngress(l)
	}
	t, err := qdisc.Read(l.Attrs().Index)
	if err != nil {
		return "", fmt.Errorf("%s: %w", k.ID(), err)
	}
	return t.Root.String(), nil
}

func (k *qdiscKnob) Write(ctx context.Context, value string) error {
	if err := k.Validate(value); err != nil {
		return fmt.Errorf("%s: %w", k.ID(), err)
	}
	l, err := k.link()
	if err != nil {
		return err
	}
	if k.ingress {
		return writeIngress(l, value)
	}
	s, _ := qdisc.Parse(value)
	if err := qdisc.Apply(l.Attrs().Index, s, l.Attrs().NumTxQueues); err != nil {
		return fmt.Errorf("%s: set %q: %w", k.ID(), value, mapErrno(err))
	}
	return nil
}

// readIngress reports lowlat's ingress shaping on l: Absent when there is no
// ingress qdisc, the IFB's root spec when lowlat's redirect is in place, and
// "ingress @unmanaged" for an ingress qdisc someone else set up (lowlat will not
// replace it).
func readIngress(l netlink.Link) (string, error) {
	entries, err := qdisc.Dump(l.Attrs().Index)
	if err != nil {
		return "", fmt.Errorf("qdisc/%s/ingress: %w", l.Attrs().Name, err)
	}
	var ing *qdisc.Entry
	for i := range entries {
		if entries[i].Parent == qdisc.HandleIngress {
			ing = &entries[i]
		}
	}
	if ing == nil {
		return Absent, nil
	}
	ifbName := IFBName(l.Attrs().Name)
	ifb, err := netlink.LinkByName(ifbName)
	if err != nil {
		return "ingress @unmanaged", nil
	}
	filters, err := netlink.FilterList(l, netlink.HANDLE_INGRESS)
	if err != nil {
		return "", fmt.Errorf("qdisc/%s/ingress: list filters: %w", l.Attrs().Name, err)
	}
	if len(filters) != 1 || !redirectsTo(filters[0], ifb.Attrs().Index) {
		return "ingress @unmanaged", nil
	}
	t, err := qdisc.Read(ifb.Attrs().Index)
	if err != nil {
		return "", fmt.Errorf("qdisc/%s/ingress: %s: %w", l.Attrs().Name, ifbName, err)
	}
	return t.Root.String(), nil
}

func redirectsTo(f netlink.Filter, ifindex int) bool {
	u, ok := f.(*netlink.U32)
	if !ok {
		return false
	}
	for _, a := range u.Actions {
		if m, ok := a.(*netlink.MirredAction); ok && m.Ifindex == ifindex && m.MirredAction == netlink.TCA_EGRESS_REDIR {
			return true
		}
	}
	return false
}

// writeIngress sets up or tears down ingress shaping. Setup order matters: the
// IFB device gets its qdisc and is brought up *before* traffic is redirected to
// it, because packets redirected to a down device are dropped.
func writeIngress(l netlink.Link, value string) error {
	id := "qdisc/" + l.Attrs().Name + "/ingress"
	ifbName := IFBName(l.Attrs().Name)
	if value == Absent {
		return teardownIngress(l, ifbName, id)
	}
	cur, err := readIngress(l)
	if err != nil {
		return err
	}
	if cur == "ingress @unmanaged" {
		return fmt.Errorf("%s: an ingress qdisc not set up by lowlat is in place; refusing to replace it", id)
	}
	spec, _ := qdisc.Parse(value)
	ifb, err := netlink.LinkByName(ifbName)
	if err != nil {
		if err := netlink.LinkAdd(&netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: ifbName, TxQLen: 1000}}); err != nil {
			return fmt.Errorf("%s: create %s: %w", id, ifbName, mapErrno(err))
		}
		if ifb, err = netlink.LinkByName(ifbName); err != nil {
			return fmt.Errorf("%s: %s: %w", id, ifbName, err)
		}
	}
	if err := netlink.LinkSetUp(ifb); err != nil {
		return fmt.Errorf("%s: bring %s up: %w", id, ifbName, err)
	}
	if err := qdisc.Apply(ifb.Attrs().Index, spec, 1); err != nil {
		return fmt.Errorf("%s: %s root %q: %w", id, ifbName, value, mapErrno(err))
	}
	if cur != Absent {
		return nil // redirect already in place; only the IFB's qdisc changed
	}
	ing := &netlink.Ingress{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_INGRESS}}
	if err := netlink.QdiscAdd(ing); err != nil {
		return fmt.Errorf("%s: add ingress qdisc: %w", id, mapErrno(err))
	}
	// Match everything: one u32 key with mask 0. The keys slice is cut to its
	// length so vishvananda/netlink v1.3.1 does not pad it with extra match-all
	// keys taken from spare capacity.
	keys := []netlink.TcU32Key{{Mask: 0, Val: 0, Off: 0}}
	filter := &netlink.U32{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: l.Attrs().Index, Parent: netlink.MakeHandle(0xffff, 0), Priority: 1, Protocol: unix.ETH_P_ALL},
		Sel:         &netlink.TcU32Sel{Flags: netlink.TC_U32_TERMINAL, Nkeys: 1, Keys: keys[:1:1]},
		Actions:     []netlink.Action{&netlink.MirredAction{ActionAttrs: netlink.ActionAttrs{Action: netlink.TC_ACT_STOLEN}, MirredAction: netlink.TCA_EGRESS_REDIR, Ifindex: ifb.Attrs().Index}},
	}
	if err := netlink.FilterAdd(filter); err != nil {
		_ = netlink.QdiscDel(ing)
		return fmt.Errorf("%s: redirect to %s: %w", id, ifbName, mapErrno(err))
	}
	return nil
}

// teardownIngress removes the redirect first (so nothing is sent to a device
// about to vanish), then the IFB device.
func teardownIngress(l netlink.Link, ifbName, id string) error {
	cur, err := readIngress(l)
	if err != nil {
		return err
	}
	if cur == "ingress @unmanaged" {
		return fmt.Errorf("%s: the ingress qdisc in place was not set up by lowlat; leaving it", id)
	}
	if cur != Absent {
		ing := &netlink.Ingress{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_INGRESS}}
		if err := netlink.QdiscDel(ing); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("%s: delete ingress qdisc: %w", id, err)
		}
	}
	if ifb, err := netlink.LinkByName(ifbName); err == nil {
		if err := netlink.LinkDel(ifb); err != nil {
			return fmt.Errorf("%s: delete %s: %w", id, ifbName, err)
		}
	}
	return nil
}
