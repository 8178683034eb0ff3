package txn

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/knob"
)

// What a reboot does to a transaction, knob by knob:
//
//   - A knob of a volatile kind (sysctl, qdisc, route, interrupt, queue,
//     NIC...) lives in the running kernel: the reboot puts it back. A
//     transaction applied with --persist gets it back from lowlat-boot.service
//     (and /etc/sysctl.d); one applied without has lost it, unless a
//     persisted transaction on top of it carries it (see stack.go: lost-ness
//     is decided per knob across the whole stack of transactions).
//   - A knob that lives on disk (a file, a drop-in, irqbalance's config, a
//     disabled service) survives: it is still in force, still drifts, and
//     still rolls back.
//   - A transaction that was still awaiting confirmation lost its dead-man
//     watchdog with the boot: it is rolled back, never re-applied.
//
// inForce says whether an intent of an applied transaction is in force in
// the boot the engine runs in.
func (e *Engine) inForce(t *journal.Txn, in journal.Intent) bool {
	return t.InBoot(e.BootID) || knob.SurvivesReboot(in.Knob, in.After)
}

// orphaned reports why a transaction awaiting confirmation has nobody left
// to roll it back at its deadline ("" when its watchdog is on duty): it was
// applied in an earlier boot, whose watchdog died with it, or its deadline
// passed and its watchdog is not running.
func (e *Engine) orphaned(t *journal.Txn) string {
	if !t.PendingConfirm() {
		return ""
	}
	if e.BootID != "" && !t.InBoot(e.BootID) {
		return "not confirmed before the reboot (its watchdog died with the boot)"
	}
	if e.now().After(*t.Meta.ConfirmBy) && !e.watchdogRuns(t) {
		return fmt.Sprintf("not confirmed by %s and its watchdog (pid %d) is gone", When(*t.Meta.ConfirmBy, e.now()), t.Meta.WatchdogPID)
	}
	return ""
}

// watchdogRuns reports whether t's dead-man process is still alive: the pid
// runs a command line naming the transaction (a reused pid does not).
func (e *Engine) watchdogRuns(t *journal.Txn) bool {
	if e.ProcessRuns != nil {
		return e.ProcessRuns(t.Meta.WatchdogPID, t.ID)
	}
	return processRuns(t.Meta.WatchdogPID, t.ID)
}

func processRuns(pid int, marker string) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && strings.Contains(string(b), marker)
}

// settle brings a writable journal up to date with this boot before a
// command works on it: it recovers interrupted transactions (as rollback
// does), rolls back transactions awaiting a confirmation that can no longer
// come in time (orphaned), and records the knobs a reboot put back as lost.
// It returns the ids it rolled back and notes for the user.
func (e *Engine) settle(ctx context.Context, j *journal.Journal) (*Result, error) {
	res, err := e.rollbackLocked(ctx, j, RollbackOptions{OnlyUnfinished: true, Reason: "recovered"})
	if err != nil {
		return res, err
	}
	st, err := j.Load()
	if err != nil {
		return res, err
	}
	// Newest first, as a rollback of several goes.
	active := st.Active()
	for i := len(active) - 1; i >= 0; i-- {
		t := active[i]
		why := e.orphaned(t)
		if why == "" {
			continue
		}
		r, err := e.rollbackTxns(ctx, j, []*journal.Txn{t}, why)
		res.merge(r)
		res.Notes = append(res.Notes, fmt.Sprintf("rolled back transaction %s: %s", t.ID, why))
		if err != nil {
			return res, err
		}
	}
	lost := e.lost(st)
	for _, t := range st.Active() {
		if len(lost[t.ID]) == 0 {
			continue
		}
		if err := j.Append(journal.Record{Type: journal.TypeLost, Txn: t.ID, Knobs: lost[t.ID], BootID: e.BootID}); err != nil {
			return res, err
		}
	}
	return res, nil
}

// settleView applies settle's verdicts to a state in memory, for a reader
// that may not write the journal (status without root). It returns notes:
// the orphaned transactions it found, which a root run would roll back, and
// the sysctl.d files a root run would rename.
func (e *Engine) settleView(st *journal.State) (notes []string) {
	notes = legacyNotes(st)
	lost := e.lost(st)
	for _, t := range st.Active() {
		if why := e.orphaned(t); why != "" {
			notes = append(notes, fmt.Sprintf("transaction %s was %s: run 'lowlat rollback' as root", t.ID, why))
			continue
		}
		if len(lost[t.ID]) > 0 {
			t.DropLost(lost[t.ID], e.now())
		}
	}
	return notes
}

// Boot runs once per boot, from lowlat-boot.service. It settles the journal
// first, so a transaction still awaiting confirmation is rolled back and
// never re-applied, then writes again the volatile knobs of every confirmed
// --persist transaction (sysctls came back through /etc/sysctl.d; files
// never left) and records the boot. Of a knob several transactions set, it
// writes only the value that is to be live: the newest transaction's in
// force (a persisted one, or one applied in this boot before Boot ran,
// which Boot must not overwrite). The recorded previous values stay those
// from before lowlat, so a later rollback still restores the host as it
// was.
func (e *Engine) Boot(ctx context.Context) (*Result, error) {
	j, err := journal.Open(e.JournalPath, journal.ReadWrite)
	if err != nil {
		return nil, err
	}
	defer j.Close()
	res, err := e.settle(ctx, j)
	if err != nil {
		return res, err
	}
	st, err := j.Load()
	if err != nil {
		return nil, err
	}
	notes, err := e.renameLegacySysctlFiles(ctx, j, st)
	res.Notes = append(res.Notes, notes...)
	if err != nil {
		return res, err
	}
	if len(notes) > 0 {
		if st, err = j.Load(); err != nil {
			return res, err
		}
	}
	var failed []Item
	tops := e.tops(st)
	for _, t := range st.Active() {
		if !t.Meta.Persist || t.Status != journal.Applied || t.InBoot(e.BootID) {
			continue
		}
		res.Txn = t.ID
		var txnFailed []Item
		for _, in := range t.Intents {
			kind := knob.Kind(in.Knob)
			if kind == "sysctl" || knob.SurvivesReboot(in.Knob, in.After) || tops[in.Knob] != t {
				continue
			}
			k, err := knob.New(e.Sys, in.Knob)
			if err == nil {
				err = k.Write(ctx, in.After)
			}
			if err == nil {
				err = knob.Verify(ctx, k, in.After)
			}
			if err != nil {
				txnFailed = append(txnFailed, Item{Knob: in.Knob, After: in.After, Error: err.Error()})
				continue
			}
			res.Changed = append(res.Changed, Item{Knob: in.Knob, After: in.After})
		}
		if err := j.Append(journal.Record{Type: journal.TypeReapply, Txn: t.ID, BootID: e.BootID, Failed: knobsOf(txnFailed)}); err != nil {
			return res, err
		}
		failed = append(failed, txnFailed...)
	}
	res.Failed = append(res.Failed, failed...)
	if len(failed) > 0 {
		return res, fmt.Errorf("boot: %d knob(s) failed (first: %s: %s)", len(failed), failed[0].Knob, failed[0].Error)
	}
	return res, nil
}
