package autorate

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/lowlat/lowlat/internal/atomicfile"
)

// State is what a running daemon publishes after each tick (StatePath): the
// monitor exports it as metrics, status and tests read it.
type State struct {
	Device string    `json:"device"`
	PID    int       `json:"pid"`
	Kind   string    `json:"kind"` // the shaper: cake or tbf
	Policy string    `json:"policy"`
	DryRun bool      `json:"dry_run,omitempty"`
	Time   time.Time `json:"time"`
	// RateBps is the shaper's rate in bits per second (in a dry run: the
	// rate autorate would have set).
	RateBps uint64 `json:"rate_bps"`
	// Adjustments counts rate changes by "direction/reason"
	// ("down/bloat", "up/load", "base/idle", "base/stop").
	Adjustments map[string]uint64 `json:"adjustments"`
	// Signals are the latest per-signal delays.
	Signals []SignalState `json:"signals"`
	// Load is the shaper's throughput over its rate in the last tick.
	Load float64 `json:"load"`
	// Backlog and Drops are the shaper's own (bytes queued, packets
	// dropped since it was created).
	Backlog uint64 `json:"backlog_bytes"`
	Drops   uint64 `json:"drops"`
}

// SignalState is one signal's latest view.
type SignalState struct {
	// Name is "owd:10.0.0.2:7431", "rtt:10.0.0.2:7431", "icmp:192.0.2.1" or
	// "passive".
	Name string `json:"name"`
	// Delay is the latest sample's delay over the signal's baseline (for
	// passive: srtt - min_rtt less the shaper's own queue); Baseline is the
	// baseline itself (0 for passive).
	DelaySeconds    float64 `json:"delay_seconds"`
	BaselineSeconds float64 `json:"baseline_seconds"`
	// Healthy is false while the signal gives no fresh samples.
	Healthy bool `json:"healthy"`
}

// RateBytes is the rate in bytes per second, the unit of the metric.
func (s *State) RateBytes() float64 { return float64(s.RateBps) / 8 }

// AdjustmentKeys returns the direction/reason keys in order.
func (s *State) AdjustmentKeys() []string {
	var ks []string
	for k := range s.Adjustments {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// SplitAdjustment splits "down/bloat" into direction and reason.
func SplitAdjustment(key string) (direction, reason string) {
	d, r, _ := strings.Cut(key, "/")
	return d, r
}

// WriteState publishes s at dir/<device>.json.
func WriteState(dir string, s *State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("autorate state dir %s: %w", dir, err)
	}
	return atomicfile.Write(filepath.Join(dir, s.Device+".json"), append(b, '\n'), 0o644)
}

// ReadState reads one daemon's state file (RunDir/<device>.json). gone is
// true when the daemon that wrote it no longer runs, so a killed daemon's
// last rate is not taken as current; a file removed under the caller is an
// error wrapping fs.ErrNotExist.
func ReadState(path string) (s State, gone bool, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return s, false, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, false, fmt.Errorf("autorate state %s: %w", path, err)
	}
	return s, s.PID > 0 && !alive(s.PID), nil
}
