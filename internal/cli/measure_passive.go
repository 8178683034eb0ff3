package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/lowlat/lowlat/internal/passive"
)

// Defaults of a passive gate's window.
const (
	passiveWindow     = 60 * time.Second
	passiveMinSamples = 200
)

// passiveNotes say what a passive gate's figures mean and cannot tell.
var passiveNotes = []string{
	"passive: the host's real traffic, measured in the kernel; it moves by itself, so a window compares with the other only when the traffic is alike (the volumes are shown)",
}

// egressNote: fq's pacing delay is queueing by design.
const egressNote = "passive egress: the time from a packet's entry into the device's queueing layer to the driver, a shaper's queue and fq's pacing delay (by design) included"

// parsePassive parses "passive TARGET [--for D] [--min-samples N]".
func parsePassive(m *measurement, args []string, usage func(error) error) (*measurement, error) {
	fs := pflag.NewFlagSet("passive", pflag.ContinueOnError)
	fs.SetOutput(discard{})
	window := fs.Duration("for", passiveWindow, "each window's length, before and after the change")
	minSamples := fs.Uint64("min-samples", passiveMinSamples, "the fewest values a window must hold to prove anything")
	if err := fs.Parse(args); err != nil {
		return nil, usage(err)
	}
	t, err := passive.ParseGateTarget(fs.Args())
	if err != nil {
		return nil, usage(err)
	}
	switch {
	case *window < 5*time.Second:
		return nil, usage(fmt.Errorf("--for %v: a window shorter than 5s has too few values to judge", *window))
	case *minSamples < 20:
		return nil, usage(fmt.Errorf("--min-samples %d: at least 20 (a p99 of fewer is its maximum)", *minSamples))
	}
	m.length = *window
	m.config = t
	m.minSamples = *minSamples
	m.notes = passiveNotes
	if t.Measure == passive.Egress {
		m.notes = append(m.notes[:len(m.notes):len(m.notes)], egressNote)
	}
	m.run = func(ctx context.Context) (any, error) { return passive.RunGate(ctx, t, *window) }
	m.samples = func(res any) uint64 {
		if r, ok := res.(*passive.GateResult); ok {
			return r.Samples()
		}
		return 0
	}
	m.compare = passiveVolumes
	return m, nil
}

// passiveVolumes says how much traffic each window saw, and warns when it
// moved by more than 2x: a window of other traffic is another workload.
func passiveVolumes(before, after any) []string {
	b, okb := before.(*passive.GateResult)
	a, oka := after.(*passive.GateResult)
	if !okb || !oka {
		return nil
	}
	out := []string{fmt.Sprintf("traffic: before %.1f values/s, %.2f new connections/s; after %.1f values/s, %.2f new connections/s",
		b.Hist.PerSecond, b.Hist.ConnsPerSecond, a.Hist.PerSecond, a.Hist.ConnsPerSecond)}
	moved := func(x, y float64) bool { return x > 0 && y > 0 && (x > 2*y || y > 2*x) || (x == 0) != (y == 0) }
	if moved(b.Hist.PerSecond, a.Hist.PerSecond) || moved(b.Hist.ConnsPerSecond, a.Hist.ConnsPerSecond) {
		out = append(out, "warning: the traffic's volume differs by more than 2x between the windows: the verdict compares different workloads")
	}
	return out
}

// tooFew is the error of a window with too few values to prove anything.
func tooFew(label string, n, min uint64) error {
	return fmt.Errorf("%s: the window held %d values; a passive gate needs at least %d (--min-samples) to prove anything: too few samples is no proof", label, n, min)
}
