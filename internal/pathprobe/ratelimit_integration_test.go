package pathprobe

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/testnet"
)

// icmpDefaults sets Linux's default ICMP rate limit in n, written rather
// than assumed: time exceeded and unreachable (icmp_ratemask 6168) at most
// one a second per peer after a burst of six (icmp_ratelimit 1000). The
// per-host limits (icmp_msgs_per_sec, icmp_msgs_burst: per namespace since
// Linux 6.2, global before) are read, not written, and logged.
func icmpDefaults(t *testing.T, n *testnet.NS) {
	t.Helper()
	sysctl(t, n, "net/ipv4/icmp_ratelimit", "1000")
	sysctl(t, n, "net/ipv4/icmp_ratemask", "6168")
	var got []string
	n.Do(func() error {
		for _, f := range []string{"ipv4/icmp_msgs_per_sec", "ipv4/icmp_msgs_burst", "ipv6/icmp/ratelimit"} {
			b, err := os.ReadFile("/proc/sys/net/" + f)
			got = append(got, fmt.Sprintf("%s=%s", f, strings.TrimSpace(string(b))))
			if err != nil {
				got[len(got)-1] = fmt.Sprintf("%s: %v", f, err)
			}
		}
		return nil
	})
	t.Logf("%s: icmp_ratelimit=1000 icmp_ratemask=6168 %s", n.Name, strings.Join(got, " "))
}

// deepQueue puts a queue of delay d on r2's link toward r3, so that hop 3
// and every later hop carry it: netem's delay where the kernel has it;
// else a 2 Mbit/s tbf whose FIFO holds d of it, kept full by l.fill (the
// probes fit in the room the load's larger packets leave).
func (l *pathLab) deepQueue(t *testing.T, d time.Duration) {
	t.Helper()
	if err := setQdisc(l.r2, "b0", fmt.Sprintf("netem delay %dms", d.Milliseconds())); err == nil {
		l.netem, l.hop3Delay = true, d
		return
	} else if testnet.Required("netem") {
		t.Fatalf("kernel feature netem is required here but missing: %v", err)
	}
	// 250 000 bytes a second; the FIFO holds whole load packets of
	// fillPkt bytes (as the qdisc counts them, Ethernet header included)
	// and half of one more, which the probes use.
	const rate = 250000
	limit := int(d.Seconds()*rate)/fillPkt*fillPkt + fillPkt/2
	if err := setQdisc(l.r2, "b0", fmt.Sprintf("tbf rate 2mbit burst 4kb limit %d", limit)); err != nil {
		t.Fatalf("tbf toward hop 3: %v", err)
	}
	l.hop3Delay = time.Duration(float64(limit) / rate * float64(time.Second))
	l.fillRate = rate
}

// fillPkt is a load packet's length in the qdisc: 1158 bytes of UDP
// payload, 8 + 20 of headers and 14 of Ethernet.
const fillPkt = 1200

// fill keeps the tbf that deepQueue made full for d: UDP from r2 to a sink
// on r3, a FIFO's worth at once, then 5 % over the tbf's rate. It stops by
// itself after d and at the test's end.
func (l *pathLab) fill(t *testing.T, d time.Duration) {
	t.Helper()
	if l.fillRate == 0 {
		return
	}
	dst := &net.UDPAddr{IP: net.ParseIP("10.70.3.2"), Port: 9}
	var sink, src *net.UDPConn
	if err := l.r3.Do(func() error {
		var err error
		sink, err = net.ListenUDP("udp4", dst)
		return err
	}); err != nil {
		t.Fatalf("load sink on r3: %v", err)
	}
	if err := l.r2.Do(func() error {
		var err error
		src, err = net.DialUDP("udp4", nil, dst)
		return err
	}); err != nil {
		sink.Close()
		t.Fatalf("load source on r2: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); src.Close(); sink.Close(); wg.Wait() })
	wg.Add(2)
	go func() {
		defer wg.Done()
		b := make([]byte, 2048)
		for {
			if _, err := sink.Read(b); err != nil {
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		pkt := make([]byte, fillPkt-42)
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		start := time.Now()
		sent := 0.0
		for first := true; ; first = false {
			want := 1.05 * time.Since(start).Seconds() * l.fillRate / fillPkt
			if first {
				want = l.hop3Delay.Seconds()*l.fillRate/fillPkt + 2
			}
			for ; sent < want; sent++ {
				src.Write(pkt)
			}
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			if first {
				start, sent = time.Now(), 0
			}
		}
	}()
	time.Sleep(500 * time.Millisecond)
}

// udpNoPorts is the server's count of datagrams to closed ports: the UDP
// probes that reached it.
func udpNoPorts(t *testing.T, n *testnet.NS) int {
	t.Helper()
	var v int
	if err := n.Do(func() error {
		f, err := os.Open("/proc/thread-self/net/snmp")
		if err != nil {
			return err
		}
		defer f.Close()
		var head []string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) == 0 || fs[0] != "Udp:" {
				continue
			}
			if head == nil {
				head = fs
				continue
			}
			for i, h := range head {
				if h == "NoPorts" && i < len(fs) {
					v, err = strconv.Atoi(fs[i])
					return err
				}
			}
		}
		return fmt.Errorf("no Udp NoPorts in the namespace's snmp counters")
	}); err != nil {
		t.Fatalf("server's UDP counters: %v", err)
	}
	return v
}

// The path: every router and the destination keep Linux's default
// ICMP rate limit, a 375 ms queue sits before hop 3, and UDP probes go at
// five rounds a second, faster than any hop answers. Every hop's loss is
// its limiter's, alike at every hop: each is labelled rate-limited, the
// destination too, the loss past them is said to be unreadable rather than
// none, and the verdict names the queue at hop 3. The first round walks the
// path, so no probe goes past the destination. Then mtr, from a second
// client with limits of its own, on the same path.
func TestIntegrationPathRateLimitDefaults(t *testing.T) {
	l := newPathLabWith(t, labOpts{defaults: true, queue: 375 * time.Millisecond, secondClient: true})
	const count = 30
	interval := 200 * time.Millisecond
	l.fill(t, 30*time.Second)

	before := udpNoPorts(t, l.s)
	start := time.Now()
	r := l.probe(t, Config{Target: labServer, Proto: UDP, Count: count, Interval: interval, Timeout: time.Second})
	took := time.Since(start)
	reachedServer := udpNoPorts(t, l.s) - before
	t.Logf("lowlat udp, %d × %s (%s; the server got %d probes):\n%s", count, interval, took.Round(time.Millisecond), reachedServer, hopTable(r))
	if !r.Reached || len(r.Hops) != len(l.hops) {
		t.Fatalf("reached %v with %d hops, want the server at hop %d", r.Reached, len(r.Hops), len(l.hops))
	}
	v := r.Verdict
	if v.Kind != "delay" || v.Hop != 3 || v.DelayHop != 3 || v.LossHop != 0 {
		t.Errorf("verdict %+v, want delay at hop 3 and no loss named", v)
	}
	if got := time.Duration(r.Hops[2].AddedUS.P50 * 1e3); math.Abs(float64(got-l.hop3Delay)) > 0.2*float64(l.hop3Delay) {
		t.Errorf("hop 3 adds %v, want the queue's %v within 20 %%", got, l.hop3Delay)
	}
	for _, h := range r.Hops {
		// A burst of six, then one a second: about 6 + 5 of 30 probes.
		if h.Received > count/2 || !h.RateLimited || math.Abs(h.ReplyEveryMS-1000) > 200 {
			t.Errorf("hop %d: %d of %d answered, rate_limited %v, one reply every %.0f ms; want Linux's limit (one a second) seen and labelled",
				h.Index, h.Received, h.Sent, h.RateLimited, h.ReplyEveryMS)
		}
	}
	if v.LossHiddenFrom != 1 || !strings.Contains(v.Text, "loss from hop 1 on cannot be read") {
		t.Errorf("loss_hidden_from %d (%q): want 1, every hop limits its replies", v.LossHiddenFrom, v.Text)
	}
	// One probe a round reached the server: none went past it in the
	// first, and its limiter's burst answered the first six rounds.
	if reachedServer != r.Hops[4].Sent {
		t.Errorf("the server got %d probes, want %d (one a round): the first round sent past it", reachedServer, r.Hops[4].Sent)
	}
	if lead := leadingRun(r.Hops[4]); lead < 5 {
		t.Errorf("the destination answered its first %d probes, want its burst of six (five, if one arrived a token short)", lead)
	}

	// mtr, UDP too, the same probes per hop and interval, from c2 (the
	// limits it meets are its own, as full as lowlat's were).
	if testnet.InVM() {
		return // the lab's path-hops scenario runs mtr in the VM
	}
	before = udpNoPorts(t, l.s)
	hubs, mtrTook, err := runMTR(l.c2, count, interval, "-u", "--gracetime", "1")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("mtr's probes that reached the server: %d", udpNoPorts(t, l.s)-before)
	var mb strings.Builder
	for i, h := range hubs {
		fmt.Fprintf(&mb, "  %2d %-12s snt %3d loss %5.1f%% avg %7.2fms best %7.2fms worst %7.2fms\n", i+1, h.Host, h.Snt, h.Loss, h.Avg, h.Best, h.Wrst)
	}
	t.Logf("mtr -u (%s, from c2):\n%s", mtrTook.Round(time.Millisecond), mb.String())
	if len(hubs) != len(l.hops) {
		t.Fatalf("mtr found %d hops, want %d", len(hubs), len(l.hops))
	}
	// mtr shows the limiters' loss at the destination, which lowlat does
	// not blame; both see the queue from hop 3 on.
	if hubs[4].Loss < 30 {
		t.Errorf("mtr: %.1f%% loss at the destination; want the rate limit seen there too", hubs[4].Loss)
	}
	for i := 2; i < len(hubs); i++ {
		ours, theirs := r.Hops[i].RTT.P50/1000, hubs[i].Avg
		if math.Abs(ours-theirs) > 0.2*theirs {
			t.Errorf("hop %d: lowlat p50 %.1f ms, mtr avg %.1f ms: more than 20 %% apart", i+1, ours, theirs)
		}
	}
}

// leadingRun is how many of a hop's first probes were answered in a row.
func leadingRun(h Hop) int {
	n := 0
	for _, p := range h.probes {
		if !p.answered {
			break
		}
		n++
	}
	return n
}
