package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/pathprobe"
)

// The table's notes: a rate-limited destination is the destination and
// rate-limited, the hop where delay starts says so even when its replies
// are rate-limited, and loss that cannot be read is not a clean bill.
func TestHumanPathNotes(t *testing.T) {
	r := &pathprobe.Result{Target: "10.0.0.5", Address: "10.0.0.5", Proto: "udp", Port: 33434, Count: 30, Reached: true, Socket: "recverr",
		Hops: []pathprobe.Hop{
			{Index: 1, Address: "10.0.0.1", Sent: 30, Received: 30},
			{Index: 2, Address: "10.0.0.2", Sent: 30, Received: 12, LossPct: 60, RateLimited: true, ReplyRateLimited: true, ReplyEveryMS: 1000},
			{Index: 3, Address: "10.0.0.5", Sent: 30, Received: 12, LossPct: 60, RateLimited: true, ReplyRateLimited: true, Destination: true},
		},
		Verdict: pathprobe.Verdict{Hop: 2, DelayHop: 2, Kind: "delay", LossHiddenFrom: 2, Text: "delay is added at hop 2; loss from hop 2 on cannot be read"},
	}
	var out bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &bytes.Buffer{}, Getenv: func(string) string { return "" }}
	if err := humanPath(&out, env, r); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	row := func(hop string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, hop+" ") {
				return l
			}
		}
		return ""
	}
	for _, tc := range []struct{ hop, want string }{
		{"1", ""},
		{"2", "← delay starts here; ICMP replies rate-limited (one every 1.00s): its loss is not the path's"},
		{"3", "destination; ICMP replies rate-limited: its loss is not the path's"},
	} {
		got := row(tc.hop)
		if got == "" {
			t.Fatalf("no row for hop %s:\n%s", tc.hop, out.String())
		}
		if tc.want == "" {
			if strings.Contains(got, "rate-limited") || strings.Contains(got, "←") {
				t.Errorf("hop %s: %q, want no note", tc.hop, got)
			}
			continue
		}
		if !strings.HasSuffix(strings.TrimSpace(got), tc.want) {
			t.Errorf("hop %s: %q, want the note %q", tc.hop, got, tc.want)
		}
	}
	if !strings.Contains(out.String(), "verdict: delay is added at hop 2; loss from hop 2 on cannot be read") {
		t.Errorf("no verdict line:\n%s", out.String())
	}
}
