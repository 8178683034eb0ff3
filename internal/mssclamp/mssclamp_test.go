package mssclamp

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestAuto(t *testing.T) {
	tests := []struct {
		name   string
		rate   uint64
		target time.Duration
		want   int
		clamp  bool
	}{
		// 1 Mbit/s, 4 ms: 500-byte frames would do, under IPv4's 536.
		{"1mbit floors at 536", 1_000_000, 4 * time.Millisecond, 536, true},
		// 1.8 Mbit/s (capped-uplink's shaper at rate=2mbit): 900-byte frames.
		{"1.8mbit", 1_800_000, 4 * time.Millisecond, 900 - FrameOverhead, true},
		{"2mbit", 2_000_000, 4 * time.Millisecond, 1000 - FrameOverhead, true},
		// 3 Mbit/s: a 1500-byte frame, just under a full one.
		{"3mbit", 3_000_000, 4 * time.Millisecond, 1500 - FrameOverhead, true},
		// 3.028 Mbit/s: a full frame takes exactly 4 ms: no clamp.
		{"full frame fits exactly", 3_028_000, 4 * time.Millisecond, 0, false},
		{"20mbit", 20_000_000, 4 * time.Millisecond, 0, false},
		// A shorter target at 2 Mbit/s.
		{"2mbit 3ms", 2_000_000, 3 * time.Millisecond, 750 - FrameOverhead, true},
		{"500kbit", 500_000, 4 * time.Millisecond, 536, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Auto(tt.rate, tt.target)
			if got != tt.want || ok != tt.clamp {
				t.Errorf("Auto(%d, %s) = %d, %v; want %d, %v", tt.rate, tt.target, got, ok, tt.want, tt.clamp)
			}
			if ok {
				// The clamp's frame fits the target, or it is the floor.
				if ft := FrameTime(got+FrameOverhead, tt.rate); ft > tt.target && got != MinMSS {
					t.Errorf("frame of clamp %d takes %s > %s", got, ft, tt.target)
				}
			}
		})
	}
}

// TestCostFigures pins the figures the docs give: at 1 Mbit/s a full frame
// takes 12.1 ms and 4.4 % of it is headers; clamped to 536, 590-byte
// frames take 4.7 ms and 11.2 % is headers.
func TestCostFigures(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) < 0.05 }
	if ms := FrameTime(FullFrame, 1_000_000).Seconds() * 1000; !near(ms, 12.1) {
		t.Errorf("1514 B at 1 Mbit/s: %.2f ms", ms)
	}
	if ms := FrameTime(536+FrameOverhead, 1_000_000).Seconds() * 1000; !near(ms, 4.7) {
		t.Errorf("590 B at 1 Mbit/s: %.2f ms", ms)
	}
	if s := HeaderShare(FullFrame-FrameOverhead) * 100; !near(s, 4.4) {
		t.Errorf("header share of a full frame: %.2f %%", s)
	}
	if s := HeaderShare(536) * 100; !near(s, 11.2) {
		t.Errorf("header share at 536: %.2f %%", s)
	}
	if IPv6MSS(536) != 516 {
		t.Errorf("IPv6MSS(536) = %d", IPv6MSS(536))
	}
}

func TestParseSetting(t *testing.T) {
	tests := []struct {
		in, want, err string
	}{
		{in: "auto", want: "auto target=4ms"},
		{in: "auto target=3ms", want: "auto target=3ms"},
		{in: "off", want: "off target=4ms"},
		{in: "off target=4ms", want: "off target=4ms"},
		{in: "1200", want: "1200 target=4ms"},
		{in: "536 target=10ms", want: "536 target=10ms"},
		{in: "", err: "empty clamp"},
		{in: "535", err: "want 536 to 65495"},
		{in: "70000", err: "want 536 to 65495"},
		{in: "1.5k", err: "want auto, off or a byte count"},
		{in: "Auto", err: "want auto, off or a byte count"},
		{in: "auto 3ms", err: "want target=DURATION"},
		{in: "auto tgt=3ms", err: "want target=DURATION"},
		{in: "auto target=0s", err: "want a time from 500µs to 100ms"},
		{in: "auto target=1h", err: "want a time from 500µs to 100ms"},
		{in: "auto target=fast", err: "want a time"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			s, err := ParseSetting(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseSetting(%q) = %v, %v; want an error with %q", tt.in, s, err, tt.err)
				}
				return
			}
			if err != nil || s.String() != tt.want {
				t.Fatalf("ParseSetting(%q) = %q, %v; want %q", tt.in, s, err, tt.want)
			}
			if again, err := ParseSetting(s.String()); err != nil || again != s {
				t.Errorf("round trip of %q: %+v, %v", s, again, err)
			}
		})
	}
	if s, _ := ParseSetting("off"); !s.Off() {
		t.Error("off is not Off")
	}
	if s, _ := ParseSetting("auto"); s.Off() {
		t.Error("auto is Off")
	}
}

func TestStateString(t *testing.T) {
	for _, tt := range []struct {
		s    State
		want string
	}{
		{State{}, ""},
		{State{MSS: 536}, "536"},
		{State{Unmanaged: "1 chains, lowlat writes 2"}, "@unmanaged: 1 chains, lowlat writes 2"},
	} {
		if got := tt.s.String(); got != tt.want || tt.s.Present() != (tt.want != "") {
			t.Errorf("%+v: %q (present %v), want %q", tt.s, got, tt.s.Present(), tt.want)
		}
	}
}
