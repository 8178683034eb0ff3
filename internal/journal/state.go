package journal

import (
	"fmt"
	"time"
)

// Status of a transaction.
type Status string

// Transaction statuses, in the order they can occur.
const (
	// Unfinished: begun, never committed or aborted. If no lowlat holds the lock, the
	// apply died part-way and the transaction must be rolled back.
	Unfinished Status = "open"
	// Applied: committed and in force.
	Applied Status = "applied"
	// RollingBack: a rollback began and has not ended; rerun it.
	RollingBack Status = "rolling-back"
	// RolledBack: every intent restored and verified.
	RolledBack Status = "rolled-back"
	// Aborted: the apply failed and rolled itself back.
	Aborted Status = "aborted"
	// Lost: applied in an earlier boot without --persist; the reboot undid
	// every one of its knobs. A transaction with knobs that survive a reboot
	// (files, drop-ins, a disabled service) loses only the others and stays
	// Applied.
	Lost Status = "lost"
)

// Intent is one knob change of a transaction.
type Intent struct {
	Seq    int
	Knob   string
	Before string
	After  string
}

// Txn is one transaction as replayed.
type Txn struct {
	ID        string
	Began     time.Time
	Meta      Meta
	Intents   []Intent
	Status    Status
	Confirmed bool
	// Error is the abort reason, or the last rollback failure.
	Error string
	// Failed are the knobs the last rollback could not restore.
	Failed []string
	// Boots are the boot ids the transaction was in force in (the apply's boot
	// plus every boot a persisted transaction was re-applied in).
	Boots []string
	// Evidence is the last gate verdict on the transaction, with its
	// measurements (nil when it was not gated).
	Evidence *Evidence
	// Lost are the intents a reboot put back (volatile knobs of a transaction
	// applied without --persist); they are no longer part of Intents.
	Lost  []Intent
	Ended time.Time
}

// Active reports whether the transaction's changes are (or may be) in force.
func (t *Txn) Active() bool {
	return t.Status == Applied || t.Status == Unfinished || t.Status == RollingBack
}

// PendingConfirm reports whether the transaction waits for lowlat confirm.
func (t *Txn) PendingConfirm() bool {
	return t.Status == Applied && t.Meta.ConfirmBy != nil && !t.Confirmed
}

// InBoot reports whether the transaction was in force in the given boot.
func (t *Txn) InBoot(boot string) bool {
	if boot == "" {
		return true
	}
	for _, b := range t.Boots {
		if b == boot {
			return true
		}
	}
	return false
}

// DropLost moves the intents of knobs a reboot put back from Intents to
// Lost; a transaction left with no intent is Lost as a whole.
func (t *Txn) DropLost(knobs []string, at time.Time) {
	for _, k := range knobs {
		for i, in := range t.Intents {
			if in.Knob == k {
				t.Lost = append(t.Lost, in)
				t.Intents = append(t.Intents[:i:i], t.Intents[i+1:]...)
				break
			}
		}
	}
	if len(t.Intents) == 0 && t.Status == Applied {
		t.Status, t.Ended = Lost, at
	}
}

// State is the journal replayed.
type State struct {
	Txns []*Txn
	Torn *Torn
}

// Replay folds records into transactions.
func Replay(recs []Record) (*State, error) {
	st := &State{}
	byID := map[string]*Txn{}
	for i, r := range recs {
		t := byID[r.Txn]
		if t == nil && r.Type != TypeBegin {
			return nil, fmt.Errorf("%w: record %d (%s) for unknown transaction %s", ErrCorrupt, i+1, r.Type, r.Txn)
		}
		switch r.Type {
		case TypeBegin:
			if t != nil {
				return nil, fmt.Errorf("%w: transaction %s begins twice", ErrCorrupt, r.Txn)
			}
			t = &Txn{ID: r.Txn, Began: r.Time, Status: Unfinished}
			if r.Meta != nil {
				t.Meta = *r.Meta
				if r.Meta.BootID != "" {
					t.Boots = []string{r.Meta.BootID}
				}
			}
			byID[r.Txn] = t
			st.Txns = append(st.Txns, t)
		case TypeIntent:
			t.Intents = append(t.Intents, Intent{Seq: r.Seq, Knob: r.Knob, Before: r.Before, After: r.After})
		case TypeSkipped:
			for k, in := range t.Intents {
				if in.Seq == r.Seq {
					t.Intents = append(t.Intents[:k:k], t.Intents[k+1:]...)
					break
				}
			}
		case TypeCommit:
			t.Status = Applied
		case TypeAbort:
			t.Status, t.Error, t.Ended = Aborted, r.Error, r.Time
		case TypeConfirm:
			t.Confirmed = true
		case TypeRollbackBegin:
			t.Status = RollingBack
			t.Failed = nil
		case TypeRestored:
		case TypeRollbackEnd:
			if len(r.Failed) > 0 {
				// Some knobs could not be restored: still in force, rerun rollback.
				t.Status, t.Failed, t.Error = RollingBack, r.Failed, r.Error
			} else {
				t.Status, t.Ended = RolledBack, r.Time
			}
		case TypeEvidence:
			t.Evidence = r.Evidence
		case TypeDeadline:
			if r.ConfirmBy == nil {
				return nil, fmt.Errorf("%w: record %d: a deadline without confirm_by", ErrCorrupt, i+1)
			}
			by := *r.ConfirmBy
			t.Meta.ConfirmBy = &by
		case TypeReapply:
			if r.BootID != "" {
				t.Boots = append(t.Boots, r.BootID)
			}
		case TypeLost:
			knobs := r.Knobs
			if len(knobs) == 0 {
				// As an older lowlat wrote it: the whole transaction.
				for _, in := range t.Intents {
					knobs = append(knobs, in.Knob)
				}
			}
			t.DropLost(knobs, r.Time)
		default:
			// Unknown record types from the same format version are a bug.
			return nil, fmt.Errorf("%w: record %d has unknown type %q", ErrCorrupt, i+1, r.Type)
		}
	}
	return st, nil
}

// Active returns the transactions whose changes may be in force, oldest first.
func (s *State) Active() []*Txn {
	var out []*Txn
	for _, t := range s.Txns {
		if t.Active() {
			out = append(out, t)
		}
	}
	return out
}

// Incomplete returns transactions that need recovery: an apply that never
// committed, or a rollback that never completed.
func (s *State) Incomplete() []*Txn {
	var out []*Txn
	for _, t := range s.Txns {
		if t.Status == Unfinished || t.Status == RollingBack {
			out = append(out, t)
		}
	}
	return out
}

// Latest returns the newest active transaction, or nil.
func (s *State) Latest() *Txn {
	a := s.Active()
	if len(a) == 0 {
		return nil
	}
	return a[len(a)-1]
}

// Find returns the transaction with the id (or a unique prefix of it).
func (s *State) Find(id string) (*Txn, error) {
	var hit *Txn
	for _, t := range s.Txns {
		if t.ID == id {
			return t, nil
		}
		if len(id) >= 4 && len(t.ID) > len(id) && t.ID[:len(id)] == id {
			if hit != nil {
				return nil, fmt.Errorf("transaction %q is ambiguous", id)
			}
			hit = t
		}
	}
	if hit == nil {
		return nil, fmt.Errorf("no transaction %q in the journal", id)
	}
	return hit, nil
}
