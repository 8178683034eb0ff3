//go:build linux

package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/testnet"
)

// heldJSON is what apply --prove --hold --json says of a change it holds.
type heldJSON struct {
	Txn       string     `json:"txn"`
	Changed   bool       `json:"changed"`
	ConfirmBy *time.Time `json:"confirm_by"`
	Gate      struct {
		Keep      bool       `json:"keep"`
		Verdict   string     `json:"verdict"`
		Held      bool       `json:"held"`
		ConfirmBy *time.Time `json:"confirm_by"`
	} `json:"gate"`
}

// TestIntegrationGateHold: apply --prove --hold --confirm D on the
// bufferbloat path. The gate keeps the fix but does not confirm it: the
// transaction awaits confirmation, its deadline re-armed to D from the
// gate's decision and shown by status. The watchdog, started with the
// gate's own deadline, lets that pass and rolls the change back at the
// re-armed one; held again, 'lowlat confirm' keeps it and ends the
// watchdog.
func TestIntegrationGateHold(t *testing.T) {
	w := newGateWorld(t, true)
	before := w.snapshot()
	args := []string{"apply", "--yes", "--json", "--profile", "capped-uplink", "--set", "rate=1.9mbit",
		"--prove", w.loadProbe(), "--settle", "1s", "--slo", "p99<=100ms", "--hold"}
	// hold applies with --hold and --confirm d, and returns what it said,
	// once the gate decided, and the watchdog's pid and its first deadline.
	hold := func(d time.Duration) (heldJSON, int, time.Time) {
		t.Helper()
		r := w.run(nil, append(args, "--confirm", d.String())...)
		decided := time.Now()
		var h heldJSON
		if err := json.Unmarshal([]byte(r.stdout), &h); err != nil {
			t.Fatalf("apply --json: %v\nstdout: %s\nstderr: %s", err, r.stdout, r.stderr)
		}
		if r.code != 0 || !h.Changed || !h.Gate.Keep || h.Gate.Verdict != "kept" || !h.Gate.Held || h.Gate.ConfirmBy == nil || h.ConfirmBy == nil {
			t.Fatalf("held apply: exit %d, %+v\nstderr: %s", r.code, h, r.stderr)
		}
		if got := h.ConfirmBy.Sub(decided); got < d-3*time.Second || got > d+time.Second || !h.ConfirmBy.Equal(h.Gate.ConfirmBy.Truncate(time.Second)) {
			t.Errorf("held until %v (%v after the apply returned), gate says %v; want --confirm %v from the decision", h.ConfirmBy, got, h.Gate.ConfirmBy, d)
		}
		tx := journalState(t, w.journal).Txns[len(journalState(t, w.journal).Txns)-1]
		if !tx.PendingConfirm() || !tx.Meta.ConfirmBy.Equal(*h.Gate.ConfirmBy) || tx.Evidence == nil || !tx.Evidence.Keep {
			t.Fatalf("journal after the hold: pending %v, confirm by %v, evidence %+v", tx.PendingConfirm(), tx.Meta.ConfirmBy, tx.Evidence)
		}
		pid := tx.Meta.WatchdogPID
		// The watchdog lives in a copy of this mount namespace, which pins
		// the namespaces' mounts: gone before they are deleted.
		t.Cleanup(func() {
			if syscall.Kill(pid, 0) == nil && !waitFor(5*time.Second, func() bool { return syscall.Kill(pid, 0) != nil }) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		})
		return h, pid, watchdogDeadline(t, pid, tx.ID)
	}

	// Held 36 s: past the gate's own deadline (settle, one measurement and
	// 30 s from the apply), which the watchdog was started with.
	h, pid, first := hold(36 * time.Second)
	if !first.Before(*h.Gate.ConfirmBy) {
		t.Fatalf("the watchdog's deadline %v is not before the held one %v: the test shows nothing", first, h.Gate.ConfirmBy)
	}
	if w.snapshot() == before {
		t.Fatal("a held change left the namespace as it was")
	}
	if st := w.mustRun("status"); !strings.Contains(st.stdout, "awaiting confirm until "+h.Gate.ConfirmBy.Local().Format(time.TimeOnly)) {
		t.Errorf("status does not show the held deadline %v:\n%s", h.Gate.ConfirmBy.Local().Format(time.TimeOnly), st.stdout)
	}
	time.Sleep(time.Until(first.Add(2 * time.Second)))
	if tx := journalState(t, w.journal).Txns[0]; !tx.PendingConfirm() || w.snapshot() == before || syscall.Kill(pid, 0) != nil {
		t.Fatalf("2 s after the watchdog's first deadline: pending %v, watchdog alive %v, in force %v; want it held", tx.PendingConfirm(), syscall.Kill(pid, 0) == nil, w.snapshot() != before)
	}
	if !waitFor(time.Until(h.Gate.ConfirmBy.Add(20*time.Second)), func() bool { return w.snapshot() == before }) {
		t.Fatalf("not rolled back 20 s after the held deadline:\n%s", testnet.DiffLines(before, w.snapshot()))
	}
	if time.Now().Before(*h.Gate.ConfirmBy) {
		t.Errorf("rolled back before the held deadline %v", h.Gate.ConfirmBy)
	}
	if tx := journalState(t, w.journal).Txns[0]; tx.Active() || tx.Confirmed {
		t.Errorf("after the held deadline: status %s, confirmed %v", tx.Status, tx.Confirmed)
	}

	// Held again, and confirmed: kept, the watchdog gone.
	_, pid, _ = hold(10 * time.Minute)
	w.mustRun("confirm")
	if !waitFor(5*time.Second, func() bool { return syscall.Kill(pid, 0) != nil }) {
		t.Error("the watchdog of a confirmed hold still runs")
	}
	if tx := journalState(t, w.journal).Txns[1]; !tx.Confirmed || !tx.Active() || w.snapshot() == before {
		t.Errorf("a confirmed hold: confirmed %v, status %s", tx.Confirmed, tx.Status)
	}
	w.mustRun("rollback")
	if after := w.snapshot(); after != before {
		t.Fatalf("rollback of a confirmed hold:\n%s", testnet.DiffLines(before, after))
	}
}

// watchdogDeadline is the deadline watchdog pid of transaction id was
// started with (its --deadline).
func watchdogDeadline(t *testing.T, pid int, id string) time.Time {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	args := strings.Split(string(b), "\x00")
	for i, a := range args {
		if a == "--deadline" && i+1 < len(args) && strings.Contains(string(b), id) {
			d, err := time.Parse(time.RFC3339Nano, args[i+1])
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
	}
	t.Fatalf("no watchdog of %s at pid %d: %v %q", id, pid, err, b)
	return time.Time{}
}
