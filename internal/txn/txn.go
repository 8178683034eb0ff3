// Package txn applies a plan's changes as one journaled transaction and undoes
// it: every knob's previous value is appended to the journal and fsynced before
// the knob is written, each write is read back, and the first failure rolls the
// whole transaction back. Rollback restores the recorded previous values in
// reverse order and verifies each one exactly. Status replays the journal,
// recovers an apply that died part-way, and reports drift: knobs whose live
// value no longer matches what was applied.
//
// The engine decides nothing about what to change (that is the plan package)
// and prints nothing (that is the CLI).
package txn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/knob"
)

// Change is one knob to set.
type Change struct {
	Knob  string
	Value string
}

// Item is one knob in a result.
type Item struct {
	Knob   string `json:"knob"`
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Result is what apply and rollback report.
type Result struct {
	Txn string `json:"txn"`
	// Changed are the knobs written ("changes" in JSON, where "changed"
	// says whether there are any, as automation such as Ansible reads it).
	Changed []Item `json:"changes"`
	Failed  []Item `json:"failed"`
	// Skipped are knobs the host refused outright (knob.ErrNotWritable: a
	// driver's EOPNOTSUPP, a fixed feature, a kernel-managed interrupt): nothing
	// was written, and the rest of the transaction went on.
	Skipped []Item `json:"skipped,omitempty"`
	// Gone are knobs a rollback could not restore because their device
	// vanished (an interface unplugged, an interrupt freed): nothing is left
	// to restore, and nothing was.
	Gone []Item `json:"gone,omitempty"`
	// Inexact are knobs whose previous value lowlat could not recreate (an
	// apply replaced it with --force): the rollback left the kernel's
	// default, and says so.
	Inexact []Item `json:"inexact,omitempty"`
	// RolledBack are the transactions a rollback (or recovery) ended.
	RolledBack []string `json:"rolled_back,omitempty"`
	Notes      []string `json:"notes,omitempty"`
	// Watchdog is the dead-man process an apply --confirm started, and
	// where it runs (its note is among Notes too).
	Watchdog *Watchdog `json:"watchdog,omitempty"`
}

// MarshalJSON adds "changed": true when the result changed any knob.
func (res Result) MarshalJSON() ([]byte, error) {
	type plain Result
	return json.Marshal(struct {
		plain
		Any bool `json:"changed"`
	}{plain(res), len(res.Changed) > 0})
}

func newResult() *Result { return &Result{Changed: []Item{}, Failed: []Item{}} }

// merge adds r's items and notes to res.
func (res *Result) merge(r *Result) {
	if r == nil {
		return
	}
	if res.Txn == "" {
		res.Txn = r.Txn
	}
	res.Changed = append(res.Changed, r.Changed...)
	res.Failed = append(res.Failed, r.Failed...)
	res.Skipped = append(res.Skipped, r.Skipped...)
	res.Gone = append(res.Gone, r.Gone...)
	res.Inexact = append(res.Inexact, r.Inexact...)
	res.RolledBack = append(res.RolledBack, r.RolledBack...)
	res.Notes = append(res.Notes, r.Notes...)
}

// Engine runs transactions against a journal and a system.
type Engine struct {
	JournalPath string
	Sys         *knob.System
	// BootID identifies the current boot (/proc/sys/kernel/random/boot_id).
	BootID string
	Now    func() time.Time
	// StartWatchdog launches the dead-man process for a --confirm apply; it
	// returns the watchdog's pid and where it runs (WatchdogStarter). Nil
	// means confirm is unavailable.
	StartWatchdog func(txn string, deadline time.Time) (Watchdog, error)
	// ProcessRuns reports whether pid is alive and its command line names
	// marker (nil: look in /proc). Tests replace it.
	ProcessRuns func(pid int, marker string) bool
}

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// ApplyError is a failed apply: which knob, why, and what the rollback did.
type ApplyError struct {
	Txn        string
	Knob       string
	Err        error
	RolledBack int
	// RollbackFailed lists knobs the automatic rollback could not restore.
	RollbackFailed []Item
}

func (e *ApplyError) Error() string {
	msg := fmt.Sprintf("%v; rolled back %d change(s) of transaction %s", e.Err, e.RolledBack, e.Txn)
	if len(e.RollbackFailed) > 0 {
		msg += fmt.Sprintf(", but %d could not be restored (run lowlat rollback)", len(e.RollbackFailed))
	}
	return msg
}

func (e *ApplyError) Unwrap() error { return e.Err }

// Apply journals and applies changes as one transaction. Before anything is
// written it validates every value and refuses to start while the journal holds
// an unfinished transaction, a torn record or an unconfirmed change. A knob the
// host refuses outright (knob.ErrNotWritable) is left out and reported in
// Result.Skipped; any other failure rolls the whole transaction back.
//
// meta.Deferred changes are validated now and made only by Confirm.
func (e *Engine) Apply(ctx context.Context, changes []Change, meta journal.Meta) (*Result, error) {
	return e.ApplyAs(ctx, journal.NewTxnID(e.now()), changes, meta)
}

// NewID returns a fresh transaction id, for callers that name files after
// the transaction before applying it (ApplyAs).
func (e *Engine) NewID() string { return journal.NewTxnID(e.now()) }

// ApplyAs is Apply with the transaction id chosen by the caller.
func (e *Engine) ApplyAs(ctx context.Context, id string, changes []Change, meta journal.Meta) (*Result, error) {
	if len(meta.Deferred) > 0 && meta.ConfirmBy == nil {
		return nil, errors.New("apply: deferred changes need --confirm (they are made at confirmation)")
	}
	knobs := make([]knob.Knob, len(changes))
	for i, c := range changes {
		k, err := newValidated(e.Sys, c.Knob, c.Value)
		if err != nil {
			return nil, err
		}
		knobs[i] = k
	}
	for _, c := range meta.Deferred {
		if _, err := newValidated(e.Sys, c.Knob, c.Value); err != nil {
			return nil, err
		}
	}
	if !meta.Force {
		if err := refuseUnrestorable(ctx, knobs); err != nil {
			return nil, err
		}
	}
	j, err := journal.Open(e.JournalPath, journal.ReadWrite)
	if err != nil {
		return nil, err
	}
	defer j.Close()
	st, err := j.Load()
	if err != nil {
		return nil, err
	}
	if err := e.refuseDirty(st, j.Path()); err != nil {
		return nil, err
	}
	res := &Result{Txn: id, Changed: []Item{}, Failed: []Item{}}
	if len(changes) == 0 {
		res.Txn = ""
		return res, nil
	}
	meta.PID = os.Getpid()
	meta.BootID = e.BootID
	if meta.ConfirmBy != nil {
		if e.StartWatchdog == nil {
			return nil, errors.New("apply --confirm: no watchdog available")
		}
		// The watchdog starts before the first write, so even an apply that
		// hangs or is killed is rolled back at the deadline.
		w, err := e.StartWatchdog(id, *meta.ConfirmBy)
		if err != nil {
			return nil, fmt.Errorf("apply --confirm: start watchdog: %w", err)
		}
		meta.WatchdogPID = w.PID
		res.Watchdog = &w
		if w.Note != "" {
			res.Notes = append(res.Notes, w.Note)
		}
	}
	if err := j.Append(journal.Record{Type: journal.TypeBegin, Txn: id, Meta: &meta}); err != nil {
		return nil, err
	}
	var done []journal.Intent
	for i, c := range changes {
		k := knobs[i]
		before, err := k.Read(ctx)
		if err != nil {
			return nil, e.abort(ctx, j, id, done, c.Knob, fmt.Errorf("%s: read current value: %w", c.Knob, err))
		}
		in := journal.Intent{Seq: i + 1, Knob: c.Knob, Before: before, After: c.Value}
		if err := j.Append(journal.Record{Type: journal.TypeIntent, Txn: id, Seq: in.Seq, Knob: in.Knob, Before: before, After: c.Value}); err != nil {
			return nil, e.abort(ctx, j, id, done, c.Knob, err)
		}
		crashPoint("intent", i+1)
		done = append(done, in)
		if err := ctx.Err(); err != nil {
			return nil, e.abort(ctx, j, id, done, c.Knob, fmt.Errorf("interrupted before %s: %w", c.Knob, err))
		}
		if err := k.Write(ctx, c.Value); err != nil {
			if errors.Is(err, knob.ErrNotWritable) {
				// Refused outright, nothing changed: record it and go on.
				done = done[:len(done)-1]
				if err := j.Append(journal.Record{Type: journal.TypeSkipped, Txn: id, Seq: in.Seq, Knob: c.Knob, Error: err.Error()}); err != nil {
					return nil, e.abort(ctx, j, id, done, c.Knob, err)
				}
				res.Skipped = append(res.Skipped, Item{Knob: c.Knob, Before: before, After: c.Value, Error: err.Error()})
				continue
			}
			return nil, e.abort(ctx, j, id, done, c.Knob, err)
		}
		crashPoint("write", i+1)
		if err := knob.Verify(ctx, k, c.Value); err != nil {
			return nil, e.abort(ctx, j, id, done, c.Knob, err)
		}
		res.Changed = append(res.Changed, Item{Knob: c.Knob, Before: before, After: c.Value})
	}
	if err := j.Append(journal.Record{Type: journal.TypeCommit, Txn: id}); err != nil {
		return nil, e.abort(ctx, j, id, done, "", err)
	}
	return res, nil
}

// newValidated returns the knob for id after checking value for it.
func newValidated(sys *knob.System, id, value string) (knob.Knob, error) {
	k, err := knob.New(sys, id)
	if err != nil {
		return nil, err
	}
	if v, ok := k.(knob.Validator); ok {
		if err := v.Validate(value); err != nil {
			return nil, fmt.Errorf("%s: %w", id, err)
		}
	}
	return k, nil
}

// ErrUnrestorable is an apply refused because a knob's current value could
// not be restored exactly after it (an @unmanaged qdisc).
var ErrUnrestorable = errors.New("cannot be restored exactly")

// refuseUnrestorable reads, before anything is written, the current value of
// every knob that may hold one lowlat cannot recreate, and refuses to replace
// such a value: its rollback could not give it back.
func refuseUnrestorable(ctx context.Context, knobs []knob.Knob) error {
	for _, k := range knobs {
		r, ok := k.(knob.Restorer)
		if !ok {
			continue
		}
		cur, err := k.Read(ctx)
		if err != nil {
			continue // the apply itself reports it, in order
		}
		if err := r.Restorable(cur); err != nil {
			return fmt.Errorf("%s: the current value %w (%v); nothing was changed: pass --force to replace it anyway (a rollback then leaves the kernel's default)", k.ID(), ErrUnrestorable, err)
		}
	}
	return nil
}

// refuseDirty stops an apply when the journal needs attention first.
func (e *Engine) refuseDirty(st *journal.State, path string) error {
	if st.Torn != nil {
		return fmt.Errorf("journal %s: %s; an earlier lowlat was killed while writing it: run 'lowlat rollback' to recover first", path, st.Torn)
	}
	if inc := st.Incomplete(); len(inc) > 0 {
		return fmt.Errorf("transaction %s did not finish (an apply or rollback was interrupted): run 'lowlat rollback' to restore it first", inc[0].ID)
	}
	for _, t := range st.Active() {
		if why := e.orphaned(t); why != "" {
			return fmt.Errorf("transaction %s was %s: run 'lowlat rollback' first", t.ID, why)
		}
		if t.PendingConfirm() {
			return fmt.Errorf("transaction %s awaits confirmation until %s: run 'lowlat confirm' or 'lowlat rollback' first", t.ID, When(*t.Meta.ConfirmBy, e.now()))
		}
	}
	return nil
}

// abort restores what this apply changed and records the failure.
func (e *Engine) abort(ctx context.Context, j *journal.Journal, id string, done []journal.Intent, knobID string, cause error) error {
	// Restoring must not be cut short by the cancellation that may have caused
	// the abort.
	rctx := context.WithoutCancel(ctx)
	failed := e.restore(rctx, j, id, done).Failed
	msg := cause.Error()
	if err := j.Append(journal.Record{Type: journal.TypeAbort, Txn: id, Knob: knobID, Error: msg, Failed: knobsOf(failed)}); err != nil {
		return fmt.Errorf("%v; and recording the abort failed: %w", cause, err)
	}
	return &ApplyError{Txn: id, Knob: knobID, Err: cause, RolledBack: len(done) - len(failed), RollbackFailed: failed}
}

// restore writes every intent's previous value back, newest first, verifying
// each exactly, and journals each success. It keeps going after a failure. A
// knob whose device vanished (Gone), or whose previous value could not be
// recreated and got the kernel's default after a forced apply (Inexact), is
// journaled as restored with the reason, and reported as such, not as
// Changed.
func (e *Engine) restore(ctx context.Context, j *journal.Journal, id string, intents []journal.Intent) *Result {
	res := newResult()
	for i := len(intents) - 1; i >= 0; i-- {
		in := intents[i]
		out, note, err := restoreOne(ctx, e.Sys, in)
		if err != nil {
			res.Failed = append(res.Failed, Item{Knob: in.Knob, Before: in.After, After: in.Before, Error: err.Error()})
			continue
		}
		crashPoint("restore", len(intents)-i)
		if err := j.Append(journal.Record{Type: journal.TypeRestored, Txn: id, Seq: in.Seq, Knob: in.Knob, Error: note}); err != nil {
			res.Failed = append(res.Failed, Item{Knob: in.Knob, Error: err.Error()})
			continue
		}
		it := Item{Knob: in.Knob, Before: in.After, After: in.Before, Error: note}
		switch out {
		case gone:
			res.Gone = append(res.Gone, it)
		case inexact:
			res.Inexact = append(res.Inexact, it)
		default:
			res.Changed = append(res.Changed, it)
		}
	}
	return res
}

type outcome int

const (
	restored outcome = iota
	gone             // the device vanished: nothing to restore
	inexact          // the previous value could not be recreated: fallback
)

// restoreOne writes an intent's previous value back and checks it exactly.
func restoreOne(ctx context.Context, sys *knob.System, in journal.Intent) (outcome, string, error) {
	k, err := knob.New(sys, in.Knob)
	if err != nil {
		return restored, "", err
	}
	live, rerr := k.Read(ctx)
	if rerr == nil && knob.Vanished(in.Knob, live, in.Before) {
		return gone, "the device is gone: nothing to restore", nil
	}
	// Skip the write when the value is already the recorded one: an intent
	// whose write never happened (killed between journal and write) restores
	// to what is already there.
	if rerr == nil && knob.Same(k, live, in.Before) {
		return restored, "", nil
	}
	if r, ok := k.(knob.Restorer); ok {
		if why := r.Restorable(in.Before); why != nil {
			// Replaced with --force: the closest lowlat can give back.
			if err := k.Write(ctx, r.Fallback(in.Before)); err != nil {
				return restored, "", fmt.Errorf("%s: previous value cannot be recreated (%v); writing the kernel's default: %w", in.Knob, why, err)
			}
			now, _ := k.Read(ctx)
			return inexact, fmt.Sprintf("the previous value cannot be recreated (%v); the kernel's default is in place: %s", why, now), nil
		}
	}
	if err := k.Write(ctx, in.Before); err != nil {
		return restored, "", err
	}
	live, err = k.Read(ctx)
	if err != nil {
		return restored, "", fmt.Errorf("%s: read back: %w", in.Knob, err)
	}
	if !knob.Same(k, live, in.Before) {
		return restored, "", fmt.Errorf("%s: restored %q but the kernel reports %q", in.Knob, in.Before, live)
	}
	return restored, "", nil
}

func knobsOf(items []Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Knob)
	}
	return out
}
