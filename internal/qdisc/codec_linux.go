//go:build linux

package qdisc

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"syscall"
	"time"

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

// Attribute numbers from linux/pkt_sched.h that vishvananda/netlink lacks.
const (
	tcaCakeBaseRate64 = 2
	tcaCakeDiffserv   = 3
	tcaCakeATM        = 4
	tcaCakeFlowMode   = 5
	tcaCakeOverhead   = 6
	tcaCakeRTT        = 7
	tcaCakeTarget     = 8
	tcaCakeAutorate   = 9
	tcaCakeMemory     = 10
	tcaCakeNAT        = 11
	tcaCakeRaw        = 12
	tcaCakeWash       = 13
	tcaCakeMPU        = 14
	tcaCakeIngress    = 15
	tcaCakeAckFilter  = 16
	tcaCakeSplitGSO   = 17
	tcaCakeFwmark     = 18

	tcaCodelTarget      = 1
	tcaCodelLimit       = 2
	tcaCodelInterval    = 3
	tcaCodelECN         = 4
	tcaCodelCEThreshold = 5

	tcaNetemLatency64 = 10
	tcaNetemJitter64  = 11
)

var cakeDiffserv = []string{"diffserv3", "diffserv4", "diffserv8", "besteffort", "precedence"}
var cakeFlow = []string{"flowblind", "srchost", "dsthost", "hosts", "flows", "dual-srchost", "dual-dsthost", "triple-isolate"}
var cakeAck = []string{"none", "filter", "aggressive"}
var cakeATM = []string{"none", "atm", "ptm"}

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
	for _, a := range attrs {
		switch a.Attr.Type {
		case nl.TCA_KIND:
			e.Spec.Kind = strings.TrimRight(string(a.Value), "\x00")
		case nl.TCA_OPTIONS:
			opts = a.Value
		case nl.TCA_STATS2:
			e.Stats = decodeStats2(a.Value)
		case nl.TCA_STATS:
			if e.Stats == (Stats{}) {
				e.Stats = decodeStats1(a.Value)
			}
		}
	}
	e.Spec.Opts, e.Spec.Unmanaged = decodeOptions(e.Spec.Kind, opts)
	return e, nil
}

func decodeStats2(b []byte) Stats {
	var s Stats
	attrs, err := nl.ParseRouteAttr(b)
	if err != nil {
		return s
	}
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
		}
	}
	return s
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

func u32s(v uint32) string { return strconv.FormatUint(uint64(v), 10) }
func usTime(us uint32) string {
	return FormatTime(time.Duration(us) * time.Microsecond)
}
func onoff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// decodeOptions turns TCA_OPTIONS into canonical options. Unknown kinds with
// options come back unmanaged: lowlat can show them but not recreate them.
func decodeOptions(kind string, b []byte) (map[string]string, bool) {
	o := map[string]string{}
	switch kind {
	case "pfifo_fast", "prio":
		if len(b) >= 20 {
			bands := int32(native.Uint32(b[0:4]))
			if kind == "prio" {
				o["bands"] = strconv.Itoa(int(bands))
				pm := make([]string, 16)
				for i := range pm {
					pm[i] = strconv.Itoa(int(b[4+i]))
				}
				o["priomap"] = strings.Join(pm, " ")
			}
		}
	case "pfifo":
		if len(b) >= 4 {
			o["limit"] = u32s(native.Uint32(b))
		}
	case "bfifo":
		if len(b) >= 4 {
			o["limit"] = FormatSize(uint64(native.Uint32(b)))
		}
	case "fq_codel", "codel", "fq", "cake", "tbf", "htb":
		attrs, err := nl.ParseRouteAttr(b)
		if err != nil {
			return nil, true
		}
		for _, a := range attrs {
			decodeAttr(kind, a, o)
		}
		if kind == "tbf" {
			finishTbf(o)
		}
	case "netem":
		decodeNetem(b, o)
	case "sfq":
		if len(b) >= 16 {
			o["quantum"] = FormatSize(uint64(native.Uint32(b[0:4])))
			o["perturb"] = u32s(native.Uint32(b[4:8]))
			o["limit"] = u32s(native.Uint32(b[8:12]))
			o["divisor"] = u32s(native.Uint32(b[12:16]))
		}
	case "mq", "noqueue", "noop", "ingress", "clsact", "mqprio":
	default:
		if len(b) > 0 {
			return nil, true
		}
	}
	if len(o) == 0 {
		o = nil
	}
	return o, false
}

func decodeAttr(kind string, a syscall.NetlinkRouteAttr, o map[string]string) {
	v := a.Value
	u32 := func() uint32 {
		if len(v) < 4 {
			return 0
		}
		return native.Uint32(v)
	}
	t := int(a.Attr.Type)
	switch kind {
	case "fq_codel":
		switch t {
		case nl.TCA_FQ_CODEL_TARGET:
			o["target"] = usTime(u32())
		case nl.TCA_FQ_CODEL_LIMIT:
			o["limit"] = u32s(u32())
		case nl.TCA_FQ_CODEL_INTERVAL:
			o["interval"] = usTime(u32())
		case nl.TCA_FQ_CODEL_ECN:
			o["ecn"] = onoff(u32() != 0)
		case nl.TCA_FQ_CODEL_FLOWS:
			o["flows"] = u32s(u32())
		case nl.TCA_FQ_CODEL_QUANTUM:
			o["quantum"] = FormatSize(uint64(u32()))
		case nl.TCA_FQ_CODEL_CE_THRESHOLD:
			// The kernel reports an unset threshold as ~0 (no ECN marking).
			if u32() != math.MaxUint32 && u32() != 0 {
				o["ce_threshold"] = usTime(u32())
			}
		case nl.TCA_FQ_CODEL_DROP_BATCH_SIZE:
			o["drop_batch"] = u32s(u32())
		case nl.TCA_FQ_CODEL_MEMORY_LIMIT:
			o["memory_limit"] = FormatSize(uint64(u32()))
		}
	case "codel":
		switch t {
		case tcaCodelTarget:
			o["target"] = usTime(u32())
		case tcaCodelLimit:
			o["limit"] = u32s(u32())
		case tcaCodelInterval:
			o["interval"] = usTime(u32())
		case tcaCodelECN:
			o["ecn"] = onoff(u32() != 0)
		case tcaCodelCEThreshold:
			if u32() != math.MaxUint32 && u32() != 0 {
				o["ce_threshold"] = usTime(u32())
			}
		}
	case "fq":
		switch t {
		case nl.TCA_FQ_PLIMIT:
			o["limit"] = u32s(u32())
		case nl.TCA_FQ_FLOW_PLIMIT:
			o["flow_limit"] = u32s(u32())
		case nl.TCA_FQ_QUANTUM:
			o["quantum"] = FormatSize(uint64(u32()))
		case nl.TCA_FQ_INITIAL_QUANTUM:
			o["initial_quantum"] = FormatSize(uint64(u32()))
		case nl.TCA_FQ_RATE_ENABLE:
			o["pacing"] = onoff(u32() != 0)
		case nl.TCA_FQ_FLOW_MAX_RATE:
			if r := u32(); r != math.MaxUint32 {
				o["maxrate"] = FormatRate(uint64(r) * 8)
			}
		case nl.TCA_FQ_BUCKETS_LOG:
			o["buckets"] = u32s(1 << u32())
		case nl.TCA_FQ_FLOW_REFILL_DELAY:
			o["refill_delay"] = usTime(u32())
		case nl.TCA_FQ_LOW_RATE_THRESHOLD:
			o["low_rate_threshold"] = FormatRate(uint64(u32()) * 8)
		case nl.TCA_FQ_CE_THRESHOLD:
			if u32() != math.MaxUint32 && u32() != 0 {
				o["ce_threshold"] = usTime(u32())
			}
		case nl.TCA_FQ_HORIZON:
			o["horizon"] = usTime(u32())
		}
	case "cake":
		word := func(list []string) string {
			if i := int(u32()); i < len(list) {
				return list[i]
			}
			return strconv.Itoa(int(u32()))
		}
		switch t {
		case tcaCakeBaseRate64:
			if len(v) >= 8 {
				o["bandwidth"] = FormatRate(native.Uint64(v) * 8)
			}
		case tcaCakeDiffserv:
			o["diffserv"] = word(cakeDiffserv)
		case tcaCakeFlowMode:
			o["flowmode"] = word(cakeFlow)
		case tcaCakeNAT:
			o["nat"] = onoff(u32() != 0)
		case tcaCakeWash:
			o["wash"] = onoff(u32() != 0)
		case tcaCakeSplitGSO:
			o["split_gso"] = onoff(u32() != 0)
		case tcaCakeAckFilter:
			o["ack_filter"] = word(cakeAck)
		case tcaCakeIngress:
			o["ingress"] = onoff(u32() != 0)
		case tcaCakeAutorate:
			o["autorate"] = onoff(u32() != 0)
		case tcaCakeOverhead:
			o["overhead"] = strconv.Itoa(int(int32(u32())))
		case tcaCakeMPU:
			o["mpu"] = u32s(u32())
		case tcaCakeATM:
			o["atm"] = word(cakeATM)
		case tcaCakeRTT:
			o["rtt"] = usTime(u32())
		case tcaCakeMemory:
			if u32() != 0 {
				o["memlimit"] = FormatSize(uint64(u32()))
			}
		case tcaCakeFwmark:
			if u32() != 0 {
				o["fwmark"] = u32s(u32())
			}
		}
	case "tbf":
		switch t {
		case nl.TCA_TBF_PARMS:
			q := nl.DeserializeTcTbfQopt(v)
			o["rate.bytes"] = strconv.FormatUint(uint64(q.Rate.Rate), 10)
			if q.Peakrate.Rate != 0 {
				o["peakrate.bytes"] = strconv.FormatUint(uint64(q.Peakrate.Rate), 10)
			}
			o["limit"] = FormatSize(uint64(q.Limit))
			o["buffer.ticks"] = u32s(q.Buffer)
			if q.Peakrate.Rate != 0 {
				o["mtu"] = FormatSize(uint64(q.Mtu))
			}
		case nl.TCA_TBF_RATE64:
			o["rate.bytes"] = strconv.FormatUint(native.Uint64(v), 10)
		case nl.TCA_TBF_PRATE64:
			o["peakrate.bytes"] = strconv.FormatUint(native.Uint64(v), 10)
		}
	case "htb":
		switch t {
		case nl.TCA_HTB_INIT:
			g := nl.DeserializeTcHtbGlob(v)
			o["r2q"] = u32s(g.Rate2Quantum)
			o["default"] = strconv.FormatUint(uint64(g.Defcls), 16)
		}
	}
}

// finishTbf turns the raw tbf fields into rate, burst and limit.
func finishTbf(o map[string]string) {
	rate, _ := strconv.ParseUint(o["rate.bytes"], 10, 64)
	ticks, _ := strconv.ParseUint(o["buffer.ticks"], 10, 32)
	o["rate"] = FormatRate(rate * 8)
	if rate > 0 {
		o["burst"] = FormatSize(uint64(netlink.Xmitsize(rate, uint32(ticks))))
	}
	if p, ok := o["peakrate.bytes"]; ok {
		pr, _ := strconv.ParseUint(p, 10, 64)
		o["peakrate"] = FormatRate(pr * 8)
	}
	delete(o, "rate.bytes")
	delete(o, "peakrate.bytes")
	delete(o, "buffer.ticks")
}

func decodeNetem(b []byte, o map[string]string) {
	if len(b) < 24 {
		return
	}
	latencyTicks := native.Uint32(b[0:4])
	o["limit"] = u32s(native.Uint32(b[4:8]))
	loss := native.Uint32(b[8:12])
	dup := native.Uint32(b[16:20])
	jitterTicks := native.Uint32(b[20:24])
	pct := func(p uint32) string {
		return strconv.FormatFloat(math.Round(float64(p)/math.MaxUint32*100*1e4)/1e4, 'f', -1, 64) + "%"
	}
	lat := time.Duration(netlink.Xmitsize(1e6, latencyTicks)) * time.Microsecond
	jit := time.Duration(netlink.Xmitsize(1e6, jitterTicks)) * time.Microsecond
	attrs, _ := nl.ParseRouteAttr(b[nl.SizeofTcNetemQopt:])
	for _, a := range attrs {
		switch a.Attr.Type {
		case tcaNetemLatency64:
			lat = time.Duration(int64(native.Uint64(a.Value)))
		case tcaNetemJitter64:
			jit = time.Duration(int64(native.Uint64(a.Value)))
		case nl.TCA_NETEM_RATE:
			if r := native.Uint32(a.Value); r != 0 {
				o["rate"] = FormatRate(uint64(r) * 8)
			}
		case nl.TCA_NETEM_RATE64:
			o["rate"] = FormatRate(native.Uint64(a.Value) * 8)
		case nl.TCA_NETEM_CORRUPT:
			if p := native.Uint32(a.Value); p != 0 {
				o["corrupt"] = pct(p)
			}
		case nl.TCA_NETEM_REORDER:
			if p := native.Uint32(a.Value); p != 0 {
				o["reorder"] = pct(p)
			}
		}
	}
	if lat != 0 {
		o["delay"] = FormatTime(lat.Round(time.Microsecond))
	}
	if jit != 0 {
		o["jitter"] = FormatTime(jit.Round(time.Microsecond))
	}
	if loss != 0 {
		o["loss"] = pct(loss)
	}
	if dup != 0 {
		o["duplicate"] = pct(dup)
	}
}

// encodeOptions builds TCA_OPTIONS for a spec. It returns nil for kinds that
// take none.
func encodeOptions(s Spec) (*nl.RtAttr, error) {
	s = normalize(s)
	get := func(key string) (string, bool) { v, ok := s.Opts[key]; return v, ok }
	u32 := func(key string) (uint32, bool, error) {
		v, ok := get(key)
		if !ok {
			return 0, false, nil
		}
		n, err := strconv.ParseUint(v, 10, 32)
		return uint32(n), true, err
	}
	us := func(key string) (uint32, bool, error) {
		v, ok := get(key)
		if !ok {
			return 0, false, nil
		}
		d, err := ParseTime(v)
		return uint32(d.Microseconds()), true, err
	}
	size := func(key string) (uint32, bool, error) {
		v, ok := get(key)
		if !ok {
			return 0, false, nil
		}
		n, err := ParseSize(v)
		if n > math.MaxUint32 {
			err = fmt.Errorf("%s %s: too large", s.Kind, key)
		}
		return uint32(n), true, err
	}
	rateBytes := func(key string) (uint64, bool, error) {
		v, ok := get(key)
		if !ok {
			return 0, false, nil
		}
		n, err := ParseRate(v)
		return n / 8, true, err
	}
	var firstErr error
	check := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	opts := nl.NewRtAttr(nl.TCA_OPTIONS, nil)
	addU32 := func(typ int, v uint32) { opts.AddRtAttr(typ, nl.Uint32Attr(v)) }
	wordIndex := func(list []string, v string) uint32 {
		for i, w := range list {
			if w == v {
				return uint32(i)
			}
		}
		check(fmt.Errorf("%s: bad value %q", s.Kind, v))
		return 0
	}
	switch s.Kind {
	case "pfifo_fast", "mq", "ingress", "clsact", "noqueue", "noop", "mqprio":
		return nil, nil
	case "pfifo", "bfifo":
		var v uint32
		var ok bool
		var err error
		if s.Kind == "pfifo" {
			v, ok, err = u32("limit")
		} else {
			v, ok, err = size("limit")
		}
		if err != nil || !ok {
			return nil, err
		}
		return nl.NewRtAttr(nl.TCA_OPTIONS, nl.Uint32Attr(v)), nil
	case "fq_codel", "codel":
		ids := map[string]int{"target": nl.TCA_FQ_CODEL_TARGET, "limit": nl.TCA_FQ_CODEL_LIMIT, "interval": nl.TCA_FQ_CODEL_INTERVAL, "ecn": nl.TCA_FQ_CODEL_ECN, "ce_threshold": nl.TCA_FQ_CODEL_CE_THRESHOLD}
		if s.Kind == "codel" {
			ids = map[string]int{"target": tcaCodelTarget, "limit": tcaCodelLimit, "interval": tcaCodelInterval, "ecn": tcaCodelECN, "ce_threshold": tcaCodelCEThreshold}
		}
		for _, k := range []string{"target", "interval", "ce_threshold"} {
			if v, ok, err := us(k); ok {
				check(err)
				addU32(ids[k], v)
			}
		}
		if v, ok, err := u32("limit"); ok {
			check(err)
			addU32(ids["limit"], v)
		}
		if v, ok := get("ecn"); ok {
			addU32(ids["ecn"], map[string]uint32{"on": 1}[v])
		}
		if s.Kind == "fq_codel" {
			if v, ok, err := u32("flows"); ok {
				check(err)
				addU32(nl.TCA_FQ_CODEL_FLOWS, v)
			}
			if v, ok, err := size("quantum"); ok {
				check(err)
				addU32(nl.TCA_FQ_CODEL_QUANTUM, v)
			}
			if v, ok, err := u32("drop_batch"); ok {
				check(err)
				addU32(nl.TCA_FQ_CODEL_DROP_BATCH_SIZE, v)
			}
			if v, ok, err := size("memory_limit"); ok {
				check(err)
				addU32(nl.TCA_FQ_CODEL_MEMORY_LIMIT, v)
			}
		}
	case "fq":
		for key, id := range map[string]int{"limit": nl.TCA_FQ_PLIMIT, "flow_limit": nl.TCA_FQ_FLOW_PLIMIT} {
			if v, ok, err := u32(key); ok {
				check(err)
				addU32(id, v)
			}
		}
		for key, id := range map[string]int{"quantum": nl.TCA_FQ_QUANTUM, "initial_quantum": nl.TCA_FQ_INITIAL_QUANTUM} {
			if v, ok, err := size(key); ok {
				check(err)
				addU32(id, v)
			}
		}
		for key, id := range map[string]int{"refill_delay": nl.TCA_FQ_FLOW_REFILL_DELAY, "ce_threshold": nl.TCA_FQ_CE_THRESHOLD, "horizon": nl.TCA_FQ_HORIZON} {
			if v, ok, err := us(key); ok {
				check(err)
				addU32(id, v)
			}
		}
		for key, id := range map[string]int{"maxrate": nl.TCA_FQ_FLOW_MAX_RATE, "low_rate_threshold": nl.TCA_FQ_LOW_RATE_THRESHOLD} {
			if v, ok, err := rateBytes(key); ok {
				check(err)
				addU32(id, uint32(min(v, math.MaxUint32)))
			}
		}
		if v, ok := get("pacing"); ok {
			addU32(nl.TCA_FQ_RATE_ENABLE, map[string]uint32{"on": 1}[v])
		}
		if v, ok, err := u32("buckets"); ok {
			check(err)
			if v == 0 || v&(v-1) != 0 {
				check(fmt.Errorf("fq buckets %d: must be a power of two", v))
			}
			addU32(nl.TCA_FQ_BUCKETS_LOG, uint32(math.Log2(float64(v))))
		}
	case "cake":
		if v, ok, err := rateBytes("bandwidth"); ok {
			check(err)
			opts.AddRtAttr(tcaCakeBaseRate64, nl.Uint64Attr(v))
		}
		if v, ok := get("diffserv"); ok {
			addU32(tcaCakeDiffserv, wordIndex(cakeDiffserv, v))
		}
		if v, ok := get("flowmode"); ok {
			addU32(tcaCakeFlowMode, wordIndex(cakeFlow, v))
		}
		if v, ok := get("atm"); ok {
			addU32(tcaCakeATM, wordIndex(cakeATM, v))
		}
		if v, ok := get("ack_filter"); ok {
			addU32(tcaCakeAckFilter, wordIndex(cakeAck, v))
		}
		for key, id := range map[string]int{"nat": tcaCakeNAT, "wash": tcaCakeWash, "split_gso": tcaCakeSplitGSO, "ingress": tcaCakeIngress, "autorate": tcaCakeAutorate} {
			if v, ok := get(key); ok {
				addU32(id, map[string]uint32{"on": 1}[v])
			}
		}
		if v, ok, err := us("rtt"); ok {
			check(err)
			addU32(tcaCakeRTT, v)
		}
		if v, ok := get("overhead"); ok {
			n, err := strconv.ParseInt(v, 10, 32)
			check(err)
			addU32(tcaCakeOverhead, uint32(int32(n)))
		}
		if v, ok, err := u32("mpu"); ok {
			check(err)
			addU32(tcaCakeMPU, v)
		}
		if v, ok, err := size("memlimit"); ok {
			check(err)
			addU32(tcaCakeMemory, v)
		}
		if v, ok, err := u32("fwmark"); ok {
			check(err)
			addU32(tcaCakeFwmark, v)
		}
	case "tbf":
		rate, ok, err := rateBytes("rate")
		check(err)
		if !ok || rate == 0 {
			return nil, fmt.Errorf("tbf: rate is required")
		}
		burst, ok, err := size("burst")
		check(err)
		if !ok || burst == 0 {
			return nil, fmt.Errorf("tbf: burst is required")
		}
		limit, ok, err := size("limit")
		check(err)
		if !ok {
			return nil, fmt.Errorf("tbf: limit or latency is required")
		}
		var q nl.TcTbfQopt
		q.Rate.Rate = uint32(min(rate, math.MaxUint32))
		q.Limit = limit
		q.Buffer = netlink.Xmittime(rate, burst)
		var rtab [256]uint32
		netlink.CalcRtable(&q.Rate, rtab[:], -1, 0, nl.LINKLAYER_ETHERNET)
		if pr, ok, err := rateBytes("peakrate"); ok {
			check(err)
			q.Peakrate.Rate = uint32(min(pr, math.MaxUint32))
			mtu, _, err := size("mtu")
			check(err)
			q.Mtu = netlink.Xmittime(pr, mtu)
		}
		opts.AddRtAttr(nl.TCA_TBF_PARMS, q.Serialize())
		if rate >= 1<<32 {
			opts.AddRtAttr(nl.TCA_TBF_RATE64, nl.Uint64Attr(rate))
		}
		opts.AddRtAttr(nl.TCA_TBF_RTAB, serializeRtab(rtab[:]))
	case "htb":
		r2q := uint32(10)
		if v, ok, err := u32("r2q"); ok {
			check(err)
			r2q = v
		}
		g := nl.TcHtbGlob{Version: 3, Rate2Quantum: r2q, Defcls: 1}
		opts.AddRtAttr(nl.TCA_HTB_INIT, g.Serialize())
	case "netem":
		return encodeNetem(s)
	case "prio":
		bands, _, err := u32("bands")
		check(err)
		if bands == 0 {
			bands = 3
		}
		var pm [16]uint8
		copy(pm[:], []uint8{1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1})
		if v, ok := get("priomap"); ok {
			for i, f := range strings.Fields(v) {
				n, err := strconv.ParseUint(f, 10, 8)
				check(err)
				if i < 16 {
					pm[i] = uint8(n)
				}
			}
		}
		b := make([]byte, 20)
		native.PutUint32(b, bands)
		copy(b[4:], pm[:])
		return nl.NewRtAttr(nl.TCA_OPTIONS, b), firstErr
	case "sfq":
		b := make([]byte, 20)
		q, _, err := size("quantum")
		check(err)
		pt, _, err := u32("perturb")
		check(err)
		lim, _, err := u32("limit")
		check(err)
		div, _, err := u32("divisor")
		check(err)
		native.PutUint32(b[0:], q)
		native.PutUint32(b[4:], pt)
		native.PutUint32(b[8:], lim)
		native.PutUint32(b[12:], div)
		return nl.NewRtAttr(nl.TCA_OPTIONS, b), firstErr
	default:
		return nil, fmt.Errorf("qdisc kind %q: lowlat cannot encode it", s.Kind)
	}
	return opts, firstErr
}

func serializeRtab(rtab []uint32) []byte {
	b := make([]byte, 4*len(rtab))
	for i, v := range rtab {
		native.PutUint32(b[4*i:], v)
	}
	return b
}

func encodeNetem(s Spec) (*nl.RtAttr, error) {
	pct := func(key string) (uint32, error) {
		v, ok := s.Opts[key]
		if !ok {
			return 0, nil
		}
		f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
		if err != nil {
			return 0, fmt.Errorf("netem %s %q: %w", key, v, err)
		}
		return uint32(math.Round(f / 100 * math.MaxUint32)), nil
	}
	dur := func(key string) (time.Duration, error) {
		v, ok := s.Opts[key]
		if !ok {
			return 0, nil
		}
		return ParseTime(v)
	}
	delay, err := dur("delay")
	if err != nil {
		return nil, err
	}
	jitter, err := dur("jitter")
	if err != nil {
		return nil, err
	}
	limit := uint32(1000)
	if v, ok := s.Opts["limit"]; ok {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("netem limit %q: %w", v, err)
		}
		limit = uint32(n)
	}
	q := nl.TcNetemQopt{Limit: limit}
	q.Latency = netlink.Xmittime(1e6, uint32(delay.Microseconds()))
	q.Jitter = netlink.Xmittime(1e6, uint32(jitter.Microseconds()))
	if q.Loss, err = pct("loss"); err != nil {
		return nil, err
	}
	if q.Duplicate, err = pct("duplicate"); err != nil {
		return nil, err
	}
	opts := nl.NewRtAttr(nl.TCA_OPTIONS, q.Serialize())
	// 64-bit nanosecond delay (4.15+) so sub-tick values survive; older kernels
	// ignore the attribute and use the tick fields above.
	opts.AddRtAttr(tcaNetemLatency64, nl.Uint64Attr(uint64(delay.Nanoseconds())))
	opts.AddRtAttr(tcaNetemJitter64, nl.Uint64Attr(uint64(jitter.Nanoseconds())))
	if v, ok := s.Opts["rate"]; ok {
		r, err := ParseRate(v)
		if err != nil {
			return nil, err
		}
		var rate nl.TcNetemRate
		if r/8 >= 1<<32 {
			opts.AddRtAttr(nl.TCA_NETEM_RATE64, nl.Uint64Attr(r/8))
			rate.Rate = math.MaxUint32
		} else {
			rate.Rate = uint32(r / 8)
		}
		opts.AddRtAttr(nl.TCA_NETEM_RATE, rate.Serialize())
	}
	for key, typ := range map[string]int{"corrupt": nl.TCA_NETEM_CORRUPT, "reorder": nl.TCA_NETEM_REORDER} {
		p, err := pct(key)
		if err != nil {
			return nil, err
		}
		if p != 0 {
			b := make([]byte, 8)
			native.PutUint32(b, p)
			opts.AddRtAttr(typ, b)
		}
	}
	return opts, nil
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
	}
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}
