package txn

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/knob"
)

// Confirm accepts the transaction waiting for confirmation, so its dead-man
// watchdog leaves it in place, and stops that watchdog. A --confirm --persist
// apply deferred the files that make it survive a reboot until now (so that
// nothing unconfirmed comes back at boot): Confirm writes them as part of the
// same transaction first, journaled like every other change. If one fails,
// those written are restored and the transaction stays unconfirmed, under its
// watchdog.
func (e *Engine) Confirm(ctx context.Context) (*Result, error) { return e.ConfirmTxn(ctx, "") }

// ConfirmTxn is Confirm for transaction id (or a unique prefix): it fails
// when the transaction awaiting confirmation is another one ("" confirms
// whichever awaits).
func (e *Engine) ConfirmTxn(ctx context.Context, id string) (*Result, error) {
	j, err := journal.Open(e.JournalPath, journal.ReadWrite)
	if err != nil {
		return nil, err
	}
	defer j.Close()
	st, err := j.Load()
	if err != nil {
		return nil, err
	}
	for i := len(st.Txns) - 1; i >= 0; i-- {
		t := st.Txns[i]
		if t.Meta.ConfirmBy == nil {
			continue
		}
		if t.PendingConfirm() {
			if id != "" && !strings.HasPrefix(t.ID, id) {
				return nil, fmt.Errorf("transaction %s is not the one awaiting confirmation (%s is)", id, t.ID)
			}
			if why := e.orphaned(t); why != "" {
				return nil, fmt.Errorf("transaction %s was %s: it cannot be confirmed; run 'lowlat rollback'", t.ID, why)
			}
			res, err := e.applyDeferred(ctx, j, t)
			if err != nil {
				return res, err
			}
			if err := j.Append(journal.Record{Type: journal.TypeConfirm, Txn: t.ID}); err != nil {
				return res, err
			}
			stopWatchdog(t)
			return res, nil
		}
		if t.Status == journal.RolledBack && !t.Confirmed {
			return nil, fmt.Errorf("transaction %s was already rolled back at %s: not confirmed by %s", t.ID, When(t.Ended, e.now()), When(*t.Meta.ConfirmBy, e.now()))
		}
		break
	}
	return nil, errors.New("no transaction awaits confirmation")
}

// applyDeferred writes a pending transaction's deferred changes (skipping
// any an interrupted confirm already made), each journaled as an intent of
// the transaction before it is written.
func (e *Engine) applyDeferred(ctx context.Context, j *journal.Journal, t *journal.Txn) (*Result, error) {
	res := newResult()
	res.Txn = t.ID
	seq := 0
	have := map[string]string{}
	for _, in := range t.Intents {
		seq = max(seq, in.Seq)
		have[in.Knob] = in.After
	}
	var done []journal.Intent
	fail := func(knobID string, err error) (*Result, error) {
		r := e.restore(context.WithoutCancel(ctx), j, t.ID, done)
		res.Failed = append(res.Failed, r.Failed...)
		return res, fmt.Errorf("confirm %s: %w; the transaction is still unconfirmed (%d deferred change(s) undone)", t.ID, err, len(done)-len(r.Failed))
	}
	for _, c := range t.Meta.Deferred {
		if v, ok := have[c.Knob]; ok && v == c.Value {
			continue // already in force (an interrupted confirm wrote it)
		}
		k, err := knob.New(e.Sys, c.Knob)
		if err != nil {
			return fail(c.Knob, err)
		}
		before, err := k.Read(ctx)
		if err != nil {
			return fail(c.Knob, fmt.Errorf("%s: read current value: %w", c.Knob, err))
		}
		seq++
		in := journal.Intent{Seq: seq, Knob: c.Knob, Before: before, After: c.Value}
		if err := j.Append(journal.Record{Type: journal.TypeIntent, Txn: t.ID, Seq: seq, Knob: c.Knob, Before: before, After: c.Value}); err != nil {
			return fail(c.Knob, err)
		}
		done = append(done, in)
		if err := k.Write(ctx, c.Value); err != nil {
			return fail(c.Knob, err)
		}
		if err := knob.Verify(ctx, k, c.Value); err != nil {
			return fail(c.Knob, err)
		}
		res.Changed = append(res.Changed, Item{Knob: c.Knob, Before: before, After: c.Value})
	}
	return res, nil
}

// Rearm moves the dead-man deadline of transaction id (or a unique prefix),
// which awaits confirmation, to deadline: a gate kept the change, and it is
// held for 'lowlat confirm' (apply --prove --hold). The new deadline is
// journaled, so status shows it, and the transaction's watchdog, which wakes
// at the deadline it was started with, reads it there and waits on. A
// deadline is only ever moved later (the watchdog sleeps until the one it
// has): Rearm returns the deadline in force, deadline or the current one if
// that is later. A transaction whose watchdog no longer runs is not
// re-armed: nobody would roll it back at the new deadline.
func (e *Engine) Rearm(ctx context.Context, id string, deadline time.Time) (time.Time, error) {
	j, err := journal.Open(e.JournalPath, journal.ReadWrite)
	if err != nil {
		return time.Time{}, err
	}
	defer j.Close()
	st, err := j.Load()
	if err != nil {
		return time.Time{}, err
	}
	t, err := st.Find(id)
	if err != nil {
		return time.Time{}, err
	}
	switch {
	case !t.PendingConfirm():
		return time.Time{}, fmt.Errorf("transaction %s does not await confirmation (%s): nothing to re-arm", t.ID, t.Status)
	case e.orphaned(t) != "":
		return time.Time{}, fmt.Errorf("transaction %s was %s", t.ID, e.orphaned(t))
	case !e.watchdogRuns(t):
		return time.Time{}, fmt.Errorf("transaction %s: its watchdog (pid %d) is not running: nobody would roll it back at %s", t.ID, t.Meta.WatchdogPID, deadline.Format(time.RFC3339))
	}
	by := deadline.Round(0)
	if t.Meta.ConfirmBy.After(by) {
		return *t.Meta.ConfirmBy, nil
	}
	if err := j.Append(journal.Record{Type: journal.TypeDeadline, Txn: t.ID, ConfirmBy: &by}); err != nil {
		return time.Time{}, err
	}
	return by, nil
}

// stopWatchdog ends a transaction's watchdog early (confirmed, or rolled
// back by hand). It checks the process really is that watchdog first: the pid
// may have been reused; and a watchdog does not stop itself.
func stopWatchdog(t *journal.Txn) {
	if pid := t.Meta.WatchdogPID; pid != os.Getpid() && processRuns(pid, t.ID) {
		syscall.Kill(t.Meta.WatchdogPID, syscall.SIGTERM)
	}
}

// Watchdog is the dead-man switch of apply --confirm: it waits until deadline,
// then rolls the transaction back unless it was confirmed (or already ended).
// A deadline moved later since (Rearm) is waited for in turn.
//
// It must win the journal lock to do so. The apply that started it (applyPID)
// may still hold the lock at the deadline, hung: the watchdog stops it
// (SIGTERM, which makes an apply roll back what it wrote, then SIGKILL after
// a grace period; the journal survives both), then rolls back. Any other
// holder is waited for, and 'lowlat status' reports the wait.
func (e *Engine) Watchdog(ctx context.Context, txnID string, deadline time.Time, applyPID int) (*Result, error) {
	for {
		if err := e.waitUntil(ctx, deadline); err != nil {
			return nil, err
		}
		res, later, err := e.watchdogFire(ctx, txnID, deadline, applyPID)
		if later.IsZero() {
			return res, err
		}
		deadline = later
	}
}

// WatchdogTick is the longest a watchdog sleeps before it reads the clock
// again.
var WatchdogTick = time.Minute

// waitUntil returns once the wall clock reaches deadline, or with ctx's
// error. It wakes every WatchdogTick to read the clock: Go's timers run on
// the monotonic clock, which stands still while the host is suspended, so
// one timer of days would fire late by every suspend (and ignore a clock
// that was stepped); the deadline is a time of day, journaled as one.
func (e *Engine) waitUntil(ctx context.Context, deadline time.Time) error {
	deadline = deadline.Round(0) // the wall clock's reading, not the monotonic one
	for {
		left := deadline.Sub(e.now().Round(0))
		if left <= 0 {
			return nil
		}
		t := time.NewTimer(min(left, WatchdogTick))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// watchdogFire is the watchdog at its deadline: it takes the journal lock
// and rolls the transaction back, unless it was confirmed or ended, or its
// deadline was moved later, which it returns (later) to be waited for.
func (e *Engine) watchdogFire(ctx context.Context, txnID string, deadline time.Time, applyPID int) (res *Result, later time.Time, err error) {
	var termSent time.Time
	for {
		j, err := journal.Open(e.JournalPath, journal.ReadWrite)
		var locked *journal.LockedError
		if errors.As(err, &locked) {
			if pid := locked.Holder.PID; pid > 0 && pid == applyPID && pid != os.Getpid() {
				switch {
				case termSent.IsZero():
					syscall.Kill(pid, syscall.SIGTERM)
					termSent = e.now()
				case e.now().Sub(termSent) > WatchdogGrace:
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			select {
			case <-ctx.Done():
				return nil, time.Time{}, ctx.Err()
			case <-time.After(200 * time.Millisecond):
				continue
			}
		}
		if err != nil {
			return nil, time.Time{}, err
		}
		defer j.Close()
		// An apply killed part-way is recovered first.
		res, err := e.rollbackLocked(context.WithoutCancel(ctx), j, RollbackOptions{OnlyUnfinished: true, Reason: "recovered by the confirm watchdog"})
		if err != nil {
			return res, time.Time{}, err
		}
		st, err := j.Load()
		if err != nil {
			return res, time.Time{}, err
		}
		tx, err := st.Find(txnID)
		if err != nil || tx.Confirmed || !tx.Active() {
			return res, time.Time{}, nil // never began, confirmed, or already ended
		}
		if by := tx.Meta.ConfirmBy; by != nil && by.After(deadline) && by.After(e.now()) {
			return res, *by, nil // re-armed: held for a confirmation until then
		}
		// Anything applied on top of the unconfirmed transaction goes too.
		var targets []*journal.Txn
		active := st.Active()
		for i := len(active) - 1; i >= 0; i-- {
			targets = append(targets, active[i])
			if active[i] == tx {
				break
			}
		}
		reason := "not confirmed by " + deadline.Format(time.RFC3339)
		if by := tx.Meta.ConfirmBy; by != nil {
			reason = "not confirmed by " + by.Format(time.RFC3339)
		}
		r, err := e.rollbackTxns(context.WithoutCancel(ctx), j, targets, reason)
		res.merge(r)
		return res, time.Time{}, err
	}
}

// WatchdogGrace is how long a hung apply gets between the watchdog's SIGTERM
// and its SIGKILL.
var WatchdogGrace = 5 * time.Second

// RecordEvidence journals a gate's measurements and verdict for a
// transaction, before the gate confirms or rolls it back.
func (e *Engine) RecordEvidence(txnID string, ev journal.Evidence) error {
	j, err := journal.Open(e.JournalPath, journal.ReadWrite)
	if err != nil {
		return err
	}
	defer j.Close()
	st, err := j.Load()
	if err != nil {
		return err
	}
	t, err := st.Find(txnID)
	if err != nil {
		return err
	}
	return j.Append(journal.Record{Type: journal.TypeEvidence, Txn: t.ID, Evidence: &ev})
}
