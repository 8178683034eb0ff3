package monitor

import (
	"bytes"
	"context"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/pathprobe"
	"github.com/lowlat/lowlat/internal/testnet"
)

// snapshotFixture is a monitor's hour: a healthy udp target with an SLO
// that the last minutes breach, an icmp target that died 20 minutes ago,
// a crr target that started 10 minutes ago; findings of each severity, a
// drifted knob, an apply awaiting confirmation, a rejected reload.
func snapshotFixture() *Snapshot {
	now := time.Date(2026, 11, 24, 2, 30, 20, 0, time.UTC)
	mk := func(f func(i int) SlotView) []SlotView {
		var out []SlotView
		end := now.Truncate(SlotWidth)
		for i := 0; i < HistorySlots; i++ {
			s := f(i)
			s.Start = end.Add(-time.Duration(HistorySlots-1-i) * SlotWidth)
			out = append(out, s)
		}
		return out
	}
	msd := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	udp := mk(func(i int) SlotView {
		p50 := 8 + 2*math.Sin(float64(i)/5)
		p99 := p50 + 6
		if i >= 52 {
			p99 = p50 + 30 // the last minutes breach the SLO
		}
		lost := int64(0)
		if i == 30 {
			lost = 12
		}
		return SlotView{P50: msd(p50), P99: msd(p99), Sent: 1200, Lost: lost}
	})
	icmp := mk(func(i int) SlotView {
		if i >= 40 {
			return SlotView{Sent: 60, Lost: 60}
		}
		return SlotView{P50: msd(31), P99: msd(44), Sent: 60, Lost: int64(i % 3)}
	})
	crr := mk(func(i int) SlotView {
		if i < 50 {
			return SlotView{}
		}
		return SlotView{P50: msd(120), P99: msd(180), Sent: 6}
	})
	cdf := func(lo, hi float64) [][2]float64 {
		var out [][2]float64
		for i := 0; i <= 20; i++ {
			out = append(out, [2]float64{(lo + (hi-lo)*float64(i)/20) / 1e3, float64(i) / 20})
		}
		return out
	}
	return &Snapshot{
		Now: now, Version: "v0.9.0", Hostname: "edge-7", ConfigPath: "/etc/lowlat/monitor.toml",
		ReloadError: `/etc/lowlat/monitor.toml:12:1: unknown key "adress" in [[target]]`,
		Targets: []TargetView{
			{Name: "edge-hk", Kind: "udp", Address: "203.0.113.7:7431", Interval: 50 * time.Millisecond, SLO: 30 * time.Millisecond,
				Labels: map[string]string{"region": "hk", "role": "<script>alert(1)</script>"}, Slots: udp, CDF: cdf(6, 45), Sent: 72000, Lost: 12},
			{Name: "upstream-gw", Kind: "icmp", Address: "198.51.100.1", Interval: time.Second, Slots: icmp, CDF: cdf(29, 50), Sent: 3600, Lost: 1226,
				LastError: "02:10:04 icmp 198.51.100.1: no echo replies since 02:10:03"},
			{Name: "origin-fra", Kind: "crr", Address: "192.0.2.10:7431", Interval: 10 * time.Second, Slots: crr, CDF: cdf(110, 190), Sent: 60},
		},
		DoctorAt: now.Add(-4 * time.Minute),
		Findings: []FindingView{
			{ID: "fifo-qdisc", Severity: "crit", Summary: "eth0: pfifo_fast in front of a 1000-packet queue", Fix: "lowlat apply --profile game-udp"},
			{ID: "congestion-control", Severity: "warn", Summary: "cubic fills buffers", Fix: "net.ipv4.tcp_congestion_control=bbr"},
			{ID: "thp", Severity: "info", Summary: "transparent hugepages: always", Fix: "madvise"},
		},
		Drift:        []DriftView{{Knob: "sysctl/net.core.default_qdisc", Applied: "fq", Live: "pfifo_fast"}},
		Transactions: []TxnView{{ID: "20261124T021500Z-abcdef", Profile: "game-udp", State: "awaiting-confirm", Began: now.Add(-15 * time.Minute), ConfirmBy: now.Add(time.Minute)}},
	}
}

func render(t *testing.T, s *Snapshot) string {
	t.Helper()
	var b bytes.Buffer
	if err := WritePage(&b, s); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// The page says each target's state in words, lists findings, drift and
// transactions, loads nothing and runs nothing, escapes what the config
// says, and stays small.
func TestPageContent(t *testing.T) {
	s := snapshotFixture()
	page := render(t, s)
	for _, want := range []string{
		`content="` + PageCSP + `"`,
		"edge-hk udp: p99 36.4 ms (SLO 30.0 ms), loss 0.00 % — SLO BREACHED",
		"upstream-gw icmp: p99 –, loss 100.00 % — DOWN · 02:10:04 icmp 198.51.100.1: no echo replies since 02:10:03",
		"origin-fra crr: p99 180 ms, loss 0.00 % — OK",
		"FAILING",
		"fifo-qdisc", "congestion-control", "thp",
		"sysctl/net.core.default_qdisc: applied fq, now pfifo_fast", "1 DRIFTED",
		"20261124T021500Z-abcdef", "awaiting-confirm",
		"RELOAD REJECTED", `unknown key &#34;adress&#34;`,
		"role=&lt;script&gt;alert(1)&lt;/script&gt;",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script") || regexp.MustCompile(`(src|href)=`).MatchString(page) {
		t.Error("the page loads or runs something")
	}
	if n := strings.Count(page, "<svg "); n != 9 {
		t.Errorf("%d charts, want 3 per target", n)
	}
	// The band has a gap where the icmp target stopped answering: its
	// fill is one closed run, its p50 line too.
	if n := strings.Count(page, `fill-opacity="0.22"`); n != 3 {
		t.Errorf("%d bands", n)
	}
	// 20 targets of an hour each stay well under a megabyte.
	big := *s
	for len(big.Targets) < 20 {
		big.Targets = append(big.Targets, s.Targets...)
	}
	if n := len(render(t, &big)); n > 1<<20 {
		t.Errorf("20 targets: %d bytes", n)
	}
	// An empty monitor renders too.
	if p := render(t, &Snapshot{Now: s.Now}); !strings.Contains(p, "No [[target]] in the config.") {
		t.Error("empty snapshot")
	}
}

// The page renders in a real browser under its own CSP: headless Chromium's
// DOM has every chart, and its screenshot shows the band, the lines and
// the loss (not a blank page). LOWLAT_MONITOR_SCREENSHOT=FILE keeps the PNG
// for a person to look at.
func TestPageRendersInChromium(t *testing.T) {
	chrome := testnet.Chromium(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "status.html")
	if err := os.WriteFile(page, []byte(render(t, snapshotFixture())), 0o644); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "status.png")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := testnet.ChromiumArgs(dir, 1280, 3000)
	if out, err := exec.CommandContext(ctx, chrome, append(args, "--screenshot="+shot, "file://"+page)...).CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	dom, err := exec.CommandContext(ctx, chrome, append(args, "--dump-dom", "file://"+page)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	if n := strings.Count(string(dom), "<svg "); n != 9 {
		t.Errorf("the browser's DOM has %d charts, want 9", n)
	}
	if p := os.Getenv("LOWLAT_MONITOR_SCREENSHOT"); p != "" {
		b, _ := os.ReadFile(shot)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Error(err)
		}
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	// The band's translucent blue, the p50 line's blue and the loss red
	// must all be on screen.
	var band, line, red, ink int
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			r, g, bl = r>>8, g>>8, bl>>8
			switch {
			case r > 190 && r < 215 && g > 215 && g < 235 && bl > 230: // #1f77b4 at 22 % on white
				band++
			case r < 60 && g > 100 && g < 140 && bl > 160 && bl < 200:
				line++
			case r > 190 && g < 60 && bl < 70:
				red++
			}
			if r < 240 || g < 240 || bl < 240 {
				ink++
			}
		}
	}
	t.Logf("screenshot: band %d, line %d, red %d, ink %d of %d sampled pixels", band, line, red, ink, b.Dx()*b.Dy()/4)
	if band < 2000 || line < 200 || red < 100 || ink < b.Dx()*b.Dy()/4/20 {
		t.Errorf("the screenshot does not show the charts: band %d, line %d, red %d, ink %d", band, line, red, ink)
	}
}

// Path targets are on the page's summary with their last run: the
// destination's figures and the verdict in a word, never "NO DATA" (they
// have no probe stream, so no minutes), and they count in the summary's
// badge.
func TestPagePathTargets(t *testing.T) {
	now := time.Date(2026, 11, 24, 2, 30, 20, 0, time.UTC)
	hop := func(i int, addr string, p50, p99, loss float64, dest bool) pathprobe.Hop {
		return pathprobe.Hop{Index: i, Address: addr, Sent: 10, Received: int(10 - loss/10), LossPct: loss, RTT: pathprobe.RTT{P50: p50, P99: p99}, Destination: dest}
	}
	clean := &pathprobe.Result{Reached: true, Started: now.Add(-time.Minute),
		Hops:    []pathprobe.Hop{hop(1, "192.0.2.1", 300, 500, 0, false), hop(2, "203.0.113.7", 1200, 1800, 0, true)},
		Verdict: pathprobe.Verdict{Kind: "none", Text: "no hop adds notable delay or loss on the way to the end of the path"}}
	delayed := &pathprobe.Result{Reached: true, Started: now.Add(-time.Minute),
		Hops:    []pathprobe.Hop{hop(1, "192.0.2.1", 300, 500, 0, false), hop(2, "198.51.100.9", 25000, 31000, 0, false), hop(3, "203.0.113.8", 25400, 31500, 10, true)},
		Verdict: pathprobe.Verdict{Hop: 2, Address: "198.51.100.9", Kind: "delay", Text: "hop 2 (198.51.100.9) adds 24.7 ms that carries on to the destination"}}
	unreached := &pathprobe.Result{Reached: false, Started: now.Add(-time.Minute),
		Hops:    []pathprobe.Hop{hop(1, "192.0.2.1", 300, 500, 0, false)},
		Verdict: pathprobe.Verdict{Kind: "none", Text: "the destination did not answer"}}
	for _, tt := range []struct {
		name  string
		tv    TargetView
		line  string
		word  string // the state, in the table and on the target's section
		badge string // the summary's
	}{
		{"clean", TargetView{Name: "border", Kind: "path", Address: "203.0.113.7", Interval: time.Minute, Path: clean},
			"border path: destination p99 1.80 ms, loss 0.00 % — CLEAN · no hop adds notable delay", "CLEAN", "ALL OK"},
		{"delay", TargetView{Name: "transit", Kind: "path", Address: "203.0.113.8", Interval: time.Minute, Path: delayed},
			"transit path: destination p99 31.5 ms, loss 10.00 % — DELAY AT HOP 2 · hop 2 (198.51.100.9) adds 24.7 ms", "DELAY AT HOP 2", "DEGRADED"},
		{"unreached", TargetView{Name: "gone", Kind: "path", Address: "203.0.113.9", Interval: time.Minute, Path: unreached},
			"gone path: destination p99 –, loss – — UNREACHED · the destination did not answer", "UNREACHED", "FAILING"},
		{"failing", TargetView{Name: "broken", Kind: "path", Address: "203.0.113.10", Interval: time.Minute, Path: clean, LastError: "02:29:00 probe path: socket: operation not permitted"},
			"broken path: destination p99 1.80 ms, loss 0.00 % — FAILING · 02:29:00 probe path: socket: operation not permitted", "FAILING", "FAILING"},
		{"waiting", TargetView{Name: "new", Kind: "path", Address: "203.0.113.11", Interval: time.Minute},
			"new path: destination p99 –, loss – — WAITING", "WAITING", "ALL OK"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			page := render(t, &Snapshot{Now: now, Targets: []TargetView{tt.tv}})
			if !strings.Contains(page, tt.line) {
				t.Errorf("the summary lacks %q", tt.line)
			}
			if strings.Contains(page, "NO DATA") {
				t.Error(`a path target reads "NO DATA"`)
			}
			if n := strings.Count(page, ">"+tt.word+"<"); n < 2 {
				t.Errorf("%q appears %d times, want in the table and on the target's section", tt.word, n)
			}
			if !strings.Contains(page, ">"+tt.badge+"<") {
				t.Errorf("the summary's badge is not %s", tt.badge)
			}
		})
	}
}
