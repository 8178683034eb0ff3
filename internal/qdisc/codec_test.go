//go:build linux

package qdisc

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink/nl"
)

// Kernel dumps of TCA_OPTIONS captured from Debian's 6.1 kernel (in the
// stock-kernel VM) and a 6.18 kernel, each configured by tc as named.
var kernelDumps = []struct {
	name, kind, dump string
	// want is the decoded spec (String form, without a handle).
	want string
	// rounded attributes come back from the kernel in coarser units than
	// sent (see kernelReports); omitted ones say "unset" and are not sent;
	// writeOnly ones are sent but never reported.
	rounded, omitted, writeOnly []uint16
}{
	{
		name: "6.1 fq orphan_mask 511 timer_slack 20us", kind: "fq",
		dump:    "0800010010270000080002006400000008000300d40b000008000400243b0000080005000100000008000700ffffffff08000900409c000008000a00ff01000008000b008e0c010008000c00ffffffff080008000a00000008000d00204e000008000e008096980005000f0001000000",
		want:    "fq limit 10000 flow_limit 100 quantum 3028 initial_quantum 15140 buckets 1024 pacing refill_delay 40ms low_rate_threshold 550kbit horizon 10s horizon_drop orphan_mask 511 timer_slack 20us",
		omitted: []uint16{nl.TCA_FQ_FLOW_MAX_RATE, nl.TCA_FQ_CE_THRESHOLD},
	},
	{
		name: "6.1 fq_codel ce_threshold 2ms ce_threshold_selector 0x1/0x3", kind: "fq_codel",
		dump:    "08000100871300000800020000280000080003009f860100080004000100000008000600ea05000008000800400000000800090000000002080005000004000008000700cf07000005000a000100000005000b0003000000",
		want:    "fq_codel limit 10240 flows 1024 target 5ms interval 100ms quantum 1514 ecn ce_threshold 2ms memory_limit 33554432 drop_batch 64 attr 10:01 attr 11:03",
		rounded: []uint16{nl.TCA_FQ_CODEL_TARGET, nl.TCA_FQ_CODEL_INTERVAL, nl.TCA_FQ_CODEL_CE_THRESHOLD},
	},
	{
		name: "6.1 codel ce_threshold 1ms", kind: "codel",
		dump:    "080001008713000008000200e8030000080003009f860100080004000000000008000500e7030000",
		want:    "codel limit 1000 target 5ms interval 100ms noecn ce_threshold 1ms",
		rounded: []uint16{tcaCodelTarget, tcaCodelInterval, tcaCodelCEThreshold},
	},
	{
		name: "6.1 cake raw ack-filter nat wash", kind: "cake",
		dump:    "0c0002000000000000000000080005000700000008000700a0860100080008008813000008000a0000000000080009000000000008000f0000000000080010000100000008000b0001000000080003000000000008000d0001000000080006000000000008000c0000000000080004000000000008000e000000000008001100010000000800120000000000",
		want:    "cake unlimited rtt 100ms diffserv3 triple-isolate nat wash split-gso ack-filter egress no-autorate-ingress overhead 0 mpu 0 noatm attr 12:00000000",
		omitted: []uint16{tcaCakeMemory, tcaCakeFwmark},
	},
	{
		name: "6.18 tbf rate 1mbit burst 10k latency 50ms peakrate 2mbit mtu 1514", kind: "tbf",
		dump:      "28000100000100000000000048e80100000100000000000090d00300be36000000881300a1710100",
		want:      "tbf rate 1mbit burst 10240 limit 14014 peakrate 2mbit mtu 1514",
		rounded:   []uint16{nl.TCA_TBF_PARMS},
		writeOnly: []uint16{nl.TCA_TBF_RTAB, nl.TCA_TBF_PTAB},
	},
	{
		name: "6.18 tbf overhead 20 mpu 64 linklayer atm", kind: "tbf",
		dump:      "28000100000214000000400048e801000000000000000000000000006a40000016a2150000000000",
		want:      "tbf rate 1mbit burst 11342 limit 16490 overhead 20 mpu 64 atm",
		rounded:   []uint16{nl.TCA_TBF_PARMS},
		writeOnly: []uint16{nl.TCA_TBF_RTAB},
	},
	{
		name: "6.1 netem delay 10ms 2ms 25% loss 1% 10% duplicate 2% corrupt 0.1% reorder 25% 50% gap 5 rate 10mbit 20 ecn slot 1ms 2ms", kind: "netem",
		dump: "5a620200e8030000295c8f020500000052b81e05127a00000c000a0080969800000000000c000b0080841e000000000010000100000000409a999919000000000c00030000000040000000800c000400378941000000000014000600d012130014000000000000000000000008000700010000002c000c0040420f000000000080841e0000000000000000000000000000000000000000000000000000000000",
		want: "netem delay 10ms jitter 2ms loss 1% duplicate 2% corrupt 0.1% reorder 25% rate 10mbit limit 1000 gap 5 ecn " +
			"attr 1:00000040" + "9a999919" + "00000000 attr 3:0000004000000080 attr 6:d012130014000000" + "0000000000000000 " +
			"attr 12:40420f000000000080841e0000000000000000000000000000000000000000000000000000000000",
	},
	{
		name: "6.1 netem loss gemodel 1% 10% 70% 0.1%", kind: "netem",
		dump:    "00000000e8030000000000000000000000000000000000000c000a0000000000000000000c000b000000000000000000100001000000000000000000000000000c00030000000000000000000c000400000000000000000014000600000000000000000000000000000000001800050014000200295c8f029a999919cdcccc4c37894100",
		want:    "netem limit 1000 attr 5:14000200295c8f029a999919cdcccc4c37894100",
		omitted: []uint16{tcaNetemCorr, tcaNetemReorder, tcaNetemCorrupt, tcaNetemRate},
	},
	{
		name: "6.1 sfq perturb 10 quantum 1514 limit 100 depth 50 headdrop flows 64 divisor 512", kind: "sfq",
		dump: "ea0500000a00000064000000000200004000000032000000010000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
		want: "sfq perturb 10 quantum 1514 limit 100 divisor 512 flows 64 depth 50 headdrop",
	},
	{
		name: "6.1 sfq (defaults: limit 127 below 128 flows)", kind: "sfq",
		dump: "ea050000000000007f00000000040000800000007f000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
		want: "sfq perturb 0 quantum 1514 limit 127 divisor 1024 flows 128 depth 127",
	},
	{
		name: "6.1 sfq redflowlimit 100000 min 8000 max 60000 probability 0.2 ecn headdrop", kind: "sfq",
		dump: "ea050000000000007f00000000040000800000007f0000000100000000000000401f000060ea00000612000133333333000000000000000000000000000000000000000000000000",
		want: "sfq perturb 0 quantum 1514 limit 127 divisor 1024 flows 128 depth 127 headdrop red 401f000060ea00000612000133333333",
	},
	{
		name: "6.1 htb default 1 r2q 20 direct_qlen 33", kind: "htb",
		dump: "1800020011000300140000000100000000000000000000000800050021000000",
		want: "htb r2q 20 direct_qlen 33 default 1",
		// The kernel reports its full version (0x30011) where tc sends 3.
		rounded: []uint16{nl.TCA_HTB_INIT},
	},
	{
		name: "6.1 prio bands 5 priomap 0 1 2 3 4 0 1 2 3 4 0 1 2 3 4 0", kind: "prio",
		dump: "0500000000010203040001020304000102030400",
		want: "prio bands 5 priomap 0 1 2 3 4 0 1 2 3 4 0 1 2 3 4 0",
	},
	{name: "6.1 pfifo limit 77", kind: "pfifo", dump: "4d000000", want: "pfifo limit 77"},
	{name: "6.1 bfifo limit 7777", kind: "bfifo", dump: "611e0000", want: "bfifo limit 7777"},
}

// unknownAttrs are attributes no kernel sends today: a future scalar with an
// odd length, and a nested one (NLA_F_NESTED) with an attribute inside.
var unknownAttrs = []Attr{
	{Type: 250, Data: []byte{0xde, 0xad, 0xbe, 0xef, 0xca}},
	{Type: 0x8000 | 251, Data: []byte{8, 0, 1, 0, 0x2a, 0, 0, 0}},
}

func TestDecodeKernelDumps(t *testing.T) {
	for _, tt := range kernelDumps {
		t.Run(tt.name, func(t *testing.T) {
			o, attrs, unmanaged := decodeOptions(tt.kind, mustHex(t, tt.dump))
			if unmanaged {
				t.Fatalf("decodeOptions: unmanaged")
			}
			got := Spec{Kind: tt.kind, Opts: o, Attrs: attrs}
			if got.String() != tt.want {
				t.Errorf("decoded (-want +got):\n- %s\n+ %s", tt.want, got)
			}
			again, err := Parse(got.String())
			if err != nil || !Equal(again, got) {
				t.Errorf("Parse(%q) = %q, %v; want it back", got, again, err)
			}
		})
	}
}

// TestEncodeDecodeRoundTrip: writing back what was read gives the kernel every
// attribute it reported, byte for byte, including attributes lowlat does not
// know (appended to each dump). The only differences are the kernel's own:
// values it reports in coarser units than it takes (checked against a model
// of the kernel's arithmetic), "unset" values it reports but is not sent, and
// rate tables it takes but does not report.
func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, tt := range kernelDumps {
		for _, withUnknown := range []bool{false, true} {
			c := codecs[tt.kind]
			if withUnknown && c.head < 0 {
				continue // one struct, no attributes to add
			}
			t.Run(fmt.Sprintf("%s/unknown=%v", tt.name, withUnknown), func(t *testing.T) {
				dump := mustHex(t, tt.dump)
				if withUnknown {
					for _, a := range unknownAttrs {
						dump = append(dump, nl.NewRtAttr(int(a.Type), a.Data).Serialize()...)
					}
				}
				o, attrs, unmanaged := decodeOptions(tt.kind, dump)
				if unmanaged {
					t.Fatal("decodeOptions: unmanaged")
				}
				spec, err := Parse(Spec{Kind: tt.kind, Opts: o, Attrs: attrs}.String())
				if err != nil {
					t.Fatal(err)
				}
				opts, err := encodeOptions(spec)
				if err != nil {
					t.Fatalf("encodeOptions(%q): %v", spec, err)
				}
				wroteHead, wrote := splitOptions(t, c, opts.Serialize()[4:])
				dumpHead, dumped := splitOptions(t, c, dump)
				if !kernelReports(tt.kind, 0, wroteHead, dumpHead) {
					t.Errorf("struct: wrote %x, kernel reported %x", wroteHead, dumpHead)
				}
				for _, d := range dumped {
					w, ok := find(wrote, d.Type)
					switch {
					case !ok && slices.Contains(tt.omitted, d.Type):
					case !ok:
						t.Errorf("attr %d (%x) reported but not written back", d.Type, d.Data)
					case slices.Contains(tt.rounded, d.Type):
						if !kernelReports(tt.kind, d.Type, w.Data, d.Data) {
							t.Errorf("attr %d: wrote %x, which the kernel reports as something else than %x", d.Type, w.Data, d.Data)
						}
					case !bytes.Equal(w.Data, d.Data):
						t.Errorf("attr %d: wrote %x, kernel reported %x", d.Type, w.Data, d.Data)
					}
				}
				for _, w := range wrote {
					if _, ok := find(dumped, w.Type); !ok && !slices.Contains(tt.writeOnly, w.Type) {
						t.Errorf("attr %d (%x) written but never reported", w.Type, w.Data)
					}
				}
			})
		}
	}
}

// TestEncodeDecodeLiteral: for an attribute set whose values the kernel
// keeps as sent, encode(decode(b)) is b itself, unknown attributes included.
func TestEncodeDecodeLiteral(t *testing.T) {
	var b []byte
	for _, a := range []Attr{
		{Type: nl.TCA_FQ_CODEL_LIMIT, Data: u32(1000)},
		{Type: nl.TCA_FQ_CODEL_ECN, Data: u32(0)},
		{Type: nl.TCA_FQ_CODEL_FLOWS, Data: u32(2048)},
		{Type: nl.TCA_FQ_CODEL_QUANTUM, Data: u32(300)},
		{Type: nl.TCA_FQ_CODEL_DROP_BATCH_SIZE, Data: u32(32)},
		{Type: nl.TCA_FQ_CODEL_MEMORY_LIMIT, Data: u32(16 << 20)},
		{Type: 10, Data: []byte{1}}, // ce_threshold_selector (5.16+)
		unknownAttrs[0],
		unknownAttrs[1],
	} {
		b = append(b, nl.NewRtAttr(int(a.Type), a.Data).Serialize()...)
	}
	o, attrs, unmanaged := decodeOptions("fq_codel", b)
	if unmanaged {
		t.Fatal("unmanaged")
	}
	s := Spec{Kind: "fq_codel", Opts: o, Attrs: attrs}
	if want := "fq_codel limit 1000 flows 2048 quantum 300 noecn memory_limit 16777216 drop_batch 32 attr 10:01 attr 250:deadbeefca attr 33019:080001002a000000"; s.String() != want {
		t.Errorf("decoded (-want +got):\n- %s\n+ %s", want, s)
	}
	opts, err := encodeOptions(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := opts.Serialize()[4:]; !bytes.Equal(sortedPayload(t, got), sortedPayload(t, b)) {
		t.Errorf("encode(decode(b)) != b:\n got %x\nwant %x", got, b)
	}
}

// TestCodelTime: the value codelTime renders for what the kernel reports,
// sent back, is reported the same, for every time a user may have sent.
func TestCodelTime(t *testing.T) {
	for sent := uint64(0); sent < 300_000; sent += 7 {
		reported := codelReported(codelKept(sent))
		d, err := ParseTime(codelTime(uint32(reported)))
		if err != nil {
			t.Fatal(err)
		}
		if again := codelReported(codelKept(uint64(d.Microseconds()))); again != reported {
			t.Fatalf("sent %dus, reported %d, rendered %s, which is reported as %d", sent, reported, codelTime(uint32(reported)), again)
		}
	}
	for reported, want := range map[uint32]string{4999: "5ms", 99999: "100ms", 1999: "2ms", 0: "0us"} {
		if got := codelTime(reported); got != want {
			t.Errorf("codelTime(%d) = %s, want %s", reported, got, want)
		}
	}
}

func TestPercent(t *testing.T) {
	for _, s := range []string{"1%", "0.1%", "25%", "2%", "100%", "0.0001%", "33.3%"} {
		p, err := pctValue(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := pct(p); got != s {
			t.Errorf("pct(pctValue(%s)) = %s", s, got)
		}
	}
	for _, p := range []uint32{0, 1, 2, 12345, 42949672, math.MaxUint32 / 3, math.MaxUint32 - 1, math.MaxUint32} {
		if got, err := pctValue(pct(p)); err != nil || got != p {
			t.Errorf("pctValue(pct(%d)) = %d, %v", p, got, err)
		}
	}
}

// TestBurstFor: a burst tc (or lowlat) wrote as a transmit time decodes to a
// byte count that writes the same time, at every rate.
func TestBurstFor(t *testing.T) {
	for _, rate := range []uint64{1000, 243750, 125000, 1_250_000, 125_000_000, 1_250_000_000, 5_000_000_000} {
		for _, burst := range []uint32{1, 1514, 1600, 4096, 10240, 15360, 65536, 1 << 20} {
			ticks := xmitTicks(rate, burst)
			b, ok := burstFor(rate, ticks)
			if !ok || xmitTicks(rate, b) != ticks {
				t.Errorf("rate %d burst %d: ticks %d decode to %d (exact %v), which is %d ticks", rate, burst, ticks, b, ok, xmitTicks(rate, b))
			}
		}
	}
}

func TestStabTable(t *testing.T) {
	// tc qdisc add ... stab overhead 20 mpu 64 linklayer atm: cell_log 2,
	// cell_align -1, linklayer atm, mpu 64, mtu 2047, tsize 512.
	spec := mustHex(t, "0200ffff140000000200000040000000ff07000000020000")
	table, err := stabTable(spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(table) != 2*512 {
		t.Fatalf("table of %d bytes, want 1024", len(table))
	}
	// Entry i is a packet of (i+1)*4 bytes: at least 64 (mpu), padded to
	// 48-byte ATM cells of 53 bytes each.
	for i, want := range map[int]uint16{0: 106, 15: 106, 23: 106, 24: 159, 511: 43 * 53} {
		if got := native.Uint16(table[2*i:]); got != want {
			t.Errorf("entry %d = %d, want %d", i, got, want)
		}
	}
	if table, err := stabTable(mustHex(t, "000000001800000000000000000000000000000000000000")); err != nil || table != nil {
		t.Errorf("overhead-only spec: table %x, %v; want none", table, err)
	}
}

// kernelReports models what the kernel reports for a value written: codel
// keeps times in 1024 ns units, tbf does not keep the rate table cell fields,
// htb reports its full version, netem derives the struct's tick fields from
// the 64-bit attributes, and sfq reports 127 for a limit left to it.
func kernelReports(kind string, typ uint16, wrote, dumped []byte) bool {
	if typ == 0 { // the struct before the attributes, or the whole payload
		w := slices.Clone(wrote)
		switch kind {
		case "netem":
			copy(w[0:4], dumped[0:4])
			copy(w[20:24], dumped[20:24])
		case "sfq":
			if native.Uint32(w[8:12]) == 0 {
				native.PutUint32(w[8:12], 127)
			}
			copy(w[28:32], dumped[28:32]) // an input the kernel does not keep
		}
		return bytes.Equal(w, dumped)
	}
	switch kind {
	case "fq_codel", "codel":
		w, d := native.Uint32(wrote), native.Uint32(dumped)
		kept := uint64(w) * 1000 / 1024
		return kept*1024/1000 == uint64(d)
	case "tbf":
		w, d := slices.Clone(wrote), slices.Clone(dumped)
		for _, o := range []int{0, 12} {
			w[o], w[o+4], w[o+5] = 0, 0, 0
			d[o], d[o+4], d[o+5] = 0, 0, 0
		}
		return bytes.Equal(w, d)
	case "htb":
		w := slices.Clone(wrote)
		native.PutUint32(w[0:4], 0x30011)
		copy(w[16:20], dumped[16:20]) // direct_pkts, a counter
		return bytes.Equal(w, dumped)
	}
	return bytes.Equal(wrote, dumped)
}

func splitOptions(t *testing.T, c optCodec, b []byte) ([]byte, []Attr) {
	t.Helper()
	if c.head < 0 {
		return b, nil
	}
	as, err := nl.ParseRouteAttr(b[c.head:])
	if err != nil {
		t.Fatalf("parse %x: %v", b, err)
	}
	var out []Attr
	for _, a := range as {
		out = append(out, Attr{Type: a.Attr.Type, Data: a.Value})
	}
	return b[:c.head], out
}

func find(attrs []Attr, typ uint16) (Attr, bool) {
	i := slices.IndexFunc(attrs, func(a Attr) bool { return a.Type == typ })
	if i < 0 {
		return Attr{}, false
	}
	return attrs[i], true
}

// sortedPayload re-serializes attributes in type order, to compare sets.
func sortedPayload(t *testing.T, b []byte) []byte {
	_, attrs := splitOptions(t, optCodec{}, b)
	var out []byte
	for _, a := range sortAttrs(attrs) {
		out = append(out, nl.NewRtAttr(int(a.Type), a.Data).Serialize()...)
	}
	return out
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzDecodeOptions: decoding any TCA_OPTIONS never panics, and what it
// decodes as writable renders to a text that parses back to the same value
// and encodes without error.
func FuzzDecodeOptions(f *testing.F) {
	kinds := []string{"pfifo", "bfifo", "prio", "sfq", "fq_codel", "codel", "fq", "cake", "tbf", "htb", "netem"}
	for _, d := range kernelDumps {
		b, _ := hex.DecodeString(d.dump)
		f.Add(uint8(slices.Index(kinds, d.kind)), b)
	}
	f.Fuzz(func(t *testing.T, k uint8, b []byte) {
		kind := kinds[int(k)%len(kinds)]
		o, attrs, unmanaged := decodeOptions(kind, b)
		if unmanaged {
			return
		}
		s := Spec{Kind: kind, Opts: o, Attrs: attrs, Handle: MakeHandle(5, 0)}
		again, err := Parse(s.String())
		if err != nil {
			t.Fatalf("%s %x decodes to %q, which does not parse: %v", kind, b, s, err)
		}
		if !Equal(again, s) || again.String() != s.String() {
			t.Fatalf("%s %x: %q parses back as %q", kind, b, s, again)
		}
		if _, err := encodeOptions(again); err != nil {
			t.Fatalf("%s %x: %q does not encode: %v", kind, b, again, err)
		}
	})
}
