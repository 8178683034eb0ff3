package monitor

import (
	"time"

	"github.com/lowlat/lowlat/internal/autorate"
	"github.com/lowlat/lowlat/internal/pathprobe"
)

// Snapshot is what the status page shows: a copy taken under the monitor's
// locks, so rendering never holds them.
type Snapshot struct {
	Now        time.Time
	Version    string
	Hostname   string
	ConfigPath string
	// ReloadError is the last rejected config ("file:line:col: ..."), empty
	// when the running config is the newest.
	ReloadError string
	Targets     []TargetView

	// Doctor: when it last ran, what it found (findings only, no
	// not-checked rows), and the error when it could not run.
	DoctorAt    time.Time
	DoctorError string
	Findings    []FindingView
	// Drift lists knobs whose live value left the applied one.
	Drift []DriftView
	// Transactions in force, newest last.
	Transactions []TxnView
	// JournalError is why the journal could not be read, if it could not.
	JournalError string
	// Autorate are the running autorate daemons' states, by device.
	Autorate []autorate.State `json:",omitempty"`
}

// TargetView is one target's last hour.
type TargetView struct {
	Name, Kind, Address string
	Interval            time.Duration
	// SLO is the target's p99 objective, 0 when none.
	SLO    time.Duration
	Labels map[string]string
	// Slots are the last hour in SlotWidth steps, oldest first; slots with
	// no probes have Sent == 0.
	Slots []SlotView
	// CDF is the RTT distribution over the hour: points (seconds, fraction
	// of replies at or below), ascending.
	CDF [][2]float64
	// Sent and Lost over the hour.
	Sent, Lost int64
	// Path is a path target's last measurement, nil for other kinds and
	// before the first run ends.
	Path *pathprobe.Result `json:",omitempty"`
	// LastError is the target's last state-change line ("no replies since
	// 12:01:05"), empty while healthy.
	LastError string
}

// SlotView is one slot of a target's history.
type SlotView struct {
	Start    time.Time
	P50, P99 time.Duration
	Sent     int64
	Lost     int64
}

// FindingView is one doctor finding.
type FindingView struct {
	ID, Severity, Summary, Fix string
}

// DriftView is one drifted knob.
type DriftView struct {
	Knob, Applied, Live string
}

// TxnView is one transaction in force.
type TxnView struct {
	ID, Profile, State string
	Began              time.Time
	// ConfirmBy is the confirm deadline of an unconfirmed apply, zero if none.
	ConfirmBy time.Time
}
