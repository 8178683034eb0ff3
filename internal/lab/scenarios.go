package lab

import (
	"fmt"
	"time"
)

// The scenarios, one per runbook problem. Every expectation says where its
// figure comes from: a runbook's own measurement (docs/runbooks.md), or
// lowlat's prediction where the runbook measured nothing the lab can
// reproduce, with the reasoning behind it. A run that misses one reports it
// as failed, with the figure; the tests whitelist nothing.

const runbook003TBF = `
name = "runbook-003-tbf"
summary = "Runbook 003's second fix, verbatim: tbf at 97.5 % of the provider rate with 300 ms of buffer"
source = "docs/runbooks.md#003-bufferbloat-behind-a-capped-uplink"

[qdisc.root]
value = "tbf rate 1950kbit burst 4096 latency 300ms"
why = "runbook 003: tc qdisc add dev eth0 root handle 1: tbf latency 300ms burst 4096 rate 1.95mbit"
source = "docs/runbooks.md#003-bufferbloat-behind-a-capped-uplink"
`

// sockopsIW40 is initcwnd 40 for the reflector's connections alone,
// through lowlat's sock_ops program: runbook 004's window without touching
// a route.
var sockopsIW40 = fmt.Sprintf(`
name = "sockops-initcwnd-40"
summary = "initcwnd 40 on the server's connections through sock_ops (lowlat sockets --fix initcwnd=40 --port %d)"

[[sockets]]
match = "port:%d"
initcwnd = 40
why = "runbook 004: a larger first flight for the viewer's first frame, per service instead of per route"
source = "docs/runbooks.md#004-time-to-first-frame-on-a-streaming-edge"
`, ReflectorPort, ReflectorPort)

// gateKeeps expects the production gate to keep a fix: apply --prove
// without --slo, its p50, p99 and loss not worse than the baseline's beyond
// the noise.
func gateKeeps() Expect {
	return Expect{Metric: "derived.gate_keep", Op: ">=", Value: 1, Unit: "kept",
		Desc: "lowlat: the gate (apply --prove, no --slo) keeps it: p50, p99 and loss not worse than the baseline beyond the noise"}
}

// clientNoDelay is "lowlat sockets --fix nodelay --cgroup" for the lab's
// client application, as a profile: the application's cgroup is the run's.
const clientNoDelay = `
name = "nodelay-for-the-client"
summary = "TCP_NODELAY on the client application's connections through sock_ops (lowlat sockets --fix nodelay --cgroup CGROUP)"

[[sockets]]
match = "cgroup:` + ClientCgroup + `"
nodelay = true
why = "runbook 001: the application writes small messages in two parts without TCP_NODELAY, and its code cannot change"
source = "docs/runbooks.md#001-small-tcp-messages-and-nagle"
`

// uplinkRate is the provider's cap in bufferbloat-uplink (Mbit/s).
const uplinkRate = 2.0

func init() {
	bbrOnly := func() *Fix {
		return &Fix{Profile: "capped-uplink", Sets: map[string]string{"rate": "2mbit"}, Only: []string{"sysctl.net.ipv4.tcp_congestion_control"}, Side: "client",
			Require: []string{"sysctl.net.ipv4.tcp_congestion_control"}}
	}
	register(&Scenario{
		Name: "bufferbloat-uplink", Runbook: "003",
		Title:   "A 2 Mbit/s uplink with a 5 s provider buffer: RTT under upload",
		Summary: "2 Mbit/s uplink, ~5 s provider buffer, base RTT 40 ms: baseline vs BBR (1 and 4 flows) vs runbook tbf vs capped-uplink",
		Problem: "The provider caps the uplink at 2 Mbit/s and buffers about 5 s of traffic without dropping: a running upload " +
			"(probe load --upload, 4 TCP flows) queues every packet behind seconds of data. Fixes side by side: BBR alone (the " +
			"runbook's first fix) with the runbook's single upload and with 4 flows, the runbook's tbf at 97.5 % of the cap with " +
			"300 ms of latency, and lowlat's capped-uplink profile (shaper at 90 % of the cap with a fair-queueing AQM leaf, chosen " +
			"by kernel support).",
		Topo:     TopoSpec{Up: Path{Rate: "2mbit", Buffer: Duration(5 * time.Second)}, Down: Path{Delay: Duration(40 * time.Millisecond)}},
		Estimate: 120 * time.Second,
		Key: []Expect{
			{Metric: "derived.idle_p50_ms", Unit: "ms", Desc: "idle RTT p50"},
			{Metric: "derived.loaded_p50_ms", Unit: "ms", Desc: "RTT p50 under upload"},
			{Metric: "derived.loaded_p99_ms", Unit: "ms", Desc: "RTT p99 under upload"},
			{Metric: "derived.goodput_up_mbps", Unit: "Mbit/s", Desc: "upload goodput"},
			{Metric: "derived.passive_rtt_p50_ms", Unit: "ms", Desc: "passive: the uploads' own TCP RTT p50 (kernel, real ACKs)"},
			{Metric: "derived.passive_rtt_p99_ms", Unit: "ms", Desc: "passive: the uploads' own TCP RTT p99"},
		},
		Passive: passiveRTT(false, ReflectorPort),
		Variants: []Variant{
			{Name: "baseline", Desc: "no fix: the provider's buffer fills",
				Expect: []Expect{{Metric: "derived.loaded_p99_ms", Op: ">=", Value: 4000, Unit: "ms",
					Desc: "runbook 003: ping passed 5,000 ms under upload, nothing lost; the lab's provider buffers 5 s, so p99 ≥ 4,000 ms (the buffer at least four-fifths full)"}}},
			{Name: "bbr-1-flow", Desc: "runbook 003's first fix as it was measured: BBR on the uploading host, one upload flow (its scp)",
				Fix: bbrOnly(), App: App{Flows: 1, Change: "one upload flow, as the runbook's scp"},
				Expect: []Expect{
					gateKeeps(),
					{Metric: "derived.loaded_p50_ms", Op: "<", Value: 200, Unit: "ms", Desc: "runbook 003: with BBR and one upload, ping about 100 ms instead of seconds (it says mostly under 100 ms); lowlat: BBR v1 keeps about one BDP plus three send bursts queued, ~120 ms at this 40 ms base: p50 < 200 ms (5 × base)"},
					{Metric: "derived.goodput_share", Op: ">=", Value: 0.85, Unit: "of cap", Desc: "runbook 003: with BBR the link stays full (goodput ≥ 85 % of the cap; headers take 4.4 %)"},
				}},
			{Name: "bbr-4-flows", Desc: "BBR alone with 4 upload flows: lowlat's own finding",
				Fix: bbrOnly(),
				Expect: []Expect{
					gateKeeps(),
					{Metric: "derived.loaded_p50_ms", Op: ">", Value: 200, Unit: "ms", Desc: "lowlat: BBR alone does not hold with 4 flows: each keeps its own send bursts and a BDP estimate inflated by the others' queue, ~300 ms in the provider's buffer: p50 > 200 ms (5 × base)"},
					{Metric: "derived.goodput_share", Op: ">=", Value: 0.85, Unit: "of cap", Desc: "lowlat: the link stays full (goodput ≥ 85 % of the cap)"},
				}},
			{Name: "runbook-tbf", Desc: "runbook 003's second fix verbatim: tbf rate 1.95mbit burst 4096 latency 300ms",
				Fix: &Fix{Profile: "runbook-003-tbf", Inline: runbook003TBF, Side: "client", Require: []string{"qdisc.root"}},
				Expect: []Expect{
					gateKeeps(),
					{Metric: "derived.added_p99_ms", Op: "<=", Value: 350, Unit: "ms", Desc: "runbook 003: about 300 ms with its tbf, whose bound is its 300 ms latency plus the 4096-byte burst (317 ms): p99 − idle p50 ≤ 350 ms"},
					{Metric: "derived.goodput_share", Op: ">=", Value: 0.85, Unit: "of cap", Desc: "runbook 003: throughput almost 2 Mbit/s (goodput ≥ 85 % of the cap)"},
				}},
			{Name: "capped-uplink", Desc: "lowlat's capped-uplink profile (--set rate=2mbit)",
				Fix: &Fix{Profile: "capped-uplink", Sets: map[string]string{"rate": "2mbit"}, Side: "client", Require: []string{"qdisc.root"}},
				Expect: []Expect{
					gateKeeps(),
					{Metric: "derived.added_p99_ms", Op: "<=", Value: 25, Unit: "ms", Desc: "lowlat: p99 ≤ base + 25 ms (base = idle RTT p50): the queue lives here, under the profile's 20 ms bound at worst"},
					{Metric: "derived.goodput_share", Op: ">=", Value: 0.7, Unit: "of cap", Desc: "lowlat: goodput ≥ 70 % of the cap: the shaper runs at 90 % and headers take 4.4 % (86 % at most); the plain-tbf fallback's 20 ms queue costs a few percent more"},
				}},
		},
	})

	register(&Scenario{
		Name: "nagle-small-messages", Runbook: "001",
		Title:   "Small messages written in two parts: Nagle + delayed ACK",
		Summary: "write-write-read of 64 B messages without TCP_NODELAY (~40 ms stall) vs TCP_NODELAY, with and without realtime-tcp",
		Problem: "The sender writes each 64-byte message in two parts and waits for the reply, with Nagle's algorithm on (no TCP_NODELAY). " +
			"The second part waits for the ACK of the first, which the peer delays by ~40 ms. The fix is TCP_NODELAY, set by the " +
			"application on its socket; no sysctl can set it, so the realtime-tcp profile alone leaves the stall.",
		Topo:     TopoSpec{},
		Estimate: 35 * time.Second,
		Key: []Expect{
			{Metric: "derived.p50_ms", Unit: "ms", Desc: "request RTT p50"},
			{Metric: "derived.p99_ms", Unit: "ms", Desc: "request RTT p99"},
			{Metric: "derived.passive_rtt_p50_ms", Unit: "ms", Desc: "passive: the client's TCP RTT samples p50 (the server's delayed ACK shows in them)"},
			{Metric: "derived.passive_rtt_p99_ms", Unit: "ms", Desc: "passive: the client's TCP RTT samples p99"},
		},
		Passive: passiveRTT(false, ReflectorPort),
		Variants: []Variant{
			{Name: "baseline", Desc: "Nagle on both ends (no TCP_NODELAY)", App: App{Nagle: true},
				Expect: []Expect{{Metric: "derived.p50_ms", Op: ">=", Value: 35, Unit: "ms", Desc: "runbook 001's stall: Linux delays the ACK the second write waits for by at least 40 ms (p50 ≥ 35 ms)"}}},
			{Name: "realtime-tcp", Desc: "the realtime-tcp profile alone, Nagle still on", App: App{Nagle: true},
				Fix:    &Fix{Profile: "realtime-tcp", Side: "client"},
				Expect: []Expect{{Metric: "derived.p50_ms", Op: ">=", Value: 35, Unit: "ms", Desc: "runbook 001: no sysctl sets TCP_NODELAY, so the profile alone leaves the stall (p50 ≥ 35 ms)"}}},
			{Name: "nodelay", Desc: "TCP_NODELAY on both ends (the application's fix)",
				App: App{Change: "TCP_NODELAY on both ends (the application's setsockopt)"},
				Expect: []Expect{
					gateKeeps(), {Metric: "derived.p50_ms", Op: "<", Value: 5, Unit: "ms", Desc: "runbook 001's fix: with TCP_NODELAY the stall is gone; the lab's path has no delay, so p50 < 5 ms (an eighth of the stall)"}}},
			{Name: "sockops-nodelay", Desc: "lowlat enforces TCP_NODELAY from outside (sock_ops on the client application's cgroup); the application unchanged, Nagle still on in its code",
				App: App{Nagle: true, OwnProcess: true},
				Fix: &Fix{Profile: "nodelay-for-the-client", Inline: clientNoDelay, Side: "client", Require: []string{"sockets.cgroup:" + ClientCgroup + "/nodelay"}},
				Expect: []Expect{
					gateKeeps(), {Metric: "derived.p50_ms", Op: "<", Value: 5, Unit: "ms", Desc: "lowlat: with TCP_NODELAY enforced on the application's new connections the stall is gone as with the application's own fix (p50 < 5 ms)"}}},
			{Name: "nodelay+realtime-tcp", Desc: "TCP_NODELAY and the realtime-tcp profile",
				Fix:    &Fix{Profile: "realtime-tcp", Side: "client"},
				App:    App{Change: "TCP_NODELAY on both ends (the application's setsockopt)"},
				Expect: []Expect{{Metric: "derived.p50_ms", Op: "<", Value: 5, Unit: "ms", Desc: "runbook 001's fix with its system profile: no stall (p50 < 5 ms)"}}},
		},
	})

	register(&Scenario{
		Name: "path-hops", Runbook: "000",
		Title:   "Where along the path the delay is added: lowlat probe path against mtr",
		Summary: "a client, four routers and a server: hop 2 rate-limits its ICMP, a queue before hop 3, two equal-cost links; lowlat probe path beside mtr",
		Problem: "Runbook 000 began with mtr: the RTT jumped at one hop at peak hours. Reading mtr is where it goes wrong: a router that " +
			"rate-limits its ICMP replies shows loss that does not continue to later hops, and ECMP sends each probe along a different " +
			"path. Here hop 2 rate-limits its time-exceeded replies (Linux's default, 1 per second), a queue sits before hop 3 (netem " +
			"40 ms ± 4 ms, or without netem a tbf kept full by upload flows), and routers 1 and 2 are joined by two equal-cost links " +
			"hashed on ports, the second 5 ms longer. lowlat probe path must name hop 3 and label hop 2 as rate-limited.",
		Topo: TopoSpec{Chain: &Chain{QueueDelay: Duration(40 * time.Millisecond), QueueJitter: Duration(4 * time.Millisecond),
			QueueRate: "20mbit", QueueLimit: "100kb", ECMPDelay: Duration(5 * time.Millisecond)}},
		Estimate: 35 * time.Second,
		Key: []Expect{
			{Metric: "derived.verdict_hop", Unit: "hop", Desc: "the verdict's hop"},
			{Metric: "derived.hop3_added_ms", Unit: "ms", Desc: "delay added at hop 3"},
			{Metric: "derived.queue_ms", Unit: "ms", Desc: "the queue's own delay"},
			{Metric: "derived.hop2_loss_pct", Unit: "%", Desc: "hop 2's loss (lowlat)"},
			{Metric: "derived.mtr_hop2_loss_pct", Unit: "%", Desc: "hop 2's loss (mtr)"},
			{Metric: "derived.lowlat_seconds", Unit: "s", Desc: "lowlat's wall time"},
			{Metric: "derived.mtr_seconds", Unit: "s", Desc: "mtr's wall time, same probes"},
		},
		Variants: []Variant{
			{Name: "baseline", Desc: "lowlat probe path (icmp beside mtr, then udp twice)",
				Expect: []Expect{
					{Metric: "derived.verdict_hop", Op: "between", Value: 2.5, Max: 3.5, Unit: "hop", Desc: "lowlat: the verdict names hop 3, the first whose replies carry the queue's delay"},
					{Metric: "derived.verdict_hop_icmp", Op: "between", Value: 2.5, Max: 3.5, Unit: "hop", Desc: "lowlat: with ICMP echo too"},
					{Metric: "derived.verdict_hop_again", Op: "between", Value: 2.5, Max: 3.5, Unit: "hop", Desc: "lowlat: and again on a second run, on the same flow"},
					{Metric: "derived.same_flow", Op: ">=", Value: 1, Unit: "", Desc: "lowlat: runs to one target keep one flow ID, so ECMP keeps them on one link"},
					{Metric: "derived.hop2_rate_limited", Op: ">=", Value: 1, Unit: "", Desc: "lowlat: hop 2's loss is its ICMP rate limit, labelled, not blamed"},
					{Metric: "derived.other_hops_rate_limited", Op: "<=", Value: 0, Unit: "hops", Desc: "lowlat: no other hop is labelled rate-limited"},
					{Metric: "derived.hop3_added_error_pct", Op: "<=", Value: 20, Unit: "%", Desc: "lowlat: the delay added at hop 3 is the queue's own (netem's, or the tbf's backlog over its rate) within 20 %"},
					{Metric: "derived.mtr_hop2_loss_pct", Op: ">=", Value: 20, Unit: "%", Desc: "lowlat: mtr's report shows loss at hop 2, where lowlat says rate limit"},
					{Metric: "derived.mtr_max_diff_pct", Op: "<=", Value: 20, Unit: "%", Desc: "lowlat: every hop past the queue agrees with mtr run beside it within 20 % (lowlat's median, mtr's mean)"},
				}},
			{Name: "tcp", Desc: "lowlat probe path --proto tcp: SYNs to the reflector's port, answered with SYN-ACK",
				Expect: []Expect{
					{Metric: "derived.verdict_hop", Op: "between", Value: 2.5, Max: 3.5, Unit: "hop", Desc: "lowlat: the verdict names hop 3 with TCP probes too"},
					{Metric: "derived.hop2_rate_limited", Op: ">=", Value: 1, Unit: "", Desc: "lowlat: hop 2's loss is labelled rate-limited"},
					{Metric: "derived.hop3_added_error_pct", Op: "<=", Value: 20, Unit: "%", Desc: "lowlat: the delay added at hop 3 is the queue's own within 20 %"},
				}},
		},
	})

	liveEdge := func(only ...string) *Fix {
		return &Fix{Profile: "live-edge", Only: only, Side: "server", Require: only}
	}
	register(&Scenario{
		Name: "first-frame", Runbook: "004",
		Title:   "Time to first frame at 100 ms RTT: initcwnd, TCP Fast Open, cubic vs BBR",
		Summary: "100 ms RTT, 300 KB and 1 MB responses by probe crr: initcwnd 10 vs 40 per route, TFO, cubic vs BBR",
		Problem: "A viewer 100 ms away opens a stream: connect, a 200-byte request, a 300 KB (first key frame and more) and a 1 MB response. " +
			"Slow start decides how many round trips that takes: initcwnd 10 needs about 8 RTT for 1 MB with the handshake, initcwnd 40 " +
			"(set on every route of the server's interface by the knob engine) about 6; TCP Fast Open brings the first byte one round " +
			"trip sooner on repeat connections.",
		Topo:       TopoSpec{Up: Path{Delay: Duration(50 * time.Millisecond)}, Down: Path{Delay: Duration(50 * time.Millisecond)}},
		NeedsNetem: "the 100 ms RTT that makes slow start's round trips visible",
		Estimate:   70 * time.Second,
		Key: []Expect{
			{Metric: "derived.rtt_ms", Unit: "ms", Desc: "path RTT p50"},
			{Metric: "derived.last_byte_300k_ms", Unit: "ms", Desc: "300 KB p50"},
			{Metric: "derived.last_byte_1m_ms", Unit: "ms", Desc: "1 MB p50"},
			{Metric: "derived.last_byte_1m_rtts", Unit: "RTT", Desc: "1 MB in RTTs"},
			{Metric: "derived.passive_first_300k_ms", Unit: "ms", Desc: "passive: server's time to deliver the first 300 KB, mean (SYN to ACK)"},
			{Metric: "derived.passive_first_1m_ms", Unit: "ms", Desc: "passive: server's time to deliver the first 1 MB, mean"},
		},
		Passive: passiveFirstBytes(ReflectorPort),
		Variants: []Variant{
			{Name: "baseline", Desc: "initcwnd 10 (kernel default), no server TFO",
				Expect: []Expect{{Metric: "derived.last_byte_1m_rtts", Op: "between", Value: 7, Max: 9, Unit: "RTT",
					Desc: "runbook 004: 1 MB in about 900 ms at a 103 ms RTT (8.7 RTT) with initcwnd 10; lowlat predicts 8 (the handshake and 7 rounds of slow start): 7..9 RTT"}}},
			{Name: "initcwnd-40", Desc: "live-edge's route.initcwnd 40 on every route of the server's interface",
				Fix: liveEdge("route.initcwnd"),
				Expect: []Expect{
					{Metric: "derived.last_byte_1m_rtts", Versus: "baseline", Op: ">=", Value: 0.5, Unit: "RTT",
						Desc: "runbook 004: initcwnd 40 saved round trips on 1 MB (900 → 550 ms; it says 3); lowlat: two doublings of slow start at most, of which a stock Linux viewer's receive window takes one back in some transfers: at least half a round trip sooner than the baseline"},
				}},
			{Name: "sockops-initcwnd-40", Desc: "initcwnd 40 for the server's connections only, through sock_ops (sockets --fix initcwnd=40 --port " + fmt.Sprint(ReflectorPort) + "), routes untouched",
				Fix: &Fix{Profile: "sockops-initcwnd-40", Inline: sockopsIW40, Side: "server", Require: []string{"sockets.port:" + fmt.Sprint(ReflectorPort) + "/initcwnd"}},
				Expect: []Expect{
					{Metric: "derived.last_byte_300k_rtts", Versus: "initcwnd-40", Op: "between", Value: -0.5, Max: 0.5, Unit: "RTT",
						Desc: "lowlat: TCP_BPF_IW at establishment replaces the window the route gave, so 300 KB takes the same round trips as initcwnd 40 on the route (measured 0.01-0.03 RTT apart; 1 MB lands on 6.2 or 7.2 RTT for both, as the viewer's receive window allows: not comparable run to run)"},
					{Metric: "derived.last_byte_1m_rtts", Versus: "baseline", Op: ">=", Value: 0.5, Unit: "RTT",
						Desc: "lowlat: as with initcwnd 40 on the route, at least half a round trip sooner than the baseline"},
				}},
			{Name: "initcwnd-40+tfo", Desc: "initcwnd 40 and TCP Fast Open (server bit by the engine, client uses TFO; repeat connections)",
				Fix: liveEdge("route.initcwnd", "sysctl.net.ipv4.tcp_fastopen"), App: App{FastOpen: true, Change: "the client connects with TCP Fast Open"},
				Expect: []Expect{
					{Metric: "derived.first_byte_1m_rtts", Versus: "initcwnd-40", Op: "between", Value: 0.5, Max: 1.5, Unit: "RTT", Desc: "lowlat: with the server bit (runbook 004 asks for tcp_fastopen ≥ 2) the request rides in the SYN, so the first byte comes one RTT sooner than initcwnd-40 (0.5..1.5)"},
					{Metric: "derived.fastopen_share", Op: ">=", Value: 1, Desc: "lowlat: every measured connection carried its request in the SYN"},
				}},
			{Name: "bbr", Desc: "BBR instead of the default congestion control (initcwnd 10)",
				Fix: liveEdge("sysctl.net.ipv4.tcp_congestion_control")},
			{Name: "live-edge", Desc: "the whole live-edge profile (initcwnd 40, TFO, BBR, fq, buffers), client uses TFO",
				Fix: &Fix{Profile: "live-edge", Side: "server", Require: []string{"route.initcwnd"}}, App: App{FastOpen: true, Change: "the client connects with TCP Fast Open"}},
		},
	})

	// The game server's NIC in game-egress and cross-border-jitter: 10 Mbit/s
	// carrying 4 download flows. Each of the host's own flows keeps only a
	// couple of send bursts in the NIC's queue (TCP small queues), 5-9 KB:
	// 4 flows hold some 20-36 KB, 16-29 ms at 10 Mbit/s (measured: mean 19,
	// p99 23 ms), about what runbook 000 measured at its server before the
	// fix (mean 8.5, p99 21 ms). At a faster NIC the same flows queue less
	// (at 20 Mbit/s the round trip's p99 grew by only 10-12 ms); more flows
	// cost a 2-CPU emulated guest more than it has.
	gameNIC := func() *NIC { return &NIC{Rate: "10mbit", Queue: "pfifo limit 1000"} }
	const gameFlows = 4
	// Server queueing is what runbook 000 reports: the time the server's own
	// game updates spend in its egress qdisc, from the kernel's stamps as
	// each enters the qdisc and leaves for the NIC. The players' round trip
	// (probe udp's game flow) adds the path and both ends' programs.
	gameMetrics := []Expect{
		{Metric: "derived.server_queueing_mean_ms", Unit: "ms", Desc: "server queueing mean (kernel stamps, qdisc in → out)"},
		{Metric: "derived.server_queueing_p99_ms", Unit: "ms", Desc: "server queueing p99"},
		{Metric: "derived.game_idle_p50_ms", Unit: "ms", Desc: "game RTT p50, idle"},
		{Metric: "derived.game_loaded_p99_ms", Unit: "ms", Desc: "game RTT p99 under the download"},
		{Metric: "derived.bulk_mbps", Unit: "Mbit/s", Desc: "bulk download goodput"},
		{Metric: "derived.passive_egress_p99_ms", Unit: "ms", Desc: "passive: egress queueing p99 of every packet the server's NIC sends (kernel)"},
		{Metric: "derived.passive_egress_ef_p99_ms", Unit: "ms", Desc: "passive: egress queueing p99 of the game flow's packets (DSCP EF class, kernel; watch --dscp EF)"},
	}
	register(&Scenario{
		Name: "game-egress", Runbook: "000",
		Title:   "A 10 Mbit/s server egress shared by a bulk download and a 60 Hz game flow",
		Summary: "10 Mbit/s server NIC, 4-flow TCP download + 60 Hz UDP game flow (DSCP EF): default FIFO vs game-udp",
		Problem: "The server's 10 Mbit/s NIC carries a bulk TCP download (4 flows, players fetching a patch) and a 60 Hz UDP game flow " +
			"marked DSCP EF. With the default FIFO the game's packets wait behind the download's: each of the server's own flows keeps " +
			"about two send bursts queued, some 30 ms in all, as runbook 000 measured before its fix (server queueing p99 21 ms). " +
			"lowlat's game-udp profile puts fq_codel at the egress, which serves the sparse game flow first (runbook 000 after: 4.3 ms).",
		Topo: TopoSpec{
			Up: Path{Delay: Duration(10 * time.Millisecond)}, Down: Path{Delay: Duration(10 * time.Millisecond)},
			ServerNIC: gameNIC(),
		},
		Estimate: 50 * time.Second,
		Key:      gameMetrics,
		Passive:  passiveEgress(),
		Variants: []Variant{
			{Name: "baseline", Desc: "default FIFO at the server's egress",
				Expect: []Expect{{Metric: "derived.server_queueing_p99_ms", Op: ">=", Value: 10, Unit: "ms",
					Desc: "runbook 000 before its fix: server queueing p99 21 ms; the baseline must show at least 10 ms"},
					{Metric: "derived.passive_egress_ef_p99_ms", Op: ">=", Value: 10, Unit: "ms",
						Desc: "runbook 000 before its fix, read passively from the game flow's DSCP class, as watch --dscp EF would in production: at least 10 ms"}}},
			{Name: "game-udp", Desc: "lowlat's game-udp profile on the server",
				Fix: &Fix{Profile: "game-udp", Side: "server", Require: []string{"qdisc.root"}},
				Expect: []Expect{
					gateKeeps(),
					{Metric: "derived.server_queueing_p99_ms", Op: "<", Value: 4.3, Unit: "ms", Desc: "runbook 000 after its fix: server queueing p99 4.3 ms; game-udp must beat it"},
					{Metric: "derived.passive_egress_ef_p99_ms", Op: "<", Value: 4.3, Unit: "ms", Desc: "runbook 000 after its fix, read passively from the game flow's DSCP class: under 4.3 ms"},
					{Metric: "derived.bulk_share", Op: ">=", Value: 0.85, Unit: "of NIC", Desc: "lowlat: fair queueing costs the download little (goodput ≥ 85 % of the NIC; headers take 4.4 %)"},
				}},
		},
	})

	register(&Scenario{
		Name: "cross-border-jitter", Runbook: "000",
		Title:   "A 30 ms cross-border path with jitter and 1 % loss: what server-side tuning removes, and what it cannot",
		Summary: "30 ms ± 5 ms path with 1 % loss behind a loaded 10 Mbit/s server NIC: queueing goes, distance, jitter and loss stay",
		Problem: "Runbook 000's FAQ: the physical route (the cross-border bottleneck) sets the floor, server-side queueing is what tuning " +
			"removes. The path here is 30 ms ± 5 ms with 1 % loss toward the players; the server's 10 Mbit/s NIC carries a bulk download " +
			"(4 flows) and the game flow, as in game-egress. game-udp removes the queueing at the NIC; the 30 ms, the path's jitter and " +
			"its loss remain.",
		Topo: TopoSpec{
			Up:        Path{Delay: Duration(15 * time.Millisecond), Jitter: Duration(5 * time.Millisecond)},
			Down:      Path{Delay: Duration(15 * time.Millisecond), Jitter: Duration(5 * time.Millisecond), Loss: 1},
			ServerNIC: gameNIC(),
		},
		NeedsNetem: "the 30 ms path with jitter and loss",
		Estimate:   50 * time.Second,
		Key: append([]Expect{
			{Metric: "derived.game_queueing_p99_ms", Unit: "ms", Desc: "game RTT p99 under load − idle p99"},
			{Metric: "derived.path_loss_pct", Unit: "%", Desc: "game packet loss, both phases"},
		}, gameMetrics[:4]...),
		Variants: []Variant{
			{Name: "baseline", Desc: "default FIFO at the server's egress",
				Expect: []Expect{{Metric: "derived.server_queueing_p99_ms", Op: ">=", Value: 10, Unit: "ms", Desc: "runbook 000 before its fix: server queueing p99 21 ms; the baseline must show at least 10 ms"}}},
			{Name: "game-udp", Desc: "lowlat's game-udp profile on the server",
				Fix: &Fix{Profile: "game-udp", Side: "server", Require: []string{"qdisc.root"}},
				Expect: []Expect{
					{Metric: "derived.server_queueing_p99_ms", Op: "<", Value: 4.3, Unit: "ms", Desc: "runbook 000 after its fix: server queueing p99 4.3 ms; game-udp must beat it"},
					{Metric: "derived.game_loaded_p50_ms", Op: ">=", Value: 27, Unit: "ms", Desc: "runbook 000's FAQ: tuning cannot remove the distance: RTT p50 stays at the path's 30 ms (−10 %)"},
					{Metric: "derived.game_idle_jitter_ms", Op: ">=", Value: 1, Unit: "ms", Desc: "runbook 000's FAQ: nor the path's jitter (RFC 3550 jitter ≥ 1 ms)"},
					{Metric: "derived.path_loss_pct", Op: ">", Value: 0, Unit: "%", Desc: "runbook 000's FAQ: nor its loss: the path's 1 % is still there (> 0 of ~1,000 game packets)"},
				}},
		},
	})
}

// varyingStep is how long each cap of capped-uplink-varying lasts.
const varyingStep = 30 * time.Second

// cappedShare is the share of the provider's rate capped-uplink shapes at
// (its cake's bandwidth ${rate*0.9}).
const cappedShare = 0.9

// varyingCaps are the provider's caps in capped-uplink-varying, in Mbit/s,
// one per step.
var varyingCaps = []float64{2, 1, 3, 2}

func init() {
	capped := func() *Fix {
		return &Fix{Profile: "capped-uplink", Sets: map[string]string{"rate": "2mbit"}, Side: "client", Require: []string{"qdisc.root"}}
	}
	// cappedMSS adds the MSS clamp (issue 31): auto at the profile's shaper
	// rate, 1.8 Mbit/s, is 846 bytes, 900-byte frames of 4 ms; the clamp
	// must be applied or the variant measures nothing new.
	cappedMSS := func() *Fix {
		f := capped()
		f.Sets["clamp-mss"] = "auto"
		f.Require = append(f.Require, "mss.clamp")
		return f
	}
	autorateExpect := []Expect{
		{Metric: "derived.added_p99_ms", Op: "<=", Value: 30, Unit: "ms", Desc: "lowlat: RTT p99 − idle p50 ≤ 30 ms over the whole run, the first 5 s after each step left out"},
		{Metric: "derived.goodput_share_min", Op: ">=", Value: 0.85, Unit: "of cap", Desc: "lowlat: goodput ≥ 85 % of the cap in force, averaged over each step (the worst step)"},
		{Metric: "derived.convergence_down_s", Op: "<=", Value: 5, Unit: "s", Desc: "lowlat: the shaper's rate within 10 % of the new cap ≤ 5 s after a step down (the slower of the two)"},
		{Metric: "derived.convergence_up_s", Op: "<=", Value: 10, Unit: "s", Desc: "lowlat: within 10 % of the new cap ≤ 10 s after the step up"},
		{Metric: "derived.rate_rsd_max", Op: "<=", Value: 0.05, Unit: "", Desc: "lowlat: no oscillation: the rate's relative standard deviation in the second half of each step ≤ 5 %"},
		{Metric: "derived.rate_at_min", Op: "<=", Value: 0, Unit: "samples", Desc: "lowlat: the rate never falls to --min"},
	}
	register(&Scenario{
		Name: "capped-uplink-varying", Runbook: "003",
		Title:   "A capped uplink whose cap moves: 2 → 1 → 3 → 2 Mbit/s every 30 s, 5 s provider buffer",
		Summary: "provider cap stepping 2 → 1 → 3 → 2 Mbit/s (5 s buffer) under 4 upload flows: no fix vs static capped-uplink vs lowlat autorate (reflector, passive only)",
		Problem: "Runbook 003's provider caps the uplink and buffers about 5 s, but here the cap moves, as burst credits run out or the " +
			"provider re-provisions: 2 Mbit/s, then 1, 3 and 2 again, every 30 s, under a running upload (probe load --upload, 4 TCP " +
			"flows). A static shaper at 90 % of the first cap lets the provider's buffer fill once the cap falls below it, and wastes " +
			"the link once it rises. lowlat autorate moves the shaper's rate: with a reflector of its own (killed in the last step, so it " +
			"must hold on the passive signal) and with the passive signal alone (tcp_info of the uploads).",
		Topo: TopoSpec{Up: Path{Rate: "2mbit", Buffer: Duration(5 * time.Second), Steps: []RateStep{
			{Every: Duration(varyingStep), Rate: "1mbit"}, {Every: Duration(varyingStep), Rate: "3mbit"}, {Every: Duration(varyingStep), Rate: "2mbit"},
		}}, Down: Path{Delay: Duration(40 * time.Millisecond)}},
		Estimate: 9 * time.Minute,
		Key: []Expect{
			{Metric: "derived.idle_p50_ms", Unit: "ms", Desc: "idle RTT p50"},
			{Metric: "derived.added_p99_ms", Unit: "ms", Desc: "added RTT p99, 5 s after each step on"},
			{Metric: "derived.added_p99_step1_ms", Unit: "ms", Desc: "added RTT p99 in the 1 Mbit/s step"},
			{Metric: "derived.goodput_share_min", Unit: "of cap", Desc: "worst step's goodput over its cap"},
			{Metric: "derived.goodput_share_mean", Unit: "of cap", Desc: "goodput over the cap, the steps' mean"},
			{Metric: "derived.convergence_down_s", Unit: "s", Desc: "time to within 10 % of the cap after a step down"},
			{Metric: "derived.convergence_up_s", Unit: "s", Desc: "time to within 10 % of the cap after the step up"},
			{Metric: "derived.rate_rsd_max", Unit: "", Desc: "rate's relative std in a flat step"},
		},
		Variants: []Variant{
			{Name: "baseline", Desc: "no fix: the provider's buffer fills",
				Expect: []Expect{{Metric: "derived.added_p99_ms", Op: ">=", Value: 4000, Unit: "ms",
					Desc: "runbook 003: ping passed 5,000 ms under upload; the lab's provider buffers 5 s: added p99 ≥ 4,000 ms"}}},
			{Name: "capped-uplink", Desc: "lowlat's static capped-uplink profile at the first cap (--set rate=2mbit)",
				Fix: capped(),
				Expect: []Expect{
					{Metric: "derived.added_p99_step1_ms", Op: ">=", Value: 300, Unit: "ms", Desc: "lowlat: a static shaper at 1.8 Mbit/s feeds the 1 Mbit/s cap 80 % too fast and the provider's buffer fills, held back only by BBR (the profile sets it): 723 ms added p99 in that step in the VM (lab vm --scale 0.5); at least 300 ms"},
				}},
			// A shaper that knows the cap: what the path leaves at best.
			// Its figures are the reference for autorate's, which must
			// find the cap, and have no targets of their own.
			{Name: "capped-uplink-oracle", Desc: "capped-uplink, its rate moved by the lab to the profile's 90 % of each new cap in the instant the provider steps: a shaper that knows the cap (reference: the delay the path leaves without any search)",
				Fix: capped(), FollowCap: cappedShare},
			{Name: "autorate-reflector", Desc: "capped-uplink, then lowlat autorate with a reflector and the passive signal; the reflector is killed in the last step",
				Fix:      capped(),
				Autorate: &AutorateRun{Reflector: true, Passive: true, Min: "500kbit", Max: "4mbit", KillReflectorAt: 3*varyingStep + varyingStep/3},
				Expect: append(append([]Expect{}, autorateExpect...),
					Expect{Metric: "derived.outage_rate_share_min", Op: ">=", Value: 0.8, Unit: "of cap", Desc: "lowlat: with its reflector killed, autorate holds on the passive signal: its rate stays ≥ 80 % of the cap"}),
			},
			// The MSS clamp beside the two above, only when named: the
			// delay a full frame's serialization adds at each of the
			// shaper and the provider against the header bytes it costs.
			// No targets: the figures are for comparison.
			{Name: "capped-uplink-oracle-mss", Desc: "capped-uplink-oracle with clamp-mss=auto: 846-byte MSS (900-byte frames, 4 ms at the profile's 1.8 Mbit/s shaper, 7.2 ms at the 1 Mbit/s cap instead of 12.1) for 66 header bytes a frame; runs only when named",
				Fix: cappedMSS(), FollowCap: cappedShare, Named: true},
			{Name: "autorate-reflector-mss", Desc: "autorate-reflector with clamp-mss=auto (846 bytes, as capped-uplink-oracle-mss: the profile journals no policy here, so auto takes its shaper's rate); runs only when named",
				Fix:      cappedMSS(),
				Autorate: &AutorateRun{Reflector: true, Passive: true, Min: "500kbit", Max: "4mbit", KillReflectorAt: 3*varyingStep + varyingStep/3},
				Named:    true},
			{Name: "autorate-passive", Desc: "capped-uplink, then lowlat autorate with the passive signal alone (tcp_info of the uploads), no reflector",
				Fix:      capped(),
				Autorate: &AutorateRun{Passive: true, Min: "500kbit", Max: "4mbit"},
				Expect:   autorateExpect},
			// The peer: the same targets show in the table, but are not
			// lowlat's to meet.
			{Name: "cake-autorate", Desc: "capped-uplink, then cake-autorate (its defaults: 30 ms over the baseline of half the echo RTT) pinging the server 20 times a second; runs only when named, from --cake-autorate DIR, on cake",
				Fix:      capped(),
				Autorate: &AutorateRun{Peer: PeerCakeAutorate, Min: "500kbit", Max: "4mbit"}},
			{Name: "cake-autorate-15ms", Desc: "cake-autorate as above, its threshold at lowlat's: 15 ms of RTT (7.5 ms of half the echo RTT)",
				Fix:      capped(),
				Autorate: &AutorateRun{Peer: PeerCakeAutorate, Min: "500kbit", Max: "4mbit", PeerConfig: map[string]string{"ul_owd_delta_delay_thr_ms": "7.5"}}},
		},
	})
}
