//go:build linux

package qdisc

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ErrUnmanaged is returned when asked to write a configuration lowlat can only
// describe (someone else's classful tree).
var ErrUnmanaged = errors.New("configuration not managed by lowlat (cannot be recreated)")

// Read returns the assembled qdisc tree of one interface.
func Read(ifindex int) (Tree, error) {
	entries, err := Dump(ifindex)
	if err != nil {
		return Tree{}, err
	}
	link, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		return Tree{}, fmt.Errorf("link %d: %w", ifindex, err)
	}
	up := link.Attrs().Flags&unix.IFF_UP != 0
	var classes []Class
	for _, e := range entries {
		if e.Parent == HandleRoot && e.Spec.Kind == "htb" {
			classes, err = htbClasses(link, e.Handle)
			if err != nil {
				return Tree{}, err
			}
		}
	}
	return Assemble(entries, classes, up), nil
}

func htbClasses(link netlink.Link, handle uint32) ([]Class, error) {
	list, err := netlink.ClassList(link, netlink.HANDLE_NONE)
	if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
		return nil, fmt.Errorf("dump classes of %s: %w", link.Attrs().Name, err)
	}
	var out []Class
	for _, c := range list {
		h, ok := c.(*netlink.HtbClass)
		if !ok || h.Handle>>16 != handle>>16 {
			continue
		}
		opts := map[string]string{
			"rate":    FormatRate(h.Rate * 8),
			"ceil":    FormatRate(h.Ceil * 8),
			"burst":   FormatSize(uint64(netlink.Xmitsize(h.Rate, h.Buffer))),
			"cburst":  FormatSize(uint64(netlink.Xmitsize(h.Ceil, h.Cbuffer))),
			"quantum": FormatSize(uint64(h.Quantum)),
		}
		out = append(out, Class{Ifindex: link.Attrs().Index, Handle: h.Handle, Parent: h.Parent, Kind: "htb", Opts: opts})
	}
	return out, nil
}

// Apply makes the interface's root configuration equal to want. It never leaves
// the device without a qdisc: new roots are grafted over old ones in one
// operation, and a shaper's class and leaf are attached right after its root.
// numTx is the device's number of tx queues (mq needs more than one).
func Apply(ifindex int, want Spec, numTx int) error {
	if want.Unmanaged {
		return ErrUnmanaged
	}
	cur, err := Read(ifindex)
	if err != nil {
		return err
	}
	switch {
	case want.Default:
		return restoreDefault(ifindex, cur, want)
	case want.Kind == "mq":
		return applyMQ(ifindex, cur, want, numTx)
	case want.Kind == "htb" || (want.Kind == "tbf" && want.Leaf != nil):
		return applyShaper(ifindex, cur, want)
	case !Creatable(want.Kind):
		return fmt.Errorf("qdisc %s cannot be created explicitly", want.Kind)
	}
	// A plain root. Same kind already there (and ours): change it in place so
	// packets in flight are kept; otherwise graft a new one.
	handle := uint32(0)
	if cur.Root.Kind == want.Kind && !cur.Root.Default && cur.RootHandle != 0 && len(cur.Root.Children) == 0 && cur.Root.Leaf == nil {
		handle = cur.RootHandle
	}
	return modify(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, ifindex, HandleRoot, handle, &want)
}

// restoreDefault returns the device to the qdiscs the kernel attaches by itself.
// Deleting a root makes the kernel attach its defaults again (dev_activate); a
// default root cannot itself be deleted (handle 0), so when only its children
// were changed, an explicit root is grafted first and then deleted.
func restoreDefault(ifindex int, cur Tree, want Spec) error {
	if Equal(cur.Root, want) {
		return nil
	}
	if cur.Root.Default {
		tmp := Spec{Kind: "pfifo_fast"}
		if err := modify(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, ifindex, HandleRoot, 0, &tmp); err != nil {
			return fmt.Errorf("restore default qdisc: %w", err)
		}
		t, err := Read(ifindex)
		if err != nil {
			return err
		}
		cur = t
	}
	if err := modify(unix.RTM_DELQDISC, 0, ifindex, HandleRoot, cur.RootHandle, nil); err != nil {
		return fmt.Errorf("restore default qdisc: delete root %s: %w", FormatHandle(cur.RootHandle), err)
	}
	return nil
}

func applyMQ(ifindex int, cur Tree, want Spec, numTx int) error {
	if numTx < 2 {
		return fmt.Errorf("mq needs a multi-queue device (this one has %d tx queue)", numTx)
	}
	if cur.Root.Kind != "mq" {
		mq := Spec{Kind: "mq"}
		if err := modify(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, ifindex, HandleRoot, 0, &mq); err != nil {
			return fmt.Errorf("create mq root: %w", err)
		}
		t, err := Read(ifindex)
		if err != nil {
			return err
		}
		cur = t
	}
	if len(want.Children) == 0 {
		return nil
	}
	major := uint16(cur.RootHandle >> 16)
	// mq has one child per *active* tx queue (real_num_tx_queues), which can
	// be fewer than the device's maximum.
	n := len(cur.Root.Children)
	if n == 0 {
		n = numTx
	}
	for i := 0; i < n; i++ {
		c := want.Children[0]
		if len(want.Children) > 1 {
			if i >= len(want.Children) {
				break
			}
			c = want.Children[i]
		}
		if i < len(cur.Root.Children) && Satisfies(cur.Root.Children[i], c) && !c.Default {
			continue
		}
		if c.Default {
			// A default child comes back only with a default mq; callers restore
			// that through the root's @default, so treat it as pfifo_fast here.
			c = Spec{Kind: "pfifo_fast"}
		}
		parent := uint32(MakeHandle(major, uint16(i+1)))
		if err := modify(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, ifindex, parent, 0, &c); err != nil {
			return fmt.Errorf("mq child %d (parent %s) -> %s: %w", i+1, FormatHandle(parent), c.Kind, err)
		}
	}
	return nil
}

// applyShaper builds root (htb or tbf, handle N:) -> class N:1 (htb) -> leaf.
// It uses a handle different from the current root so the whole new tree is
// grafted in place of the old one.
func applyShaper(ifindex int, cur Tree, want Spec) error {
	major := uint16(1)
	if cur.RootHandle>>16 == 1 {
		major = 2
	}
	handle := MakeHandle(major, 0)
	root := Spec{Kind: want.Kind, Opts: want.Opts}
	if want.Kind == "htb" {
		root.Opts = map[string]string{}
		if v, ok := want.Opts["r2q"]; ok {
			root.Opts["r2q"] = v
		}
	}
	if err := modify(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, ifindex, HandleRoot, handle, &root); err != nil {
		return fmt.Errorf("create %s root: %w", want.Kind, err)
	}
	if want.Kind == "htb" {
		if err := htbClass(ifindex, handle, want); err != nil {
			return err
		}
	}
	if want.Leaf != nil {
		leaf := *want.Leaf
		leafHandle := MakeHandle(major+0x10, 0)
		if err := modify(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, ifindex, handle|1, leafHandle, &leaf); err != nil {
			return fmt.Errorf("attach %s leaf under %s: %w", leaf.Kind, FormatHandle(handle|1), err)
		}
	}
	return nil
}

func htbClass(ifindex int, handle uint32, want Spec) error {
	rate, err := ParseRate(want.Opts["rate"])
	if err != nil || rate == 0 {
		return fmt.Errorf("htb: rate is required")
	}
	ceil := rate
	if v, ok := want.Opts["ceil"]; ok {
		if ceil, err = ParseRate(v); err != nil {
			return fmt.Errorf("htb ceil: %w", err)
		}
	}
	attrs := netlink.HtbClassAttrs{Rate: rate, Ceil: ceil}
	for key, dst := range map[string]*uint32{"burst": &attrs.Buffer, "cburst": &attrs.Cbuffer, "quantum": &attrs.Quantum} {
		if v, ok := want.Opts[key]; ok {
			n, err := ParseSize(v)
			if err != nil {
				return fmt.Errorf("htb %s: %w", key, err)
			}
			*dst = uint32(n)
		}
	}
	cls := netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: ifindex, Handle: handle | 1, Parent: netlink.HANDLE_ROOT}, attrs)
	if attrs.Quantum != 0 {
		cls.Quantum = attrs.Quantum
	}
	if err := netlink.ClassReplace(cls); err != nil {
		return fmt.Errorf("htb class %s rate %s: %w", FormatHandle(handle|1), FormatRate(rate), err)
	}
	return nil
}

// Probe reports whether the kernel accepts a qdisc of the given kind, by
// creating one on the given (scratch) interface and deleting it again. Callers
// use a device in a throwaway network namespace.
func Probe(ifindex int, kind string) error {
	s := Spec{Kind: kind}
	switch kind {
	case "tbf":
		s.Opts = map[string]string{"rate": "1mbit", "burst": "4096", "limit": "10000"}
	case "htb":
		s.Opts = map[string]string{}
	}
	if err := modify(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, ifindex, HandleRoot, MakeHandle(0x7fff, 0), &s); err != nil {
		return err
	}
	return modify(unix.RTM_DELQDISC, 0, ifindex, HandleRoot, MakeHandle(0x7fff, 0), nil)
}
