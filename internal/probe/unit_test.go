package probe

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// A scripted sequence: 10 probes sent; 3 lost upstream (never reached the
// reflector), 1 lost downstream, 5 arrived after 6 (reordered), 2 duplicated.
func TestUDPStatsScripted(t *testing.T) {
	s := newUDPStats(10)
	arrivals := []struct {
		seq uint32
		rtt int64
	}{
		{0, 1000}, {1, 1200}, {2, 1100}, {4, 1500}, {6, 1000}, {5, 3000}, {2, 1100}, {2, 1100},
	}
	// Reflector got 0,1,2,4,5,6,9 = 7 unique (9's reply lost), never 3,7,8.
	for _, a := range arrivals {
		s.add(a.seq, a.rtt, 0)
	}
	if s.received != 6 || s.duplicates != 2 || s.reordered != 1 {
		t.Errorf("received %d duplicates %d reordered %d, want 6 2 1", s.received, s.duplicates, s.reordered)
	}
	l := s.loss(10, 7, 0)
	if l.Up != 3 || l.Down != 1 || l.UpPct != 30 || l.DownPct != 10 || l.Split != "final" {
		t.Errorf("loss %+v, want up 3 down 1", l)
	}
	// Two of the three the reflector never counted, its rate limit dropped:
	// they are not path loss.
	if l := s.loss(10, 7, 2); l.Up != 1 || l.Down != 1 || l.Throttled != 2 {
		t.Errorf("loss with 2 throttled %+v, want up 1 down 1 throttled 2", l)
	}
	// RFC 3550 over arrival order (duplicates excluded): |D| = 200, 100, 400, 500, 2000.
	var j float64
	for _, d := range []float64{200, 100, 400, 500, 2000} {
		j += (d - j) / 16
	}
	if math.Abs(s.jitter-j) > 1e-9 {
		t.Errorf("jitter %v, want %v", s.jitter, j)
	}
	// IPDV pairs by sequence: (0,1)=200 (1,2)=100 (4,5)=1500 (5,6)=2000.
	if n := s.ipdv.TotalCount(); n != 4 {
		t.Errorf("ipdv samples %d, want 4", n)
	}
	if mx := s.ipdv.Max(); !s.ipdv.ValuesAreEquivalent(mx, 2000) {
		t.Errorf("ipdv max %d, want 2000", mx)
	}
	if mn := s.ipdv.Min(); !s.ipdv.ValuesAreEquivalent(mn, 100) {
		t.Errorf("ipdv min %d, want 100", mn)
	}
	// Without the reflector's final count, the echoed maximum is used.
	s2 := newUDPStats(4)
	s2.add(0, 10, 1)
	s2.add(1, 10, 3)
	if l := s2.loss(4, -1, 0); l.Up != 1 || l.Down != 1 || l.Split != "echoed" {
		t.Errorf("echoed split %+v, want up 1 down 1", l)
	}
	// Out-of-range sequence numbers are ignored, not a panic.
	s2.add(1<<31, 10, 0)
}

func TestPDVFromHistogram(t *testing.T) {
	h := newHist()
	for i := int64(1); i <= 100; i++ {
		record(h, i*1000) // 1..100 µs
	}
	p := summarize(h)
	if p.Min != 1 || math.Abs(p.P99-99) > 0.1 || math.Abs(p.P50-50) > 0.1 {
		t.Errorf("percentiles %+v", p)
	}
}

func TestSchedule(t *testing.T) {
	start := time.Unix(1000, 0)
	// 4 connections at 100/s: each sends every 40 ms, staggered by 10 ms.
	cases := []struct {
		conn int
		k    int64
		want time.Duration
	}{{0, 0, 0}, {1, 0, 10 * time.Millisecond}, {3, 0, 30 * time.Millisecond}, {0, 1, 40 * time.Millisecond}, {2, 5, 220 * time.Millisecond}}
	for _, c := range cases {
		if got := schedule(start, c.conn, 4, 100, c.k).Sub(start); got != c.want {
			t.Errorf("schedule(conn %d, k %d) = %s, want %s", c.conn, c.k, got, c.want)
		}
	}
	// Over all connections the sends are evenly spaced at 1/rate.
	var times []time.Duration
	for k := int64(0); k < 3; k++ {
		for c := 0; c < 4; c++ {
			times = append(times, schedule(start, c, 4, 100, k).Sub(start))
		}
	}
	for i := 1; i < len(times); i++ {
		if d := times[i] - times[i-1]; d != 10*time.Millisecond {
			t.Fatalf("gap %d = %s, want 10ms", i, d)
		}
	}
}

// Coordinated omission: a 200 ms stall at 100 req/s on one connection delays
// the ~20 requests scheduled during it; each must be charged its wait, not
// just the one request that stalled.
func TestCoordinatedOmissionCorrection(t *testing.T) {
	start := time.Unix(0, 0)
	period := 10 * time.Millisecond
	service := func(k int) time.Duration {
		if k == 10 {
			return 200 * time.Millisecond
		}
		return 100 * time.Microsecond
	}
	var lat []time.Duration
	var ideal, now time.Time = time.Time{}, start
	for k := 0; k < 50; k++ {
		intended := start.Add(time.Duration(k) * period)
		if now.Before(intended) {
			now = intended
		}
		// A timer that wakes 300 µs late, and once 5 ms late.
		now = now.Add(300 * time.Microsecond)
		if k == 40 {
			now = now.Add(5 * time.Millisecond)
		}
		sent := now
		done := sent.Add(service(k))
		l, id := coLatency(intended, ideal, done.Sub(sent))
		lat = append(lat, l)
		ideal, now = id, done
	}
	slow := 0
	for _, l := range lat {
		if l >= 50*time.Millisecond {
			slow++
		}
	}
	if slow < 15 {
		t.Errorf("%d requests charged ≥ 50 ms, want ≥ 15 (the stall hid them)", slow)
	}
	if lat[11] < 190*time.Millisecond {
		t.Errorf("request 11 latency %s, want ≈ 190 ms+ (waited behind the stall)", lat[11])
	}
	// The client's own timer lateness is never charged, nor does it cascade.
	for _, k := range []int{5, 40, 41, 49} {
		if lat[k] != 100*time.Microsecond {
			t.Errorf("request %d latency %s, want 100µs (timer slop excluded)", k, lat[k])
		}
	}
}

func TestTokenBucket(t *testing.T) {
	ms := int64(time.Millisecond)
	b := newTokenBucket(10*time.Millisecond, 5, 0)
	n := 0
	for i := 0; i < 20; i++ {
		if b.allow(0) {
			n++
		}
	}
	if n != 5 {
		t.Errorf("burst admitted %d, want 5", n)
	}
	if b.allow(5 * ms) {
		t.Error("admitted after 5 ms with an empty bucket")
	}
	if !b.allow(10 * ms) {
		t.Error("refused after 10 ms")
	}
	// A steady 10 ms sender is never refused; a 5 ms sender gets half through.
	b = newTokenBucket(10*time.Millisecond, 5, 0)
	ok := 0
	for i := int64(0); i < 1000; i++ {
		if b.allow(i * 5 * ms) {
			ok++
		}
	}
	if ok < 500 || ok > 506 {
		t.Errorf("5 ms sender admitted %d of 1000, want ~505", ok)
	}
	// Credit never exceeds the burst after a long pause.
	b.allow(1 << 62)
	for i := 0; i < 5; i++ {
		b.allow(1 << 62)
	}
	if b.allow(1 << 62) {
		t.Error("burst exceeded after a long pause")
	}
}

func TestReplayWindow(t *testing.T) {
	w := newReplayWindow()
	steps := []struct {
		seq  uint32
		want bool
	}{{0, true}, {0, false}, {2, true}, {1, true}, {1, false}, {2, false}, {2000, true}, {977, true}, {976, false}, {1999, true}, {1999, false}, {5000, true}, {2000, false}}
	for i, s := range steps {
		if got := w.check(s.seq); got != s.want {
			t.Errorf("step %d: check(%d) = %v, want %v", i, s.seq, got, s.want)
		}
	}
}

func TestNonceCache(t *testing.T) {
	c := newNonceCache(3, time.Second)
	if !c.fresh(1, 0) || c.fresh(1, 1) {
		t.Error("repeat within TTL accepted")
	}
	if !c.fresh(1, int64(2*time.Second)) {
		t.Error("nonce refused after its TTL")
	}
	for n := uint64(10); n < 100; n++ {
		c.fresh(n, int64(3*time.Second))
	}
	if len(c.seen) > 3 {
		t.Errorf("cache holds %d entries, cap 3", len(c.seen))
	}
}

func TestGrade(t *testing.T) {
	for _, c := range []struct {
		ms   float64
		want string
	}{{-1, "A+"}, {0, "A+"}, {4.99, "A+"}, {5, "A"}, {29.9, "A"}, {30, "B"}, {59, "B"}, {60, "C"}, {199, "C"}, {200, "D"}, {399, "D"}, {400, "F"}, {5000, "F"}} {
		if got := Grade(c.ms); got != c.want {
			t.Errorf("Grade(%v) = %s, want %s", c.ms, got, c.want)
		}
	}
	if d := diagnose(4800, Loss{}); !bytes.Contains([]byte(d), []byte("bufferbloat")) {
		t.Errorf("runbook 003 pattern not named: %q", d)
	}
}

func TestCompare(t *testing.T) {
	before := UDPResult{Meta: Meta{Type: "udp"}, Config: UDPConfig{Interval: Duration(10 * time.Millisecond)}, RTT: Percentiles{P50: 100, P99: 400}, Sent: 100, Received: 90, Timestamps: "kernel"}
	after := before
	after.RTT.P50, after.RTT.P99, after.Received = 50, 400, 100
	after.Config.Interval = Duration(time.Millisecond)
	a, _ := json.Marshal(before)
	b, _ := json.Marshal(after)
	cmp, err := Compare(a, b)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]CompareRow{}
	for _, r := range cmp.Rows {
		rows[r.Metric] = r
	}
	p50 := rows["rtt_us.p50"]
	if p50.Before == nil || *p50.Before != 100 || *p50.After != 50 || *p50.Change != -50 || *p50.ChangePct != -50 || p50.Better != "lower" {
		t.Errorf("rtt_us.p50 row %+v", p50)
	}
	if r := rows["received"]; *r.Change != 10 || r.Better != "higher" {
		t.Errorf("received row %+v", r)
	}
	if r := rows["timestamps"]; r.BeforeText != "kernel" {
		t.Errorf("text row %+v", r)
	}
	if _, ok := rows["config.interval"]; ok {
		t.Error("config compared as a metric")
	}
	if len(cmp.ConfigChanges) != 1 || cmp.ConfigChanges[0].Key != "interval" {
		t.Errorf("config changes %+v", cmp.ConfigChanges)
	}
	tcp, _ := json.Marshal(TCPResult{Meta: Meta{Type: "tcp"}})
	if _, err := Compare(a, tcp); err == nil {
		t.Error("compared udp with tcp")
	}
	if _, err := Compare([]byte("{}"), a); err == nil {
		t.Error("compared a non-result")
	}
}

func TestDurationJSON(t *testing.T) {
	b, _ := json.Marshal(Duration(1500 * time.Millisecond))
	if string(b) != `"1.5s"` {
		t.Errorf("marshal %s", b)
	}
	var d Duration
	if err := json.Unmarshal([]byte(`"10ms"`), &d); err != nil || d != Duration(10*time.Millisecond) {
		t.Errorf("unmarshal %v %v", d, err)
	}
}

// The JSON field names are a contract with scripts and the lab.
func TestResultFieldNames(t *testing.T) {
	check := func(v any, keys ...string) {
		t.Helper()
		b, _ := json.Marshal(v)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		for _, k := range keys {
			cur := m
			parts := bytes.Split([]byte(k), []byte("."))
			for i, p := range parts {
				x, ok := cur[string(p)]
				if !ok {
					t.Errorf("%T: missing %q", v, k)
					break
				}
				if i < len(parts)-1 {
					cur, _ = x.(map[string]any)
				}
			}
		}
	}
	pk := []string{"min", "p50", "p90", "p99", "p999", "max", "mean"}
	with := func(prefix string, extra ...string) []string {
		out := extra
		for _, k := range pk {
			out = append(out, prefix+"."+k)
		}
		return out
	}
	common := []string{"type", "version", "host.num_cpu", "start", "end", "config", "histograms"}
	check(UDPResult{Histograms: map[string]string{}}, append(with("rtt_us", "jitter_us", "ipdv_us.p50", "ipdv_us.p99", "pdv_us", "sent", "received", "loss.up", "loss.down", "duplicates", "reordered", "timestamps"), common...)...)
	check(TCPResult{Histograms: map[string]string{}}, append(with("rtt_us", "connections", "requests", "errors"), common...)...)
	crr := append(with("connect_us", "transactions_per_sec", "errors"), with("first_byte_us")...)
	check(CRRResult{Histograms: map[string]string{}}, append(append(crr, with("last_byte_us")...), common...)...)
	check(LoadResult{Histograms: map[string]string{}}, append(append(with("idle_rtt_us", "increase_ms", "grade", "rpm", "goodput_mbps.up", "goodput_mbps.down"), with("loaded_rtt_us")...), common...)...)
}

func TestDecodeResult(t *testing.T) {
	in := &UDPResult{Meta: Meta{Type: "udp", Target: "192.0.2.1:7431"}, Sent: 7}
	b, _ := json.Marshal(in)
	res, err := DecodeResult(b)
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := res.(*UDPResult); !ok || u.Sent != 7 || Kind(res) != "udp" {
		t.Errorf("DecodeResult = %#v", res)
	}
	// An icmp result is one the gate takes as a baseline too.
	res, err = DecodeResult([]byte(`{"type":"icmp","target":"192.0.2.1","sent":9,"config":{"target":"192.0.2.1","interval":"20ms","duration":"10s","size":56}}`))
	if i, ok := res.(*ICMPResult); err != nil || !ok || i.Sent != 9 || Kind(res) != "icmp" {
		t.Errorf("DecodeResult(icmp) = %#v, %v", res, err)
	}
	if diff, err := ConfigDiff(res, ICMPConfig{Target: "192.0.2.1", Interval: Duration(20 * time.Millisecond)}); err != nil || len(diff) != 0 {
		t.Errorf("ConfigDiff(icmp, same) = %q, %v", diff, err)
	}
	if diff, err := ConfigDiff(res, ICMPConfig{Target: "192.0.2.1", Interval: Duration(time.Second)}); err != nil || len(diff) != 1 || !strings.Contains(diff[0], "interval") {
		t.Errorf("ConfigDiff(icmp, another interval) = %q, %v", diff, err)
	}
	for _, bad := range []string{`{"type":"path"}`, `[]`, `{"type":"udp","sent":"x"}`, `{"type":"icmp","sent":"x"}`} {
		if _, err := DecodeResult([]byte(bad)); err == nil {
			t.Errorf("DecodeResult(%s) accepted it", bad)
		}
	}
	if Kind(&Comparison{}) != "" {
		t.Error("a comparison has a probe kind")
	}
}
