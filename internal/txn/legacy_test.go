//go:build linux

package txn_test

import (
	"context"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/persist"
	"github.com/lowlat/lowlat/internal/txn"
)

// applyLegacy applies a persisted transaction as an older lowlat did: its
// sysctl.d file named 99-lowlat-<txn>.conf, which sorts before 99-sysctl.conf.
func applyLegacy(t *testing.T, h *fakeHost, e *txn.Engine) (id, oldFile, newFile string) {
	t.Helper()
	id = e.NewID()
	oldFile = strings.TrimPrefix(persist.LegacySysctlFile(id), "/")
	newFile = strings.TrimPrefix(persist.SysctlFile(id), "/")
	changes := []txn.Change{
		{Knob: "sysctl/net.core.somaxconn", Value: "1024"},
		{Knob: "file/" + oldFile, Value: knob.FileContent("# Written by lowlat\nnet.core.somaxconn = 1024\n", 0o644)},
	}
	if _, err := e.ApplyAs(context.Background(), id, changes, journal.Meta{Persist: true}); err != nil {
		t.Fatal(err)
	}
	return id, oldFile, newFile
}

// TestLegacySysctlFile: a persisted transaction whose sysctl.d file an
// older lowlat named 99-lowlat-<txn>.conf still rolls back by that name;
// lowlat boot, or a root status, renames the file within the transaction so
// that the boot reads it last, and the rollback then removes it under its
// new name (and the directory lowlat created for it). A file that is no
// longer what lowlat wrote keeps its name.
func TestLegacySysctlFile(t *testing.T) {
	ctx := context.Background()
	t.Run("rollback by the old name", func(t *testing.T) {
		h := newHost(t)
		e := h.engine("boot-1")
		_, oldFile, _ := applyLegacy(t, h, e)
		if _, err := e.Rollback(ctx, txn.RollbackOptions{}); err != nil {
			t.Fatal(err)
		}
		if h.exists(oldFile) || h.exists("etc/sysctl.d") || h.read(somaxconn) != "4096" {
			t.Errorf("after rollback: %s %v, sysctl.d %v, somaxconn %s", oldFile, h.exists(oldFile), h.exists("etc/sysctl.d"), h.read(somaxconn))
		}
	})
	for _, by := range []string{"boot", "root status"} {
		t.Run("renamed by "+by, func(t *testing.T) {
			h := newHost(t)
			id, oldFile, newFile := applyLegacy(t, h, h.engine("boot-1"))
			content := h.read(oldFile)
			h.reboot()
			h.write(somaxconn, "1024\n")
			e := h.engine("boot-2")
			view, err := e.Status(ctx, txn.StatusOptions{})
			if err != nil || !strings.Contains(strings.Join(view.Notes, "\n"), "run 'lowlat status' as root to rename it") || !h.exists(oldFile) {
				t.Errorf("status without root: %v %q", err, view.Notes)
			}
			var notes []string
			if by == "boot" {
				res, err := e.Boot(ctx)
				if err != nil {
					t.Fatal(err)
				}
				notes = res.Notes
			} else {
				rep, err := e.Status(ctx, txn.StatusOptions{Recover: true})
				if err != nil {
					t.Fatal(err)
				}
				notes = rep.Notes
			}
			if h.exists(oldFile) || h.read(newFile) != content || !strings.Contains(strings.Join(notes, "\n"), "renamed /"+oldFile+" to /"+newFile) {
				t.Fatalf("after %s: old %v, new %q, notes %q", by, h.exists(oldFile), h.read(newFile), notes)
			}
			rep, err := e.Status(ctx, txn.StatusOptions{Recover: true})
			if err != nil || len(rep.Drift) != 0 || len(rep.Active) != 1 || rep.Active[0].ID != id {
				t.Errorf("status after the rename: %v, drift %+v, active %+v", err, rep.Drift, rep.Active)
			}
			if _, err := e.Rollback(ctx, txn.RollbackOptions{}); err != nil {
				t.Fatal(err)
			}
			if h.exists(oldFile) || h.exists(newFile) || h.exists("etc/sysctl.d") || h.read(somaxconn) != "4096" {
				t.Errorf("after rollback: old %v new %v sysctl.d %v somaxconn %s", h.exists(oldFile), h.exists(newFile), h.exists("etc/sysctl.d"), h.read(somaxconn))
			}
		})
	}
	t.Run("edited by hand", func(t *testing.T) {
		h := newHost(t)
		_, oldFile, newFile := applyLegacy(t, h, h.engine("boot-1"))
		h.write(oldFile, "net.core.somaxconn = 2048\n")
		rep, err := h.engine("boot-1").Status(ctx, txn.StatusOptions{Recover: true})
		if err != nil {
			t.Fatal(err)
		}
		if !h.exists(oldFile) || h.exists(newFile) || !strings.Contains(strings.Join(rep.Notes, "\n"), "is not as lowlat wrote it") {
			t.Errorf("an edited file: old %v new %v notes %q", h.exists(oldFile), h.exists(newFile), rep.Notes)
		}
	})
}
