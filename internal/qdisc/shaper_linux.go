//go:build linux

package qdisc

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// ReadShaper returns the interface's root shaper (cake or tbf) with its rate
// and counters. The error wraps ErrNoShaper, naming the kind found, when the
// root is anything else.
//
// It is meant to be called several times a second: it costs one qdisc dump
// (RTM_GETQDISC) and decodes only the interface's root from it — no class or
// filter dumps, no option decoding beyond the rate. The kernel answers a qdisc
// dump with the qdiscs of every interface of the namespace whatever index the
// request names, so the cost grows with the namespace's qdiscs, not only the
// interface's.
func ReadShaper(ifindex int) (Shaper, error) {
	st, err := readShaper(ifindex)
	if err != nil {
		return Shaper{}, fmt.Errorf("read shaper on ifindex %d: %w", ifindex, err)
	}
	return st.Shaper, nil
}

// SetShaperRate changes the rate of the interface's root shaper in place and
// returns the shaper as it was before the change. Everything else stays: the
// qdisc and its handle, its other options, its size table, a tbf's leaf with
// its handle and options, and the packets queued in them. bps is rounded down
// to whole bytes per second (see Shaper); a rate the shaper already has
// writes nothing.
//
// A cake is sent its new bandwidth alone (cake keeps every option a change
// does not carry). A tbf is sent its whole parameter block, as tc would: the
// kernel's tbf takes no partial change. Its bucket becomes the profile's for
// the new rate (2 MTUs or 1 ms of traffic, ${tbf_burst}); its byte limit
// keeps the latency it was made from, limit = rate*latency + burst, so the
// queue's time bound (limit/rate) stays what it was where the bucket grows
// with the rate, and never shrinks below the bucket where it does not (see
// shaperLimit). Its peak rate, minimum burst, overhead, mpu and link layer
// are sent back as read.
//
// Two kernel behaviours it works around: a qdisc change that carries no size
// table removes the qdisc's size table (qdisc_change), so the table read is
// sent back; and a tbf change sets the limit of a pfifo, bfifo or
// pfifo_head_drop leaf to the tbf's byte limit (fifo_set_limit: a pfifo leaf
// of 100 packets becomes one of some thousands), so such a leaf's options
// are written back right after (other leaves, fq_codel among them, are not
// touched by the kernel). Also note that a tbf change refills its bucket
// (tbf_change sets its tokens to a full bucket), so each change can let up
// to one bucket through beyond the rate; that is why an unchanged rate
// writes nothing, and why a caller should not change it more often than it
// must.
//
// It does not read the shaper back; the next ReadShaper shows the rate the
// kernel holds.
func SetShaperRate(ifindex int, bps uint64) (Shaper, error) {
	st, err := readShaper(ifindex)
	if err != nil {
		return Shaper{}, fmt.Errorf("set shaper rate on ifindex %d to %s: %w", ifindex, FormatRate(bps), err)
	}
	if err := st.setRate(ifindex, bps/8); err != nil {
		return Shaper{}, fmt.Errorf("set %s rate on ifindex %d to %s: %w", st.Kind, ifindex, FormatRate(bps), err)
	}
	return st.Shaper, nil
}

// shaperState is a read shaper with what changing it needs.
type shaperState struct {
	Shaper
	rate uint64 // bytes per second
	root []byte // the root's RTM_NEWQDISC message
	// leaf is the message of the qdisc under a tbf's class, nil when there
	// is none or only the default bfifo tbf makes itself (which the kernel
	// marks invisible and leaves out of dumps).
	leaf []byte
}

// readShaper dumps the qdiscs once and decodes the interface's root (and a
// tbf's leaf header).
func readShaper(ifindex int) (shaperState, error) {
	msgs, err := dumpTC(unix.RTM_GETQDISC, unix.RTM_NEWQDISC, ifindex, 0)
	if err != nil {
		return shaperState{}, fmt.Errorf("dump qdiscs: %w", err)
	}
	var st shaperState
	for _, m := range msgs {
		if len(m) >= nl.SizeofTcMsg {
			if h := nl.DeserializeTcMsg(m); int(h.Ifindex) == ifindex && h.Parent == HandleRoot {
				st.root, st.Handle = m, h.Handle
			}
		}
	}
	if st.root == nil {
		return st, noRoot(ifindex)
	}
	attrs, err := parseAttrs(st.root[nl.SizeofTcMsg:])
	if err != nil {
		return st, fmt.Errorf("root qdisc %s: %w", FormatHandle(st.Handle), err)
	}
	var opts []byte
	var stats Stats
	for _, a := range attrs {
		switch a.Type {
		case nl.TCA_KIND:
			st.Kind = strings.TrimRight(string(a.Data), "\x00")
		case nl.TCA_OPTIONS:
			opts = a.Data
		case nl.TCA_STATS2:
			stats, _ = decodeStats2(a.Data)
		case nl.TCA_STATS:
			if stats == (Stats{}) {
				stats = decodeStats1(a.Data)
			}
		}
	}
	if st.Kind != "cake" && st.Kind != "tbf" {
		return st, fmt.Errorf("root qdisc is %s, %w", st.Kind, ErrNoShaper)
	}
	if st.rate, err = shaperRate(st.Kind, opts); err != nil {
		return st, fmt.Errorf("root %s %s: %w", st.Kind, FormatHandle(st.Handle), err)
	}
	st.RateBps = st.rate * 8
	st.Bytes, st.Packets, st.Backlog, st.Drops = stats.Bytes, stats.Packets, stats.Backlog, stats.Drops
	st.Qlen = uint32(min(stats.Qlen, math.MaxUint32))
	if st.Kind == "tbf" {
		for _, m := range msgs {
			if len(m) >= nl.SizeofTcMsg {
				if h := nl.DeserializeTcMsg(m); int(h.Ifindex) == ifindex && h.Parent == st.Handle|1 && st.Handle != 0 {
					st.leaf = m
				}
			}
		}
	}
	return st, nil
}

// noRoot explains a dump without a root for the interface: the kernel does
// not dump the builtin noop of a down link (as Assemble assumes, an up link
// without one has noqueue), and there is none for an interface that does
// not exist.
func noRoot(ifindex int) error {
	l, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return fmt.Errorf("no such interface: %w", os.ErrNotExist)
		}
		return fmt.Errorf("link: %w", err)
	}
	kind := "noqueue"
	if l.Attrs().Flags&unix.IFF_UP == 0 {
		kind = "noop"
	}
	return fmt.Errorf("root qdisc is %s, %w", kind, ErrNoShaper)
}

// shaperRate reads the rate in bytes per second from a cake's or tbf's
// TCA_OPTIONS.
func shaperRate(kind string, opts []byte) (uint64, error) {
	attrs, err := parseAttrs(opts)
	if err != nil {
		return 0, fmt.Errorf("options: %w", err)
	}
	var rate uint64
	found := false
	for _, a := range attrs {
		switch {
		case kind == "cake" && a.Type == tcaCakeBaseRate64:
			rate, found = getU64(a.Data)
		case kind == "tbf" && int(a.Type) == nl.TCA_TBF_PARMS && len(a.Data) == tbfParmsLen:
			rate, found = max(rate, uint64(getRateSpec(a.Data[0:12]).rate)), true
		case kind == "tbf" && int(a.Type) == nl.TCA_TBF_RATE64:
			if v, ok := getU64(a.Data); ok {
				rate = max(rate, v)
			}
		}
	}
	switch {
	case !found:
		return 0, errors.New("options carry no rate")
	case rate > math.MaxUint64/8:
		return 0, fmt.Errorf("rate of %d bytes/s out of range", rate)
	}
	return rate, nil
}

// setRate changes the shaper's rate to rate bytes per second.
func (st shaperState) setRate(ifindex int, rate uint64) error {
	switch {
	case rate == 0:
		// cake would take 0 as "unlimited", and tbf refuses it.
		return errors.New("rate below 8 bit/s (the kernel holds whole bytes per second)")
	case st.Handle == 0:
		return errors.New("the root is the kernel's default qdisc (handle 0:), which cannot be changed in place")
	case rate == st.rate:
		return nil
	}
	root, err := decodeQdisc(st.root)
	if err != nil {
		return err
	}
	if st.Kind == "cake" {
		s := Spec{Kind: "cake", Opts: map[string]string{"bandwidth": FormatRate(rate * 8)}, Stab: root.Spec.Stab}
		// No NLM_F_CREATE or NLM_F_REPLACE: the kernel changes the qdisc
		// with this handle and kind, or fails; it never creates one.
		return modify(unix.RTM_NEWQDISC, 0, ifindex, HandleRoot, st.Handle, &s)
	}
	burst := shaperBurst(rate * 8)
	if burst > math.MaxUint32 {
		return fmt.Errorf("a %d-byte bucket is beyond tbf's 32 bits", burst)
	}
	limit, err1 := ParseSize(root.Spec.Opts["limit"])
	oldBurst, err2 := ParseSize(root.Spec.Opts["burst"])
	if err1 != nil || err2 != nil {
		return fmt.Errorf("tbf %s: options lowlat cannot decode (%s)", FormatHandle(st.Handle), root.Spec)
	}
	if burst >= oldBurst || st.Backlog > 0 {
		// tbf lets whole GSO packets up to its bucket into its queue. A
		// smaller bucket would leave such a packet at the head waiting
		// for more tokens than the bucket holds, and the shaper would
		// send nothing until its rate rose again (seen on 6.18 with a
		// provider's cap stepping down under TCP). The bucket shrinks at
		// a change that finds the queue empty. The same bucket in bytes
		// may hold a byte less at the new rate (see largestPacket): that
		// byte is added at any change, as a packet may enter between
		// this read and the change.
		burst = holdingBurst(st.rate, oldBurst, rate, max(burst, oldBurst))
	}
	s, err := tbfWithRate(root.Spec, rate, burst, shaperLimit(limit, oldBurst, st.rate, rate, burst))
	if err != nil {
		return err
	}
	if err := modify(unix.RTM_NEWQDISC, 0, ifindex, HandleRoot, st.Handle, &s); err != nil {
		return err
	}
	return st.restoreFifoLeaf(ifindex)
}

// largestPacket is the largest packet a tbf at rate (bytes/s) with a bucket
// of burst bytes, written as tc writes it, takes whole: the kernel keeps the
// bucket as ticks of the rate (tc truncates them) and its largest packet as
// the bytes those ticks hold, rounded down (psched_ns_t2l). That is burst-1
// at some rates: 3027 bytes at 3 Mbit/s for a 3028-byte bucket, 3028 at 4.
func largestPacket(rate, burst uint64) uint64 {
	ns := float64(xmitTicks(rate, uint32(min(burst, math.MaxUint32)))) * 1000 / netlink.TickInUsec()
	return uint64(ns * float64(rate) / 1e9)
}

// holdingBurst is burst, or the least bucket over it that takes whole every
// packet a tbf at oldRate with oldBurst let into its queue. Without it, a
// change of rate with the same 3028-byte bucket (two full frames) from 4 to
// 3 Mbit/s left a 3028-byte GSO packet at the head of the queue waiting for
// more tokens than the bucket holds: the shaper sent nothing again (seen in
// the lab under lowlat autorate).
func holdingBurst(oldRate, oldBurst, rate, burst uint64) uint64 {
	need := largestPacket(oldRate, oldBurst)
	// A tick holds rate/15.6e6 bytes: a few hundred at 40 Gbit/s.
	for i := 0; i < 1<<16 && largestPacket(rate, burst) < need; i++ {
		burst++
	}
	return burst
}

// tbfWithRate is the tbf spec cur with a new rate (bytes/s), bucket and
// limit (bytes). A parameter block cur keeps verbatim (its options cannot
// reproduce it: no link layer, a bucket in ticks no byte count gives) is
// patched in those three fields and sent otherwise as it was.
func tbfWithRate(cur Spec, rate, burst, limit uint64) (Spec, error) {
	if _, ok := cur.Opts["rate"]; !ok {
		return Spec{}, fmt.Errorf("tbf options lowlat cannot decode (%s)", cur)
	}
	out := Spec{Kind: "tbf", Opts: maps.Clone(cur.Opts), Stab: cur.Stab}
	out.Opts["rate"] = FormatRate(rate * 8)
	out.Opts["burst"] = FormatSize(burst)
	out.Opts["limit"] = FormatSize(limit)
	for _, a := range cur.Attrs {
		switch int(a.Type) {
		case nl.TCA_TBF_PARMS:
			if len(a.Data) != tbfParmsLen {
				return Spec{}, fmt.Errorf("tbf parameter block of %d bytes, want %d", len(a.Data), tbfParmsLen)
			}
			p := slices.Clone(a.Data)
			native.PutUint32(p[8:], uint32(min(rate, math.MaxUint32)))
			native.PutUint32(p[24:], uint32(limit))
			native.PutUint32(p[28:], xmitTicks(rate, uint32(burst)))
			out.Attrs = append(out.Attrs, Attr{Type: a.Type, Data: p})
		case nl.TCA_TBF_RATE64:
			// The encoder writes one for the new rate when it needs 64 bits.
		default:
			out.Attrs = append(out.Attrs, a)
		}
	}
	return out, nil
}

// restoreFifoLeaf writes a fifo leaf's options back after a tbf change set
// its limit to the tbf's (fifo_set_limit matches any kind named "?fifo*"
// that has a change operation: pfifo, bfifo, pfifo_head_drop).
func (st shaperState) restoreFifoLeaf(ifindex int) error {
	if st.leaf == nil {
		return nil
	}
	h := nl.DeserializeTcMsg(st.leaf)
	leaf, err := decodeQdisc(st.leaf)
	if err != nil {
		return fmt.Errorf("leaf %s: %w", FormatHandle(h.Handle), err)
	}
	kind := leaf.Spec.Kind
	if kind != "pfifo" && kind != "bfifo" && kind != "pfifo_head_drop" {
		return nil
	}
	attrs, err := parseAttrs(st.leaf[nl.SizeofTcMsg:])
	if err != nil {
		return fmt.Errorf("leaf %s: %w", FormatHandle(h.Handle), err)
	}
	i := slices.IndexFunc(attrs, func(a Attr) bool { return a.Type == nl.TCA_OPTIONS })
	if i < 0 {
		return nil
	}
	// Sent back as dumped: a fifo's options are its struct tc_fifo_qopt
	// (the limit), which its change operation takes as it is.
	req := nl.NewNetlinkRequest(unix.RTM_NEWQDISC, unix.NLM_F_ACK)
	req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(ifindex), Parent: h.Parent, Handle: h.Handle})
	req.AddData(nl.NewRtAttr(nl.TCA_KIND, nl.ZeroTerminated(kind)))
	req.AddData(nl.NewRtAttr(nl.TCA_OPTIONS, attrs[i].Data))
	if leaf.Spec.Stab != nil {
		stab, err := encodeStab(leaf.Spec.Stab)
		if err != nil {
			return fmt.Errorf("leaf %s %s: %w", kind, FormatHandle(h.Handle), err)
		}
		req.AddData(stab)
	}
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("restore the limit of leaf %s %s (the tbf change set it to the tbf's): %w", kind, FormatHandle(h.Handle), err)
	}
	return nil
}
