//go:build linux

package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/lowlat/lowlat/internal/probe"
)

func init() {
	measurers["bufferbloat-uplink"] = measureBufferbloat
	measurers["nagle-small-messages"] = measureNagle
	measurers["first-frame"] = measureFirstFrame
	measurers["game-egress"] = func(e *env, vr *VariantResult) error { return measureGame(e, vr, 4) }
	measurers["cross-border-jitter"] = func(e *env, vr *VariantResult) error { return measureGame(e, vr, 4) }
}

func ms(us float64) float64 { return round3(us / 1000) }

// noteSendLag notes a variant whose prober sent late: its own send lag
// (p99, µs) says whether the machine gave the lab the CPU it needs. Sends
// that leave late mean threads ran late, and the round trips carry that
// lateness: a missed expectation beside this note may be the machine's.
// limitUS is the prober's own: what it reads on an undisturbed run, with
// room.
func noteSendLag(vr *VariantResult, prober string, lagUS, limitUS float64, more string) {
	if lagUS > limitUS {
		vr.Notes = append(vr.Notes, fmt.Sprintf("the %s sends left up to %.1f ms late (p99): the machine was short of CPU, and the round-trip figures carry that lateness%s", prober, lagUS/1000, more))
	}
}

// inClient runs a probe on a thread in the client namespace.
func inClient[T any](e *env, f func(ctx context.Context) (T, error)) (T, error) {
	var res T
	err := e.client(func() error {
		var err error
		res, err = f(e.ctx)
		return err
	})
	return res, err
}

// measureBufferbloat: probe load --upload through the provider's buffer,
// with 4 flows unless the variant says otherwise.
func measureBufferbloat(e *env, vr *VariantResult) error {
	idle, loaded := e.opts.dur(3*time.Second), e.opts.dur(15*time.Second)
	flows := 4
	if e.v.App.Flows > 0 {
		flows = e.v.App.Flows
	}
	s, err := startUDPSampler(e.ctx, e.t.Client, e.echo.udpAddr, 50*time.Millisecond)
	if err != nil {
		return fmt.Errorf("sampler: %w", err)
	}
	e.phase(fmt.Sprintf("measure: probe load --upload (%s idle, then %s under %d upload flows)", idle, loaded, flows), idle+loaded+2*time.Second)
	// Upload goodput is what reaches the server inside the loaded phase,
	// from its NIC's counters: the probe's own figure divides by the
	// loaded phase everything the reflector received until the flows
	// closed, which includes the data still queued (in the provider's
	// buffer, in the sender's socket buffers) when the phase ended.
	rx := e.t.Server.rxRate(e.ctx, ServerIf, idle+time.Second, loaded-time.Second)
	res, err := inClient(e, func(ctx context.Context) (*probe.LoadResult, error) {
		return probe.Load(ctx, probe.LoadConfig{Target: e.refl, Upload: true, Flows: flows, Idle: probe.Duration(idle), Duration: probe.Duration(loaded)})
	})
	s.mark("upload", idle)
	vr.Timeline = s.stop()
	st := <-rx
	if err != nil {
		return err
	}
	vr.Metrics["load"] = res
	vr.Metrics["derived"] = map[string]float64{
		"idle_p50_ms":         ms(res.IdleRTT.P50),
		"loaded_p50_ms":       ms(res.LoadedRTT.P50),
		"loaded_p99_ms":       ms(res.LoadedRTT.P99),
		"added_p99_ms":        ms(res.LoadedRTT.P99 - res.IdleRTT.P50),
		"goodput_up_mbps":     st.PayloadMbps,
		"goodput_share":       round3(st.PayloadMbps / uplinkRate),
		"server_rx_mbps":      st.Mbps,
		"rtt_send_lag_p99_ms": ms(res.SendLag.P99),
	}
	// Under upload in the stock-kernel VM (emulated, 2 vCPUs) it reads
	// 7.7–10.5 ms; a run whose capped-uplink p99 was twice its others'
	// read 31 ms, with one send 107 ms late.
	noteSendLag(vr, "RTT probe's", res.SendLag.P99, 20000, "")
	vr.CDF = "load.histograms.loaded_rtt_ns"
	return nil
}

// measureNagle: 64-byte messages written in two parts, then read.
func measureNagle(e *env, vr *VariantResult) error {
	d := e.opts.dur(5 * time.Second)
	nagle := e.v.App.Nagle
	if e.app != nil {
		return measureNagleApp(e, vr, d)
	}
	s, err := startTCPSampler(e.ctx, e.t.Client, e.echo.tcpAddr, 100*time.Millisecond, nagle)
	if err != nil {
		return fmt.Errorf("sampler: %w", err)
	}
	e.phase(fmt.Sprintf("measure: probe tcp --pattern write-write-read for %s (Nagle %v)", d, onOff(nagle)), d+time.Second)
	res, err := inClient(e, func(ctx context.Context) (*probe.TCPResult, error) {
		return probe.TCP(ctx, probe.TCPConfig{Target: e.refl, Connections: 1, Rate: 20, Size: 64, Pattern: probe.PatternWriteWriteRead,
			Nagle: nagle, ServerNagle: nagle, Duration: probe.Duration(d)})
	})
	vr.Timeline = s.stop()
	if err != nil {
		return err
	}
	nagleMetrics(vr, res)
	return nil
}

// nagleMetrics records a write-write-read run: the probe's result, the
// derived figures and its CDF.
func nagleMetrics(vr *VariantResult, res *probe.TCPResult) {
	vr.Metrics["tcp"] = res
	vr.Metrics["derived"] = map[string]float64{
		"p50_ms":         ms(res.RTT.P50),
		"p99_ms":         ms(res.RTT.P99),
		"service_p50_ms": ms(res.Service.P50),
	}
	vr.CDF = "tcp.histograms.rtt_ns"
}

// measureNagleApp measures the same exchange made by a client application
// of its own: "lowlat probe tcp" with Nagle on, which leaves its sockets as
// the kernel makes them (no setsockopt, as a C program that never asks for
// TCP_NODELAY), in the run's client cgroup. The lab's own sampler is not
// run: it would be a second client, outside that cgroup, stalling as the
// baseline does; the timeline is the application's own, per fifth.
func measureNagleApp(e *env, vr *VariantResult, d time.Duration) error {
	e.phase(fmt.Sprintf("measure: lowlat probe tcp --pattern write-write-read --nodelay=false for %s, as a process in cgroup %s", d, e.app.rel), d+time.Second)
	out, err := e.runApp(e.app, "probe", "tcp", e.refl, "--pattern", probe.PatternWriteWriteRead, "--nodelay=false", "--server-nodelay=false",
		"--connections", "1", "--rate", "20", "--size", "64", "--duration", d.String(), "--json")
	if err != nil {
		return err
	}
	var res probe.TCPResult
	if err := json.Unmarshal(out, &res); err != nil {
		return fmt.Errorf("client application's result: %w", err)
	}
	if res.Requests == 0 || res.Errors > 0 {
		return fmt.Errorf("client application: %d requests, %d errors (%s)", res.Requests, res.Errors, res.ErrorSample)
	}
	nagleMetrics(vr, &res)
	vr.Timeline = batchTimeline(res.Batches, d, "the client application's probe tcp: RTT p50 of each fifth of the run")
	return nil
}

// batchTimeline turns a probe's per-fifth figures into a coarse timeline:
// each fifth's p50 at its middle.
func batchTimeline(b *probe.Batches, d time.Duration, source string) *Timeline {
	tl := &Timeline{Source: source, Points: [][2]float64{}}
	if b == nil {
		return tl
	}
	step := d.Seconds() / float64(len(b.P50))
	for i, p50 := range b.P50 {
		if b.Count[i] > 0 {
			tl.Points = append(tl.Points, [2]float64{round3(step * (float64(i) + 0.5)), ms(p50)})
		}
	}
	return tl
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// measureFirstFrame: the path RTT, then connect + request + 300 KB and 1 MB
// responses, seven of each (the median of an odd count is one of them).
func measureFirstFrame(e *env, vr *VariantResult) error {
	const n = 7
	fo := e.v.App.FastOpen
	s, err := startUDPSampler(e.ctx, e.t.Client, e.echo.udpAddr, 100*time.Millisecond)
	if err != nil {
		return fmt.Errorf("sampler: %w", err)
	}
	defer func() { vr.Timeline = s.stop() }()
	rttDur := e.opts.dur(2 * time.Second)
	e.phase("measure: path RTT (probe udp, "+rttDur.String()+")", rttDur)
	udp, err := inClient(e, func(ctx context.Context) (*probe.UDPResult, error) {
		return probe.UDP(ctx, probe.UDPConfig{Target: e.refl, Interval: probe.Duration(20 * time.Millisecond), Duration: probe.Duration(rttDur)})
	})
	if err != nil {
		return err
	}
	rtt := ms(udp.RTT.P50)
	// One transaction first: it fetches the TFO cookie when Fast Open is on,
	// and gives every variant the same warm start (ARP, route lookups).
	e.phase("measure: warm-up transaction", time.Second)
	if _, err := inClient(e, func(ctx context.Context) (*probe.CRRResult, error) {
		return probe.CRR(ctx, probe.CRRConfig{Target: e.refl, Request: 200, Response: 1000, FastOpen: fo, Count: 1, Duration: probe.Duration(10 * time.Second)})
	}); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	crr := func(size int) (*probe.CRRResult, error) {
		s.mark(fmt.Sprintf("crr %d B", size), time.Since(s.start))
		e.phase(fmt.Sprintf("measure: probe crr --response %d, %d transactions", size, n), time.Duration(n)*time.Duration(float64(time.Millisecond)*rtt*10))
		return inClient(e, func(ctx context.Context) (*probe.CRRResult, error) {
			return probe.CRR(ctx, probe.CRRConfig{Target: e.refl, Request: 200, Response: size, FastOpen: fo, Count: n, Duration: probe.Duration(60 * time.Second), Timeout: probe.Duration(20 * time.Second)})
		})
	}
	c300, err := crr(300_000)
	if err != nil {
		return err
	}
	c1m, err := crr(1_000_000)
	if err != nil {
		return err
	}
	vr.Metrics["udp"] = udp
	vr.Metrics["crr_300k"] = c300
	vr.Metrics["crr_1m"] = c1m
	d := map[string]float64{
		"rtt_ms":            rtt,
		"first_byte_1m_ms":  ms(c1m.FirstByte.P50),
		"last_byte_300k_ms": ms(c300.LastByte.P50),
		"last_byte_1m_ms":   ms(c1m.LastByte.P50),
		"fastopen_share":    round3(float64(c1m.FastOpenUsed) / float64(max(c1m.Transactions, 1))),
	}
	if rtt > 0 {
		d["first_byte_1m_rtts"] = round3(d["first_byte_1m_ms"] / rtt)
		d["last_byte_300k_rtts"] = round3(d["last_byte_300k_ms"] / rtt)
		d["last_byte_1m_rtts"] = round3(d["last_byte_1m_ms"] / rtt)
	}
	vr.Metrics["derived"] = d
	vr.CDF = "crr_1m.histograms.last_byte_ns"
	return nil
}

// measureGame: a 60 Hz UDP game flow (160 B, DSCP EF) alone, then while
// flows TCP flows download through the server's NIC. The players' round
// trip comes from probe udp; the server's queueing from the server's own
// 60 Hz updates, stamped by the kernel as they enter and leave its qdisc.
func measureGame(e *env, vr *VariantResult, flows int) error {
	idle, loaded := e.opts.dur(3*time.Second), e.opts.dur(15*time.Second)
	const loadIdle = 2 * time.Second
	game := probe.UDPConfig{Target: e.refl, Interval: probe.Duration(time.Second / 60), Size: 160, DSCP: 46}
	s, err := startUDPSampler(e.ctx, e.t.Client, e.echo.udpAddr, 50*time.Millisecond)
	if err != nil {
		return fmt.Errorf("sampler: %w", err)
	}
	defer func() { vr.Timeline = s.stop() }()
	eg, err := startEgressTimer(e.ctx, e.t.Server, e.t.Client, time.Second/60)
	if err != nil {
		return err
	}
	egStopped := false
	defer func() {
		if !egStopped {
			eg.stop()
		}
	}()
	e.phase(fmt.Sprintf("measure: 60 Hz game flow alone (%s)", idle), idle)
	eg.mark("idle")
	gIdle, err := inClient(e, func(ctx context.Context) (*probe.UDPResult, error) {
		g := game
		g.Duration = probe.Duration(idle)
		return probe.UDP(ctx, g)
	})
	eg.mark("")
	if err != nil {
		return fmt.Errorf("game flow, idle: %w", err)
	}
	e.phase(fmt.Sprintf("measure: game flow under a %d-flow download (%s)", flows, loaded), loadIdle+loaded+2*time.Second)
	s.mark("download", time.Since(s.start)+loadIdle)
	type loadOut struct {
		r   *probe.LoadResult
		err error
	}
	lc := make(chan loadOut, 1)
	go func() {
		r, err := inClient(e, func(ctx context.Context) (*probe.LoadResult, error) {
			return probe.Load(ctx, probe.LoadConfig{Target: e.refl, Download: true, Flows: flows, Idle: probe.Duration(loadIdle), Duration: probe.Duration(loaded)})
		})
		lc <- loadOut{r, err}
	}()
	// The game flow runs inside the download's loaded phase: it starts a
	// second after the flows and stops before they do.
	var gLoad *probe.UDPResult
	var gErr error
	select {
	case <-e.ctx.Done():
		gErr = e.ctx.Err()
	case <-time.After(loadIdle + time.Second):
		eg.mark("loaded")
		gLoad, gErr = inClient(e, func(ctx context.Context) (*probe.UDPResult, error) {
			g := game
			g.Duration = probe.Duration(loaded - 1500*time.Millisecond)
			return probe.UDP(ctx, g)
		})
		eg.mark("")
	}
	lo := <-lc
	egStopped = true
	phases, egErr := eg.stop()
	if gErr != nil {
		return fmt.Errorf("game flow, loaded: %w", gErr)
	}
	if lo.err != nil {
		return fmt.Errorf("download: %w", lo.err)
	}
	if egErr != nil {
		return fmt.Errorf("server updates: %w", egErr)
	}
	lossPct, pathLoss := 0.0, 0.0
	if gLoad.Sent > 0 {
		lossPct = round3(float64(gLoad.Loss.Up+gLoad.Loss.Down) * 100 / float64(gLoad.Sent))
	}
	// The path's loss over every game packet of the variant (~1,000): a 1 %
	// loss shows as 10 ± 3 packets, and is gone only if it reads 0.
	if n := gIdle.Sent + gLoad.Sent; n > 0 {
		pathLoss = round3(float64(gIdle.Loss.Up+gIdle.Loss.Down+gLoad.Loss.Up+gLoad.Loss.Down) * 100 / float64(n))
	}
	vr.Metrics["game_idle"] = gIdle
	vr.Metrics["game"] = gLoad
	vr.Metrics["load"] = lo.r
	d := map[string]float64{
		"game_idle_p50_ms":     ms(gIdle.RTT.P50),
		"game_idle_p99_ms":     ms(gIdle.RTT.P99),
		"game_idle_jitter_ms":  ms(gIdle.Jitter),
		"game_loaded_p50_ms":   ms(gLoad.RTT.P50),
		"game_loaded_p99_ms":   ms(gLoad.RTT.P99),
		"game_added_mean_ms":   ms(gLoad.RTT.Mean - gIdle.RTT.P50),
		"game_added_p99_ms":    ms(gLoad.RTT.P99 - gIdle.RTT.P50),
		"game_queueing_p99_ms": ms(gLoad.RTT.P99 - gIdle.RTT.P99),
		"game_loss_pct":        lossPct,
		"path_loss_pct":        pathLoss,
		"bulk_mbps":            lo.r.Goodput.Down,
	}
	if nic := e.sc.Topo.ServerNIC.mbps(); nic > 0 {
		d["bulk_share"] = round3(lo.r.Goodput.Down / nic)
	}
	// The game probe reads 2.0–3.6 ms in the VM (testdata/results). The
	// server's queueing, from kernel stamps, carries only the kernel's own
	// lateness.
	lag := max(gIdle.SendLag.P99, gLoad.SendLag.P99)
	d["game_send_lag_p99_ms"] = ms(lag)
	noteSendLag(vr, "game probe's", lag, 10000, " (server queueing comes from kernel stamps)")
	// The server's queueing, from its own updates' kernel stamps. An update
	// without both stamps was dropped in the qdisc or the kernel does not
	// stamp this device: the metric is left out (and its expectation fails)
	// rather than made up from the rest.
	for _, ph := range []string{"idle", "loaded"} {
		p := phases[ph]
		if p == nil || p.Sent == 0 || len(p.Waits) < p.Sent*9/10 {
			got, sent := 0, 0
			if p != nil {
				got, sent = len(p.Waits), p.Sent
			}
			vr.Notes = append(vr.Notes, fmt.Sprintf("server queueing not measured (%s): %d of %d server updates came back with both kernel stamps (entering the qdisc, leaving for %s)", ph, got, sent, ServerIf))
			continue
		}
		vr.Metrics["server_updates_"+ph] = map[string]any{"sent": p.Sent, "stamped": len(p.Waits)}
		if ph == "idle" {
			d["server_queueing_idle_p99_ms"] = quantile(p.Waits, 0.99)
			continue
		}
		d["server_queueing_mean_ms"] = meanMS(p.Waits)
		d["server_queueing_p50_ms"] = quantile(p.Waits, 0.50)
		d["server_queueing_p99_ms"] = quantile(p.Waits, 0.99)
	}
	vr.Metrics["derived"] = d
	vr.CDF = "game.histograms.rtt_ns"
	return nil
}
