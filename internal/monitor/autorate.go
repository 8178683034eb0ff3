package monitor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lowlat/lowlat/internal/autorate"
)

// Autorate daemons ('lowlat autorate') rewrite a small state file per
// device after every tick; the monitor reads them when scraped and when the
// page is drawn, so their series need no goroutine and vanish with the
// daemon (autorate.ReadState says when its pid is gone). The shaper's
// backlog and drops are node_exporter's (node_qdisc_*{device, kind}): they
// are not exported here.

// autorateAdjustments are the direction/reason keys the daemon counts
// (autorate.State.Adjustments): each is exported from the start, at 0,
// so rate() sees a device's first adjustment.
var autorateAdjustments = []string{"down/bloat", "up/load", "base/idle", "base/stop"}

var (
	dShaperRate = prometheus.NewDesc("lowlat_shaper_rate_bytes_per_second", "The rate autorate holds the device's egress shaper at (in a dry run: the rate it would have set).", []string{"device"}, nil)
	dShaperAdj  = prometheus.NewDesc("lowlat_shaper_adjustments_total", "Rate changes autorate made to the device's shaper since its daemon started, by direction (down, up, base) and reason.", []string{"device", "direction", "reason"}, nil)
	dShaperLoad = prometheus.NewDesc("lowlat_shaper_load_ratio", "The shaper's throughput over its rate in autorate's last tick.", []string{"device"}, nil)
	dARMin      = prometheus.NewDesc("lowlat_autorate_rate_min_bytes_per_second", "The lowest rate the device's autorate policy allows (--min).", []string{"device"}, nil)
	dARMax      = prometheus.NewDesc("lowlat_autorate_rate_max_bytes_per_second", "The highest rate the device's autorate policy allows (--max).", []string{"device"}, nil)
	dARDelay    = prometheus.NewDesc("lowlat_autorate_signal_delay_seconds", "A signal's latest delay over its baseline (passive: srtt - min_rtt less the shaper's own queue).", []string{"device", "signal"}, nil)
	dARHealthy  = prometheus.NewDesc("lowlat_autorate_signal_healthy", "1 while the signal gives fresh samples.", []string{"device", "signal"}, nil)
	dARInfo     = prometheus.NewDesc("lowlat_autorate_info", "A running autorate daemon: its shaper's qdisc kind, its policy, and whether it only reports (dry_run), 1.", []string{"device", "kind", "policy", "dry_run"}, nil)
	dARTick     = prometheus.NewDesc("lowlat_autorate_last_tick_timestamp_seconds", "When the autorate daemon last published its state (every tick).", []string{"device"}, nil)
)

// autorateDir is where the config says autorate daemons publish state.
func (c *Config) autorateDir() string {
	if c.AutorateDir == "" {
		return autorate.RunDir
	}
	return c.AutorateDir
}

// readAutorate reads the state of every running autorate daemon under dir,
// in file name order. A missing dir is no daemon. A file that does not
// parse, or whose device is not its name, is skipped and logged once
// (until it reads again or goes): a scrape never fails on one.
func (m *Monitor) readAutorate(dir string) []autorate.State {
	ents, err := os.ReadDir(dir)
	bad := map[string]string{}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		bad[dir] = fmt.Sprintf("autorate states: %v", err)
	}
	var out []autorate.State
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		s, gone, err := autorate.ReadState(path)
		switch {
		case errors.Is(err, fs.ErrNotExist), gone:
			// Removed under us, or its daemon was killed: its last rate
			// is not the shaper's now.
		case err != nil:
			bad[path] = err.Error()
		case s.Device == "" || s.Device+".json" != e.Name():
			// A daemon writes <device>.json: anything else is not its
			// state, and could repeat another device's series.
			bad[path] = fmt.Sprintf("autorate state %s: device %q is not its file's", path, s.Device)
		default:
			out = append(out, s)
		}
	}
	m.arMu.Lock()
	defer m.arMu.Unlock()
	paths := make([]string, 0, len(bad))
	for path := range bad {
		paths = append(paths, path)
	}
	sort.Strings(paths)
	now := map[string]bool{}
	for _, path := range paths {
		if !m.arBad[path] {
			m.opts.Logf("%s (skipped; logged once)", bad[path])
		}
		now[path] = true
	}
	m.arBad = now
	return out
}

// collectAutorate sends the series of the daemons' states. Every value
// comes from a file, so a series that would repeat another (or carry a
// label value client_golang refuses) is dropped rather than failing the
// scrape.
func collectAutorate(ch chan<- prometheus.Metric, states []autorate.State) {
	for i := range states {
		s := &states[i]
		dev := s.Device
		seen := map[string]bool{}
		send := func(d *prometheus.Desc, vt prometheus.ValueType, v float64, labels ...string) {
			k := d.String() + "\xff" + strings.Join(labels, "\xff")
			if seen[k] {
				return
			}
			seen[k] = true
			if m, err := prometheus.NewConstMetric(d, vt, v, labels...); err == nil {
				ch <- m
			}
		}
		send(dARInfo, prometheus.GaugeValue, 1, dev, s.Kind, s.Policy, strconv.FormatBool(s.DryRun))
		send(dShaperRate, prometheus.GaugeValue, s.RateBytes(), dev)
		send(dShaperLoad, prometheus.GaugeValue, s.Load, dev)
		if !s.Time.IsZero() {
			send(dARTick, prometheus.GaugeValue, float64(s.Time.UnixNano())/1e9, dev)
		}
		if p, err := autorate.ParsePolicy(s.Policy); err == nil {
			send(dARMin, prometheus.GaugeValue, float64(p.Min)/8, dev)
			send(dARMax, prometheus.GaugeValue, float64(p.Max)/8, dev)
		}
		for _, k := range s.AdjustmentKeys() {
			d, r := autorate.SplitAdjustment(k)
			send(dShaperAdj, prometheus.CounterValue, float64(s.Adjustments[k]), dev, d, r)
		}
		for _, k := range autorateAdjustments {
			if _, ok := s.Adjustments[k]; !ok {
				d, r := autorate.SplitAdjustment(k)
				send(dShaperAdj, prometheus.CounterValue, 0, dev, d, r)
			}
		}
		for _, sig := range s.Signals {
			send(dARDelay, prometheus.GaugeValue, sig.DelaySeconds, dev, sig.Name)
			send(dARHealthy, prometheus.GaugeValue, b2f(sig.Healthy), dev, sig.Name)
		}
	}
}
