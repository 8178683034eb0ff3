package doctor

import (
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/pathprobe"
)

func TestPathFinding(t *testing.T) {
	hops := []pathprobe.Hop{
		{Index: 1, Address: "10.0.0.1", Sent: 10, Received: 10, RTT: pathprobe.RTT{P50: 300, P99: 500}},
		{Index: 2, Address: "10.0.1.2", Sent: 10, Received: 3, LossPct: 70, RateLimited: true, RTT: pathprobe.RTT{P50: 400, P99: 600}},
		{Index: 3, Address: "10.0.3.2", Sent: 10, Received: 10, RTT: pathprobe.RTT{P50: 40300, P99: 41000}},
		{Index: 4, Sent: 10},
	}
	for _, c := range []struct {
		name     string
		verdict  pathprobe.Verdict
		severity string
		fix      string
	}{
		{"none", pathprobe.Verdict{Kind: "none", Text: "no hop adds notable delay or loss"}, Info, ""},
		{"first hop", pathprobe.Verdict{Hop: 1, Address: "10.0.0.1", Kind: "delay", Text: "delay is added at hop 1"}, Warn, "on this host or its LAN"},
		{"further out", pathprobe.Verdict{Hop: 3, Address: "10.0.3.2", Kind: "delay", Text: "delay is added at hop 3"}, Warn, "hop 3 (10.0.3.2)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := PathFinding(&pathprobe.Result{Target: "example.net", Proto: "udp", Count: 10, Flow: 40000, Hops: hops, Verdict: c.verdict, Reached: false})
			if f.ID != "path" || f.Severity != c.severity || !strings.Contains(f.Summary, "example.net") || !strings.Contains(f.Summary, c.verdict.Text) {
				t.Errorf("finding %+v", f)
			}
			if c.fix == "" && f.Fix != "" || !strings.Contains(f.Fix, c.fix) {
				t.Errorf("fix %q, want one with %q", f.Fix, c.fix)
			}
			if !strings.Contains(f.Evidence["hop 02"], "rate-limited") || f.Evidence["hop 04"] != "no reply" || !strings.Contains(f.Evidence["hop 03"], "p50 40.30 ms") || f.Evidence["destination"] == "" {
				t.Errorf("evidence %v", f.Evidence)
			}
		})
	}
}
