//go:build linux

package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lowlat/lowlat/internal/pathprobe"
	"github.com/lowlat/lowlat/internal/probe"
	"github.com/lowlat/lowlat/internal/qdisc"
	"github.com/vishvananda/netlink"
)

func init() { measurers["path-hops"] = measurePathHops }

// mtrHub is one hop of mtr's JSON report.
type mtrHub struct {
	Host string  `json:"host"`
	Loss float64 `json:"Loss%"`
	Snt  int     `json:"Snt"`
	Avg  float64 `json:"Avg"`
	Best float64 `json:"Best"`
	Wrst float64 `json:"Wrst"`
}

// measurePathHops: lowlat probe path with ICMP side by side with Debian's
// mtr (the same number of probes per hop, at the same moment, both on the
// one ECMP link ICMP hashes to), then twice with UDP on one flow. Without
// netem, four upload flows keep hop 3's queue full throughout, and the
// queue's own delay is read from its backlog as the reference.
func measurePathHops(e *env, vr *VariantResult) error {
	if e.v.Name == "tcp" {
		return measurePathTCP(e, vr)
	}
	mtrBin, err := exec.LookPath("mtr")
	if err != nil {
		return fmt.Errorf("path-hops runs Debian's mtr beside lowlat: mtr not found (apt-get install mtr-tiny)")
	}
	const interval = 100 * time.Millisecond
	count := max(10, int(e.opts.dur(4*time.Second)/interval))
	run := time.Duration(count)*interval + time.Second
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	var bg sync.WaitGroup
	defer bg.Wait()
	defer cancel()
	if err := loadQueue(ctx, e, &bg, 4*run+5*time.Second); err != nil {
		return err
	}
	s, err := startUDPSampler(e.ctx, e.t.Client, e.echo.udpAddr, 100*time.Millisecond)
	if err != nil {
		return fmt.Errorf("sampler: %w", err)
	}
	defer func() { vr.Timeline = s.stop() }()

	// Side by side with mtr, both ICMP.
	e.phase(fmt.Sprintf("measure: lowlat probe path --proto icmp beside mtr --report, %d probes per hop", count), run)
	type mtrOut struct {
		hubs []mtrHub
		took time.Duration
		err  error
	}
	mc := make(chan mtrOut, 1)
	cmd := exec.CommandContext(e.ctx, mtrBin, "--report", "--json", "-n", "-c", strconv.Itoa(count), "-i", fmt.Sprintf("%g", interval.Seconds()), ServerAddr)
	var out, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &stderr
	start := time.Now()
	if err := e.client(cmd.Start); err != nil {
		return fmt.Errorf("mtr: %w", err)
	}
	go func() {
		err := cmd.Wait()
		o := mtrOut{took: time.Since(start), err: err}
		if err == nil {
			var rep struct {
				Report struct {
					Hubs []mtrHub `json:"hubs"`
				} `json:"report"`
			}
			if o.err = json.Unmarshal([]byte(out.String()), &rep); o.err == nil {
				o.hubs = rep.Report.Hubs
			}
		} else {
			o.err = fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
		}
		mc <- o
	}()
	start = time.Now()
	icmp, err := inClient(e, func(ctx context.Context) (*pathprobe.Result, error) {
		return pathprobe.Run(ctx, pathprobe.Config{Target: ServerAddr, Proto: pathprobe.ICMP, Count: count, Interval: interval, Timeout: time.Second})
	})
	icmpTook := time.Since(start)
	m := <-mc
	if err != nil {
		return fmt.Errorf("probe path --proto icmp: %w", err)
	}
	if m.err != nil {
		return fmt.Errorf("mtr: %w", m.err)
	}

	// UDP on one flow, twice; the queue's backlog read meanwhile.
	e.phase(fmt.Sprintf("measure: lowlat probe path (udp), twice, %d probes per hop", count), 2*run)
	stopBacklog := queueBacklog(e)
	waitE2E := endToEnd(e, run)
	udp := make([]*pathprobe.Result, 2)
	var udpTook time.Duration
	var backlog []float64
	for i := range udp {
		start := time.Now()
		udp[i], err = inClient(e, func(ctx context.Context) (*pathprobe.Result, error) {
			return pathprobe.Run(ctx, pathprobe.Config{Target: ServerAddr, Count: count, Interval: interval, Timeout: time.Second})
		})
		if i == 0 {
			udpTook = time.Since(start)
			backlog = stopBacklog()
		}
		if err != nil {
			waitE2E()
			return fmt.Errorf("probe path: %w", err)
		}
	}
	udpE2E := waitE2E()
	cancel()

	vr.Metrics["path_icmp"] = icmp
	vr.Metrics["path_udp"] = udp[0]
	vr.Metrics["path_udp_again"] = udp[1]
	vr.Metrics["mtr"] = map[string]any{"hubs": m.hubs, "seconds": round3(m.took.Seconds())}
	if udpE2E != nil {
		vr.Metrics["udp"] = udpE2E
		vr.CDF = "udp.histograms.rtt_ns"
	}
	d := map[string]float64{
		"verdict_hop_again":  float64(udp[1].Verdict.Hop),
		"verdict_hop_icmp":   float64(icmp.Verdict.Hop),
		"same_flow":          b2f(udp[0].Flow == udp[1].Flow),
		"lowlat_seconds":     round3(icmpTook.Seconds()),
		"lowlat_udp_seconds": round3(udpTook.Seconds()),
		"mtr_seconds":        round3(m.took.Seconds()),
	}
	vr.Metrics["derived"] = d
	if err := hopFigures(e, d, udp[0], backlog); err != nil {
		return err
	}
	// mtr beside lowlat: hop 2's loss, and every hop past the queue within
	// 20 % (mtr's mean against lowlat's median; below 5 ms the figures are
	// each tool's own timing as much as the path's).
	if len(m.hubs) != len(ChainHops) {
		return fmt.Errorf("mtr found %d hops, the chain has %d", len(m.hubs), len(ChainHops))
	}
	d["mtr_hop2_loss_pct"] = m.hubs[1].Loss
	worst := 0.0
	for i, h := range icmp.Hops {
		if i == 1 || i >= len(m.hubs) {
			continue
		}
		ours, theirs := h.RTT.P50/1000, m.hubs[i].Avg
		if ours >= 5 || theirs >= 5 {
			worst = max(worst, math.Abs(ours-theirs)/theirs*100)
		}
	}
	d["mtr_max_diff_pct"] = round3(worst)
	return nil
}

// hopFigures puts a run's hop figures in d: hop 2's loss and label, the
// labels elsewhere, hop 3's added delay against the queue's own (netem's
// delay, or the tbf's median backlog over its rate).
func hopFigures(e *env, d map[string]float64, r *pathprobe.Result, backlog []float64) error {
	hops := r.Hops
	if len(hops) != len(ChainHops) || !r.Reached {
		return fmt.Errorf("probe path found %d hops (reached %v), the chain has %d", len(hops), r.Reached, len(ChainHops))
	}
	d["verdict_hop"] = float64(r.Verdict.Hop)
	d["hop2_loss_pct"] = hops[1].LossPct
	d["hop2_rate_limited"] = b2f(hops[1].RateLimited)
	others := 0
	for _, h := range hops {
		if h.Index != 2 && h.RateLimited {
			others++
		}
	}
	d["other_hops_rate_limited"] = float64(others)
	d["hop3_added_ms"] = round3(hops[2].AddedUS.P50 / 1000)
	ref := time.Duration(e.t.Spec.Chain.QueueDelay).Seconds() * 1000
	if !e.t.Netem {
		rate, _ := qdisc.ParseRate(e.t.Spec.Chain.QueueRate)
		if len(backlog) == 0 || rate == 0 {
			return fmt.Errorf("no backlog samples of hop 3's queue")
		}
		ref = median(backlog) * 8 / float64(rate) * 1000
	}
	d["queue_ms"] = round3(ref)
	d["hop3_added_error_pct"] = round3(math.Abs(hops[2].AddedUS.P50/1000-ref) / ref * 100)
	return nil
}

// measurePathTCP: lowlat probe path --proto tcp to the reflector's port,
// the queue loaded as in the baseline.
func measurePathTCP(e *env, vr *VariantResult) error {
	const interval = 100 * time.Millisecond
	count := max(10, int(e.opts.dur(2*time.Second)/interval))
	ctx, cancel := context.WithCancel(e.ctx)
	var bg sync.WaitGroup
	defer bg.Wait()
	defer cancel()
	if err := loadQueue(ctx, e, &bg, time.Minute); err != nil {
		return err
	}
	s, err := startUDPSampler(e.ctx, e.t.Client, e.echo.udpAddr, 100*time.Millisecond)
	if err != nil {
		return fmt.Errorf("sampler: %w", err)
	}
	defer func() { vr.Timeline = s.stop() }()
	e.phase(fmt.Sprintf("measure: lowlat probe path --proto tcp, %d probes per hop", count), time.Duration(count)*interval*5)
	stopBacklog := queueBacklog(e)
	waitE2E := endToEnd(e, 2*time.Second)
	r, err := inClient(e, func(ctx context.Context) (*pathprobe.Result, error) {
		return pathprobe.Run(ctx, pathprobe.Config{Target: e.refl, Proto: pathprobe.TCP, Count: count, Interval: interval, Timeout: time.Second})
	})
	backlog := stopBacklog()
	udpE2E := waitE2E()
	if err != nil {
		return fmt.Errorf("probe path --proto tcp: %w", err)
	}
	vr.Metrics["path_tcp"] = r
	if udpE2E != nil {
		vr.Metrics["udp"] = udpE2E
		vr.CDF = "udp.histograms.rtt_ns"
	}
	d := map[string]float64{"lowlat_seconds": r.Seconds}
	vr.Metrics["derived"] = d
	return hopFigures(e, d, r, backlog)
}

// loadQueue starts four upload flows through hop 3's queue for d when it is
// a tbf (without netem nothing else fills it), and gives them 2 s to fill it.
func loadQueue(ctx context.Context, e *env, bg *sync.WaitGroup, d time.Duration) error {
	if e.t.Netem {
		return nil
	}
	e.phase("load: 4 upload flows keep hop 3's queue full", time.Second)
	bg.Add(1)
	go func() {
		defer bg.Done()
		_ = e.client(func() error {
			_, err := probe.Load(ctx, probe.LoadConfig{Target: e.refl, Upload: true, Flows: 4, Idle: probe.Duration(time.Second), Duration: probe.Duration(d)})
			return err
		})
	}()
	if !sleepCtx(e.ctx, 2*time.Second) {
		return e.ctx.Err()
	}
	return nil
}

// queueBacklog samples hop 3's tbf backlog until the returned function is
// called, which returns the samples (none with netem, whose delay is known).
func queueBacklog(e *env) func() []float64 {
	if e.t.Netem {
		return func() []float64 { return nil }
	}
	stop, out := make(chan struct{}), make(chan []float64, 1)
	go func() { out <- sampleBacklog(e.t.Routers[0], chainQueueIf, stop) }()
	return func() []float64 {
		close(stop)
		return <-out
	}
}

// endToEnd runs probe udp to the reflector for d beside the path probe: the
// end-to-end RTT distribution through the queue (the variant's CDF). The
// returned function waits for it.
func endToEnd(e *env, d time.Duration) func() *probe.UDPResult {
	var res *probe.UDPResult
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, _ = inClient(e, func(ctx context.Context) (*probe.UDPResult, error) {
			return probe.UDP(ctx, probe.UDPConfig{Target: e.refl, Interval: probe.Duration(20 * time.Millisecond), Duration: probe.Duration(d)})
		})
	}()
	return func() *probe.UDPResult {
		<-done
		return res
	}
}

// sampleBacklog reads dev's root qdisc backlog (bytes) in ns every 20 ms
// until stop closes.
func sampleBacklog(ns *NS, dev string, stop <-chan struct{}) []float64 {
	var out []float64
	_ = ns.Do(func() error {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return err
		}
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return nil
			case <-t.C:
			}
			if tr, err := qdisc.Read(l.Attrs().Index); err == nil {
				out = append(out, float64(tr.RootStats.Backlog))
			}
		}
	})
	return out
}

func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	return s[len(s)/2]
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
