//go:build linux

package qdisc

import (
	"bytes"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink/nl"
)

func TestShaperBurst(t *testing.T) {
	// The profile's ${tbf_burst}: two MTUs, or 1 ms of traffic above 24.224 Mbit/s.
	for _, c := range []struct{ bits, want uint64 }{
		{128_000, 3028}, {1_800_000, 3028}, {24_224_000, 3028}, {24_232_000, 3029}, {100_000_000, 12500}, {40e9, 5e6},
	} {
		if got := shaperBurst(c.bits); got != c.want {
			t.Errorf("shaperBurst(%s) = %d, want %d", FormatRate(c.bits), got, c.want)
		}
	}
}

func TestShaperLimit(t *testing.T) {
	tests := []struct {
		name                                  string
		limit, burst, rate, newRate, newBurst uint64
		want                                  uint64
	}{
		// The profile's plain tbf at 1800kbit: latency 6.5ms.
		{"same rate", 4491, 3028, 225000, 225000, 3028, 4491},
		{"half the rate: latency kept", 4491, 3028, 225000, 112500, 3028, 3759},
		{"a sixth: still above the bucket", 4491, 3028, 225000, 37500, 3028, 3272},
		{"1 ms buckets: limit/rate kept", 3_000_000, 1_000_000, 1e9, 5e8, 500_000, 1_500_000},
		{"latency rounded to 100us", 4500, 3028, 225000, 225000, 3028, 4491},
		{"limit below the bucket", 2000, 3028, 225000, 112500, 3028, 3028},
		{"clamped to 32 bits", math.MaxUint32, 3028, 1000, 1e6, 3028, math.MaxUint32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := shaperLimit(tt.limit, tt.burst, tt.rate, tt.newRate, tt.newBurst); got != tt.want {
				t.Errorf("shaperLimit(%d, %d, %d, %d, %d) = %d, want %d", tt.limit, tt.burst, tt.rate, tt.newRate, tt.newBurst, got, tt.want)
			}
		})
	}
}

// TestShaperLimitNoDrift: a rate moved around and back gives the limit it
// started from, whatever the steps (the profile's limits, all rates
// autorate may set).
func TestShaperLimitNoDrift(t *testing.T) {
	for _, base := range []uint64{128_000, 900_000, 1_800_000, 20_000_000, 100_000_000} {
		for _, latency := range []time.Duration{2 * time.Millisecond, 6500 * time.Microsecond, 50 * time.Millisecond} {
			rate, burst := base/8, shaperBurst(base)
			limit := TbfLimit(base, burst, latency)
			l, r, b := limit, rate, burst
			for i := range 2000 {
				// A walk between a tenth and twice the base, in uneven steps.
				nr := max(base/10, min(2*base, uint64(float64(r*8)*(0.83+0.37*float64((i*7919)%11)/10)))) / 8
				nb := shaperBurst(nr * 8)
				l, r, b = shaperLimit(l, b, r, nr, nb), nr, nb
				if l < b {
					t.Fatalf("base %d latency %v step %d: limit %d below the bucket %d", base, latency, i, l, b)
				}
			}
			if got := shaperLimit(l, b, r, rate, burst); got != limit {
				t.Errorf("base %s latency %v: limit %d after 2000 changes and back, want %d", FormatRate(base), latency, got, limit)
			}
		}
	}
}

// stats2 builds a TCA_STATS2 payload from attributes.
func stats2(attrs ...Attr) []byte {
	var b []byte
	for _, a := range attrs {
		b = append(b, nl.NewRtAttr(int(a.Type), a.Data).Serialize()...)
	}
	return b
}

func basic(bytes uint64, packets uint32) Attr {
	return Attr{Type: nl.TCA_STATS_BASIC, Data: append(u64(bytes), append(u32(packets), 0, 0, 0, 0)...)}
}

func TestShaperStats2Packets64(t *testing.T) {
	queue := Attr{Type: nl.TCA_STATS_QUEUE, Data: slices.Concat(u32(7), u32(9000), u32(3), u32(0), u32(11))}
	pad := Attr{Type: nl.TCA_STATS_PAD}
	tests := []struct {
		name  string
		attrs []Attr
		want  Stats
	}{
		{"32-bit count", []Attr{basic(1e6, 1000), queue}, Stats{Bytes: 1e6, Packets: 1000, Qlen: 7, Backlog: 9000, Drops: 3, Overlimits: 11}},
		{"64-bit count after basic", []Attr{basic(1e13, 0x2a), {Type: tcaStatsPkt64, Data: u64(1<<32 | 0x2a)}, queue},
			Stats{Bytes: 1e13, Packets: 1<<32 | 0x2a, Qlen: 7, Backlog: 9000, Drops: 3, Overlimits: 11}},
		{"padding between", []Attr{basic(1e13, 0x2a), pad, {Type: tcaStatsPkt64, Data: u64(1<<32 | 0x2a)}},
			Stats{Bytes: 1e13, Packets: 1<<32 | 0x2a}},
		{"hardware count is not ours", []Attr{basic(1e6, 5), {Type: nl.TCA_STATS_BASIC_HW, Data: basic(1e13, 1).Data}, {Type: tcaStatsPkt64, Data: u64(1 << 40)}},
			Stats{Bytes: 1e6, Packets: 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := decodeStats2(stats2(tt.attrs...))
			if got != tt.want {
				t.Errorf("decodeStats2:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func kernelDump(t *testing.T, name string) []byte {
	t.Helper()
	for _, d := range kernelDumps {
		if d.name == name {
			return mustHex(t, d.dump)
		}
	}
	t.Fatalf("no kernel dump %q", name)
	return nil
}

const tbfPeakDump = "6.18 tbf rate 1mbit burst 10k latency 50ms peakrate 2mbit mtu 1514"

func TestShaperRateOptions(t *testing.T) {
	tbf := kernelDump(t, tbfPeakDump)
	rate64 := slices.Concat(tbf, nl.NewRtAttr(nl.TCA_TBF_RATE64, u64(5e9)).Serialize())
	tests := []struct {
		name, kind string
		opts       []byte
		want       uint64
		wantErr    bool
	}{
		{"cake unlimited", "cake", kernelDump(t, "6.1 cake raw ack-filter nat wash"), 0, false},
		{"cake 1900kbit", "cake", nl.NewRtAttr(tcaCakeBaseRate64, u64(237500)).Serialize(), 237500, false},
		{"tbf 1mbit", "tbf", tbf, 125000, false},
		{"tbf 40gbit", "tbf", rate64, 5e9, false},
		{"tbf without parameters", "tbf", nl.NewRtAttr(nl.TCA_TBF_RATE64, u64(5e9)).Serialize(), 0, true},
		{"cake without bandwidth", "cake", nl.NewRtAttr(tcaCakeRTT, u32(100000)).Serialize(), 0, true},
		{"cut short", "tbf", tbf[:len(tbf)-3], 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := shaperRate(tt.kind, tt.opts)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("shaperRate = %d, %v; want %d (error: %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// sentTbf encodes spec as SetShaperRate sends it and returns the attributes.
func sentTbf(t *testing.T, s Spec) []Attr {
	t.Helper()
	opts, err := encodeOptions(s)
	if err != nil {
		t.Fatalf("encodeOptions(%q): %v", s, err)
	}
	attrs, err := parseAttrs(opts.Serialize()[4:])
	if err != nil {
		t.Fatal(err)
	}
	return attrs
}

// TestShaperTbfWithRate: the parameter block sent carries the new rate,
// bucket and limit and everything else as the kernel reported it, whether
// the options reproduce the block or it is kept verbatim.
func TestShaperTbfWithRate(t *testing.T) {
	exact := kernelDump(t, tbfPeakDump)
	// The same tbf made without rate tables: no link layer, which no option
	// says, so the block is kept verbatim.
	unaware := slices.Clone(exact)
	unaware[4+1] = 0
	tests := []struct {
		name      string
		dump      []byte
		verbatim  bool
		rate      uint64 // bytes/s
		wantTable bool
	}{
		{"options reproduce the block", exact, false, 187500, true},
		{"verbatim block without link layer", unaware, true, 187500, false},
		{"64-bit rate", exact, false, 5e9, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, attrs, unmanaged := decodeOptions("tbf", tt.dump)
			if unmanaged {
				t.Fatal("decodeOptions: unmanaged")
			}
			cur := Spec{Kind: "tbf", Opts: o, Attrs: attrs, Stab: []byte{1, 2}}
			if got := slices.ContainsFunc(attrs, func(a Attr) bool { return a.Type == nl.TCA_TBF_PARMS }); got != tt.verbatim {
				t.Fatalf("parameter block kept verbatim: %v, want %v (%s)", got, tt.verbatim, cur)
			}
			if tt.rate > math.MaxUint32 {
				// A peak rate must stay above the rate: drop it for this one.
				cur.Opts = map[string]string{"rate": o["rate"], "burst": o["burst"], "limit": o["limit"]}
			}
			burst, limit := shaperBurst(tt.rate*8), uint64(21021)
			s, err := tbfWithRate(cur, tt.rate, burst, limit)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(s.Stab, cur.Stab) {
				t.Errorf("size table %x, want %x", s.Stab, cur.Stab)
			}
			sent := sentTbf(t, s)
			parms, ok := find(sent, nl.TCA_TBF_PARMS)
			if !ok || len(parms.Data) != tbfParmsLen {
				t.Fatalf("no parameter block sent: %v", sent)
			}
			old, _ := find(must(t, tt.dump), nl.TCA_TBF_PARMS)
			p := parms.Data
			if got := getRateSpec(p[0:12]).rate; uint64(got) != min(tt.rate, math.MaxUint32) {
				t.Errorf("rate %d, want %d", got, tt.rate)
			}
			if got := native.Uint32(p[24:28]); uint64(got) != limit {
				t.Errorf("limit %d, want %d", got, limit)
			}
			if got, want := native.Uint32(p[28:32]), xmitTicks(tt.rate, uint32(burst)); got != want {
				t.Errorf("buffer %d ticks, want %d (%d bytes)", got, want, burst)
			}
			if tt.rate <= math.MaxUint32 {
				// Link layer, overhead, mpu of the rate; the whole peak rate
				// spec; mtu: as reported (cell fields are tc's, unreported).
				if !sameRateSpecs(slices.Concat(p[0:8], p[12:24], p[32:36]), slices.Concat(old.Data[0:8], old.Data[12:24], old.Data[32:36]), 0, 8) {
					t.Errorf("parameter block %x; want %x but for rate, limit and buffer", p, old.Data)
				}
			}
			r64, has64 := find(sent, nl.TCA_TBF_RATE64)
			if want := tt.rate >= 1<<32; has64 != want || (has64 && native.Uint64(r64.Data) != tt.rate) {
				t.Errorf("RATE64 sent: %v %x; want %v", has64, r64.Data, want)
			}
			if _, ok := find(sent, nl.TCA_TBF_RTAB); ok != tt.wantTable {
				t.Errorf("rate table sent: %v, want %v", ok, tt.wantTable)
			}
		})
	}
}

// TestShaperTbfWithRateDropsStaleRate64: a verbatim RATE64 of the old rate
// must not override the new one.
func TestShaperTbfWithRateDropsStaleRate64(t *testing.T) {
	cur := Spec{Kind: "tbf", Opts: map[string]string{"rate": "40gbit", "burst": "5000000", "limit": "10000000"},
		Attrs: []Attr{{Type: nl.TCA_TBF_RATE64, Data: u64(5e9)}}}
	s, err := tbfWithRate(cur, 2_500_000, shaperBurst(20e6), 5000)
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := find(sentTbf(t, s), nl.TCA_TBF_RATE64); ok {
		t.Errorf("sent RATE64 %x for a 20mbit rate", a.Data)
	}
	if _, err := tbfWithRate(Spec{Kind: "tbf"}, 1000, 3028, 5000); err == nil {
		t.Error("tbfWithRate of a spec without options: no error")
	}
}

func must(t *testing.T, b []byte) []Attr {
	t.Helper()
	attrs, err := parseAttrs(b)
	if err != nil {
		t.Fatal(err)
	}
	return attrs
}

// A change of rate with packets queued keeps a bucket that takes whole the
// largest packet the old one let in, through tc's truncated ticks: 3028
// bytes (two full frames) pass whole at 4 Mbit/s but not at 3 with the same
// bucket, where the kernel's largest packet is 3027.
func TestHoldingBurst(t *testing.T) {
	if got := largestPacket(500_000, 3028); got != 3028 {
		t.Errorf("4 Mbit/s, 3028-byte bucket: largest packet %d, want 3028", got)
	}
	if got := largestPacket(375_000, 3028); got != 3027 {
		t.Errorf("3 Mbit/s, 3028-byte bucket: largest packet %d, want 3027 (the case to mend)", got)
	}
	if got := holdingBurst(500_000, 3028, 375_000, 3028); got < 3029 || largestPacket(375_000, got) < 3028 {
		t.Errorf("4 → 3 Mbit/s: bucket %d takes %d whole, want 3028", got, largestPacket(375_000, got))
	}
	for oldRate := uint64(50_000); oldRate <= 5_000_000; oldRate = oldRate*21/20 + 7 {
		for rate := uint64(50_000); rate <= 5_000_000; rate = rate*23/20 + 3 {
			old := shaperBurst(oldRate * 8)
			b := holdingBurst(oldRate, old, rate, shaperBurst(rate*8))
			if largestPacket(rate, b) < largestPacket(oldRate, old) {
				t.Fatalf("%d → %d B/s: bucket %d takes %d, the old one let in %d", oldRate, rate, b, largestPacket(rate, b), largestPacket(oldRate, old))
			}
			if b > shaperBurst(rate*8)+max(rate/15_000_000, 1)+old {
				t.Fatalf("%d → %d B/s: bucket %d, far over what was asked", oldRate, rate, b)
			}
		}
	}
}
