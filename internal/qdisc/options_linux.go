//go:build linux

package qdisc

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
)

// The per-kind codecs. Attribute numbers come from linux/pkt_sched.h; the
// comments say what the kernel does with a value where it is not kept as sent.

// Attribute numbers that vishvananda/netlink lacks.
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

	tcaFqCodelCESelector = 10
	tcaFqCodelCEMask     = 11

	tcaFqTimerSlack  = 13
	tcaFqHorizon     = 14
	tcaFqHorizonDrop = 15

	tcaNetemCorr      = 1
	tcaNetemReorder   = 3
	tcaNetemCorrupt   = 4
	tcaNetemRate      = 6
	tcaNetemECN       = 7
	tcaNetemRate64    = 8
	tcaNetemLatency64 = 10
	tcaNetemJitter64  = 11

	linklayerEthernet = 1
	linklayerATM      = 2
)

var cakeDiffserv = []string{"diffserv3", "diffserv4", "diffserv8", "besteffort", "precedence"}
var cakeFlow = []string{"flowblind", "srchost", "dsthost", "hosts", "flows", "dual-srchost", "dual-dsthost", "triple-isolate"}
var cakeAck = []string{"none", "filter", "aggressive"}
var cakeATM = []string{"none", "atm", "ptm"}

// enc collects a spec's option values as integers, remembering the first
// error, so an encoder reads as a list of fields.
type enc struct {
	s   Spec
	err error
}

func (e *enc) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

func (e *enc) has(key string) bool { _, ok := e.s.Opts[key]; return ok }

func (e *enc) parse(key string, f func(string) (uint64, error), max uint64) (uint64, bool) {
	v, ok := e.s.Opts[key]
	if !ok {
		return 0, false
	}
	n, err := f(v)
	if err == nil && n > max {
		err = fmt.Errorf("too large")
	}
	if err != nil {
		e.fail(fmt.Errorf("%s %s %q: %v", e.s.Kind, key, v, err))
	}
	return n, true
}

func (e *enc) uint(key string) (uint32, bool) {
	n, ok := e.parse(key, func(v string) (uint64, error) { return strconv.ParseUint(v, 10, 32) }, math.MaxUint32)
	return uint32(n), ok
}

func (e *enc) size(key string) (uint32, bool) {
	n, ok := e.parse(key, ParseSize, math.MaxUint32)
	return uint32(n), ok
}

func (e *enc) micros(key string) (uint32, bool) {
	n, ok := e.parse(key, func(v string) (uint64, error) {
		d, err := ParseTime(v)
		return uint64(d.Microseconds()), err
	}, math.MaxUint32)
	return uint32(n), ok
}

// rateBytes is a rate in bytes per second, the kernel's unit.
func (e *enc) rateBytes(key string) (uint64, bool) {
	return e.parse(key, func(v string) (uint64, error) { n, err := ParseRate(v); return n / 8, err }, math.MaxUint64)
}

func (e *enc) on(key string) (bool, bool) {
	v, ok := e.s.Opts[key]
	return v == "on", ok
}

func (e *enc) word(key string, list []string) (uint32, bool) {
	v, ok := e.s.Opts[key]
	if !ok {
		return 0, false
	}
	if i := slices.Index(list, v); i >= 0 {
		return uint32(i), true
	}
	e.fail(fmt.Errorf("%s %s: bad value %q", e.s.Kind, key, v))
	return 0, true
}

func u32(v uint32) []byte {
	b := make([]byte, 4)
	native.PutUint32(b, v)
	return b
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	native.PutUint64(b, v)
	return b
}

// getU32 reads an attribute that must be exactly one u32; anything else is
// left to be kept verbatim.
func getU32(b []byte) (uint32, bool) {
	if len(b) != 4 {
		return 0, false
	}
	return native.Uint32(b), true
}

func getU64(b []byte) (uint64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	return native.Uint64(b), true
}

func u32s(v uint32) string { return strconv.FormatUint(uint64(v), 10) }

func usTime(us uint32) string { return FormatTime(time.Duration(us) * time.Microsecond) }

func onoff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func bool32(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

func sortAttrs(attrs []Attr) []Attr {
	slices.SortStableFunc(attrs, func(a, b Attr) int { return int(a.Type) - int(b.Type) })
	return attrs
}

// ---- pfifo, bfifo: one u32 limit (packets or bytes).

func fifoCodec(bytesLimit bool) optCodec {
	return optCodec{
		head: -1,
		decode: func(head []byte, _ []Attr, o map[string]string) {
			if v, ok := getU32(head); ok {
				if bytesLimit {
					o["limit"] = FormatSize(uint64(v))
				} else {
					o["limit"] = u32s(v)
				}
			}
		},
		encode: func(s Spec) ([]byte, []Attr, error) {
			e := &enc{s: s}
			var v uint32
			var ok bool
			if bytesLimit {
				v, ok = e.size("limit")
			} else {
				v, ok = e.uint("limit")
			}
			if !ok || e.err != nil {
				return nil, nil, e.err
			}
			return u32(v), nil, nil
		},
	}
}

// ---- prio: struct tc_prio_qopt {int bands; __u8 priomap[16]}.

var defaultPriomap = [16]uint8{1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}

var prioCodec = optCodec{
	head: -1,
	decode: func(b []byte, _ []Attr, o map[string]string) {
		if len(b) != 20 {
			return
		}
		o["bands"] = strconv.Itoa(int(int32(native.Uint32(b[0:4]))))
		pm := make([]string, 16)
		for i := range pm {
			pm[i] = strconv.Itoa(int(b[4+i]))
		}
		o["priomap"] = strings.Join(pm, " ")
	},
	encode: func(s Spec) ([]byte, []Attr, error) {
		e := &enc{s: s}
		bands, ok := e.uint("bands")
		if !ok {
			bands = 3
		}
		pm := defaultPriomap
		if v, ok := s.Opts["priomap"]; ok {
			for i, f := range strings.Fields(v) {
				n, err := strconv.ParseUint(f, 10, 8)
				if err != nil || i >= 16 {
					e.fail(fmt.Errorf("prio priomap %q: want 16 band numbers", v))
					break
				}
				pm[i] = uint8(n)
			}
		}
		b := make([]byte, 20)
		native.PutUint32(b, bands)
		copy(b[4:], pm[:])
		return b, nil, e.err
	},
}

// ---- sfq: struct tc_sfq_qopt_v1 (72 bytes): the v0 struct {quantum,
// perturb_period, limit, divisor, flows}, then depth, headdrop, a RED limit
// the kernel does not keep, the RED parameters (qth_min, qth_max, Wlog, Plog,
// Scell_log, flags, max_P) and RED statistics (runtime counters).

const (
	sfqV1Len       = 72
	sfqRedAt       = 32
	sfqRedEnd      = 48
	sfqDefaultDeep = 127 // SFQ_MAX_DEPTH, also the limit of a new sfq
	sfqDefaultFlow = 128 // SFQ_DEFAULT_FLOWS
)

var sfqCodec = optCodec{
	head: -1,
	decode: func(b []byte, _ []Attr, o map[string]string) {
		if len(b) < 20 {
			return
		}
		o["quantum"] = FormatSize(uint64(native.Uint32(b[0:4])))
		o["perturb"] = u32s(native.Uint32(b[4:8]))
		o["limit"] = u32s(native.Uint32(b[8:12]))
		o["divisor"] = u32s(native.Uint32(b[12:16]))
		o["flows"] = u32s(native.Uint32(b[16:20]))
		if len(b) < sfqRedEnd {
			return
		}
		o["depth"] = u32s(native.Uint32(b[20:24]))
		if native.Uint32(b[24:28]) != 0 {
			o["headdrop"] = "on"
		}
		if red := b[sfqRedAt:sfqRedEnd]; slices.ContainsFunc(red, func(c byte) bool { return c != 0 }) {
			o["red"] = hex.EncodeToString(red)
		}
	},
	encode: func(s Spec) ([]byte, []Attr, error) {
		e := &enc{s: s}
		b := make([]byte, sfqV1Len)
		put := func(at int, key string, size bool) uint32 {
			var v uint32
			if size {
				v, _ = e.size(key)
			} else {
				v, _ = e.uint(key)
			}
			native.PutUint32(b[at:], v)
			return v
		}
		put(0, "quantum", true)
		put(4, "perturb", false)
		put(12, "divisor", false)
		flows := put(16, "flows", false)
		put(20, "depth", false)
		if on, _ := e.on("headdrop"); on {
			native.PutUint32(b[24:], 1)
		}
		if v, ok := s.Opts["red"]; ok {
			red, err := hex.DecodeString(v)
			if err != nil || len(red) != sfqRedEnd-sfqRedAt {
				e.fail(fmt.Errorf("sfq red %q: want %d bytes in hex", v, sfqRedEnd-sfqRedAt))
			}
			copy(b[sfqRedAt:sfqRedEnd], red)
		}
		// A limit below the number of flows lowers the flows to it; a new sfq
		// has limit 127 and 128 flows, which sending "limit 127" would turn
		// into 127 flows. So the default limit is left to the kernel.
		if limit, ok := e.uint("limit"); ok {
			if flows == 0 {
				flows = sfqDefaultFlow
			}
			if !(limit == sfqDefaultDeep && flows > limit) {
				native.PutUint32(b[8:], limit)
			}
		}
		return b, nil, e.err
	},
	sameHead: func(w, d []byte) bool {
		if len(d) < 20 || len(w) != sfqV1Len {
			return false
		}
		w = slices.Clone(w)
		if native.Uint32(w[8:12]) == 0 {
			native.PutUint32(w[8:], sfqDefaultDeep) // left to the kernel's default
		}
		n := min(len(d), sfqRedEnd)
		// The v1 "limit" at 28 is an input the kernel does not report.
		return bytes.Equal(w[:min(n, 28)], d[:min(n, 28)]) && (n <= sfqRedAt || bytes.Equal(w[sfqRedAt:n], d[sfqRedAt:n]))
	},
}

// ---- fq_codel and codel. Times are sent in microseconds, kept in 1024 ns
// units and reported back in microseconds, rounded down both ways: 5ms is
// kept as 4882 units and reported as 4999us, and 4999us would be kept as
// 4881. codelTime finds the value to send to get the reported state again.

// codelKept is what the kernel keeps for us microseconds, and codelReported
// what it reports for that.
func codelKept(us uint64) uint64       { return us * 1000 >> 10 }
func codelReported(kept uint64) uint64 { return (kept << 10) / 1000 }

// codelTime renders a reported codel time as the smallest value that, sent,
// is reported the same: 4999us -> 5ms.
func codelTime(reported uint32) string {
	r := uint64(reported)
	kept := (r*1000 + 1023) / 1024 // smallest kept value reported as r
	if codelReported(kept) != r {
		return usTime(reported) // not a value the kernel reports; keep it as is
	}
	send := (kept*1024 + 999) / 1000 // smallest value sent that is kept as kept
	if codelKept(send) != kept || send > math.MaxUint32 {
		return usTime(reported)
	}
	return usTime(uint32(send))
}

func sameCodelTime(wrote, dumped []byte) bool {
	w, ok1 := getU32(wrote)
	d, ok2 := getU32(dumped)
	return ok1 && ok2 && codelReported(codelKept(uint64(w))) == uint64(d)
}

var fqCodelCodec = optCodec{
	decode: func(_ []byte, attrs []Attr, o map[string]string) {
		for _, a := range attrs {
			v, ok := getU32(a.Data)
			if !ok {
				continue
			}
			switch int(a.Type) {
			case nl.TCA_FQ_CODEL_TARGET:
				o["target"] = codelTime(v)
			case nl.TCA_FQ_CODEL_LIMIT:
				o["limit"] = u32s(v)
			case nl.TCA_FQ_CODEL_INTERVAL:
				o["interval"] = codelTime(v)
			case nl.TCA_FQ_CODEL_ECN:
				o["ecn"] = onoff(v != 0)
			case nl.TCA_FQ_CODEL_FLOWS:
				o["flows"] = u32s(v)
			case nl.TCA_FQ_CODEL_QUANTUM:
				o["quantum"] = FormatSize(uint64(v))
			case nl.TCA_FQ_CODEL_CE_THRESHOLD:
				// Reported only when set.
				o["ce_threshold"] = codelTime(v)
			case nl.TCA_FQ_CODEL_DROP_BATCH_SIZE:
				o["drop_batch"] = u32s(v)
			case nl.TCA_FQ_CODEL_MEMORY_LIMIT:
				o["memory_limit"] = FormatSize(uint64(v))
			}
		}
	},
	encode: func(s Spec) ([]byte, []Attr, error) {
		e := &enc{s: s}
		var out []Attr
		add := func(typ int, v uint32, ok bool) {
			if ok {
				out = append(out, Attr{Type: uint16(typ), Data: u32(v)})
			}
		}
		v, ok := e.micros("target")
		add(nl.TCA_FQ_CODEL_TARGET, v, ok)
		v, ok = e.uint("limit")
		add(nl.TCA_FQ_CODEL_LIMIT, v, ok)
		v, ok = e.micros("interval")
		add(nl.TCA_FQ_CODEL_INTERVAL, v, ok)
		on, ok := e.on("ecn")
		add(nl.TCA_FQ_CODEL_ECN, bool32(on), ok)
		v, ok = e.uint("flows")
		add(nl.TCA_FQ_CODEL_FLOWS, v, ok)
		v, ok = e.size("quantum")
		add(nl.TCA_FQ_CODEL_QUANTUM, v, ok)
		v, ok = e.micros("ce_threshold")
		add(nl.TCA_FQ_CODEL_CE_THRESHOLD, v, ok)
		v, ok = e.uint("drop_batch")
		add(nl.TCA_FQ_CODEL_DROP_BATCH_SIZE, v, ok)
		v, ok = e.size("memory_limit")
		add(nl.TCA_FQ_CODEL_MEMORY_LIMIT, v, ok)
		return nil, out, e.err
	},
	sameAttr: func(typ uint16, w, d []byte) bool {
		switch int(typ) {
		case nl.TCA_FQ_CODEL_TARGET, nl.TCA_FQ_CODEL_INTERVAL, nl.TCA_FQ_CODEL_CE_THRESHOLD:
			return sameCodelTime(w, d)
		}
		return bytes.Equal(w, d)
	},
	// 5.16+ report the CE threshold's selector and mask (u8 each) with the
	// threshold; 0 is what a new qdisc has. Set ones are kept verbatim.
	unset: func(typ uint16, b []byte) bool {
		return (typ == tcaFqCodelCESelector || typ == tcaFqCodelCEMask) && len(b) == 1 && b[0] == 0
	},
}

var codelCodec = optCodec{
	decode: func(_ []byte, attrs []Attr, o map[string]string) {
		for _, a := range attrs {
			v, ok := getU32(a.Data)
			if !ok {
				continue
			}
			switch a.Type {
			case tcaCodelTarget:
				o["target"] = codelTime(v)
			case tcaCodelLimit:
				o["limit"] = u32s(v)
			case tcaCodelInterval:
				o["interval"] = codelTime(v)
			case tcaCodelECN:
				o["ecn"] = onoff(v != 0)
			case tcaCodelCEThreshold:
				o["ce_threshold"] = codelTime(v)
			}
		}
	},
	encode: func(s Spec) ([]byte, []Attr, error) {
		e := &enc{s: s}
		var out []Attr
		add := func(typ uint16, v uint32, ok bool) {
			if ok {
				out = append(out, Attr{Type: typ, Data: u32(v)})
			}
		}
		v, ok := e.micros("target")
		add(tcaCodelTarget, v, ok)
		v, ok = e.uint("limit")
		add(tcaCodelLimit, v, ok)
		v, ok = e.micros("interval")
		add(tcaCodelInterval, v, ok)
		on, ok := e.on("ecn")
		add(tcaCodelECN, bool32(on), ok)
		v, ok = e.micros("ce_threshold")
		add(tcaCodelCEThreshold, v, ok)
		return nil, out, e.err
	},
	sameAttr: func(typ uint16, w, d []byte) bool {
		switch typ {
		case tcaCodelTarget, tcaCodelInterval, tcaCodelCEThreshold:
			return sameCodelTime(w, d)
		}
		return bytes.Equal(w, d)
	},
}

// ---- fq. Every option is reported, unset ones as ~0 (maxrate, ce_threshold).
// Newer kernels add a band priomap, weights and an offload horizon, kept
// verbatim.

var fqCodec = optCodec{
	decode: func(_ []byte, attrs []Attr, o map[string]string) {
		for _, a := range attrs {
			if a.Type == tcaFqHorizonDrop {
				if len(a.Data) == 1 {
					o["horizon_drop"] = onoff(a.Data[0] != 0)
				}
				continue
			}
			v, ok := getU32(a.Data)
			if !ok {
				continue
			}
			switch int(a.Type) {
			case nl.TCA_FQ_PLIMIT:
				o["limit"] = u32s(v)
			case nl.TCA_FQ_FLOW_PLIMIT:
				o["flow_limit"] = u32s(v)
			case nl.TCA_FQ_QUANTUM:
				o["quantum"] = FormatSize(uint64(v))
			case nl.TCA_FQ_INITIAL_QUANTUM:
				o["initial_quantum"] = FormatSize(uint64(v))
			case nl.TCA_FQ_RATE_ENABLE:
				o["pacing"] = onoff(v != 0)
			case nl.TCA_FQ_FLOW_MAX_RATE:
				if v != math.MaxUint32 {
					o["maxrate"] = FormatRate(uint64(v) * 8)
				}
			case nl.TCA_FQ_BUCKETS_LOG:
				if v < 32 {
					o["buckets"] = u32s(1 << v)
				}
			case nl.TCA_FQ_FLOW_REFILL_DELAY:
				o["refill_delay"] = usTime(v)
			case nl.TCA_FQ_ORPHAN_MASK:
				o["orphan_mask"] = u32s(v)
			case nl.TCA_FQ_LOW_RATE_THRESHOLD:
				o["low_rate_threshold"] = FormatRate(uint64(v) * 8)
			case nl.TCA_FQ_CE_THRESHOLD:
				if v != math.MaxUint32 {
					o["ce_threshold"] = usTime(v)
				}
			case tcaFqTimerSlack:
				if v%1000 == 0 { // nanoseconds
					o["timer_slack"] = usTime(v / 1000)
				}
			case tcaFqHorizon:
				o["horizon"] = usTime(v)
			}
		}
	},
	encode: func(s Spec) ([]byte, []Attr, error) {
		e := &enc{s: s}
		var out []Attr
		add := func(typ int, v uint32, ok bool) {
			if ok {
				out = append(out, Attr{Type: uint16(typ), Data: u32(v)})
			}
		}
		rate := func(typ int, key string) {
			if v, ok := e.rateBytes(key); ok {
				add(typ, uint32(min(v, math.MaxUint32)), true)
			}
		}
		v, ok := e.uint("limit")
		add(nl.TCA_FQ_PLIMIT, v, ok)
		v, ok = e.uint("flow_limit")
		add(nl.TCA_FQ_FLOW_PLIMIT, v, ok)
		v, ok = e.size("quantum")
		add(nl.TCA_FQ_QUANTUM, v, ok)
		v, ok = e.size("initial_quantum")
		add(nl.TCA_FQ_INITIAL_QUANTUM, v, ok)
		on, ok := e.on("pacing")
		add(nl.TCA_FQ_RATE_ENABLE, bool32(on), ok)
		rate(nl.TCA_FQ_FLOW_MAX_RATE, "maxrate")
		if v, ok := e.uint("buckets"); ok {
			if v == 0 || v&(v-1) != 0 {
				e.fail(fmt.Errorf("fq buckets %d: must be a power of two", v))
			}
			add(nl.TCA_FQ_BUCKETS_LOG, uint32(math.Log2(float64(max(v, 1)))), true)
		}
		v, ok = e.micros("refill_delay")
		add(nl.TCA_FQ_FLOW_REFILL_DELAY, v, ok)
		v, ok = e.uint("orphan_mask")
		add(nl.TCA_FQ_ORPHAN_MASK, v, ok)
		rate(nl.TCA_FQ_LOW_RATE_THRESHOLD, "low_rate_threshold")
		v, ok = e.micros("ce_threshold")
		add(nl.TCA_FQ_CE_THRESHOLD, v, ok)
		if v, ok := e.micros("timer_slack"); ok {
			if uint64(v)*1000 > math.MaxUint32 {
				e.fail(fmt.Errorf("fq timer_slack: too large"))
			}
			add(tcaFqTimerSlack, v*1000, true)
		}
		v, ok = e.micros("horizon")
		add(tcaFqHorizon, v, ok)
		if on, ok := e.on("horizon_drop"); ok {
			out = append(out, Attr{Type: tcaFqHorizonDrop, Data: []byte{byte(bool32(on))}})
		}
		return nil, out, e.err
	},
	unset: func(typ uint16, b []byte) bool {
		v, ok := getU32(b)
		return ok && v == math.MaxUint32 && (int(typ) == nl.TCA_FQ_FLOW_MAX_RATE || int(typ) == nl.TCA_FQ_CE_THRESHOLD)
	},
}

// ---- cake. Every setting is reported. "raw" (no overhead compensation) is
// an attribute of its own, reported when set; the CoDel target is what tc
// derives from rtt (rtt/20) unless set otherwise.

var cakeCodec = optCodec{
	decode: func(_ []byte, attrs []Attr, o map[string]string) {
		for _, a := range attrs {
			if a.Type == tcaCakeBaseRate64 {
				if v, ok := getU64(a.Data); ok && v <= maxRate/8 {
					o["bandwidth"] = FormatRate(v * 8)
				}
				continue
			}
			v, ok := getU32(a.Data)
			if !ok {
				continue
			}
			// A mode lowlat has no word for is left out; the attribute is
			// then kept verbatim.
			word := func(key string, list []string) {
				if int(v) < len(list) {
					o[key] = list[v]
				}
			}
			switch a.Type {
			case tcaCakeDiffserv:
				word("diffserv", cakeDiffserv)
			case tcaCakeFlowMode:
				word("flowmode", cakeFlow)
			case tcaCakeNAT:
				o["nat"] = onoff(v != 0)
			case tcaCakeWash:
				o["wash"] = onoff(v != 0)
			case tcaCakeSplitGSO:
				o["split_gso"] = onoff(v != 0)
			case tcaCakeAckFilter:
				word("ack_filter", cakeAck)
			case tcaCakeIngress:
				o["ingress"] = onoff(v != 0)
			case tcaCakeAutorate:
				o["autorate"] = onoff(v != 0)
			case tcaCakeOverhead:
				o["overhead"] = strconv.Itoa(int(int32(v)))
			case tcaCakeMPU:
				o["mpu"] = u32s(v)
			case tcaCakeATM:
				word("atm", cakeATM)
			case tcaCakeRTT:
				o["rtt"] = usTime(v)
			case tcaCakeMemory:
				if v != 0 {
					o["memlimit"] = FormatSize(uint64(v))
				}
			case tcaCakeFwmark:
				if v != 0 {
					o["fwmark"] = u32s(v)
				}
			}
		}
	},
	encode: func(s Spec) ([]byte, []Attr, error) {
		e := &enc{s: s}
		var out []Attr
		add := func(typ uint16, v uint32, ok bool) {
			if ok {
				out = append(out, Attr{Type: typ, Data: u32(v)})
			}
		}
		if v, ok := e.rateBytes("bandwidth"); ok {
			out = append(out, Attr{Type: tcaCakeBaseRate64, Data: u64(v)})
		}
		v, ok := e.word("diffserv", cakeDiffserv)
		add(tcaCakeDiffserv, v, ok)
		v, ok = e.word("atm", cakeATM)
		add(tcaCakeATM, v, ok)
		v, ok = e.word("flowmode", cakeFlow)
		add(tcaCakeFlowMode, v, ok)
		if o, ok := s.Opts["overhead"]; ok {
			n, err := strconv.ParseInt(o, 10, 32)
			if err != nil {
				e.fail(fmt.Errorf("cake overhead %q: %v", o, err))
			}
			add(tcaCakeOverhead, uint32(int32(n)), true)
		}
		if rtt, ok := e.micros("rtt"); ok {
			add(tcaCakeRTT, rtt, true)
			add(tcaCakeTarget, max(rtt/20, 1), true) // as tc sets it
		}
		on, ok := e.on("autorate")
		add(tcaCakeAutorate, bool32(on), ok)
		v, ok = e.size("memlimit")
		add(tcaCakeMemory, v, ok)
		on, ok = e.on("nat")
		add(tcaCakeNAT, bool32(on), ok)
		on, ok = e.on("wash")
		add(tcaCakeWash, bool32(on), ok)
		v, ok = e.uint("mpu")
		add(tcaCakeMPU, v, ok)
		on, ok = e.on("ingress")
		add(tcaCakeIngress, bool32(on), ok)
		v, ok = e.word("ack_filter", cakeAck)
		add(tcaCakeAckFilter, v, ok)
		on, ok = e.on("split_gso")
		add(tcaCakeSplitGSO, bool32(on), ok)
		v, ok = e.uint("fwmark")
		add(tcaCakeFwmark, v, ok)
		return nil, out, e.err
	},
	unset: func(typ uint16, b []byte) bool {
		v, ok := getU32(b)
		return ok && v == 0 && (typ == tcaCakeMemory || typ == tcaCakeFwmark)
	},
}

// ---- tbf: TCA_TBF_PARMS is struct tc_tbf_qopt {rate, peakrate (struct
// tc_ratespec), limit, buffer, mtu}; buffer and mtu are the burst and minburst
// as transmit times in scheduler ticks (64 ns). Rates of 2^32 bytes/s and more
// go in RATE64/PRATE64. The rate tables are only sent (3.10 kernels need them).

const tbfParmsLen = 2*nl.SizeofTcRateSpec + 12

type rateSpec struct {
	linklayer uint8
	overhead  uint16
	mpu       uint16
	rate      uint32
}

func getRateSpec(b []byte) rateSpec {
	return rateSpec{linklayer: b[1], overhead: native.Uint16(b[2:4]), mpu: native.Uint16(b[6:8]), rate: native.Uint32(b[8:12])}
}

// putRateSpec writes a tc_ratespec with the cell size tc computes for its
// rate table (the kernel reports the cell fields as 0 and does not keep them).
func putRateSpec(b []byte, r rateSpec) {
	cellLog := 0
	for (2047 >> cellLog) > 255 {
		cellLog++
	}
	b[0] = uint8(cellLog)
	b[1] = r.linklayer
	native.PutUint16(b[2:4], r.overhead)
	native.PutUint16(b[4:6], 0xffff) // cell_align -1
	native.PutUint16(b[6:8], r.mpu)
	native.PutUint32(b[8:12], r.rate)
}

// sameRateSpecs compares structs holding tc_ratespecs at the given offsets,
// without the cell fields the kernel does not report.
func sameRateSpecs(w, d []byte, at ...int) bool {
	if len(w) != len(d) {
		return false
	}
	w, d = slices.Clone(w), slices.Clone(d)
	for _, o := range at {
		for _, b := range [][]byte{w, d} {
			b[o] = 0
			b[o+4], b[o+5] = 0, 0
		}
	}
	return bytes.Equal(w, d)
}

// rtab is tc's rate table for r: the transmit time of each size cell.
func rtab(r rateSpec, rate uint64) []byte {
	const cellLog = 3 // putRateSpec's cell size for mtu 2047
	b := make([]byte, 256*4)
	for i := range 256 {
		sz := uint32((i + 1) << cellLog)
		sz = uint32(netlink.AdjustSize(uint(sz), uint(r.mpu), int(r.linklayer)))
		native.PutUint32(b[4*i:], xmitTicks(rate, sz))
	}
	return b
}

// xmitTicks is the time to send size bytes at rate bytes/s, in scheduler
// ticks, computed as tc computes it (tc_calc_xmittime), so a burst written by
// lowlat and the same burst written with tc are the same kernel value.
func xmitTicks(rate uint64, size uint32) uint32 {
	if rate == 0 {
		return 0
	}
	t := 1e6 * (float64(size) / float64(rate)) * netlink.TickInUsec()
	return uint32(min(t, math.MaxUint32))
}

// burstFor is the burst in bytes whose transmit time at rate is ticks, and
// whether one exists; otherwise the nearest, for display.
func burstFor(rate uint64, ticks uint32) (uint32, bool) {
	if rate == 0 {
		return 0, false
	}
	approx := float64(ticks) / netlink.TickInUsec() * float64(rate) / 1e6
	// One tick spans this many bytes at high rates; search that far around.
	span := int64(float64(rate)/1e6/netlink.TickInUsec()) + 3
	lo := max(int64(approx)-span, 0)
	for b := lo; b <= int64(approx)+span && b <= math.MaxUint32; b++ {
		if xmitTicks(rate, uint32(b)) == ticks {
			return uint32(b), true
		}
	}
	return uint32(min(math.Round(approx), math.MaxUint32)), false
}

// decodeRateSpec puts a ratespec's overhead, mpu and link layer into o
// (ethernet, tc's default, is left out).
func decodeRateSpec(r rateSpec, o map[string]string) {
	if r.overhead != 0 {
		o["overhead"] = strconv.Itoa(int(r.overhead))
	}
	if r.mpu != 0 {
		o["mpu"] = strconv.Itoa(int(r.mpu))
	}
	// Other link layers (0, "unaware": no rate table was sent) have no
	// option; the self-check keeps such a struct verbatim.
	if r.linklayer == linklayerATM {
		o["linklayer"] = "atm"
	}
}

// encodeRateSpec is the ratespec for a rate in bytes/s with the spec's
// overhead, mpu and link layer.
func (e *enc) rateSpec(rate uint64) rateSpec {
	r := rateSpec{rate: uint32(min(rate, math.MaxUint32)), linklayer: linklayerEthernet}
	if v, ok := e.uint("overhead"); ok {
		r.overhead = uint16(min(v, math.MaxUint16))
	}
	if v, ok := e.uint("mpu"); ok {
		r.mpu = uint16(min(v, math.MaxUint16))
	}
	switch v := e.s.Opts["linklayer"]; v {
	case "", "ethernet":
	case "atm":
		r.linklayer = linklayerATM
	default:
		e.fail(fmt.Errorf("%s linklayer %q: want ethernet or atm", e.s.Kind, v))
	}
	return r
}

var tbfCodec = optCodec{
	decode: func(_ []byte, attrs []Attr, o map[string]string) {
		var parms []byte
		var rate64, prate64 uint64
		for _, a := range attrs {
			switch int(a.Type) {
			case nl.TCA_TBF_PARMS:
				if len(a.Data) == tbfParmsLen {
					parms = a.Data
				}
			case nl.TCA_TBF_RATE64:
				rate64, _ = getU64(a.Data)
			case nl.TCA_TBF_PRATE64:
				prate64, _ = getU64(a.Data)
			}
		}
		if parms == nil {
			return
		}
		r, p := getRateSpec(parms[0:12]), getRateSpec(parms[12:24])
		rate, peak := max(uint64(r.rate), rate64), max(uint64(p.rate), prate64)
		if rate > maxRate/8 || peak > maxRate/8 {
			return
		}
		o["rate"] = FormatRate(rate * 8)
		o["limit"] = FormatSize(uint64(native.Uint32(parms[24:28])))
		burst, _ := burstFor(rate, native.Uint32(parms[28:32]))
		o["burst"] = FormatSize(uint64(burst))
		if peak != 0 {
			o["peakrate"] = FormatRate(peak * 8)
			mtu, _ := burstFor(peak, native.Uint32(parms[32:36]))
			o["mtu"] = FormatSize(uint64(mtu))
		}
		decodeRateSpec(r, o)
	},
	encode: func(s Spec) ([]byte, []Attr, error) {
		e := &enc{s: s}
		rate, ok := e.rateBytes("rate")
		if !ok || rate == 0 {
			return nil, nil, fmt.Errorf("tbf: rate is required")
		}
		burst, ok := e.size("burst")
		if !ok || burst == 0 {
			return nil, nil, fmt.Errorf("tbf: burst is required")
		}
		limit, ok := e.size("limit")
		if !ok {
			return nil, nil, fmt.Errorf("tbf: limit or latency is required")
		}
		parms := make([]byte, tbfParmsLen)
		rs := e.rateSpec(rate)
		putRateSpec(parms[0:12], rs)
		native.PutUint32(parms[24:], limit)
		native.PutUint32(parms[28:], xmitTicks(rate, burst))
		out := []Attr{{Type: nl.TCA_TBF_PARMS, Data: parms}, {Type: nl.TCA_TBF_RTAB, Data: rtab(rs, rate)}}
		if rate >= 1<<32 {
			out = append(out, Attr{Type: nl.TCA_TBF_RATE64, Data: u64(rate)})
		}
		if peak, ok := e.rateBytes("peakrate"); ok && peak != 0 {
			mtu, ok := e.size("mtu")
			if !ok || mtu == 0 {
				e.fail(fmt.Errorf("tbf: peakrate needs mtu (the peak burst)"))
			}
			ps := rs
			ps.rate = uint32(min(peak, math.MaxUint32))
			putRateSpec(parms[12:24], ps)
			native.PutUint32(parms[32:], xmitTicks(peak, mtu))
			out = append(out, Attr{Type: nl.TCA_TBF_PTAB, Data: rtab(ps, peak)})
			if peak >= 1<<32 {
				out = append(out, Attr{Type: nl.TCA_TBF_PRATE64, Data: u64(peak)})
			}
		}
		return nil, sortAttrs(out), e.err
	},
	sameAttr: func(typ uint16, w, d []byte) bool {
		if int(typ) == nl.TCA_TBF_PARMS {
			return sameRateSpecs(w, d, 0, 12)
		}
		return bytes.Equal(w, d)
	},
	writeOnly: func(attrs []Attr) []Attr {
		// A preserved parameter block without a link layer came without rate
		// tables (from which the kernel would derive one): send none either.
		i := slices.IndexFunc(attrs, func(a Attr) bool { return int(a.Type) == nl.TCA_TBF_PARMS })
		if i >= 0 && len(attrs[i].Data) == tbfParmsLen && attrs[i].Data[1] == 0 {
			return slices.DeleteFunc(attrs, func(a Attr) bool {
				return int(a.Type) == nl.TCA_TBF_RTAB || int(a.Type) == nl.TCA_TBF_PTAB
			})
		}
		return attrs
	},
}

// ---- htb (the qdisc; its class is classCodec): TCA_HTB_INIT is struct
// tc_htb_glob {version, rate2quantum, defcls, debug, direct_pkts}. The kernel
// takes version 3 and reports its full version (0x30011); direct_pkts is a
// counter.

const htbGlobLen = 20

var htbCodec = optCodec{
	decode: func(_ []byte, attrs []Attr, o map[string]string) {
		for _, a := range attrs {
			switch int(a.Type) {
			case nl.TCA_HTB_INIT:
				if len(a.Data) == htbGlobLen {
					o["r2q"] = u32s(native.Uint32(a.Data[4:8]))
					o["default"] = u32s(native.Uint32(a.Data[8:12]))
				}
			case nl.TCA_HTB_DIRECT_QLEN:
				if v, ok := getU32(a.Data); ok {
					o["direct_qlen"] = u32s(v)
				}
			}
		}
	},
	encode: func(s Spec) ([]byte, []Attr, error) {
		e := &enc{s: s}
		r2q, ok := e.uint("r2q")
		if !ok {
			r2q = 10
		}
		def, ok := e.uint("default")
		if !ok {
			def = 1
		}
		g := make([]byte, htbGlobLen)
		native.PutUint32(g[0:], 3)
		native.PutUint32(g[4:], r2q)
		native.PutUint32(g[8:], def)
		out := []Attr{{Type: nl.TCA_HTB_INIT, Data: g}}
		if v, ok := e.uint("direct_qlen"); ok {
			out = append(out, Attr{Type: nl.TCA_HTB_DIRECT_QLEN, Data: u32(v)})
		}
		return nil, out, e.err
	},
	sameAttr: func(typ uint16, w, d []byte) bool {
		if int(typ) == nl.TCA_HTB_INIT {
			return len(w) == htbGlobLen && len(d) == htbGlobLen && bytes.Equal(w[4:16], d[4:16])
		}
		return bytes.Equal(w, d)
	},
}

// htbClassLen is struct tc_htb_opt: rate, ceil (tc_ratespec), buffer, cbuffer
// (transmit times in ticks), quantum, level (the class's depth in the tree,
// computed by the kernel) and prio.
const htbClassLen = 2*nl.SizeofTcRateSpec + 20

// decodeHTBClass turns an htb class's TCA_OPTIONS into options, and reports
// whether encodeHTBClass writes them back as they are. A parameter block the
// options cannot reproduce (a burst no byte count gives, as older lowlat
// versions computed it) is kept whole in the "parms" option.
func decodeHTBClass(b []byte) (map[string]string, bool) {
	attrs, err := parseAttrs(b)
	if err != nil {
		return nil, false
	}
	var parms []byte
	var rate64, ceil64 uint64
	for _, a := range attrs {
		switch int(a.Type) {
		case nl.TCA_HTB_PARMS:
			parms = a.Data
		case nl.TCA_HTB_RATE64:
			rate64, _ = getU64(a.Data)
		case nl.TCA_HTB_CEIL64:
			ceil64, _ = getU64(a.Data)
		default:
			return nil, false
		}
	}
	if len(parms) != htbClassLen {
		return nil, false
	}
	r, c := getRateSpec(parms[0:12]), getRateSpec(parms[12:24])
	rate, ceil := max(uint64(r.rate), rate64), max(uint64(c.rate), ceil64)
	if rate > maxRate/8 || ceil > maxRate/8 {
		return nil, false
	}
	burst, ok1 := burstFor(rate, native.Uint32(parms[24:28]))
	cburst, ok2 := burstFor(ceil, native.Uint32(parms[28:32]))
	o := map[string]string{
		"rate":    FormatRate(rate * 8),
		"ceil":    FormatRate(ceil * 8),
		"burst":   FormatSize(uint64(burst)),
		"cburst":  FormatSize(uint64(cburst)),
		"quantum": FormatSize(uint64(native.Uint32(parms[32:36]))),
	}
	if prio := native.Uint32(parms[40:44]); prio != 0 {
		o["prio"] = u32s(prio)
	}
	decodeRateSpec(r, o)
	if ok1 && ok2 {
		if w, err := htbClassParms(o); err == nil {
			copy(w[36:40], parms[36:40]) // level: the kernel's, not ours
			if sameRateSpecs(w, parms, 0, 12) {
				return o, true
			}
		}
	}
	if c.linklayer == 0 || r.linklayer == 0 {
		return o, false // without a link layer the kernel would derive one from our tables
	}
	o["parms"] = hex.EncodeToString(parms)
	return o, true
}

// encodeHTBClass builds an htb class's TCA_OPTIONS. Without burst and cburst
// the class gets tc's defaults (rate/HZ plus 1600 bytes).
func encodeHTBClass(opts map[string]string) (*nl.RtAttr, error) {
	p, err := htbClassParms(opts)
	if err != nil {
		return nil, err
	}
	if v, ok := opts["parms"]; ok {
		raw, err := hex.DecodeString(v)
		if err != nil || len(raw) != htbClassLen {
			return nil, fmt.Errorf("htb parms %q: want %d bytes in hex", v, htbClassLen)
		}
		p = raw
	}
	e := &enc{s: Spec{Kind: "htb", Opts: opts}}
	rate, _ := e.rateBytes("rate")
	ceil, ok := e.rateBytes("ceil")
	if !ok {
		ceil = rate
	}
	rs, cs := getRateSpec(p[0:12]), getRateSpec(p[12:24])
	opts2 := nl.NewRtAttr(nl.TCA_OPTIONS, nil)
	opts2.AddRtAttr(nl.TCA_HTB_PARMS, p)
	if rate >= 1<<32 {
		opts2.AddRtAttr(nl.TCA_HTB_RATE64, u64(rate))
	}
	if ceil >= 1<<32 {
		opts2.AddRtAttr(nl.TCA_HTB_CEIL64, u64(ceil))
	}
	opts2.AddRtAttr(nl.TCA_HTB_RTAB, rtab(rs, rate))
	opts2.AddRtAttr(nl.TCA_HTB_CTAB, rtab(cs, ceil))
	return opts2, nil
}

// htbClassParms is struct tc_htb_opt for the options.
func htbClassParms(opts map[string]string) ([]byte, error) {
	e := &enc{s: Spec{Kind: "htb", Opts: opts}}
	rate, ok := e.rateBytes("rate")
	if !ok || rate == 0 {
		return nil, fmt.Errorf("htb: rate is required")
	}
	ceil, ok := e.rateBytes("ceil")
	if !ok {
		ceil = rate
	}
	defBurst := func(r uint64) uint32 { return uint32(float64(r)/netlink.Hz() + 1600) }
	burst, ok := e.size("burst")
	if !ok {
		burst = defBurst(rate)
	}
	cburst, ok := e.size("cburst")
	if !ok {
		cburst = defBurst(ceil)
	}
	quantum, _ := e.size("quantum")
	prio, _ := e.uint("prio")
	rs := e.rateSpec(rate)
	cs := rs
	cs.rate = uint32(min(ceil, math.MaxUint32))
	if e.err != nil {
		return nil, e.err
	}
	p := make([]byte, htbClassLen)
	putRateSpec(p[0:12], rs)
	putRateSpec(p[12:24], cs)
	native.PutUint32(p[24:], xmitTicks(rate, burst))
	native.PutUint32(p[28:], xmitTicks(ceil, cburst))
	native.PutUint32(p[32:], quantum)
	native.PutUint32(p[40:], prio)
	return p, nil
}

// ---- netem: struct tc_netem_qopt {latency, limit, loss, gap, duplicate,
// jitter} then attributes. The kernel reports latency and jitter in 64 ns
// ticks in the struct and in nanoseconds in LATENCY64/JITTER64 (which win on
// write). Correlations, the loss model, slots and the random seed are kept
// verbatim; the delay distribution table is never reported (see docs).

const netemQoptLen = 24

// pct renders a kernel probability (of 2^32-1) as the shortest percentage
// that encodes back to it: 42949673 -> "1%".
func pct(p uint32) string {
	f := float64(p) / math.MaxUint32 * 100
	for prec := 0; prec <= 12; prec++ {
		s := strconv.FormatFloat(f, 'f', prec, 64) + "%"
		if q, err := pctValue(s); err == nil && q == p {
			return s
		}
	}
	return strconv.FormatFloat(f, 'g', -1, 64) + "%"
}

// pctValue is tc's encoding of a percentage (rint(per * UINT32_MAX)).
func pctValue(s string) (uint32, error) {
	f, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil || f < 0 || f > 100 {
		return 0, fmt.Errorf("bad percentage %q", s)
	}
	return uint32(math.RoundToEven(f / 100 * math.MaxUint32)), nil
}

func allZero(b []byte) bool { return !slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) }

var netemCodec = optCodec{
	head: netemQoptLen,
	decode: func(h []byte, attrs []Attr, o map[string]string) {
		lat := time.Duration(native.Uint32(h[0:4])) * 64
		jit := time.Duration(native.Uint32(h[20:24])) * 64
		o["limit"] = u32s(native.Uint32(h[4:8]))
		if v := native.Uint32(h[8:12]); v != 0 {
			o["loss"] = pct(v)
		}
		if v := native.Uint32(h[12:16]); v != 0 {
			o["gap"] = u32s(v)
		}
		if v := native.Uint32(h[16:20]); v != 0 {
			o["duplicate"] = pct(v)
		}
		var rate uint64
		for _, a := range attrs {
			switch a.Type {
			case tcaNetemLatency64:
				if v, ok := getU64(a.Data); ok {
					lat = time.Duration(int64(v))
				}
			case tcaNetemJitter64:
				if v, ok := getU64(a.Data); ok {
					jit = time.Duration(int64(v))
				}
			case tcaNetemReorder, tcaNetemCorrupt:
				key := map[uint16]string{tcaNetemReorder: "reorder", tcaNetemCorrupt: "corrupt"}[a.Type]
				if len(a.Data) == 8 && native.Uint32(a.Data) != 0 {
					o[key] = pct(native.Uint32(a.Data))
				}
			case tcaNetemRate:
				if len(a.Data) == 16 && rate == 0 {
					rate = uint64(native.Uint32(a.Data))
				}
			case tcaNetemRate64:
				rate, _ = getU64(a.Data)
			case tcaNetemECN:
				if v, ok := getU32(a.Data); ok && v != 0 {
					o["ecn"] = "on"
				}
			}
		}
		if rate != 0 && rate <= maxRate/8 {
			o["rate"] = FormatRate(rate * 8)
		}
		if lat != 0 {
			o["delay"] = FormatTime(lat.Round(time.Microsecond))
		}
		if jit != 0 {
			o["jitter"] = FormatTime(jit.Round(time.Microsecond))
		}
	},
	encode: encodeNetem,
	sameHead: func(w, d []byte) bool {
		// latency and jitter (0:4, 20:24) are derived from LATENCY64/JITTER64.
		return len(w) == netemQoptLen && len(d) == netemQoptLen && bytes.Equal(w[4:20], d[4:20])
	},
	unset: func(typ uint16, b []byte) bool {
		switch typ {
		case tcaNetemCorr, tcaNetemReorder, tcaNetemCorrupt, tcaNetemRate:
			return allZero(b)
		}
		return false
	},
}

func encodeNetem(s Spec) ([]byte, []Attr, error) {
	e := &enc{s: s}
	p := func(key string) uint32 {
		v, ok := s.Opts[key]
		if !ok {
			return 0
		}
		n, err := pctValue(v)
		if err != nil {
			e.fail(fmt.Errorf("netem %s: %v", key, err))
		}
		return n
	}
	dur := func(key string) time.Duration {
		v, ok := s.Opts[key]
		if !ok {
			return 0
		}
		d, err := ParseTime(v)
		if err != nil {
			e.fail(fmt.Errorf("netem %s: %w", key, err))
		}
		return d
	}
	delay, jitter := dur("delay"), dur("jitter")
	limit, ok := e.uint("limit")
	if !ok {
		limit = 1000
	}
	gap, _ := e.uint("gap")
	h := make([]byte, netemQoptLen)
	native.PutUint32(h[0:], uint32(min(delay.Nanoseconds()>>6, math.MaxUint32)))
	native.PutUint32(h[4:], limit)
	native.PutUint32(h[8:], p("loss"))
	native.PutUint32(h[12:], gap)
	native.PutUint32(h[16:], p("duplicate"))
	native.PutUint32(h[20:], uint32(min(jitter.Nanoseconds()>>6, math.MaxUint32)))
	// 64-bit nanosecond delay (4.15+) so sub-tick values survive; older kernels
	// ignore the attribute and use the tick fields above.
	out := []Attr{
		{Type: tcaNetemLatency64, Data: u64(uint64(delay.Nanoseconds()))},
		{Type: tcaNetemJitter64, Data: u64(uint64(jitter.Nanoseconds()))},
	}
	// A gap makes the kernel assume 100 % reordering unless told otherwise.
	if e.has("reorder") || gap != 0 {
		out = append(out, Attr{Type: tcaNetemReorder, Data: append(u32(p("reorder")), 0, 0, 0, 0)})
	}
	if e.has("corrupt") {
		out = append(out, Attr{Type: tcaNetemCorrupt, Data: append(u32(p("corrupt")), 0, 0, 0, 0)})
	}
	if r, ok := e.rateBytes("rate"); ok {
		b := make([]byte, 16)
		native.PutUint32(b, uint32(min(r, math.MaxUint32)))
		out = append(out, Attr{Type: tcaNetemRate, Data: b})
		if r >= 1<<32 {
			out = append(out, Attr{Type: tcaNetemRate64, Data: u64(r)})
		}
	}
	if on, _ := e.on("ecn"); on {
		out = append(out, Attr{Type: tcaNetemECN, Data: u32(1)})
	}
	return h, sortAttrs(out), e.err
}

// ---- size tables (TCA_STAB). The kernel reports the spec (struct
// tc_sizespec: cell_log, size_log, cell_align, overhead, linklayer, mpu, mtu,
// tsize) but not the table; tc computes the table from the spec, and so does
// stabTable: entry i is the size of a packet of (i+1) << cell_log bytes after
// mpu and ATM cell padding, shifted right by size_log.

const sizespecLen = 24

func stabTable(spec []byte) ([]byte, error) {
	if len(spec) != sizespecLen {
		return nil, fmt.Errorf("size table spec: %d bytes, want %d", len(spec), sizespecLen)
	}
	cellLog, sizeLog := uint(spec[0]), uint(spec[1])
	linklayer := native.Uint32(spec[8:12])
	mpu := native.Uint32(spec[12:16])
	tsize := native.Uint32(spec[20:24])
	if tsize == 0 {
		return nil, nil
	}
	if tsize > 4096 || cellLog > 30 || sizeLog > 30 {
		return nil, fmt.Errorf("size table spec: tsize %d, cell_log %d, size_log %d out of range", tsize, cellLog, sizeLog)
	}
	b := make([]byte, 2*tsize)
	for i := range tsize {
		sz := netlink.AdjustSize(uint(i+1)<<cellLog, uint(mpu), int(linklayer))
		native.PutUint16(b[2*i:], uint16(min(sz>>sizeLog, math.MaxUint16)))
	}
	return b, nil
}
