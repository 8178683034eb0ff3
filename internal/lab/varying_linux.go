//go:build linux

package lab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/lowlat/lowlat/internal/autorate"
	"github.com/lowlat/lowlat/internal/probe"
	"github.com/lowlat/lowlat/internal/qdisc"
)

func init() { measurers["capped-uplink-varying"] = measureVarying }

// settle is how long after each step the delay figures leave out: the
// time any controller needs to see a new cap (the issue's own window).
const settle = 5 * time.Second

// measureVarying: an upload of 4 flows for four steps of the provider's
// cap, the RTT sampled every 50 ms, the client's shaper rate every 200 ms,
// the server's goodput per step; autorate, when the variant runs it, for
// the whole time.
func measureVarying(e *env, vr *VariantResult) error {
	idle := 3 * time.Second
	step := e.opts.dur(varyingStep)
	steps := e.t.Spec.Up.Steps
	loaded := time.Duration(len(steps)+1) * step
	caps := []string{e.t.Spec.Up.Rate}
	for _, s := range steps {
		caps = append(caps, s.Rate)
	}
	capBits := make([]float64, len(caps))
	for i, c := range caps {
		b, err := qdisc.ParseRate(c)
		if err != nil {
			return fmt.Errorf("step %d: %w", i, err)
		}
		capBits[i] = float64(b)
	}

	var ar *autorateChild
	if a := e.v.Autorate; a != nil {
		start := startAutorate
		if a.Peer != "" {
			start = startCakeAutorate
		}
		var err error
		if ar, err = start(e, a); err != nil {
			return err
		}
		defer ar.stop()
	}

	s, err := startUDPSampler(e.ctx, e.t.Client, e.echo.udpAddr, 50*time.Millisecond)
	if err != nil {
		return fmt.Errorf("sampler: %w", err)
	}
	t0 := s.start
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	rates := sampleShaper(ctx, e.t.Client, t0)
	stepErr := make(chan error, 1)
	go func() { stepErr <- e.stepProvider(ctx, t0.Add(idle), step) }()
	if ar != nil && e.v.Autorate.KillReflectorAt > 0 {
		at := idle + e.opts.dur(e.v.Autorate.KillReflectorAt)
		go func() {
			select {
			case <-ctx.Done():
			case <-time.After(time.Until(t0.Add(at))):
				ar.killReflector()
			}
		}()
	}
	var rx []<-chan rxStats
	for i := range caps {
		from := time.Until(t0.Add(idle + time.Duration(i)*step + time.Second))
		rx = append(rx, e.t.Server.rxRate(ctx, ServerIf, from, step-2*time.Second))
	}
	e.phase(fmt.Sprintf("measure: probe load --upload, 4 flows, %s idle then %d steps of %s (%s)", idle, len(caps), step, strings.Join(caps, " → ")), idle+loaded+2*time.Second)
	res, err := inClient(e, func(ctx context.Context) (*probe.LoadResult, error) {
		return probe.Load(ctx, probe.LoadConfig{Target: e.refl, Upload: true, Flows: 4, Idle: probe.Duration(idle), Duration: probe.Duration(loaded)})
	})
	s.mark("upload", idle)
	for i := 1; i < len(caps); i++ {
		s.mark(fmt.Sprintf("cap %s", caps[i]), idle+time.Duration(i)*step)
	}
	vr.Timeline = s.stop()
	cancel()
	rateTL := <-rates
	if serr := <-stepErr; serr != nil && err == nil {
		err = serr
	}
	var goodput []float64
	for _, c := range rx {
		st := <-c
		goodput = append(goodput, st.PayloadMbps)
	}
	if ar != nil {
		vr.Metrics["autorate"] = ar.stop()
		if ar.err != nil && err == nil {
			err = ar.err
		}
	}
	if err != nil {
		return err
	}
	vr.Metrics["load"] = res
	vr.CDF = "load.histograms.loaded_rtt_ns"
	w := varyingWindow{idle: idle.Seconds(), step: step.Seconds(), caps: capBits}
	d := w.derive(vr.Timeline, rateTL, goodput, res.IdleRTT.P50/1000)
	if a := e.v.Autorate; a != nil {
		minRate, _ := qdisc.ParseRate(a.Min)
		d["rate_at_min"] = float64(w.atMin(rateTL, float64(minRate)))
		if a.KillReflectorAt > 0 {
			d["outage_rate_share_min"] = round3(w.shareMinAfter(rateTL, idle.Seconds()+e.opts.dur(a.KillReflectorAt).Seconds()))
		}
	}
	vr.Metrics["derived"] = d
	vr.Rates = &RateTimeline{Source: "the client's shaper rate (qdisc " + ClientIf + " root), read every 200 ms; the provider's cap", Points: rateTL, Cap: w.capLine(loaded.Seconds())}
	return nil
}

// stepProvider moves the provider's cap at each step, in place: its buffer
// keeps what it holds, as a real provider's would. A variant that follows
// the cap has its client's shaper moved with it.
func (e *env) stepProvider(ctx context.Context, start time.Time, step time.Duration) error {
	for i, st := range e.t.Spec.Up.Steps {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(start.Add(time.Duration(i+1) * step))):
		}
		s, err := e.t.Spec.Up.stepSpec(st.Rate)
		if err != nil {
			return err
		}
		if err := e.t.Provider.Do(func() error {
			l, err := netlink.LinkByName(ProviderSIf)
			if err != nil {
				return err
			}
			return qdisc.ChangeRoot(l.Attrs().Index, s)
		}); err != nil {
			return fmt.Errorf("provider cap to %s: %w", st.Rate, err)
		}
		if share := e.v.FollowCap; share > 0 {
			bits, err := qdisc.ParseRate(st.Rate)
			if err != nil {
				return fmt.Errorf("step rate %q: %w", st.Rate, err)
			}
			want := uint64(share * float64(bits))
			if err := e.t.Client.Do(func() error {
				l, err := netlink.LinkByName(ClientIf)
				if err != nil {
					return err
				}
				_, err = qdisc.SetShaperRate(l.Attrs().Index, want)
				return err
			}); err != nil {
				return fmt.Errorf("client shaper to %s (%.0f %% of the cap): %w", qdisc.FormatRate(want), 100*share, err)
			}
		}
	}
	return nil
}

// sampleShaper reads the client's root shaper every 200 ms until ctx ends,
// as (seconds since t0, Mbit/s); nothing while there is no shaper.
func sampleShaper(ctx context.Context, ns *NS, t0 time.Time) <-chan [][2]float64 {
	out := make(chan [][2]float64, 1)
	go func() {
		var pts [][2]float64
		_ = ns.Do(func() error {
			l, err := netlink.LinkByName(ClientIf)
			if err != nil {
				return err
			}
			t := time.NewTicker(200 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return nil
				case now := <-t.C:
					if sh, err := qdisc.ReadShaper(l.Attrs().Index); err == nil {
						pts = append(pts, [2]float64{round3(now.Sub(t0).Seconds()), round3(float64(sh.RateBps) / 1e6)})
					}
				}
			}
		})
		out <- pts
	}()
	return out
}

// varyingWindow is the run's schedule: the loaded phase starts after idle
// seconds, each of caps (bit/s) lasts step seconds.
type varyingWindow struct {
	idle, step float64
	caps       []float64
}

// stepAt is the index of the step at t seconds (-1 before the load).
func (w varyingWindow) stepAt(t float64) int {
	if t < w.idle {
		return -1
	}
	return min(int((t-w.idle)/w.step), len(w.caps)-1)
}

// since is how far into its step t is.
func (w varyingWindow) since(t float64) float64 {
	return t - w.idle - float64(w.stepAt(t))*w.step
}

// derive computes the scenario's figures from the RTT samples (s, ms), the
// shaper's rate (s, Mbit/s) and each step's goodput (Mbit/s).
func (w varyingWindow) derive(rtt *Timeline, rates [][2]float64, goodput []float64, idleP50 float64) map[string]float64 {
	d := map[string]float64{"idle_p50_ms": round3(idleP50)}
	var all []float64
	per := make([][]float64, len(w.caps))
	for _, p := range rtt.Points {
		i := w.stepAt(p[0])
		if i < 0 || w.since(p[0]) < settle.Seconds() || p[0] >= w.idle+float64(len(w.caps))*w.step {
			continue
		}
		all = append(all, p[1])
		per[i] = append(per[i], p[1])
	}
	d["added_p99_ms"] = round3(pctl(all, 0.99) - idleP50)
	for i, v := range per {
		d[fmt.Sprintf("added_p99_step%d_ms", i)] = round3(pctl(v, 0.99) - idleP50)
	}
	share, sum := math.Inf(1), 0.0
	for i, g := range goodput {
		s := g * 1e6 / w.caps[i]
		d[fmt.Sprintf("goodput_share_step%d", i)] = round3(s)
		share = math.Min(share, s)
		sum += s
	}
	d["goodput_share_min"] = round3(share)
	if len(goodput) > 0 {
		// The mean shows what a cost paid in every step takes (an MSS
		// clamp's headers), which the worst step alone can hide.
		d["goodput_share_mean"] = round3(sum / float64(len(goodput)))
	}
	if len(rates) == 0 {
		return d
	}
	// Convergence: the first sample of a step within 10 % of its cap; a
	// step never reached counts its whole length.
	var down, up float64
	rsd := 0.0
	for i := range w.caps {
		conv := w.step
		var flat []float64
		for _, r := range rates {
			if w.stepAt(r[0]) != i {
				continue
			}
			if math.Abs(r[1]*1e6-w.caps[i])/w.caps[i] <= 0.10 && conv == w.step {
				conv = w.since(r[0])
			}
			if w.since(r[0]) >= w.step/2 {
				flat = append(flat, r[1])
			}
		}
		d[fmt.Sprintf("convergence_step%d_s", i)] = round3(conv)
		if i > 0 && w.caps[i] < w.caps[i-1] {
			down = math.Max(down, conv)
		} else if i > 0 {
			up = math.Max(up, conv)
		}
		r := relStd(flat)
		d[fmt.Sprintf("rate_rsd_step%d", i)] = round3(r)
		rsd = math.Max(rsd, r)
	}
	d["convergence_down_s"], d["convergence_up_s"], d["rate_rsd_max"] = round3(down), round3(up), round3(rsd)
	return d
}

// atMin counts rate samples in the loaded phase at the policy's minimum.
func (w varyingWindow) atMin(rates [][2]float64, minBits float64) int {
	n := 0
	for _, r := range rates {
		if w.stepAt(r[0]) >= 0 && r[1]*1e6 <= minBits*1.01 {
			n++
		}
	}
	return n
}

// shareMinAfter is the lowest rate over the cap in force from t on, in the
// loaded phase.
func (w varyingWindow) shareMinAfter(rates [][2]float64, t float64) float64 {
	lo := math.Inf(1)
	end := w.idle + float64(len(w.caps))*w.step
	for _, r := range rates {
		if r[0] >= t && r[0] < end {
			lo = math.Min(lo, r[1]*1e6/w.caps[w.stepAt(r[0])])
		}
	}
	if math.IsInf(lo, 1) {
		return 0
	}
	return lo
}

// capLine is the provider's cap as a staircase (s, Mbit/s).
func (w varyingWindow) capLine(loaded float64) [][2]float64 {
	pts := [][2]float64{{0, w.caps[0] / 1e6}}
	for i, c := range w.caps {
		t := w.idle + float64(i)*w.step
		if i > 0 {
			pts = append(pts, [2]float64{round3(t), w.caps[i-1] / 1e6})
		}
		pts = append(pts, [2]float64{round3(t), c / 1e6})
	}
	return append(pts, [2]float64{round3(w.idle + loaded), w.caps[len(w.caps)-1] / 1e6})
}

func pctl(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(int(math.Ceil(p*float64(len(s))))-1, len(s)-1)]
}

func relStd(v []float64) float64 {
	if len(v) < 2 {
		return 0
	}
	var sum, sq float64
	for _, x := range v {
		sum += x
	}
	mean := sum / float64(len(v))
	for _, x := range v {
		sq += (x - mean) * (x - mean)
	}
	return math.Sqrt(sq/float64(len(v))) / mean
}

// autorateChild is "lowlat autorate", or a peer in its place, running in
// the client namespace.
type autorateChild struct {
	cmd        *exec.Cmd
	log        *os.File
	stopRefl   func()
	reflOnce   sync.Once
	stopOnce   sync.Once
	summary    map[string]any
	err        error
	killedRefl time.Time
	// done is closed when the process has exited, err then set.
	done chan struct{}
	// logs are the files the daemon writes, oldest first: read whole at
	// stop, their tails in errors.
	logs []string
	// summarize turns the logs' lines into the variant's "autorate"
	// metrics.
	summarize func(lines []string) map[string]any
}

// startAutorate starts autorate's reflector (when the variant has one) and
// the daemon, journaled with the variant's fix, and waits until it runs.
func startAutorate(e *env, a *AutorateRun) (*autorateChild, error) {
	c := &autorateChild{summarize: lowlatSummary}
	if a.Reflector {
		_, stop, err := startReflectorOn(e.ctx, e.t.Server, AutorateReflectorPort)
		if err != nil {
			return nil, fmt.Errorf("autorate's reflector: %w", err)
		}
		c.stopRefl = stop
	}
	bin := e.opts.Lowlat
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			c.killReflector()
			return nil, err
		}
		bin = exe
	}
	logPath := filepath.Join(e.tmp, "autorate-"+e.v.Name+".log")
	c.logs = []string{logPath}
	c.cmd = exec.Command(bin, append(a.args(), "--journal", e.journal)...)
	// Its own process group: a lab stopped by a terminal's ^C does not
	// stop it before the lab's own stop sets its shaper back.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	state := filepath.Join(autorate.RunDir, ClientIf+".json")
	if err := c.start(e, a, logPath, func() bool {
		_, err := os.Stat(state)
		return err == nil
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// start runs c.cmd in the client namespace, its output to outPath, and
// waits up to 15 s for ready. A daemon that exits first, or is not ready
// by then, is an error naming a, with its logs' tails; its process group
// is killed and its reflector stopped.
func (c *autorateChild) start(e *env, a *AutorateRun, outPath string, ready func() bool) error {
	var err error
	if c.log, err = os.Create(outPath); err != nil {
		c.killReflector()
		return err
	}
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	e.phase("start "+a.String(), 0)
	if err := e.t.Client.Do(c.cmd.Start); err != nil {
		c.log.Close()
		c.killReflector()
		return fmt.Errorf("start %s: %w", a, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- c.cmd.Wait() }()
	fail := func(format string, args ...any) error {
		// Whatever the daemon started (a peer's pingers) goes with it.
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		c.log.Close()
		c.killReflector()
		return fmt.Errorf(format+": %s", append(args, c.tails())...)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		if ready() {
			c.done = make(chan struct{})
			go func() {
				if err := <-exited; err != nil {
					c.err = fmt.Errorf("%s: %v: %s", a, err, c.tails())
				}
				close(c.done)
			}()
			return nil
		}
		select {
		case werr := <-exited:
			return fail("%s exited at start: %v", a, werr)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			err := fail("%s: not running after 15 s", a)
			<-exited
			return err
		}
	}
}

func (c *autorateChild) killReflector() {
	c.reflOnce.Do(func() {
		if c.stopRefl != nil {
			c.stopRefl()
			c.killedRefl = time.Now()
		}
	})
}

// stop sends SIGTERM (the daemon sets its shaper back to base and exits),
// waits, and summarizes its log: one line per adjustment.
func (c *autorateChild) stop() map[string]any {
	c.stopOnce.Do(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
			c.err = errors.New("autorate did not stop within 10 s of SIGTERM")
		}
		// Whatever the daemon started (a peer's pingers) goes with it.
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		c.log.Close()
		c.killReflector()
		var b []byte
		for _, p := range c.logs {
			more, _ := os.ReadFile(p)
			b = append(b, more...)
		}
		c.summary = c.summarize(strings.Split(strings.TrimSpace(string(b)), "\n"))
	})
	return c.summary
}

// lowlatSummary counts lowlat autorate's adjustments by direction/reason.
func lowlatSummary(lines []string) map[string]any {
	adj := map[string]int{}
	for _, l := range lines {
		if _, rest, ok := strings.Cut(l, ": "); ok {
			if k, _, ok := strings.Cut(rest, " "); ok && strings.Contains(k, "/") && strings.Contains(rest, " -> ") {
				adj[k]++
			}
		}
	}
	return map[string]any{"adjustments": adj, "log": lines}
}

// tail is the last lines of a log, for errors.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(len(lines)-3, 0):], " | ")
}

// tails are the last lines of each of the daemon's logs that has any.
func (c *autorateChild) tails() string {
	var ts []string
	for _, p := range c.logs {
		if t := tail(p); t != "" {
			ts = append(ts, t)
		}
	}
	return strings.Join(ts, " | ")
}
