package qdisc

import (
	"strings"
	"testing"
	"time"
)

func TestParseFormatRoundTrip(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"fq_codel", "fq_codel limit 1000 target 5ms interval 100ms flows 2048 quantum 1514", "fq_codel limit 1000 flows 2048 target 5ms interval 100ms quantum 1514"},
		{"ecn words", "fq_codel noecn", "fq_codel noecn"},
		{"time units", "fq_codel target 5000us interval 0.1s", "fq_codel target 5ms interval 100ms"},
		{"cake", "cake bandwidth 1900kbit besteffort nat split-gso", "cake bandwidth 1900kbit besteffort nat split-gso"},
		{"htb leaf", "htb rate 1.9mbit leaf { fq_codel target 8ms }", "htb rate 1900kbit leaf { fq_codel target 8ms }"},
		{"tbf runbook 003", "tbf latency 300ms burst 4096 rate 1.95mbit", "tbf rate 1950kbit burst 4096 latency 300ms"},
		{"mq children compressed", "mq children { pfifo_fast @default; pfifo_fast @default; fq_codel }", "mq children { 2*pfifo_fast @default; fq_codel }"},
		{"mq repeat", "mq children { 3*{ fq_codel limit 100 } }", "mq children { 3*fq_codel limit 100 }"},
		{"netem positional", "netem delay 50ms 10ms loss random 1%", "netem delay 50ms jitter 10ms loss 1%"},
		{"default marker", "pfifo_fast @default", "pfifo_fast @default"},
		{"prio priomap", "prio bands 3 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1", "prio bands 3 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1"},
		{"exact value", "fq handle 8001: limit 100 attr 16:0A attr 10:ff010000 orphan_mask 511 horizon_cap", "fq limit 100 horizon_cap orphan_mask 511 attr 10:ff010000 attr 16:0a handle 8001:"},
		{"empty and nested attrs", "cake attr 33019:080001002a000000 attr 12:", "cake attr 12: attr 33019:080001002a000000"},
		{"size table", "pfifo stab 0200FFFF140000000200000040000000ff07000000020000 limit 99", "pfifo limit 99 stab 0200ffff140000000200000040000000ff07000000020000"},
		{"handles below the root", "mq handle 7: children { pfifo limit 11 handle 71:; pfifo_fast @default }", "mq handle 7: children { pfifo limit 11 handle 71:; pfifo_fast @default }"},
		{"sfq red", "sfq depth 50 headdrop red 401F000060EA00000612000133333333", "sfq depth 50 headdrop red 401f000060ea00000612000133333333"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse(tt.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if got := s.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			again, err := Parse(s.String())
			if err != nil {
				t.Fatalf("re-Parse(%q): %v", s.String(), err)
			}
			if !Equal(again, s) {
				t.Errorf("round trip changed the spec: %q -> %q", s, again)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ in, wantErr string }{
		{"", "empty"},
		{"fq_codl", `unknown qdisc kind "fq_codl"`},
		{"fq_codel targte 5ms", `unknown option "targte"`},
		{"fq_codel target", "needs a value"},
		{"fq_codel target 5parsecs", "unknown unit"},
		{"fq_codel limit -1", "bad number"},
		{"fq_codel leaf { pfifo }", "takes no leaf"},
		{"htb rate 1mbit leaf fq_codel", "want {"},
		{"mq children { fq_codel", "want }"},
		{"tbf rate 1mbit burst 4k }", `unexpected "}"`},
		{"cake diffserv besteffortt", "bad value"},
		{"netem loss 120%", "bad percentage"},
		{"prio priomap 1 2 3", "16 band numbers"},
		{"fq attr", "needs a value"},
		{"fq attr 10", "want TYPE:HEX"},
		{"fq attr x:00", "want TYPE:HEX"},
		{"fq attr 70000:00", "want TYPE:HEX"},
		{"fq attr 10:zz", "bad attr"},
		{"fq attr 10:00 attr 10:01", "attr 10 given twice"},
		{"pfifo handle 1:2", "bad handle"},
		{"pfifo handle 0:", "bad handle"},
		{"pfifo handle ffff:", "bad handle"},
		{"pfifo stab xyz", "bad stab"},
		{"sfq red nothex", "bad hex value"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := Parse(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Parse(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
			}
		})
	}
}

func TestSatisfies(t *testing.T) {
	live := mustParse(t, "fq_codel limit 10240 flows 1024 target 5ms interval 100ms quantum 1514 ecn memory_limit 33554432 drop_batch 64")
	tests := []struct {
		desired string
		want    bool
	}{
		{"fq_codel", true},
		{"fq_codel target 5ms", true},
		{"fq_codel target 5000us", true},
		{"fq_codel target 5001us", true}, // kernel codel time units are 1024 ns
		{"fq_codel target 5100us", false},
		{"fq_codel target 8ms", false},
		{"fq_codel limit 10240 flows 1024", true},
		{"cake", false},
		{"fq_codel ce_threshold 1ms", false},
	}
	for _, tt := range tests {
		if got := Satisfies(live, mustParse(t, tt.desired)); got != tt.want {
			t.Errorf("Satisfies(live, %q) = %v, want %v", tt.desired, got, tt.want)
		}
	}
	// A one-child desired mq applies to every live child.
	mq := mustParse(t, "mq children { 4*fq_codel target 5ms }")
	if !Satisfies(mq, mustParse(t, "mq children { fq_codel }")) {
		t.Error("one desired child should apply to all live children")
	}
	if Satisfies(mustParse(t, "mq children { 3*fq_codel; pfifo_fast }"), mustParse(t, "mq children { fq_codel }")) {
		t.Error("a differing child must not satisfy")
	}
	// tbf latency is satisfied by the limit the kernel computed from it.
	tbf := mustParse(t, "tbf rate 1950kbit burst 4096 limit 77221")
	if !Satisfies(tbf, mustParse(t, "tbf rate 1950kbit burst 4096 latency 300ms")) {
		t.Errorf("tbf latency 300ms should match limit %d", TbfLimit(1950000, 4096, 300*time.Millisecond))
	}
	if Satisfies(mustParse(t, "htb rate 1mbit @unmanaged"), mustParse(t, "htb rate 1mbit")) {
		t.Error("an unmanaged live tree never satisfies")
	}
}

// TestEqualExactAndLegacy: two values read by this lowlat are equal only when
// everything they record is; a value journaled by an older lowlat (no handle,
// no attributes, no detail options) equals a live one on what it recorded.
func TestEqualExactAndLegacy(t *testing.T) {
	const fqLive = "fq limit 10000 flow_limit 100 quantum 3028 buckets 1024 pacing horizon_drop orphan_mask 511 timer_slack 20us attr 16:0102 handle 5:"
	tests := []struct {
		name string
		a, b string
		want bool
	}{
		{"same exact value", fqLive, fqLive, true},
		{"preserved attribute differs", fqLive, strings.Replace(fqLive, "attr 16:0102", "attr 16:0103", 1), false},
		{"preserved attribute missing", fqLive, strings.Replace(fqLive, " attr 16:0102", "", 1), false},
		{"detail option differs", fqLive, strings.Replace(fqLive, "orphan_mask 511", "orphan_mask 1023", 1), false},
		{"handle differs", fqLive, strings.Replace(fqLive, "handle 5:", "handle 8001:", 1), false},
		{"size table differs", "pfifo limit 1 stab 00 handle 5:", "pfifo limit 1 stab 01 handle 5:", false},
		{"size table missing", "pfifo limit 1 stab 00 handle 5:", "pfifo limit 1 handle 5:", false},
		{"exact times are exact", "fq_codel target 5ms handle 5:", "fq_codel target 4999us handle 5:", false},
		{"option only on one side", "fq_codel target 5ms ce_threshold 2ms handle 5:", "fq_codel target 5ms handle 5:", false},
		{"legacy record of the same qdisc", fqLive, "fq limit 10000 flow_limit 100 quantum 3028 buckets 1024 pacing", true},
		{"legacy record, kernel rounding", "fq_codel limit 10240 target 5ms interval 100ms ecn handle 5:", "fq_codel limit 10240 target 4999us interval 99999us ecn", true},
		{"legacy record, option differs", fqLive, "fq limit 5000 flow_limit 100 quantum 3028 buckets 1024 pacing", false},
		{"legacy record lacks a kept option", "fq_codel limit 10240 ce_threshold 2ms handle 5:", "fq_codel limit 10240", false},
		{"legacy default", "pfifo_fast @default", "pfifo_fast @default", true},
		{"default marker", "pfifo_fast @default", "pfifo_fast handle 5:", false},
		{"child attribute differs", "mq handle 7: children { fq attr 16:01 handle 71:; pfifo_fast @default }", "mq handle 7: children { fq attr 16:02 handle 71:; pfifo_fast @default }", false},
		{"child handle differs", "mq handle 7: children { pfifo limit 1 handle 71:; pfifo_fast @default }", "mq handle 7: children { pfifo limit 1 handle 72:; pfifo_fast @default }", false},
		{"legacy children", "mq children { pfifo limit 1; pfifo_fast @default }", "mq handle 7: children { pfifo limit 1 handle 71:; pfifo_fast @default }", true},
		{"child count differs", "mq children { pfifo limit 1 }", "mq handle 7: children { pfifo limit 1 handle 71:; pfifo_fast @default }", false},
		{"leaf differs", "tbf rate 1mbit burst 4096 limit 9000 handle 5: leaf { bfifo limit 1 handle 15: }", "tbf rate 1mbit burst 4096 limit 9000 handle 5: leaf { bfifo limit 2 handle 15: }", false},
		{"unmanaged", "htb rate 1mbit @unmanaged", "htb rate 1mbit @unmanaged", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := mustParse(t, tt.a), mustParse(t, tt.b)
			if got := Equal(a, b); got != tt.want {
				t.Errorf("Equal(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
			}
			if got := Equal(b, a); got != tt.want {
				t.Errorf("Equal is not symmetric: Equal(%q, %q) = %v", tt.b, tt.a, got)
			}
		})
	}
}

func TestSatisfiesExactParts(t *testing.T) {
	live := mustParse(t, "fq limit 10000 orphan_mask 511 attr 16:0102 stab 00 handle 5:")
	tests := []struct {
		desired string
		want    bool
	}{
		{"fq limit 10000", true},
		{"fq orphan_mask 511", true},
		{"fq orphan_mask 1023", false},
		{"fq handle 5:", true},
		{"fq handle 6:", false},
		{"fq attr 16:0102", true},
		{"fq attr 16:0103", false},
		{"fq attr 17:00", false},
		{"fq stab 00", true},
		{"fq stab 01", false},
	}
	for _, tt := range tests {
		if got := Satisfies(live, mustParse(t, tt.desired)); got != tt.want {
			t.Errorf("Satisfies(%q, %q) = %v, want %v", live, tt.desired, got, tt.want)
		}
	}
}

func TestManaged(t *testing.T) {
	for in, want := range map[string]bool{
		"fq_codel":                  true,
		"htb rate 1mbit @unmanaged": false,
		"htb rate 1mbit leaf { pfifo @unmanaged }":                     false,
		"mq children { pfifo_fast @default; pfifo @unmanaged }":        false,
		"mq children { pfifo_fast @default; pfifo limit 1 handle 2: }": true,
	} {
		if got := mustParse(t, in).Managed(); got != want {
			t.Errorf("Managed(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestUnits(t *testing.T) {
	for in, want := range map[string]uint64{"2mbit": 2e6, "1.95mbit": 1950000, "1950kbit": 1950000, "10gbit": 1e10, "100": 100, "1kbps": 8000} {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, want := range map[string]uint64{"4096": 4096, "4k": 4096, "32mb": 32 << 20, "1514b": 1514} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"fast", "-1mbit", "1xbit", "NaN"} {
		if _, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) accepted", bad)
		}
	}
	if FormatRate(1950000) != "1950kbit" || FormatRate(2e6) != "2mbit" || FormatRate(1234) != "1234bit" {
		t.Error("FormatRate")
	}
	if FormatTime(5*time.Millisecond) != "5ms" || FormatTime(1500*time.Microsecond) != "1500us" || FormatTime(2*time.Second) != "2s" {
		t.Error("FormatTime")
	}
}

func TestHandles(t *testing.T) {
	for _, s := range []string{"root", "ingress", "8001:", "1:1", "ffff:"} {
		h, err := ParseHandle(s)
		if err != nil || FormatHandle(h) != s {
			t.Errorf("handle %q -> %x %v -> %q", s, h, err, FormatHandle(h))
		}
	}
}

func TestAssemble(t *testing.T) {
	pf := Spec{Kind: "pfifo_fast"}
	mqEntries := []Entry{
		{Handle: 0, Parent: HandleRoot, Spec: Spec{Kind: "mq"}},
		{Handle: 0, Parent: 1, Spec: pf},
		{Handle: 0, Parent: 2, Spec: pf},
	}
	tr := Assemble(mqEntries, nil, true)
	if got := tr.Root.String(); got != "mq @default children { 2*pfifo_fast @default }" {
		t.Errorf("default mq = %q", got)
	}
	shaper := []Entry{
		{Handle: MakeHandle(1, 0), Parent: HandleRoot, Spec: Spec{Kind: "htb", Opts: map[string]string{"r2q": "10", "default": "1"}}},
		{Handle: MakeHandle(0x11, 0), Parent: MakeHandle(1, 1), Spec: mustParse(t, "fq_codel target 8ms")},
	}
	cls := []Class{{Handle: MakeHandle(1, 1), Parent: HandleRoot, Kind: "htb", Opts: map[string]string{"rate": "1900kbit", "ceil": "1900kbit"}}}
	tr = Assemble(shaper, cls, true)
	if got := tr.Root.String(); got != "htb rate 1900kbit ceil 1900kbit handle 1: leaf { fq_codel target 8ms handle 11: }" {
		t.Errorf("shaper = %q", got)
	}
	cls = append(cls, Class{Handle: MakeHandle(1, 2), Parent: MakeHandle(1, 1), Kind: "htb"})
	if tr := Assemble(shaper, cls, true); !tr.Root.Unmanaged {
		t.Error("an htb with two classes is someone else's tree and must be unmanaged")
	}
	if tr := Assemble(nil, nil, true); tr.Root.String() != "noqueue @default" {
		t.Errorf("no root on an up link = %q", tr.Root)
	}
	if tr := Assemble(nil, nil, false); tr.Root.String() != "noop @default" {
		t.Errorf("no root on a down link = %q", tr.Root)
	}
}

func mustParse(t *testing.T, s string) Spec {
	t.Helper()
	sp, err := Parse(s)
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return sp
}
