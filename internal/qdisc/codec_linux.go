//go:build linux

package qdisc

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

func init() {
	// Ask the kernel for extended ack messages ("Specified qdisc kind is
	// unknown") so errors say more than EINVAL.
	nl.EnableErrorMessageReporting = true
}

// native is the host byte order netlink structs use.
var native = nl.NativeEndian()

// Attribute numbers from linux/pkt_sched.h and linux/gen_stats.h that
// vishvananda/netlink lacks.
const (
	tcaStabBase = 1
	tcaStabData = 2

	tcaStatsPkt64 = 8
)

// Dump returns every qdisc of the interface (ifindex 0: all interfaces).
func Dump(ifindex int) ([]Entry, error) {
	var out []Entry
	for attempt := 0; ; attempt++ {
		req := nl.NewNetlinkRequest(unix.RTM_GETQDISC, unix.NLM_F_DUMP)
		req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(ifindex)})
		msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWQDISC)
		if errors.Is(err, netlink.ErrDumpInterrupted) && attempt < 5 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("dump qdiscs: %w", err)
		}
		out = out[:0]
		for _, m := range msgs {
			e, err := decodeQdisc(m)
			if err != nil {
				return nil, fmt.Errorf("dump qdiscs: %w", err)
			}
			if ifindex == 0 || e.Ifindex == ifindex {
				out = append(out, e)
			}
		}
		return out, nil
	}
}

func decodeQdisc(m []byte) (Entry, error) {
	if len(m) < nl.SizeofTcMsg {
		return Entry{}, fmt.Errorf("short tcmsg (%d bytes)", len(m))
	}
	msg := nl.DeserializeTcMsg(m)
	attrs, err := nl.ParseRouteAttr(m[nl.SizeofTcMsg:])
	if err != nil {
		return Entry{}, err
	}
	e := Entry{Ifindex: int(msg.Ifindex), Handle: msg.Handle, Parent: msg.Parent}
	var opts []byte
	estimator := false
	for _, a := range attrs {
		switch a.Attr.Type {
		case nl.TCA_KIND:
			e.Spec.Kind = strings.TrimRight(string(a.Value), "\x00")
		case nl.TCA_OPTIONS:
			opts = a.Value
		case nl.TCA_STAB:
			e.Spec.Stab = decodeStab(a.Value)
		case nl.TCA_STATS2:
			e.Stats, estimator = decodeStats2(a.Value)
		case nl.TCA_STATS:
			if e.Stats == (Stats{}) {
				e.Stats = decodeStats1(a.Value)
			}
		}
	}
	var unmanaged bool
	e.Spec.Opts, e.Spec.Attrs, unmanaged = decodeOptions(e.Spec.Kind, opts)
	// A rate estimator ("tc qdisc add ... estimator 1s 8s") shows only as rate
	// statistics; its interval and time constant are never reported, so a
	// qdisc with one cannot be recreated as it is.
	e.Spec.Unmanaged = unmanaged || estimator
	return e, nil
}

// decodeStab returns the size table spec of a TCA_STAB attribute. The kernel
// reports only the spec; the table itself is recomputed from it (stabTable).
func decodeStab(b []byte) []byte {
	attrs, err := parseAttrs(b)
	if err != nil {
		return nil
	}
	for _, a := range attrs {
		if a.Type == tcaStabBase {
			return a.Data
		}
	}
	return nil
}

// parseAttrs splits a netlink attribute stream, checking every length (the
// library's parser trusts them). Payloads are copies.
func parseAttrs(b []byte) ([]Attr, error) {
	var out []Attr
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("attribute header cut short (%d bytes)", len(b))
		}
		l := int(native.Uint16(b[0:2]))
		if l < 4 || l > len(b) {
			return nil, fmt.Errorf("attribute %d: length %d of %d bytes", native.Uint16(b[2:4]), l, len(b))
		}
		out = append(out, Attr{Type: native.Uint16(b[2:4]), Data: slices.Clone(b[4:l])})
		b = b[min((l+3)&^3, len(b)):]
	}
	return out, nil
}

// decodeStats2 reads the basic and queue counters, and whether a rate
// estimator reports through TCA_STATS_RATE_EST(64). gnet_stats_basic counts
// packets in 32 bits; past that the kernel (5.5+) puts the whole count in a
// TCA_STATS_PKT64 right after it (and another after TCA_STATS_BASIC_HW, for
// an offloaded qdisc's hardware counters, which is not ours).
func decodeStats2(b []byte) (Stats, bool) {
	var s Stats
	attrs, err := nl.ParseRouteAttr(b)
	if err != nil {
		return s, false
	}
	estimator := false
	var pkt64 uint64
	prev := uint16(0)
	for _, a := range attrs {
		v := a.Value
		switch a.Attr.Type {
		case nl.TCA_STATS_BASIC:
			if len(v) >= 12 {
				s.Bytes = native.Uint64(v[0:8])
				s.Packets = uint64(native.Uint32(v[8:12]))
			}
		case nl.TCA_STATS_QUEUE:
			if len(v) >= 20 {
				s.Qlen = uint64(native.Uint32(v[0:4]))
				s.Backlog = uint64(native.Uint32(v[4:8]))
				s.Drops = uint64(native.Uint32(v[8:12]))
				s.Requeues = uint64(native.Uint32(v[12:16]))
				s.Overlimits = uint64(native.Uint32(v[16:20]))
			}
		case tcaStatsPkt64:
			if len(v) >= 8 && prev == nl.TCA_STATS_BASIC {
				pkt64 = native.Uint64(v[0:8])
			}
		case nl.TCA_STATS_RATE_EST, nl.TCA_STATS_RATE_EST64:
			estimator = true
		}
		if a.Attr.Type != nl.TCA_STATS_PAD {
			prev = a.Attr.Type
		}
	}
	s.Packets = max(s.Packets, pkt64)
	return s, estimator
}

// decodeStats1 reads the old struct tc_stats (kernels before TCA_STATS2).
func decodeStats1(v []byte) Stats {
	if len(v) < 36 {
		return Stats{}
	}
	return Stats{
		Bytes: native.Uint64(v[0:8]), Packets: uint64(native.Uint32(v[8:12])),
		Drops: uint64(native.Uint32(v[12:16])), Overlimits: uint64(native.Uint32(v[16:20])),
		Qlen: uint64(native.Uint32(v[28:32])), Backlog: uint64(native.Uint32(v[32:36])),
	}
}

// optCodec reads and writes one kind's TCA_OPTIONS. Its decode and encode are
// checked against each other on every read (decodeOptions): whatever encode
// would not write back exactly is kept verbatim as an Attr, or, for a fixed
// struct that cannot be split, makes the qdisc unmanaged.
type optCodec struct {
	// head is the length of the struct before the attributes (netem's
	// tc_netem_qopt), 0 when TCA_OPTIONS holds attributes only, and -1 when
	// it is one struct and nothing else (pfifo, prio, sfq).
	head int
	// decode turns the dumped struct and attributes into options.
	decode func(head []byte, attrs []Attr, o map[string]string)
	// encode builds the struct and the attributes for a spec. Attributes come
	// in ascending type order so equal specs encode to equal bytes.
	encode func(s Spec) (head []byte, attrs []Attr, err error)
	// sameHead and sameAttr report whether what encode wrote comes back from
	// the kernel as dumped (the kernel rounds some units, fills in runtime
	// counters and leaves out fields it does not keep). nil: byte equality.
	sameHead func(wrote, dumped []byte) bool
	sameAttr func(typ uint16, wrote, dumped []byte) bool
	// unset reports a dumped attribute that only says "not set": the value a
	// new qdisc has when the attribute is not sent, which encode then omits.
	unset func(typ uint16, b []byte) bool
	// writeOnly filters the attributes actually sent once preserved ones
	// replaced encoded ones (tbf drops its rate tables when a preserved
	// parameter block has no link layer, or the kernel would derive one).
	writeOnly func(attrs []Attr) []Attr
}

// codecs are the kinds whose options lowlat reads and writes. Kinds absent
// here take no options (mq, ingress, clsact, noqueue, noop) or take none that
// can be set (pfifo_fast's priomap is fixed).
var codecs map[string]optCodec

func init() {
	codecs = map[string]optCodec{
		"pfifo":    fifoCodec(false),
		"bfifo":    fifoCodec(true),
		"prio":     prioCodec,
		"sfq":      sfqCodec,
		"fq_codel": fqCodelCodec,
		"codel":    codelCodec,
		"fq":       fqCodec,
		"cake":     cakeCodec,
		"tbf":      tbfCodec,
		"htb":      htbCodec,
		"netem":    netemCodec,
	}
}

// decodeOptions turns TCA_OPTIONS into canonical options plus the attributes
// no option reproduces exactly. Unknown kinds with options, and fixed structs
// lowlat cannot write back as they are, come back unmanaged.
func decodeOptions(kind string, b []byte) (map[string]string, []Attr, bool) {
	c, ok := codecs[kind]
	if !ok {
		switch kind {
		case "mq", "noqueue", "noop", "ingress", "clsact", "mqprio", "pfifo_fast":
			return nil, nil, false
		}
		return nil, nil, len(b) > 0
	}
	var head []byte
	var dumped []Attr
	switch {
	case c.head < 0:
		head = b
	case len(b) < c.head:
		return nil, nil, true
	default:
		head = b[:c.head]
		as, err := parseAttrs(b[c.head:])
		if err != nil {
			return nil, nil, true
		}
		for _, a := range as {
			if slices.ContainsFunc(dumped, func(d Attr) bool { return d.Type == a.Type }) {
				return nil, nil, true // no kind repeats a top-level attribute
			}
			dumped = append(dumped, a)
		}
	}
	if c.head == 0 {
		head = nil
	}
	o := map[string]string{}
	c.decode(head, dumped, o)
	if len(o) == 0 {
		o = nil
	}
	wroteHead, wrote, err := c.encode(Spec{Kind: kind, Opts: o})
	if err != nil {
		return o, dumped, true
	}
	if c.head != 0 && !sameOr(c.sameHead, wroteHead, head) {
		return o, nil, true
	}
	var keep []Attr
	for _, a := range dumped {
		i := slices.IndexFunc(wrote, func(w Attr) bool { return w.Type == a.Type })
		if i >= 0 && c.same(a.Type, wrote[i].Data, a.Data) {
			continue // the options write it back exactly
		}
		if i < 0 && c.unset != nil && c.unset(a.Type, a.Data) {
			continue // the kernel's value when it is not sent
		}
		keep = append(keep, a)
	}
	return o, keep, false
}

func (c optCodec) same(typ uint16, w, d []byte) bool {
	if c.sameAttr == nil {
		return bytes.Equal(w, d)
	}
	return c.sameAttr(typ, w, d)
}

func sameOr(same func(w, d []byte) bool, w, d []byte) bool {
	if same == nil {
		return bytes.Equal(w, d)
	}
	return same(w, d)
}

// encodeOptions builds TCA_OPTIONS for a spec: the encoded options, with the
// spec's preserved attributes in place of encoded ones of the same type. It
// returns nil for kinds and specs that send none.
func encodeOptions(s Spec) (*nl.RtAttr, error) {
	c, ok := codecs[s.Kind]
	if !ok {
		switch s.Kind {
		case "pfifo_fast", "mq", "ingress", "clsact", "noqueue", "noop", "mqprio":
			if len(s.Attrs) > 0 {
				return nil, fmt.Errorf("qdisc %s takes no options, yet attributes are recorded", s.Kind)
			}
			return nil, nil
		}
		return nil, fmt.Errorf("qdisc kind %q: lowlat cannot encode it", s.Kind)
	}
	if c.head < 0 && len(s.Attrs) > 0 {
		return nil, fmt.Errorf("qdisc %s: its options are one struct; attributes cannot be added to it", s.Kind)
	}
	head, attrs, err := c.encode(normalize(s))
	if err != nil {
		return nil, err
	}
	for _, a := range s.Attrs {
		attrs = slices.DeleteFunc(attrs, func(e Attr) bool { return e.Type == a.Type })
		attrs = append(attrs, a)
	}
	if c.writeOnly != nil {
		attrs = c.writeOnly(attrs)
	}
	if head == nil && len(attrs) == 0 && c.head != 0 {
		return nil, nil // no options: the kernel's defaults (pfifo without a limit)
	}
	opts := nl.NewRtAttr(nl.TCA_OPTIONS, head)
	for _, a := range attrs {
		opts.AddRtAttr(int(a.Type), a.Data)
	}
	return opts, nil
}

// encodeStab builds TCA_STAB from a size table spec, with the table the
// kernel needs when the spec has one (tsize > 0), computed as tc does.
func encodeStab(spec []byte) (*nl.RtAttr, error) {
	table, err := stabTable(spec)
	if err != nil {
		return nil, err
	}
	a := nl.NewRtAttr(nl.TCA_STAB, nil)
	a.AddRtAttr(tcaStabBase, spec)
	if table != nil {
		a.AddRtAttr(tcaStabData, table)
	}
	return a, nil
}

// modify sends one RTM_NEWQDISC/RTM_DELQDISC.
func modify(cmd, flags int, ifindex int, parent, handle uint32, s *Spec) error {
	req := nl.NewNetlinkRequest(cmd, flags|unix.NLM_F_ACK)
	req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(ifindex), Parent: parent, Handle: handle})
	if s != nil {
		req.AddData(nl.NewRtAttr(nl.TCA_KIND, nl.ZeroTerminated(s.Kind)))
		opts, err := encodeOptions(*s)
		if err != nil {
			return err
		}
		if opts != nil {
			req.AddData(opts)
		}
		if s.Stab != nil {
			st, err := encodeStab(s.Stab)
			if err != nil {
				return err
			}
			req.AddData(st)
		}
	}
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}
