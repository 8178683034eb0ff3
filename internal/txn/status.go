package txn

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/knob"
)

// Drift is a knob whose live value no longer matches what was applied.
type Drift struct {
	Knob    string `json:"knob"`
	Applied string `json:"applied"`
	Live    string `json:"live"`
	Txn     string `json:"txn"`
}

// TxnSummary is one transaction in a status report.
type TxnSummary struct {
	ID        string     `json:"id"`
	Status    string     `json:"status"`
	Profile   string     `json:"profile,omitempty"`
	Began     time.Time  `json:"began"`
	Knobs     int        `json:"knobs"`
	Persist   bool       `json:"persist,omitempty"`
	ConfirmBy *time.Time `json:"confirm_by,omitempty"`
	Confirmed bool       `json:"confirmed,omitempty"`
	Error     string     `json:"error,omitempty"`
}

// StatusReport is what lowlat status shows.
type StatusReport struct {
	// Txn is the newest transaction in force, nil when none.
	Txn    *string      `json:"txn"`
	Drift  []Drift      `json:"drift"`
	Active []TxnSummary `json:"active"`
	// Recovered lists interrupted transactions this status run restored.
	Recovered []string `json:"recovered,omitempty"`
	// Lost lists transactions undone by a reboot (applied without --persist).
	Lost []string `json:"lost,omitempty"`
	// Checked is how many knobs were compared with their live value.
	Checked int      `json:"checked"`
	Notes   []string `json:"notes,omitempty"`
}

// StatusOptions controls what status may do besides reading.
type StatusOptions struct {
	// Recover lets status restore an interrupted apply (needs root). Without
	// it, an interrupted transaction is reported with the command to run.
	Recover bool
}

// Status replays the journal, recovers interrupted transactions when allowed,
// notes transactions a reboot undid, and compares every applied knob with its
// live value.
func (e *Engine) Status(ctx context.Context, opts StatusOptions) (*StatusReport, error) {
	mode := journal.ReadOnly
	if opts.Recover {
		mode = journal.ReadWrite
	}
	j, err := journal.Open(e.JournalPath, mode)
	if errors.Is(err, os.ErrPermission) && mode == journal.ReadWrite {
		mode = journal.ReadOnly
		j, err = journal.Open(e.JournalPath, mode)
	}
	if err != nil {
		return nil, err
	}
	defer j.Close()
	rep := &StatusReport{Drift: []Drift{}, Active: []TxnSummary{}}
	st, err := j.Load()
	if err != nil {
		return nil, err
	}
	if len(st.Incomplete()) > 0 || st.Torn != nil {
		if mode == journal.ReadWrite {
			res, err := e.rollbackLocked(ctx, j, RollbackOptions{OnlyUnfinished: true, Reason: "recovered by status"})
			if res != nil {
				rep.Notes = append(rep.Notes, res.Notes...)
			}
			for _, t := range st.Incomplete() {
				rep.Recovered = append(rep.Recovered, t.ID)
			}
			if err != nil {
				return rep, fmt.Errorf("recover interrupted transaction: %w", err)
			}
			if st, err = j.Load(); err != nil {
				return nil, err
			}
		} else {
			for _, t := range st.Incomplete() {
				rep.Notes = append(rep.Notes, fmt.Sprintf("transaction %s was interrupted; run 'lowlat rollback' as root to restore it", t.ID))
			}
			if st.Torn != nil {
				rep.Notes = append(rep.Notes, fmt.Sprintf("journal %s: %s", j.Path(), st.Torn))
			}
		}
	}
	// A transaction applied in an earlier boot and not persisted is gone: the
	// reboot put every knob back.
	for _, t := range st.Active() {
		if t.Status == journal.Applied && !t.Meta.Persist && e.BootID != "" && !t.InBoot(e.BootID) {
			rep.Lost = append(rep.Lost, t.ID)
			if mode == journal.ReadWrite {
				if err := j.Append(journal.Record{Type: journal.TypeLost, Txn: t.ID, BootID: e.BootID}); err != nil {
					return nil, err
				}
			}
		}
	}
	if len(rep.Lost) > 0 && mode == journal.ReadWrite {
		if st, err = j.Load(); err != nil {
			return nil, err
		}
	}
	applied := map[string]Drift{}
	var order []string
	for _, t := range st.Active() {
		if containsString(rep.Lost, t.ID) {
			continue
		}
		rep.Active = append(rep.Active, summarize(t))
		for _, in := range t.Intents {
			if _, seen := applied[in.Knob]; !seen {
				order = append(order, in.Knob)
			}
			applied[in.Knob] = Drift{Knob: in.Knob, Applied: in.After, Txn: t.ID}
		}
	}
	if n := len(rep.Active); n > 0 {
		id := rep.Active[n-1].ID
		rep.Txn = &id
	}
	for _, id := range order {
		d := applied[id]
		k, err := knob.New(e.Sys, id)
		if err != nil {
			d.Live = "error: " + err.Error()
			rep.Drift = append(rep.Drift, d)
			continue
		}
		live, err := k.Read(ctx)
		rep.Checked++
		switch {
		case err != nil:
			d.Live = "error: " + err.Error()
		case k.Satisfied(live, d.Applied):
			continue
		default:
			d.Live = live
		}
		rep.Drift = append(rep.Drift, d)
	}
	return rep, nil
}

func summarize(t *journal.Txn) TxnSummary {
	return TxnSummary{ID: t.ID, Status: string(t.Status), Profile: t.Meta.Profile, Began: t.Began, Knobs: len(t.Intents),
		Persist: t.Meta.Persist, ConfirmBy: t.Meta.ConfirmBy, Confirmed: t.Confirmed, Error: t.Error}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Confirm accepts the transaction waiting for confirmation, so its dead-man
// watchdog leaves it in place, and stops that watchdog.
func (e *Engine) Confirm(ctx context.Context) (string, error) {
	j, err := journal.Open(e.JournalPath, journal.ReadWrite)
	if err != nil {
		return "", err
	}
	defer j.Close()
	st, err := j.Load()
	if err != nil {
		return "", err
	}
	for i := len(st.Txns) - 1; i >= 0; i-- {
		t := st.Txns[i]
		if t.Meta.ConfirmBy == nil {
			continue
		}
		if t.PendingConfirm() {
			if err := j.Append(journal.Record{Type: journal.TypeConfirm, Txn: t.ID}); err != nil {
				return "", err
			}
			stopWatchdog(t.Meta.WatchdogPID, t.ID)
			return t.ID, nil
		}
		if t.Status == journal.RolledBack && !t.Confirmed {
			return "", fmt.Errorf("transaction %s was already rolled back at %s: not confirmed by %s", t.ID, t.Ended.Local().Format(time.TimeOnly), t.Meta.ConfirmBy.Local().Format(time.TimeOnly))
		}
		break
	}
	return "", errors.New("no transaction awaits confirmation")
}

// stopWatchdog ends a confirmed transaction's watchdog early. It checks the
// process really is that watchdog first: the pid may have been reused.
func stopWatchdog(pid int, txnID string) {
	if pid <= 0 {
		return
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || !strings.Contains(string(cmdline), txnID) {
		return
	}
	syscall.Kill(pid, syscall.SIGTERM)
}

// Watchdog is the dead-man switch of apply --confirm: it waits until deadline,
// then rolls the transaction back unless it was confirmed (or already ended).
// The apply may still hold the journal lock when the deadline passes (a hung
// apply); the watchdog keeps retrying until it gets it or ctx ends.
func (e *Engine) Watchdog(ctx context.Context, txnID string, deadline time.Time) (*Result, error) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	for {
		j, err := journal.Open(e.JournalPath, journal.ReadWrite)
		if errors.Is(err, journal.ErrLocked) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(200 * time.Millisecond):
				continue
			}
		}
		if err != nil {
			return nil, err
		}
		defer j.Close()
		st, err := j.Load()
		if err != nil {
			return nil, err
		}
		tx, err := st.Find(txnID)
		if err != nil {
			return nil, nil // the apply died before it began: nothing to undo
		}
		if tx.Confirmed || !tx.Active() {
			return nil, nil
		}
		// Anything applied on top of the unconfirmed transaction goes too.
		return e.rollbackLocked(context.WithoutCancel(ctx), j, RollbackOptions{Txn: txnID, All: tx != st.Latest(), Reason: "not confirmed by " + deadline.Format(time.RFC3339)})
	}
}
