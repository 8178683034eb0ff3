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

// Rollback restores previous values. Interrupted transactions are always
// recovered first. It returns an error when any knob could not be restored;
// the journal then keeps the transaction active so a rerun retries it.
func (e *Engine) Rollback(ctx context.Context, opts RollbackOptions) (*Result, error) {
	j, err := journal.Open(e.JournalPath, journal.ReadWrite)
	if err != nil {
		return nil, err
	}
	defer j.Close()
	return e.rollbackLocked(ctx, j, opts)
}

func (e *Engine) rollbackLocked(ctx context.Context, j *journal.Journal, opts RollbackOptions) (*Result, error) {
	st, err := j.Load()
	if err != nil {
		return nil, err
	}
	res := &Result{Changed: []Item{}, Failed: []Item{}}
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
	if !opts.OnlyUnfinished {
		active := st.Active()
		switch {
		case opts.All:
			for i := len(active) - 1; i >= 0; i-- {
				if !contains(targets, active[i]) {
					targets = append(targets, active[i])
				}
			}
		case opts.Txn != "":
			t, err := st.Find(opts.Txn)
			if err != nil {
				return nil, err
			}
			if !t.Active() {
				return nil, fmt.Errorf("transaction %s is %s; nothing to roll back", t.ID, t.Status)
			}
			if latest := st.Latest(); latest != t && !contains(targets, t) {
				return nil, fmt.Errorf("transaction %s is not the newest (%s is applied on top of it): roll that back first, or use --all", t.ID, latest.ID)
			}
			if !contains(targets, t) {
				targets = append(targets, t)
			}
		default:
			if len(targets) == 0 && len(active) > 0 {
				targets = append(targets, active[len(active)-1])
			}
		}
	}
	for _, t := range targets {
		if res.Txn == "" {
			res.Txn = t.ID
		}
		if err := j.Append(journal.Record{Type: journal.TypeRollbackBegin, Txn: t.ID, Error: opts.Reason}); err != nil {
			return nil, err
		}
		failed := e.restore(ctx, j, t.ID, t.Intents)
		for i := len(t.Intents) - 1; i >= 0; i-- {
			in := t.Intents[i]
			if !containsKnob(failed, in.Knob) {
				res.Changed = append(res.Changed, Item{Knob: in.Knob, Before: in.After, After: in.Before})
			}
		}
		res.Failed = append(res.Failed, failed...)
		end := journal.Record{Type: journal.TypeRollbackEnd, Txn: t.ID, Failed: knobsOf(failed)}
		if len(failed) > 0 {
			end.Error = failed[0].Error
		}
		if err := j.Append(end); err != nil {
			return nil, err
		}
		if t.Status == journal.Unfinished || t.Status == journal.RollingBack {
			res.Notes = append(res.Notes, fmt.Sprintf("recovered interrupted transaction %s", t.ID))
		}
	}
	if len(res.Failed) > 0 {
		return res, fmt.Errorf("rollback: %d knob(s) could not be restored (first: %s: %s); rerun 'lowlat rollback' once fixed", len(res.Failed), res.Failed[0].Knob, res.Failed[0].Error)
	}
	return res, nil
}

func contains(list []*journal.Txn, t *journal.Txn) bool {
	for _, x := range list {
		if x == t {
			return true
		}
	}
	return false
}

func containsKnob(items []Item, id string) bool {
	for _, it := range items {
		if it.Knob == id {
			return true
		}
	}
	return false
}
