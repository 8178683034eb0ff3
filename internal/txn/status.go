package txn

import (
	"context"
	"errors"
	"fmt"
	"os"
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
	// Lost counts the knobs a reboot put back (the transaction is partly
	// lost; its other knobs are still in force).
	Lost  int    `json:"lost,omitempty"`
	Error string `json:"error,omitempty"`
	// Evidence is the gate's measurements and verdict, when it was gated.
	Evidence *journal.Evidence `json:"evidence,omitempty"`
}

// StatusReport is what lowlat status shows.
type StatusReport struct {
	// Txn is the newest transaction in force, nil when none.
	Txn    *string      `json:"txn"`
	Drift  []Drift      `json:"drift"`
	Active []TxnSummary `json:"active"`
	// Recovered lists interrupted transactions this status run restored.
	Recovered []string `json:"recovered,omitempty"`
	// Lost lists transactions a reboot undid completely (applied without
	// --persist, nothing of them survives a reboot).
	Lost []string `json:"lost,omitempty"`
	// PartlyLost lists transactions a reboot undid in part: their volatile
	// knobs are back to what they were, the rest (files, drop-ins, a
	// disabled service) is still in force and still rolls back.
	PartlyLost []string `json:"partly_lost,omitempty"`
	// Overdue says what keeps a transaction past its confirm deadline in
	// force: a journal lock its watchdog waits for, a dead watchdog.
	Overdue []string `json:"overdue,omitempty"`
	// Locked names the process holding the journal when status had to read
	// it without the lock.
	Locked string `json:"locked,omitempty"`
	// LastGate is the newest gated transaction, in force or not: a change
	// the gate rolled back is still evidence worth showing.
	LastGate *TxnSummary `json:"last_gate,omitempty"`
	// Checked is how many knobs were compared with their live value.
	Checked int      `json:"checked"`
	Notes   []string `json:"notes,omitempty"`
}

// StatusOptions controls what status may do besides reading.
type StatusOptions struct {
	// Recover lets status settle the journal (needs root): restore an
	// interrupted apply, roll back a transaction whose confirmation can no
	// longer come, record what a reboot put back. Without it, those are
	// reported with the command to run.
	Recover bool
	// Peek reads the journal without taking its lock, even a shared one:
	// for a reader that runs on its own schedule (lowlat monitor), whose
	// lock would make an apply starting at that moment fail as "Locked".
	// It cannot be combined with Recover.
	Peek bool
}

// Status settles the journal when allowed, and compares every knob in force
// with its live value. When another process holds the journal (a hung apply
// whose watchdog waits), it reads the journal as last written, without the
// lock, and says who holds it.
func (e *Engine) Status(ctx context.Context, opts StatusOptions) (*StatusReport, error) {
	rep := &StatusReport{Drift: []Drift{}, Active: []TxnSummary{}}
	mode := journal.ReadOnly
	if opts.Recover {
		mode = journal.ReadWrite
	}
	var j *journal.Journal
	var err error
	if opts.Peek && !opts.Recover {
		j, err = journal.Peek(e.JournalPath)
	} else {
		j, err = journal.Open(e.JournalPath, mode)
	}
	if errors.Is(err, os.ErrPermission) && mode == journal.ReadWrite {
		mode = journal.ReadOnly
		j, err = journal.Open(e.JournalPath, mode)
	}
	var locked *journal.LockedError
	if errors.As(err, &locked) {
		rep.Locked = locked.Holder.String()
		j, err = journal.Peek(e.JournalPath)
	}
	settle := err == nil && mode == journal.ReadWrite && rep.Locked == ""
	if err != nil {
		return nil, err
	}
	defer j.Close()
	before, err := j.Load()
	if err != nil {
		return nil, err
	}
	st := before
	if settle {
		res, err := e.settle(ctx, j)
		if res != nil {
			rep.Notes = append(rep.Notes, res.Notes...)
		}
		for _, t := range before.Incomplete() {
			rep.Recovered = append(rep.Recovered, t.ID)
		}
		if err != nil {
			return rep, fmt.Errorf("settle the journal: %w", err)
		}
		if st, err = j.Load(); err != nil {
			return nil, err
		}
		notes, err := e.renameLegacySysctlFiles(ctx, j, st)
		rep.Notes = append(rep.Notes, notes...)
		if err != nil {
			return rep, fmt.Errorf("rename sysctl.d files: %w", err)
		}
		if len(notes) > 0 {
			if st, err = j.Load(); err != nil {
				return nil, err
			}
		}
	} else {
		for _, t := range st.Incomplete() {
			if rep.Locked != "" {
				rep.Notes = append(rep.Notes, fmt.Sprintf("transaction %s is unfinished: %s may be applying or rolling it back right now", t.ID, rep.Locked))
				continue
			}
			rep.Notes = append(rep.Notes, fmt.Sprintf("transaction %s was interrupted; run 'lowlat rollback' as root to restore it", t.ID))
		}
		if st.Torn != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("journal %s: %s", j.Path(), st.Torn))
		}
		rep.Notes = append(rep.Notes, e.settleView(st)...)
	}
	if rep.Locked != "" {
		rep.Notes = append(rep.Notes, fmt.Sprintf("journal %s is locked by %s: this is the journal as last written", j.Path(), rep.Locked))
	}
	rep.Lost, rep.PartlyLost = lostNow(before, st)
	for i := len(st.Txns) - 1; i >= 0; i-- {
		if st.Txns[i].Evidence != nil {
			g := summarize(st.Txns[i])
			rep.LastGate = &g
			break
		}
	}
	applied := map[string]Drift{}
	var order []string
	for _, t := range st.Active() {
		rep.Active = append(rep.Active, summarize(t))
		if t.PendingConfirm() && e.now().After(*t.Meta.ConfirmBy) {
			rep.Overdue = append(rep.Overdue, e.overdue(t, rep.Locked))
		}
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

// lostNow lists the transactions with knobs lost at a reboot: wholly lost
// ones that were still active before settling, and partly lost ones.
func lostNow(before, after *journal.State) (lost, partly []string) {
	was := map[string]bool{}
	for _, t := range before.Active() {
		was[t.ID] = true
	}
	for _, t := range after.Txns {
		switch {
		case t.Status == journal.Lost && was[t.ID]:
			lost = append(lost, t.ID)
		case t.Active() && len(t.Lost) > 0:
			partly = append(partly, t.ID)
		}
	}
	return lost, partly
}

// overdue says why t is still in force past its confirm deadline.
func (e *Engine) overdue(t *journal.Txn, lockedBy string) string {
	late := fmt.Sprintf("transaction %s was not confirmed by %s", t.ID, When(*t.Meta.ConfirmBy, e.now()))
	switch {
	case !e.watchdogRuns(t):
		return late + fmt.Sprintf(" and its watchdog (pid %d) is gone: run 'lowlat rollback' as root", t.Meta.WatchdogPID)
	case lockedBy != "":
		return late + fmt.Sprintf("; its watchdog (pid %d) waits for the journal lock held by %s", t.Meta.WatchdogPID, lockedBy)
	}
	return late + fmt.Sprintf("; its watchdog (pid %d) is rolling it back", t.Meta.WatchdogPID)
}

func summarize(t *journal.Txn) TxnSummary {
	return TxnSummary{ID: t.ID, Status: string(t.Status), Profile: t.Meta.Profile, Began: t.Began, Knobs: len(t.Intents),
		Persist: t.Meta.Persist, ConfirmBy: t.Meta.ConfirmBy, Confirmed: t.Confirmed, Lost: len(t.Lost), Error: t.Error, Evidence: t.Evidence}
}
