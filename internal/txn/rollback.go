package txn

import (
	"context"
	"fmt"

	"github.com/lowlat/lowlat/internal/journal"
)

// RollbackOptions selects what to roll back. The zero value rolls back the
// newest active transaction (after recovering any unfinished one).
type RollbackOptions struct {
	// Txn names a transaction (id or unique prefix); it must be the newest
	// active one, since older ones may be overlaid by newer changes.
	Txn string
	// All rolls back every active transaction, newest first.
	All bool
	// Reason is recorded in the journal ("confirm deadline passed").
	Reason string
	// OnlyUnfinished recovers interrupted transactions and nothing else (what
	// status does).
	OnlyUnfinished bool
}

// Rollback restores previous values. The journal is settled first:
// interrupted transactions are recovered, and one still awaiting a
// confirmation that can no longer come (applied before a reboot) is rolled
// back; when that did anything, the default rollback stops there. It returns
// an error when any knob could not be restored; the journal then keeps the
// transaction active so a rerun retries it.
func (e *Engine) Rollback(ctx context.Context, opts RollbackOptions) (*Result, error) {
	j, err := journal.Open(e.JournalPath, journal.ReadWrite)
	if err != nil {
		return nil, err
	}
	defer j.Close()
	res, err := e.settle(ctx, j)
	if err != nil {
		return res, err
	}
	if opts.OnlyUnfinished {
		return res, nil
	}
	st, err := j.Load()
	if err != nil {
		return res, err
	}
	active := st.Active()
	var targets []*journal.Txn
	switch {
	case opts.All:
		for i := len(active) - 1; i >= 0; i-- {
			targets = append(targets, active[i])
		}
	case opts.Txn != "":
		t, err := st.Find(opts.Txn)
		if err != nil {
			return res, err
		}
		if !t.Active() {
			if containsID(res, t.ID) {
				return res, nil // settling just rolled it back
			}
			return res, fmt.Errorf("transaction %s is %s; nothing to roll back", t.ID, t.Status)
		}
		if latest := st.Latest(); latest != t {
			return res, fmt.Errorf("transaction %s is not the newest (%s is applied on top of it): roll that back first, or use --all", t.ID, latest.ID)
		}
		targets = append(targets, t)
	default:
		if res.Txn == "" && len(active) > 0 {
			targets = append(targets, active[len(active)-1])
		}
	}
	r, err := e.rollbackTxns(ctx, j, targets, opts.Reason)
	res.merge(r)
	return res, err
}

// rollbackLocked recovers the interrupted transactions of a locked journal
// (cutting a torn last line first), or, without OnlyUnfinished, also the
// newest active one.
func (e *Engine) rollbackLocked(ctx context.Context, j *journal.Journal, opts RollbackOptions) (*Result, error) {
	st, err := j.Load()
	if err != nil {
		return nil, err
	}
	res := newResult()
	if st.Torn != nil {
		// The torn record announced a change that never started (knobs are
		// written only after their intent is on disk): cut it so new records
		// start on a clean line.
		if err := j.CutTorn(st.Torn); err != nil {
			return nil, err
		}
		res.Notes = append(res.Notes, fmt.Sprintf("journal %s: removed %s", j.Path(), st.Torn))
	}
	var targets []*journal.Txn
	inc := st.Incomplete()
	for i := len(inc) - 1; i >= 0; i-- {
		targets = append(targets, inc[i])
	}
	if !opts.OnlyUnfinished && len(targets) == 0 {
		if latest := st.Latest(); latest != nil {
			targets = append(targets, latest)
		}
	}
	r, err := e.rollbackTxns(ctx, j, targets, opts.Reason)
	res.merge(r)
	return res, err
}

// rollbackTxns restores each transaction in order. Knobs a reboot already
// put back (Lost) are not part of a transaction's intents any more; knobs
// whose device vanished are reported as Gone.
func (e *Engine) rollbackTxns(ctx context.Context, j *journal.Journal, targets []*journal.Txn, reason string) (*Result, error) {
	res := newResult()
	for _, t := range targets {
		if res.Txn == "" {
			res.Txn = t.ID
		}
		res.RolledBack = append(res.RolledBack, t.ID)
		if err := j.Append(journal.Record{Type: journal.TypeRollbackBegin, Txn: t.ID, Error: reason}); err != nil {
			return res, err
		}
		r := e.restore(ctx, j, t.ID, t.Intents)
		res.Changed = append(res.Changed, r.Changed...)
		res.Gone = append(res.Gone, r.Gone...)
		res.Inexact = append(res.Inexact, r.Inexact...)
		res.Failed = append(res.Failed, r.Failed...)
		end := journal.Record{Type: journal.TypeRollbackEnd, Txn: t.ID, Failed: knobsOf(r.Failed)}
		if len(r.Failed) > 0 {
			end.Error = r.Failed[0].Error
		}
		if err := j.Append(end); err != nil {
			return res, err
		}
		if t.Status == journal.Unfinished || t.Status == journal.RollingBack {
			res.Notes = append(res.Notes, fmt.Sprintf("recovered interrupted transaction %s", t.ID))
		}
		if t.PendingConfirm() && len(r.Failed) == 0 {
			// Nothing left for its dead-man watchdog to do.
			stopWatchdog(t)
		}
	}
	if len(res.Failed) > 0 {
		return res, fmt.Errorf("rollback: %d knob(s) could not be restored (first: %s: %s); rerun 'lowlat rollback' once fixed", len(res.Failed), res.Failed[0].Knob, res.Failed[0].Error)
	}
	return res, nil
}

func containsID(res *Result, id string) bool {
	for _, x := range res.RolledBack {
		if x == id {
			return true
		}
	}
	return false
}
