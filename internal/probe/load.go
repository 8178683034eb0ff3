package probe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// LoadConfig is one latency-under-load run (flent RRUL's idea): a UDP probe on
// an idle path, then the same probe while Flows TCP flows per direction fill it.
type LoadConfig struct {
	Target   string `json:"target"`
	Upload   bool   `json:"upload"`
	Download bool   `json:"download"`
	// Flows is the number of TCP flows per direction.
	Flows    int      `json:"flows"`
	Duration Duration `json:"duration"` // loaded phase
	Idle     Duration `json:"idle"`     // idle phase before it
	// Interval and Size are the UDP probe's.
	Interval Duration `json:"interval"`
	Size     int      `json:"size"`
	// DSCP marks the UDP probes only; the load flows stay best effort, as a
	// game flow marked EF shares a link with unmarked downloads, so a
	// priority-aware queue (cake diffserv4) shows as a smaller increase.
	DSCP          int    `json:"dscp"`
	Authenticated bool   `json:"authenticated"`
	Key           []byte `json:"-"`
	Force         bool   `json:"-"`
}

// LoadResult is the outcome of a load run.
type LoadResult struct {
	Meta
	Config    LoadConfig  `json:"config"`
	IdleRTT   Percentiles `json:"idle_rtt_us"`
	LoadedRTT Percentiles `json:"loaded_rtt_us"`
	// Increase is loaded p50 − idle p50, ms.
	Increase float64 `json:"increase_ms"`
	// Grade rates the increase: A+ < 5 ms, A < 30, B < 60, C < 200, D < 400, else F.
	Grade string `json:"grade"`
	// RPM is round trips per minute under load: 60000 / the loaded RTT's
	// trimmed mean (slowest 5 % dropped) in ms.
	RPM     float64 `json:"rpm"`
	Goodput Goodput `json:"goodput_mbps"`
	// GoodputSamples is the goodput of each sampling interval of the loaded
	// phase: its spread is the run's own noise (the gate's interval).
	GoodputSamples GoodputSamples `json:"goodput_samples_mbps"`
	// ReflectorCap is the rate (Mbit/s) the reflector paced this client's
	// flows to in each direction, when it set one (a reflector without a
	// key, run with --allow-load). Goodput near it measured the cap, not
	// the path.
	ReflectorCap float64 `json:"reflector_cap_mbps,omitempty"`
	// IdleLoss and LoadedLoss are the UDP probes' loss in each phase.
	IdleLoss   Loss `json:"idle_loss"`
	LoadedLoss Loss `json:"loaded_loss"`
	// IdleBatches and LoadedBatches are each phase's figures per fifth.
	IdleBatches   *Batches `json:"idle_batches,omitempty"`
	LoadedBatches *Batches `json:"loaded_batches,omitempty"`
	// SendLag is how late the probes left against their schedule, both
	// phases merged, µs: the host's own timing noise.
	SendLag Percentiles `json:"send_lag_us"`
	// DSCP is how the loaded phase's probes were marked and came back.
	DSCP DSCPReport `json:"dscp"`
	// Diagnosis names what the figures show, e.g. a bloated buffer.
	Diagnosis  string            `json:"diagnosis"`
	Histograms map[string]string `json:"histograms"`
}

// Goodput in Mbit/s, per direction: upload counted by the reflector (what
// arrived), download by the client.
type Goodput struct {
	Up   float64 `json:"up"`
	Down float64 `json:"down"`
}

// GoodputSamples are per-interval goodputs in Mbit/s. Upload is what left
// the client's socket buffers (written minus what the kernel still holds
// unsent or unacknowledged), download what the client read.
type GoodputSamples struct {
	Interval Duration  `json:"interval"`
	Up       []float64 `json:"up,omitempty"`
	Down     []float64 `json:"down,omitempty"`
}

func (c *LoadConfig) normalize() error {
	if !c.Upload && !c.Download {
		c.Upload, c.Download = true, true
	}
	if c.Flows == 0 {
		c.Flows = 4
	}
	if c.Duration == 0 {
		c.Duration = Duration(20 * time.Second)
	}
	if c.Idle == 0 {
		c.Idle = Duration(5 * time.Second)
	}
	if c.Interval == 0 {
		c.Interval = Duration(20 * time.Millisecond)
	}
	c.Authenticated = len(c.Key) > 0
	switch {
	case c.Flows < 1 || c.Flows > 256:
		return fmt.Errorf("flows %d: must be 1..256", c.Flows)
	case time.Duration(c.Idle) < time.Duration(c.Interval):
		return fmt.Errorf("idle %s: shorter than the interval %s", time.Duration(c.Idle), time.Duration(c.Interval))
	}
	if err := checkDuration("duration", time.Duration(c.Duration)+time.Duration(c.Idle), c.Force); err != nil {
		return err
	}
	probe := c.probe(c.Duration)
	return probe.normalize()
}

// probe is the UDP probe of one phase.
func (c *LoadConfig) probe(d Duration) UDPConfig {
	return UDPConfig{Target: c.Target, Interval: c.Interval, Duration: d, Size: c.Size, DSCP: c.DSCP, Key: c.Key, Force: c.Force}
}

// Grade maps a latency increase under load (ms) to the DSLReports bands.
func Grade(increaseMS float64) string {
	switch {
	case increaseMS < 5:
		return "A+"
	case increaseMS < 30:
		return "A"
	case increaseMS < 60:
		return "B"
	case increaseMS < 200:
		return "C"
	case increaseMS < 400:
		return "D"
	}
	return "F"
}

// diagnose names the pattern runbook 003 is about: latency climbs under load
// while nothing is lost, so a buffer somewhere delays instead of dropping.
func diagnose(increaseMS float64, loaded Loss) string {
	lost := loaded.Up + loaded.Down
	switch {
	case increaseMS >= 200 && lost == 0:
		return fmt.Sprintf("bufferbloat: latency rises %.0f ms under load with no loss; a queue on the path delays instead of dropping (shape below the bottleneck rate, or use BBR)", increaseMS)
	case increaseMS >= 60:
		return fmt.Sprintf("latency rises %.0f ms under load", increaseMS)
	}
	return "latency holds under load"
}

// maxLag is the worse of two phases' send lags, percentile by percentile.
func maxLag(a, b Percentiles) Percentiles {
	return Percentiles{Count: a.Count + b.Count, Min: min(a.Min, b.Min), P50: max(a.P50, b.P50), P90: max(a.P90, b.P90),
		P99: max(a.P99, b.P99), P999: max(a.P999, b.P999), Max: max(a.Max, b.Max), Mean: max(a.Mean, b.Mean)}
}

// sampleGoodput records the goodput of each interval between from and to:
// upload from the sink flows (conns[i] non-nil) as written[i] minus the bytes
// their sockets still hold, download from the down counter. It stops at to or
// when ctx ends; a socket whose queue cannot be read gives no upload samples.
func sampleGoodput(ctx context.Context, s *GoodputSamples, conns []net.Conn, written []atomic.Int64, down *atomic.Int64, from, to time.Time) {
	iv := time.Duration(s.Interval)
	upNow := func() (int64, bool) {
		var sum int64
		some := false
		for i, c := range conns {
			if c == nil {
				continue
			}
			q, ok := unsentBytes(c)
			if !ok {
				return 0, false
			}
			sum += written[i].Load() - q
			some = true
		}
		return sum, some
	}
	wait := func(t time.Time) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Until(t)):
			return true
		}
	}
	if !wait(from) {
		return
	}
	lastUp, upOK := upNow()
	lastDown := down.Load()
	for t := from.Add(iv); !t.After(to); t = t.Add(iv) {
		if !wait(t) {
			return
		}
		u, ok := upNow()
		d := down.Load()
		scale := 8 / 1e6 / iv.Seconds()
		if ok && upOK {
			s.Up = append(s.Up, round3(float64(u-lastUp)*scale))
		}
		if d > 0 || lastDown > 0 {
			s.Down = append(s.Down, round3(float64(d-lastDown)*scale))
		}
		lastUp, upOK, lastDown = u, ok, d
	}
}

// capNote says when goodput reached the reflector's rate cap (kbit/s, 0:
// none) in a direction: then the flows measured the cap, and may not have
// filled the path, so the latency under load may not be the path's.
func capNote(g Goodput, capKbit uint32) string {
	c := float64(capKbit) / 1000
	if c <= 0 || max(g.Up, g.Down) < 0.9*c {
		return ""
	}
	return fmt.Sprintf("; goodput held at the reflector's cap of %s per direction for peers without a key (reflector --load-rate): the flows may not have filled the path", fmtRate(uint64(capKbit)*1000))
}

// Load measures idle latency, then latency while TCP flows saturate the path.
// Everything is bounded: the flows end with the loaded phase.
func Load(ctx context.Context, cfg LoadConfig) (*LoadResult, error) {
	if err := cfg.normalize(); err != nil {
		return nil, configErr(err)
	}
	start := time.Now()
	// Flows run a little longer than the loaded probe so it sees load only.
	const ramp = 500 * time.Millisecond
	flowDur := ramp + time.Duration(cfg.Duration) + 300*time.Millisecond
	m := newMAC(cfg.Key)
	d := &net.Dialer{Timeout: 5 * time.Second}
	// Ask for one flow first and drop it: a reflector that refuses load
	// says so now, not after the idle phase.
	mode := uint8(modeSink)
	if !cfg.Upload {
		mode = modeSource
	}
	c, _, err := dialHello(ctx, d, cfg.Target, &hello{Mode: mode, Nonce: randUint64(), Duration: int64(flowDur)}, m, 5*time.Second)
	if err != nil {
		var re *RefusedError
		if errors.As(err, &re) {
			return nil, err
		}
		return nil, fmt.Errorf("load flow: %w", err)
	}
	c.Close()
	probe := cfg.probe(cfg.Idle)
	idle, err := UDP(ctx, probe)
	if err != nil {
		return nil, fmt.Errorf("idle phase: %w", err)
	}

	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var capKbit uint32
	type flow struct {
		c    net.Conn
		mode uint8
	}
	var flows []flow
	defer func() {
		for _, f := range flows {
			f.c.Close()
		}
	}()
	for _, mode := range []uint8{modeSink, modeSource} {
		if (mode == modeSink && !cfg.Upload) || (mode == modeSource && !cfg.Download) {
			continue
		}
		for range cfg.Flows {
			h := hello{Mode: mode, Nonce: randUint64(), Duration: int64(flowDur)}
			c, acc, err := dialHello(ctx, d, cfg.Target, &h, m, 5*time.Second)
			if err != nil {
				return nil, fmt.Errorf("load flow: %w", err)
			}
			capKbit = max(capKbit, acc.capKbit)
			if tc, ok := c.(*net.TCPConn); ok && mode == modeSink && acc.capKbit > 0 {
				// The reflector reads at its cap: queue at most 100 ms
				// of it here, so what the flow wrote and the reflector
				// counts is what the cap let through during the flow.
				_ = tc.SetWriteBuffer(max(64<<10, int(acc.capKbit)*1000/8/10))
			}
			flows = append(flows, flow{c, mode})
		}
	}
	var (
		up, down atomic.Int64
		wg       sync.WaitGroup
	)
	flowStart := time.Now()
	stopAt := flowStart.Add(flowDur)
	written := make([]atomic.Int64, len(flows))
	sinks := make([]net.Conn, len(flows))
	for i, f := range flows {
		if f.mode == modeSink {
			sinks[i] = f.c
		}
	}
	samples := GoodputSamples{Interval: Duration(max(100*time.Millisecond, time.Duration(cfg.Duration)/20))}
	wg.Add(1)
	go func() {
		defer wg.Done()
		sampleGoodput(fctx, &samples, sinks, written, &down, flowStart.Add(ramp), flowStart.Add(ramp+time.Duration(cfg.Duration)))
	}()
	for i, f := range flows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64<<10)
			if f.mode == modeSink {
				_ = f.c.SetWriteDeadline(stopAt)
				for fctx.Err() == nil && time.Now().Before(stopAt) {
					n, err := f.c.Write(buf)
					written[i].Add(int64(n))
					if err != nil {
						break
					}
				}
				// Half-close; the reflector answers with what it received.
				if tc, ok := f.c.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
				_ = f.c.SetReadDeadline(time.Now().Add(5 * time.Second))
				var sb [statusLen]byte
				if _, err := io.ReadFull(f.c, sb[:]); err == nil {
					up.Add(int64(binary.BigEndian.Uint64(sb[8:])))
				}
				return
			}
			_ = f.c.SetReadDeadline(stopAt)
			for fctx.Err() == nil {
				n, err := f.c.Read(buf)
				if time.Now().Before(stopAt) {
					down.Add(int64(n))
				}
				if err != nil {
					break
				}
			}
		}()
	}
	select {
	case <-ctx.Done():
	case <-time.After(ramp):
	}
	probe.Duration = cfg.Duration
	loaded, err := UDP(ctx, probe)
	if err != nil {
		cancel()
		wg.Wait()
		return nil, fmt.Errorf("loaded phase: %w", err)
	}
	wg.Wait()
	// Both directions stop counting at stopAt.
	flowTime := min(time.Since(flowStart), flowDur).Seconds()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	loadedH, _ := DecodeHistogram(loaded.Histograms["rtt_ns"])
	res := &LoadResult{
		Meta:          newMeta("load", cfg.Target, start),
		Config:        cfg,
		IdleRTT:       idle.RTT,
		LoadedRTT:     loaded.RTT,
		Increase:      round3((loaded.RTT.P50 - idle.RTT.P50) / 1000),
		IdleLoss:      idle.Loss,
		LoadedLoss:    loaded.Loss,
		IdleBatches:   idle.Batches,
		LoadedBatches: loaded.Batches,
		SendLag:       maxLag(idle.SendLag, loaded.SendLag),
		DSCP:          loaded.DSCP,
		Histograms:    map[string]string{"idle_rtt_ns": idle.Histograms["rtt_ns"], "loaded_rtt_ns": loaded.Histograms["rtt_ns"]},
	}
	res.Grade = Grade(res.Increase)
	if loadedH != nil {
		if tm := trimmedMean(loadedH, 95); tm > 0 {
			res.RPM = round3(60000 / (tm / 1e6))
		}
	}
	if flowTime > 0 {
		res.Goodput.Up = round3(float64(up.Load()) * 8 / 1e6 / flowTime)
		res.Goodput.Down = round3(float64(down.Load()) * 8 / 1e6 / flowTime)
	}
	res.GoodputSamples = samples
	res.ReflectorCap = round3(float64(capKbit) / 1000)
	res.Diagnosis = diagnose(res.Increase, res.LoadedLoss) + capNote(res.Goodput, capKbit)
	return res, nil
}
