package pathprobe

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// rawProbes is a hop that was sent `sent` probes and lost `lost` of them; the
// replies come from addr with RTTs base, base+spread, base+2·spread, base, …
// (µs). For n = 10 replies: min = base, p50 = base+spread,
// p99 = max = base+2·spread, jitter = 4/3·spread.
func rawProbes(addr string, sent, lost int, base, spread float64) rawHop {
	h := rawHop{sent: sent}
	for i := 0; i < sent-lost; i++ {
		h.replies = append(h.replies, reply{addr: addr, rtt: base + spread*float64(i%3)})
	}
	return h
}

// rawTraced is a hop whose probes fared as p says; the answered ones came
// back from addr after base µs, base+spread, base+2·spread, base, …
func rawTraced(addr string, p []probeOut, base, spread float64) rawHop {
	h := rawHop{sent: len(p), probes: p}
	for i, q := range p {
		if q.answered {
			h.replies = append(h.replies, reply{addr: addr, rtt: base + spread*float64(i%3)})
		}
	}
	return h
}

// rawSilent is a hop that answered none of its probes.
func rawSilent(sent int) rawHop { return rawHop{sent: sent} }

// rawDest marks a hop's replies as the destination's.
func rawDest(h rawHop) rawHop {
	for i := range h.replies {
		h.replies[i].dest = true
	}
	return h
}

// rawMixed is a hop answered by several addresses, n replies each, in turn.
func rawMixed(sent int, base float64, by map[string]int) rawHop {
	h := rawHop{sent: sent}
	addrs := make([]string, 0, len(by))
	for a := range by {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	left := map[string]int{}
	for a, n := range by {
		left[a] = n
	}
	for more := true; more; {
		more = false
		for _, a := range addrs {
			if left[a] > 0 {
				h.replies = append(h.replies, reply{addr: a, rtt: base})
				left[a]--
				more = true
			}
		}
	}
	return h
}

func nearUS(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

func hopAddr(i int) string { return "10.0.0." + string(rune('0'+i)) }

func rateLimitedHops(hops []Hop) []int {
	var out []int
	for _, h := range hops {
		if h.RateLimited {
			out = append(out, h.Index)
		}
	}
	return out
}

// TestJudgeVerdict runs scripted traces through summarize and judge.
func TestJudgeVerdict(t *testing.T) {
	tests := []struct {
		name      string
		raw       []rawHop
		destTTL   int
		kind      string
		hop       int
		addedUS   float64 // verdict AddedUS, ±1 µs (0: not checked)
		lossPct   float64 // verdict LossPct, ±0.01 (0: must be 0)
		limited   []int   // hops marked RateLimited
		unreached bool    // the destination did not answer
		delayHop  int     // Verdict.DelayHop
		lossHop   int     // Verdict.LossHop
		hidden    int     // Verdict.LossHiddenFrom
		text      []string
		checkHops func(t *testing.T, hops []Hop)
	}{
		{
			// The issue's: hops 2 to 5 each answered 17 of 60 (a burst of
			// six, then one a second), and a 375 ms queue from hop 3 on.
			name: "every hop but the first rate-limits, the destination too; a queue from hop 3",
			raw: []rawHop{
				rawProbes(hopAddr(1), 60, 0, 60, 10),
				rawTraced(hopAddr(2), linuxLimited(60, 200*time.Millisecond), 80, 10),
				rawTraced(hopAddr(3), linuxLimited(60, 200*time.Millisecond), 375000, 2000),
				rawTraced(hopAddr(4), linuxLimited(60, 200*time.Millisecond), 375200, 2000),
				rawDest(rawTraced(hopAddr(5), linuxLimited(60, 200*time.Millisecond), 375100, 2000)),
			},
			destTTL:  5,
			kind:     "delay",
			hop:      3,
			delayHop: 3,
			addedUS:  376910,
			limited:  []int{2, 3, 4, 5},
			hidden:   2,
			text:     []string{"delay is added at hop 3", "loss from hop 2 on cannot be read", "about one every 1.00 s", "--interval 1s"},
			checkHops: func(t *testing.T, hops []Hop) {
				for _, h := range hops[1:] {
					if h.Received != 17 || h.ReplyEveryMS != 1000 {
						t.Errorf("hop %d: %d answered, one every %v ms; want 17, 1000", h.Index, h.Received, h.ReplyEveryMS)
					}
				}
			},
		},
		{
			name: "every hop rate-limits, the first too",
			raw: []rawHop{
				rawTraced(hopAddr(1), linuxLimited(30, 200*time.Millisecond), 60, 10),
				rawTraced(hopAddr(2), linuxLimited(30, 200*time.Millisecond), 80, 10),
				rawTraced(hopAddr(3), linuxLimited(30, 200*time.Millisecond), 40000, 2000),
				rawDest(rawTraced(hopAddr(4), linuxLimited(30, 200*time.Millisecond), 40100, 2000)),
			},
			destTTL:  4,
			kind:     "delay",
			hop:      3,
			delayHop: 3,
			addedUS:  41910,
			limited:  []int{1, 2, 3, 4},
			hidden:   1,
			text:     []string{"loss from hop 1 on cannot be read: hops 1 to 4 limit"},
		},
		{
			name: "only the destination rate-limits (UDP's port unreachable)",
			raw: []rawHop{
				rawProbes(hopAddr(1), 30, 0, 300, 10),
				rawProbes(hopAddr(2), 30, 0, 400, 10),
				rawDest(rawTraced(hopAddr(3), linuxLimited(30, 200*time.Millisecond), 500, 10)),
			},
			destTTL: 3,
			kind:    "none",
			limited: []int{3},
			hidden:  3,
			text:    []string{"no hop adds notable delay on the way to the end of the path", "loss from hop 3 on cannot be read: hop 3 limits"},
		},
		{
			name: "the last hop that answered rate-limits, the destination never does",
			raw: []rawHop{
				rawProbes(hopAddr(1), 30, 0, 300, 10),
				rawTraced(hopAddr(2), linuxLimited(30, 200*time.Millisecond), 400, 10),
				rawSilent(30),
				rawSilent(30),
			},
			unreached: true,
			kind:      "none",
			limited:   []int{2},
			hidden:    2,
			text:      []string{"on the way to the last hop that answered", "loss from hop 2 on cannot be read"},
		},
		{
			name: "routers rate-limit, the destination answers all (ICMP echo)",
			raw: []rawHop{
				rawProbes(hopAddr(1), 30, 0, 300, 10),
				rawTraced(hopAddr(2), linuxLimited(30, 200*time.Millisecond), 400, 10),
				rawTraced(hopAddr(3), linuxLimited(30, 200*time.Millisecond), 40000, 10),
				rawDest(rawProbes(hopAddr(4), 30, 0, 40100, 10)),
			},
			destTTL:  4,
			kind:     "delay",
			hop:      3,
			delayHop: 3,
			addedUS:  39600,
			limited:  []int{2, 3},
		},
		{
			name: "random loss from hop 2 on, a queue from hop 3: both named",
			raw: []rawHop{
				rawProbes(hopAddr(1), 20, 0, 300, 10),
				rawTraced(hopAddr(2), pattern("11011110111101111011", 200*time.Millisecond, time.Millisecond), 400, 10),
				rawTraced(hopAddr(3), pattern("11110111101111011110", 200*time.Millisecond, time.Millisecond), 40400, 10),
				rawDest(rawTraced(hopAddr(4), pattern("01111011110111101111", 200*time.Millisecond, time.Millisecond), 40500, 10)),
			},
			destTTL:  4,
			kind:     "loss",
			hop:      2,
			lossHop:  2,
			delayHop: 3,
			lossPct:  20,
			text:     []string{"loss starts at hop 2", "delay is added at hop 3"},
		},
		{
			name: "clean path",
			raw: []rawHop{
				rawProbes(hopAddr(1), 10, 0, 200, 10),
				rawProbes(hopAddr(2), 10, 0, 300, 10),
				rawProbes(hopAddr(3), 10, 0, 450, 10),
				rawProbes(hopAddr(4), 10, 0, 400, 10), // faster than hop 3
				rawProbes(hopAddr(5), 10, 0, 600, 10),
				rawDest(rawProbes(hopAddr(6), 10, 0, 700, 10)),
			},
			destTTL: 6,
			kind:    "none",
			checkHops: func(t *testing.T, hops []Hop) {
				want := []Added{
					{P50: 210, P99: 220}, // against nothing
					{P50: 100, P99: 100},
					{P50: 150, P99: 150},
					{P50: 0, P99: 0},     // clamped: 410 − 460
					{P50: 200, P99: 200}, // against hop 4, the previous responder
					{P50: 100, P99: 100},
				}
				for i, w := range want {
					if hops[i].AddedUS != w {
						t.Errorf("hop %d AddedUS = %+v, want %+v", i+1, hops[i].AddedUS, w)
					}
				}
				if !hops[5].Destination || hops[4].Destination {
					t.Errorf("Destination: hop 5 %v, hop 6 %v; want false, true", hops[4].Destination, hops[5].Destination)
				}
				if hops[2].QueueUS != 20 {
					t.Errorf("hop 3 QueueUS = %v, want 20", hops[2].QueueUS)
				}
			},
		},
		{
			name: "lab: hop 2 rate-limits ICMP, hop 3 adds 40 ms",
			raw: []rawHop{
				rawProbes(hopAddr(1), 10, 0, 300, 10),
				rawProbes(hopAddr(2), 10, 6, 500, 10), // 60 % loss here only
				rawProbes(hopAddr(3), 10, 0, 40500, 10),
				rawProbes(hopAddr(4), 10, 0, 40700, 10),
				rawProbes(hopAddr(5), 10, 0, 40800, 10),
				rawDest(rawProbes(hopAddr(6), 10, 0, 41000, 10)),
			},
			destTTL:  6,
			delayHop: 3,
			kind:     "delay",
			hop:      3,
			addedUS:  40200, // floor 40510 − hop 1's 310: rate-limited hop 2 is not a base
			limited:  []int{2},
			checkHops: func(t *testing.T, hops []Hop) {
				if hops[1].LossPct != 60 || hops[1].Received != 4 {
					t.Errorf("hop 2 loss %v %% received %d, want 60 %% 4", hops[1].LossPct, hops[1].Received)
				}
			},
		},
		{
			name: "slow-path reply at hop 2",
			raw: []rawHop{
				rawProbes(hopAddr(1), 10, 0, 300, 10),
				rawProbes(hopAddr(2), 10, 0, 30000, 10),
				rawProbes(hopAddr(3), 10, 0, 1000, 10),
				rawProbes(hopAddr(4), 10, 0, 1000, 10),
				rawDest(rawProbes(hopAddr(5), 10, 0, 1000, 10)),
			},
			destTTL: 5,
			kind:    "none",
			limited: []int{2},
		},
		{
			name: "loss from hop 4 on",
			raw: []rawHop{
				rawProbes(hopAddr(1), 20, 0, 300, 10),
				rawProbes(hopAddr(2), 20, 0, 400, 10),
				rawProbes(hopAddr(3), 20, 0, 500, 10),
				rawProbes(hopAddr(4), 20, 4, 600, 10),
				rawProbes(hopAddr(5), 20, 4, 700, 10),
				rawDest(rawProbes(hopAddr(6), 20, 4, 800, 10)),
			},
			destTTL: 6,
			lossHop: 4,
			kind:    "loss",
			hop:     4,
			lossPct: 20,
		},
		{
			name: "delay and loss from hop 3 on",
			raw: []rawHop{
				rawProbes(hopAddr(1), 10, 0, 300, 10),
				rawProbes(hopAddr(2), 10, 0, 500, 10),
				rawProbes(hopAddr(3), 10, 2, 20500, 10),
				rawProbes(hopAddr(4), 10, 2, 20600, 10),
				rawDest(rawProbes(hopAddr(5), 10, 2, 20700, 10)),
			},
			destTTL:  5,
			delayHop: 3, lossHop: 3,
			kind:    "delay+loss",
			hop:     3,
			addedUS: 20000,
			lossPct: 20,
		},
		{
			// +5 ms at hop 3 is under 20 % of a ~45 ms path; +40 ms at hop 5
			// is the verdict.
			name: "propagation under the share of the path",
			raw: []rawHop{
				rawProbes(hopAddr(1), 10, 0, 300, 10),
				rawProbes(hopAddr(2), 10, 0, 500, 10),
				rawProbes(hopAddr(3), 10, 0, 5500, 10),
				rawProbes(hopAddr(4), 10, 0, 5600, 10),
				rawProbes(hopAddr(5), 10, 0, 45500, 10),
				rawDest(rawProbes(hopAddr(6), 10, 0, 45600, 10)),
			},
			destTTL:  6,
			delayHop: 5,
			kind:     "delay",
			hop:      5,
			addedUS:  39900,
		},
		{
			name: "one lost probe is not loss",
			raw: []rawHop{
				rawProbes(hopAddr(1), 10, 0, 300, 10),
				rawProbes(hopAddr(2), 10, 1, 400, 10), // 10 % but one probe
				rawProbes(hopAddr(3), 10, 1, 500, 10),
				rawDest(rawProbes(hopAddr(4), 10, 1, 600, 10)),
			},
			destTTL: 4,
			kind:    "none",
		},
		{
			name: "silent hop in the middle",
			raw: []rawHop{
				rawProbes(hopAddr(1), 10, 0, 300, 10),
				rawSilent(10),
				rawProbes(hopAddr(3), 10, 0, 500, 10),
				rawProbes(hopAddr(4), 10, 0, 600, 10),
				rawDest(rawProbes(hopAddr(5), 10, 0, 700, 10)),
			},
			destTTL: 5,
			kind:    "none",
			checkHops: func(t *testing.T, hops []Hop) {
				h := hops[1]
				if h.Received != 0 || h.Address != "" || h.LossPct != 100 || h.Sent != 10 {
					t.Errorf("hop 2 = received %d address %q loss %v sent %d; want 0 \"\" 100 10",
						h.Received, h.Address, h.LossPct, h.Sent)
				}
				if h.Histogram == nil || len(h.Histogram) != 0 {
					t.Errorf("hop 2 Histogram = %#v, want empty, non-nil", h.Histogram)
				}
				// Hop 3 adds against hop 1, the previous responder.
				if want := (Added{P50: 200, P99: 200}); hops[2].AddedUS != want {
					t.Errorf("hop 3 AddedUS = %+v, want %+v", hops[2].AddedUS, want)
				}
			},
		},
		{
			name: "silent hop before the hop that adds delay",
			raw: []rawHop{
				rawProbes(hopAddr(1), 10, 0, 300, 10),
				rawSilent(10),
				rawProbes(hopAddr(3), 10, 0, 30300, 10),
				rawDest(rawProbes(hopAddr(4), 10, 0, 30400, 10)),
			},
			destTTL:  4,
			delayHop: 3,
			kind:     "delay",
			hop:      3,
			addedUS:  30000,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hops := summarize(tc.raw, tc.destTTL)
			want := len(tc.raw)
			for tc.unreached && tc.raw[want-1].replies == nil {
				want--
			}
			if len(hops) != want {
				t.Fatalf("summarize: %d hops, want %d", len(hops), want)
			}
			for i, h := range hops {
				if h.Index != i+1 {
					t.Errorf("hops[%d].Index = %d", i, h.Index)
				}
			}
			v, _ := judge(hops, !tc.unreached)
			if v.DelayHop != tc.delayHop || v.LossHop != tc.lossHop || v.LossHiddenFrom != tc.hidden {
				t.Errorf("delay_hop %d loss_hop %d loss_hidden_from %d, want %d %d %d (%s)", v.DelayHop, v.LossHop, v.LossHiddenFrom, tc.delayHop, tc.lossHop, tc.hidden, v.Text)
			}
			for _, w := range tc.text {
				if !strings.Contains(v.Text, w) {
					t.Errorf("verdict text %q lacks %q", v.Text, w)
				}
			}
			if v.Kind != tc.kind || v.Hop != tc.hop {
				t.Errorf("verdict = %q at hop %d, want %q at hop %d (%s)", v.Kind, v.Hop, tc.kind, tc.hop, v.Text)
			}
			if tc.hop > 0 && v.Address != hops[tc.hop-1].Address {
				t.Errorf("verdict address %q, want hop %d's %q", v.Address, tc.hop, hops[tc.hop-1].Address)
			}
			if tc.hop == 0 && v.Address != "" {
				t.Errorf("verdict address %q, want none", v.Address)
			}
			if tc.addedUS != 0 && !nearUS(v.AddedUS, tc.addedUS, 1) {
				t.Errorf("verdict AddedUS = %v, want %v", v.AddedUS, tc.addedUS)
			}
			if !nearUS(v.LossPct, tc.lossPct, 0.01) {
				t.Errorf("verdict LossPct = %v, want %v", v.LossPct, tc.lossPct)
			}
			if v.Text == "" {
				t.Error("verdict has no text")
			}
			if got := rateLimitedHops(hops); !slices.Equal(got, tc.limited) {
				t.Errorf("RateLimited hops = %v, want %v", got, tc.limited)
			}
			// A hop named may limit its reply rate (its replies still
			// time the path), never be slow or lossy on its own.
			if tc.hop > 0 && hops[tc.hop-1].RateLimited && !hops[tc.hop-1].ReplyRateLimited {
				t.Errorf("verdict hop %d is marked RateLimited for its own delay or loss", tc.hop)
			}
			if tc.checkHops != nil {
				tc.checkHops(t, hops)
			}
		})
	}
}

// TestSummarizeEnd checks where the hop list ends.
func TestSummarizeEnd(t *testing.T) {
	answering := func(n int) []rawHop {
		var raw []rawHop
		for i := 1; i <= n; i++ {
			raw = append(raw, rawProbes(hopAddr(i), 5, 0, 100*float64(i), 10))
		}
		return raw
	}
	tests := []struct {
		name    string
		raw     []rawHop
		destTTL int
		want    int
	}{
		{"unreachable, hops 5..8 silent", append(answering(4), rawSilent(5), rawSilent(5), rawSilent(5), rawSilent(5)), 0, 4},
		{"unreachable, silent hop 2 kept", append([]rawHop{rawProbes(hopAddr(1), 5, 0, 100, 10), rawSilent(5)}, answering(3)[2:]...), 0, 3},
		{"destination at TTL 5 of 8", append(answering(5), answering(8)[5:]...), 5, 5},
		{"destination past the raw hops", answering(3), 9, 3},
		{"nothing answered", []rawHop{rawSilent(5), rawSilent(5)}, 0, 0},
		{"no raw hops", nil, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hops := summarize(tc.raw, tc.destTTL)
			if len(hops) != tc.want {
				t.Fatalf("summarize: %d hops, want %d", len(hops), tc.want)
			}
			v, jf := judge(hops, true)
			if v.Kind != "none" || v.Hop != 0 || jf != 0 {
				t.Errorf("judge = %+v, jitter from %d; want none, 0", v, jf)
			}
			if tc.want > 0 && hops[tc.want-1].Received == 0 {
				t.Errorf("last hop %d answered nothing", tc.want)
			}
		})
	}
}

// TestSummarizeAddresses checks the most frequent responder and Others.
func TestSummarizeAddresses(t *testing.T) {
	tests := []struct {
		name   string
		by     map[string]int
		addr   string
		others []string
	}{
		{"ECMP 7 vs 3", map[string]int{"10.0.2.1": 3, "10.0.2.2": 7}, "10.0.2.2", []string{"10.0.2.1"}},
		{"three, most frequent first", map[string]int{"10.0.2.1": 2, "10.0.2.2": 3, "10.0.2.3": 5}, "10.0.2.3", []string{"10.0.2.2", "10.0.2.1"}},
		{"one address", map[string]int{"10.0.2.9": 10}, "10.0.2.9", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw := []rawHop{rawProbes(hopAddr(1), 10, 0, 300, 10), rawMixed(10, 500, tc.by), rawProbes(hopAddr(3), 10, 0, 700, 10)}
			hops := summarize(raw, 0)
			h := hops[1]
			if h.Address != tc.addr || !slices.Equal(h.Others, tc.others) {
				t.Errorf("Address %q Others %q, want %q %q", h.Address, h.Others, tc.addr, tc.others)
			}
			if h.Received != 10 || h.LossPct != 0 {
				t.Errorf("received %d loss %v, want 10 0", h.Received, h.LossPct)
			}
		})
	}
}

func TestPercentiles(t *testing.T) {
	seq := func(n int) []float64 {
		var s []float64
		for i := n; i >= 1; i-- {
			s = append(s, float64(i))
		}
		return s
	}
	tests := []struct {
		name string
		in   []float64
		want RTT
	}{
		{"one", []float64{42}, RTT{42, 42, 42, 42, 42}},
		{"shuffled 1..10", []float64{10, 1, 9, 2, 8, 3, 7, 4, 6, 5}, RTT{Min: 1, P50: 5, P90: 9, P99: 10, Max: 10}},
		{"1..100", seq(100), RTT{Min: 1, P50: 50, P90: 90, P99: 99, Max: 100}},
		{"1..1000", seq(1000), RTT{Min: 1, P50: 500, P90: 900, P99: 990, Max: 1000}},
		{"1..3", seq(3), RTT{Min: 1, P50: 2, P90: 3, P99: 3, Max: 3}},
		{"rounded to 0.1", []float64{1.26, 2.04}, RTT{Min: 1.3, P50: 1.3, P90: 2, P99: 2, Max: 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.in)
			if got := percentiles(in); got != tc.want {
				t.Errorf("percentiles = %+v, want %+v", got, tc.want)
			}
			if !slices.Equal(in, tc.in) {
				t.Error("percentiles reordered its input")
			}
		})
	}
}

func TestJitter(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{100}, 0},
		{[]float64{100, 100, 100}, 0},
		{[]float64{100, 110, 105, 125}, 35.0 / 3},
		{[]float64{0, 1000, 0, 1000}, 1000},
	}
	for _, tc := range tests {
		if got := jitter(tc.in); !nearUS(got, tc.want, 1e-9) {
			t.Errorf("jitter(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestHistogram(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		want map[float64]int // LeUS → count, for the buckets named
	}{
		{"small", []float64{40, 50, 51, 150, 999, 1000, 1001, 30000},
			map[float64]int{50: 2, 100: 1, 200: 1, 500: 0, 1000: 2, 2000: 1, 50000: 1}},
		{"one", []float64{7}, map[float64]int{50: 1}},
		{"seconds", []float64{1.5e6, 3e6}, map[float64]int{2e6: 1, 5e6: 1}},
		{"7 s", []float64{7e6}, map[float64]int{1e7: 1}},
		{"30 s", []float64{3e7}, map[float64]int{6e7: 1}},
		{"59 s", []float64{100, 5.9e7}, map[float64]int{50: 0, 100: 1, 6e7: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := histogram(tc.in)
			sum := 0
			for i, b := range got {
				sum += b.Count
				if i > 0 && b.LeUS <= got[i-1].LeUS {
					t.Errorf("bucket %d LeUS %v not above bucket %d's %v", i, b.LeUS, i-1, got[i-1].LeUS)
				}
			}
			if sum != len(tc.in) {
				t.Errorf("counts sum to %d, want %d", sum, len(tc.in))
			}
			if top := slices.Max(tc.in); got[len(got)-1].LeUS < top {
				t.Errorf("last bucket LeUS %v < max RTT %v", got[len(got)-1].LeUS, top)
			}
			for le, n := range tc.want {
				found := false
				for i, b := range got {
					lo := 0.0
					if i > 0 {
						lo = got[i-1].LeUS
					}
					if b.LeUS == le {
						found = true
						c := 0
						for _, r := range tc.in {
							if r > lo && r <= le {
								c++
							}
						}
						if b.Count != n || c != n {
							t.Errorf("bucket ≤ %v: count %d, want %d", le, b.Count, n)
						}
						break
					}
				}
				if !found {
					t.Errorf("no bucket ≤ %v in %v", le, got)
				}
			}
		})
	}
}

// TestBucketEdges checks the histogram's edges: 1-2-5 steps, increasing, from
// 50 µs to 60 s.
func TestBucketEdges(t *testing.T) {
	if bucketEdges[0] != 50 || bucketEdges[len(bucketEdges)-1] != 6e7 {
		t.Errorf("edges run %v..%v, want 50..6e7", bucketEdges[0], bucketEdges[len(bucketEdges)-1])
	}
	for i := 1; i < len(bucketEdges); i++ {
		if bucketEdges[i] <= bucketEdges[i-1] {
			t.Errorf("bucketEdges[%d] = %v not above bucketEdges[%d] = %v (%v)", i, bucketEdges[i], i-1, bucketEdges[i-1], bucketEdges)
			break
		}
	}
}

func TestResultJSON(t *testing.T) {
	raw := []rawHop{
		rawProbes(hopAddr(1), 10, 0, 300, 10),
		rawSilent(10),
		rawProbes(hopAddr(3), 10, 6, 40500, 10),
		rawMixed(10, 3e7, map[string]int{"10.0.0.8": 7, "10.0.0.9": 3}),
		rawDest(rawProbes(hopAddr(5), 10, 0, 40800, 10)),
	}
	res := Result{Target: "example", Address: "10.0.0.5", Proto: UDP, Port: DefaultUDPPort, Count: 10,
		Interval: time.Second, Reached: true, Started: time.Unix(0, 0).UTC()}
	res.Hops = summarize(raw, 5)
	res.Verdict, res.JitterFrom = judge(res.Hops, true)
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	s := string(b)
	for _, bad := range []string{"Inf", "NaN"} {
		if strings.Contains(s, bad) {
			t.Errorf("JSON contains %s: %s", bad, s)
		}
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("json.Unmarshal: %v", err)
	}
	if len(back.Hops) != 5 || back.Hops[3].Address != "10.0.0.8" || back.Verdict.Kind != res.Verdict.Kind ||
		!slices.Equal(back.Hops[3].Others, []string{"10.0.0.9"}) || back.Hops[4].RTT != res.Hops[4].RTT {
		t.Errorf("round trip lost data: %s", s)
	}
	if !strings.Contains(s, `"rtt_us":{"min":300,"p50":310,"p90":320,"p99":320,"max":320}`) {
		t.Errorf("hop 1 RTT not as expected in %s", s)
	}
}

func TestJudgeJitterFrom(t *testing.T) {
	tests := []struct {
		name    string
		spreads []float64 // per hop; jitter is 4/3 of it
		want    int
	}{
		{"steady", []float64{10, 10, 10, 10, 10, 10}, 0},
		{"rises at hop 3 and stays", []float64{10, 10, 600, 600, 600, 600}, 3},
		{"rises at hop 4, more at 5", []float64{10, 10, 10, 600, 900, 700}, 4},
		{"hop 3 only", []float64{10, 10, 600, 10, 10, 10}, 0},
		{"at the destination only", []float64{10, 10, 10, 10, 10, 600}, 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var raw []rawHop
			for i, s := range tc.spreads {
				raw = append(raw, rawProbes(hopAddr(i+1), 10, 0, 200+50*float64(i), s))
			}
			hops := summarize(raw, len(raw))
			if j := hops[2].JitterUS; !nearUS(j, 4.0/3*tc.spreads[2], 0.1) {
				t.Errorf("hop 3 JitterUS = %v, want %v", j, 4.0/3*tc.spreads[2])
			}
			v, got := judge(hops, true)
			if got != tc.want {
				t.Errorf("jitter from %d, want %d", got, tc.want)
			}
			if v.Kind != "none" {
				t.Errorf("verdict %q at hop %d, want none (%s)", v.Kind, v.Hop, v.Text)
			}
		})
	}
}
