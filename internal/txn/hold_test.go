//go:build linux

package txn_test

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/txn"
)

// TestRearmHoldsUntilTheNewDeadline: a transaction re-armed (apply --hold,
// its gate kept it) is not rolled back by its watchdog at the deadline the
// watchdog was started with, but at the journaled one; status reads that
// one; a deadline is never moved earlier.
func TestRearmHoldsUntilTheNewDeadline(t *testing.T) {
	h := newHost(t)
	ctx := context.Background()
	e := h.engine("boot-1")
	e.Now = time.Now
	first := time.Now().Add(150 * time.Millisecond)
	res := mustApply(t, e, mixed()[:1], journal.Meta{ConfirmBy: &first})

	by, err := e.Rearm(ctx, res.Txn, time.Now().Add(1200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if !by.After(first) {
		t.Fatalf("re-armed to %v, not after the first deadline %v", by, first)
	}
	if got := state(t, h).Txns[0].Meta.ConfirmBy; got == nil || !got.Equal(by) {
		t.Errorf("the journal's deadline %v, want the re-armed %v", got, by)
	}
	rep, err := e.Status(ctx, txn.StatusOptions{Peek: true})
	if err != nil || len(rep.Active) != 1 || rep.Active[0].ConfirmBy == nil || !rep.Active[0].ConfirmBy.Equal(by) || rep.Active[0].Confirmed {
		t.Errorf("status after the re-arm: %v %+v", err, rep.Active)
	}
	// Earlier than the deadline in force: kept as it is, nothing journaled.
	before := h.journalText()
	if again, err := e.Rearm(ctx, res.Txn, first); err != nil || !again.Equal(by) {
		t.Errorf("re-arm to an earlier deadline: %v, %v; want the deadline in force %v", again, err, by)
	}
	if h.journalText() != before {
		t.Error("a re-arm to an earlier deadline wrote the journal")
	}

	wres, err := e.Watchdog(ctx, res.Txn, first, 0)
	if err != nil {
		t.Fatal(err)
	}
	if time.Now().Before(by) {
		t.Errorf("the watchdog rolled back at %v, before the re-armed deadline %v", time.Now(), by)
	}
	if len(wres.RolledBack) != 1 || h.read("proc/sys/net/core/somaxconn") != "4096" {
		t.Errorf("watchdog result %+v, somaxconn %s", wres, h.read("proc/sys/net/core/somaxconn"))
	}
	if tx := state(t, h).Txns[0]; tx.Status != journal.RolledBack {
		t.Errorf("status %s after the re-armed deadline", tx.Status)
	}
}

// TestRearmRefused: only a transaction awaiting confirmation, with its
// watchdog on duty, is re-armed.
func TestRearmRefused(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		prep func(h *fakeHost, e *txn.Engine)
		want string
	}{
		{"confirmed", func(h *fakeHost, e *txn.Engine) {
			if _, err := e.Confirm(ctx); err != nil {
				t.Fatal(err)
			}
		}, "does not await confirmation"},
		{"rolled back", func(h *fakeHost, e *txn.Engine) {
			if _, err := e.Rollback(ctx, txn.RollbackOptions{}); err != nil {
				t.Fatal(err)
			}
		}, "does not await confirmation"},
		{"watchdog gone", func(h *fakeHost, e *txn.Engine) { delete(h.watchdogs, 4242) }, "is not running"},
		{"another boot", func(h *fakeHost, e *txn.Engine) { e.BootID = "boot-2" }, "before the reboot"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			e := h.engine("boot-1")
			deadline := h.now.Add(time.Minute)
			res := mustApply(t, e, mixed()[:1], journal.Meta{ConfirmBy: &deadline})
			tt.prep(h, e)
			if _, err := e.Rearm(ctx, res.Txn, h.now.Add(time.Hour)); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("re-arm: %v, want %q", err, tt.want)
			}
		})
	}
}

// TestWatchdogReadsTheWallClock: a deadline eight days away (the longest
// --confirm) is kept by the wall clock, not by one timer on the monotonic
// clock, which stands still while the host is suspended: when the clock
// jumps past the deadline, the watchdog rolls back within a tick.
func TestWatchdogReadsTheWallClock(t *testing.T) {
	tick := txn.WatchdogTick
	txn.WatchdogTick = 10 * time.Millisecond
	t.Cleanup(func() { txn.WatchdogTick = tick })
	h := newHost(t)
	var clock atomic.Int64
	clock.Store(h.now.UnixNano())
	e := h.engine("boot-1")
	e.Now = func() time.Time { return time.Unix(0, clock.Load()) }
	deadline := h.now.Add(8 * 24 * time.Hour)
	res := mustApply(t, e, mixed()[:1], journal.Meta{ConfirmBy: &deadline})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := e.Watchdog(ctx, res.Txn, deadline, 0); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("the watchdog ended %v before its deadline: %v", deadline.Sub(e.Now()), err)
	case <-time.After(100 * time.Millisecond):
	}
	clock.Store(deadline.Add(time.Second).UnixNano()) // resumed from a suspend of eight days
	start := time.Now()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the watchdog took %v after the clock passed its deadline", d)
	}
	if h.read("proc/sys/net/core/somaxconn") != "4096" {
		t.Error("not rolled back at the deadline")
	}
}

// TestBootRollsBackALongHold: a transaction held for days (re-armed to the
// longest deadline) is rolled back at the next boot like any unconfirmed
// one: the boot guard does not read the deadline.
func TestBootRollsBackALongHold(t *testing.T) {
	h := newHost(t)
	ctx := context.Background()
	id, _ := applyConfirmPersist(t, h, h.engine("boot-1"))
	if _, err := h.engine("boot-1").Rearm(ctx, id, h.now.Add(8*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	h.reboot()
	res, err := h.engine("boot-2").Boot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.RolledBack) != 1 || res.RolledBack[0] != id {
		t.Errorf("boot rolled back %v, want %s", res.RolledBack, id)
	}
	if h.svc.Units["irqbalance.service"] != "active,enabled" || h.exists("etc/systemd/system/lowlat-boot.service") {
		t.Errorf("boot left a held transaction's changes: irqbalance %s", h.svc.Units["irqbalance.service"])
	}
}

func (h *fakeHost) journalText() string {
	h.t.Helper()
	b, err := os.ReadFile(h.jp)
	if err != nil {
		h.t.Fatal(err)
	}
	return string(b)
}
