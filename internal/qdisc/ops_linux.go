//go:build linux

package qdisc

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// ErrUnmanaged is returned when asked to write a configuration lowlat can only
// describe (someone else's classful tree).
var ErrUnmanaged = errors.New("configuration not managed by lowlat (cannot be recreated)")

// Read returns the assembled qdisc tree of one interface. A root with filters
// attached (to itself or to a shaper's class) is unmanaged: replacing the root
// destroys them, and lowlat does not record filters to put them back.
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
			if classes, err = dumpClasses(ifindex); err != nil {
				return Tree{}, fmt.Errorf("%s: %w", link.Attrs().Name, err)
			}
		}
	}
	t := Assemble(entries, classes, up)
	if t.RootHandle != 0 && !t.Root.Unmanaged {
		parents := []uint32{t.RootHandle}
		if t.Root.Kind == "htb" || t.Root.Kind == "tbf" {
			parents = append(parents, t.RootHandle|1)
		}
		for _, p := range parents {
			n, err := countFilters(ifindex, p)
			if err != nil {
				return Tree{}, fmt.Errorf("%s: %w", link.Attrs().Name, err)
			}
			if n > 0 {
				t.Root.Unmanaged = true
			}
		}
	}
	return t, nil
}

// dumpClasses returns the interface's classes; htb classes carry their
// options, and are unmanaged when lowlat cannot write them back as they are
// (or a rate estimator is attached).
func dumpClasses(ifindex int) ([]Class, error) {
	msgs, err := dumpTC(unix.RTM_GETTCLASS, unix.RTM_NEWTCLASS, ifindex, 0)
	if err != nil {
		return nil, fmt.Errorf("dump classes: %w", err)
	}
	var out []Class
	for _, m := range msgs {
		if len(m) < nl.SizeofTcMsg {
			continue
		}
		msg := nl.DeserializeTcMsg(m)
		attrs, err := nl.ParseRouteAttr(m[nl.SizeofTcMsg:])
		if err != nil {
			return nil, fmt.Errorf("dump classes: %w", err)
		}
		c := Class{Ifindex: int(msg.Ifindex), Handle: msg.Handle, Parent: msg.Parent}
		var opts []byte
		estimator := false
		for _, a := range attrs {
			switch a.Attr.Type {
			case nl.TCA_KIND:
				c.Kind = strings.TrimRight(string(a.Value), "\x00")
			case nl.TCA_OPTIONS:
				opts = a.Value
			case nl.TCA_STATS2:
				_, estimator = decodeStats2(a.Value)
			}
		}
		ok := false
		if c.Kind == "htb" {
			c.Opts, ok = decodeHTBClass(opts)
		}
		c.Unmanaged = !ok || estimator
		out = append(out, c)
	}
	return out, nil
}

// countFilters returns how many filters are attached at parent (a qdisc or a
// class handle) of the interface.
func countFilters(ifindex int, parent uint32) (int, error) {
	msgs, err := dumpTC(unix.RTM_GETTFILTER, unix.RTM_NEWTFILTER, ifindex, parent)
	if err != nil {
		return 0, fmt.Errorf("dump filters of %s: %w", FormatHandle(parent), err)
	}
	return len(msgs), nil
}

// dumpTC sends one tc dump request, retrying an interrupted dump.
func dumpTC(cmd, reply, ifindex int, parent uint32) ([][]byte, error) {
	for attempt := 0; ; attempt++ {
		req := nl.NewNetlinkRequest(cmd, unix.NLM_F_DUMP)
		req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(ifindex), Parent: parent})
		msgs, err := req.Execute(unix.NETLINK_ROUTE, uint16(reply))
		if errors.Is(err, netlink.ErrDumpInterrupted) && attempt < 5 {
			continue
		}
		return msgs, err
	}
}

// Apply makes the interface's root configuration equal to want. It never leaves
// the device without a qdisc: new roots are grafted over old ones in one
// operation, and a shaper's class and leaf are attached right after its root.
// numTx is the device's number of tx queues (mq needs more than one).
//
// A value that records its handle (one read from the kernel: see Spec.Exact)
// is recreated exactly, with its handles, every option and preserved
// attribute; anything else is applied the cheaper way (a qdisc of the same kind
// is changed in place).
func Apply(ifindex int, want Spec, numTx int) error {
	if !want.Managed() {
		return ErrUnmanaged
	}
	cur, err := Read(ifindex)
	if err != nil {
		return err
	}
	switch {
	case want.Default:
		return restoreDefault(ifindex, cur, want)
	case want.Handle != 0:
		return recreate(ifindex, cur, want, numTx)
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
		if !changeable(want) {
			// Without a handle of its own the kernel would try a change
			// (same kind), whatever the flags say.
			handle = unusedHandle(cur)
		}
	}
	return modify(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, ifindex, HandleRoot, handle, &want)
}

// unusedHandle returns a qdisc handle no qdisc of the interface has, below the
// range the kernel allocates from (8000: and up), so it cannot race with one.
func unusedHandle(cur Tree, taken ...uint32) uint32 {
	used := map[uint32]bool{}
	for _, e := range cur.Entries {
		used[e.Handle] = true
	}
	for _, h := range taken {
		used[h] = true
	}
	for major := uint16(0x7ffe); major > 0; major-- {
		if h := MakeHandle(major, 0); !used[h] {
			return h
		}
	}
	return 0
}

// changeable reports whether the kernel changes a qdisc of want's kind in
// place with want's options: sfq and pfifo_fast have no change operation, and
// fq_codel refuses a flow count once it has its flow table.
func changeable(want Spec) bool {
	switch want.Kind {
	case "pfifo", "bfifo", "prio", "tbf", "netem", "fq", "codel", "cake":
		return true
	case "fq_codel":
		_, flows := want.Opts["flows"]
		return !flows
	}
	return false
}

// recreate builds want afresh with the handles it records, so every setting of
// the result comes from want and none from the qdisc it replaces (a change in
// place keeps whatever it does not mention). The new root is grafted over the
// old tree in one operation; when a handle want needs is still in use (the
// apply changed the recorded qdisc in place, or a qdisc below the root took
// it), a placeholder pfifo_fast root is grafted first, which takes the whole
// old tree with it.
func recreate(ifindex int, cur Tree, want Spec, numTx int) error {
	switch {
	case !Creatable(want.Kind):
		return fmt.Errorf("qdisc %s cannot be created explicitly", want.Kind)
	case want.Kind == "mq" && numTx < 2:
		return fmt.Errorf("mq needs a multi-queue device (this one has %d tx queue)", numTx)
	}
	if handlesInUse(cur, want) {
		// The placeholder gets a handle of its own: with none, a root of the
		// same kind (pfifo_fast) would be changed rather than replaced.
		tmp := Spec{Kind: "pfifo_fast"}
		if err := modify(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, ifindex, HandleRoot, unusedHandle(cur, wantedHandles(want)...), &tmp); err != nil {
			return fmt.Errorf("free handle %s with a placeholder root: %w", FormatHandle(want.Handle), err)
		}
	}
	root := want
	root.Leaf, root.Children = nil, nil
	if want.Kind == "htb" {
		root.Opts = htbRootOpts(want.Opts)
	}
	if err := modify(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, ifindex, HandleRoot, want.Handle, &root); err != nil {
		return fmt.Errorf("create %s root %s: %w", want.Kind, FormatHandle(want.Handle), err)
	}
	if want.Kind == "htb" {
		if err := htbClass(ifindex, want.Handle, want); err != nil {
			return err
		}
	}
	if want.Leaf != nil {
		leaf := *want.Leaf
		if err := modify(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, ifindex, want.Handle|1, leaf.Handle, &leaf); err != nil {
			return fmt.Errorf("attach %s leaf under %s: %w", leaf.Kind, FormatHandle(want.Handle|1), err)
		}
	}
	for i, c := range want.Children {
		if c.Default {
			continue // the new mq attached it by itself
		}
		parent := want.Handle | uint32(i+1)
		if err := modify(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, ifindex, parent, c.Handle, &c); err != nil {
			return fmt.Errorf("mq child %d (parent %s) -> %s: %w", i+1, FormatHandle(parent), c.Kind, err)
		}
	}
	return nil
}

// handlesInUse reports whether a qdisc of the interface holds a handle want
// records.
func handlesInUse(cur Tree, want Spec) bool {
	for _, e := range cur.Entries {
		if e.Handle != 0 && e.Parent != HandleIngress && slices.Contains(wantedHandles(want), e.Handle) {
			return true
		}
	}
	return false
}

// wantedHandles are the handles want records: its own, its leaf's and its
// children's.
func wantedHandles(want Spec) []uint32 {
	out := []uint32{want.Handle}
	if want.Leaf != nil && want.Leaf.Handle != 0 {
		out = append(out, want.Leaf.Handle)
	}
	for _, c := range want.Children {
		if c.Handle != 0 {
			out = append(out, c.Handle)
		}
	}
	return out
}

// htbRootOpts are the options of an htb spec that belong to the qdisc (the
// rest describe its class).
func htbRootOpts(opts map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range []string{"r2q", "direct_qlen"} {
		if v, ok := opts[k]; ok {
			out[k] = v
		}
	}
	return out
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
	root := Spec{Kind: want.Kind, Opts: want.Opts, Attrs: want.Attrs, Stab: want.Stab}
	if want.Kind == "htb" {
		root.Opts = htbRootOpts(want.Opts)
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
	opts, err := encodeHTBClass(want.Opts)
	if err != nil {
		return err
	}
	req := nl.NewNetlinkRequest(unix.RTM_NEWTCLASS, unix.NLM_F_CREATE|unix.NLM_F_REPLACE|unix.NLM_F_ACK)
	req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(ifindex), Handle: handle | 1, Parent: HandleRoot})
	req.AddData(nl.NewRtAttr(nl.TCA_KIND, nl.ZeroTerminated("htb")))
	req.AddData(opts)
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("htb class %s rate %s: %w", FormatHandle(handle|1), want.Opts["rate"], err)
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
