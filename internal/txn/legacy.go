package txn

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/persist"
)

// legacySysctlFile returns the file knob a persisted transaction's sysctl.d
// file has under today's name, when id is that file under the name an older
// lowlat gave it (persist.LegacySysctlFile: it sorts before 99-sysctl.conf,
// the link to /etc/sysctl.conf, and loses to it at every boot). The file
// may sit below a --persist-root.
func legacySysctlFile(t *journal.Txn, id string) (string, bool) {
	p, ok := strings.CutPrefix(id, "file")
	if !ok {
		return "", false
	}
	dir, base := path.Split(p)
	if base != path.Base(persist.LegacySysctlFile(t.ID)) || !strings.HasSuffix(dir, persist.SysctlDir+"/") {
		return "", false
	}
	return "file" + dir + path.Base(persist.SysctlFile(t.ID)), true
}

// renameLegacySysctlFiles gives the sysctl.d file of every persisted
// transaction an older lowlat wrote its name of today, so that the boot
// reads it after 99-sysctl.conf. The rename is two changes of the
// transaction itself, journaled and verified like any other (the file under
// the new name created, the old one removed): a rollback undoes them with
// the rest, and removes the file by whichever name it has. A file that is
// no longer what lowlat wrote (edited, removed) is left alone, with a note;
// so is one whose new name is taken. The rename takes effect from the next
// boot. Boot and a root status run it; it returns notes for the user, and
// an error only when the journal cannot be written.
func (e *Engine) renameLegacySysctlFiles(ctx context.Context, j *journal.Journal, st *journal.State) ([]string, error) {
	var notes []string
	for _, t := range st.Active() {
		if t.Status != journal.Applied || t.PendingConfirm() {
			continue
		}
		seq := 0
		have := map[string]bool{}
		for _, in := range append(append([]journal.Intent{}, t.Intents...), t.Lost...) {
			seq = max(seq, in.Seq)
			have[in.Knob] = true
		}
		for _, in := range t.Intents {
			newID, ok := legacySysctlFile(t, in.Knob)
			if !ok || have[newID] || knob.ParseFileValue(in.After).Absent {
				continue
			}
			note, err := e.renameOne(ctx, j, t, in, newID, &seq)
			if err != nil {
				return notes, err
			}
			notes = append(notes, note)
		}
	}
	return notes, nil
}

// legacyNotes says, for a reader that may not write the journal, which
// persisted transactions still have a sysctl.d file under an older name.
func legacyNotes(st *journal.State) []string {
	var out []string
	for _, t := range st.Active() {
		for _, in := range t.Intents {
			if _, ok := legacySysctlFile(t, in.Knob); ok && !knob.ParseFileValue(in.After).Absent {
				out = append(out, fmt.Sprintf("transaction %s: %s sorts before 99-sysctl.conf (/etc/sysctl.conf), which overrides it at boot: run 'lowlat status' as root to rename it", t.ID, strings.TrimPrefix(in.Knob, "file")))
			}
		}
	}
	return out
}

// renameOne moves one legacy sysctl.d file to newID within transaction t
// and says what it did. A failure after the first intent restores what it
// wrote and is said, not returned: the file keeps its old name, as before.
// The error is the journal's.
func (e *Engine) renameOne(ctx context.Context, j *journal.Journal, t *journal.Txn, in journal.Intent, newID string, seq *int) (string, error) {
	oldPath, newPath := strings.TrimPrefix(in.Knob, "file"), strings.TrimPrefix(newID, "file")
	oldK, err := knob.New(e.Sys, in.Knob)
	if err != nil {
		return "", err
	}
	newK, err := knob.New(e.Sys, newID)
	if err != nil {
		return "", err
	}
	live, err := oldK.Read(ctx)
	if err != nil || !knob.Same(oldK, live, in.After) {
		return fmt.Sprintf("transaction %s: %s is not as lowlat wrote it: left under its old name, which the boot reads before 99-sysctl.conf", t.ID, oldPath), nil
	}
	taken, err := newK.Read(ctx)
	if err != nil || !knob.ParseFileValue(taken).Absent {
		return fmt.Sprintf("transaction %s: %s exists already: %s left under its old name", t.ID, newPath, oldPath), nil
	}
	var done []journal.Intent
	for _, s := range []journal.Intent{{Knob: newID, Before: taken, After: in.After}, {Knob: in.Knob, Before: live, After: knob.Absent}} {
		*seq++
		s.Seq = *seq
		if err := j.Append(journal.Record{Type: journal.TypeIntent, Txn: t.ID, Seq: s.Seq, Knob: s.Knob, Before: s.Before, After: s.After}); err != nil {
			return "", err
		}
		done = append(done, s)
		k := newK
		if s.Knob == in.Knob {
			k = oldK
		}
		err := k.Write(ctx, s.After)
		if err == nil {
			err = knob.Verify(ctx, k, s.After)
		}
		if err != nil {
			e.restore(context.WithoutCancel(ctx), j, t.ID, done)
			return fmt.Sprintf("transaction %s: rename %s to %s: %v; left under its old name", t.ID, oldPath, newPath, err), nil
		}
	}
	return fmt.Sprintf("transaction %s: renamed %s to %s, which the boot reads after 99-sysctl.conf (/etc/sysctl.conf), from the next boot on", t.ID, oldPath, newPath), nil
}
