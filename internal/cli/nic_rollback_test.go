package cli

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/knob/knobtest"
	"github.com/lowlat/lowlat/internal/plan"
	"github.com/lowlat/lowlat/internal/profile"
	"github.com/lowlat/lowlat/internal/txn"
)

// copyTree copies a fixture tree, symlinks as symlinks.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, out)
		case d.IsDir():
			return os.MkdirAll(out, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// treeState hashes every regular file and symlink of a tree. Files below
// proc/ and sys/ stand for kernel files, which print their value in their
// own format ("always [madvise] never", a trailing newline) whatever was
// written: they are compared by the value they show.
func treeState(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "-> " + target
		case d.Type().IsRegular():
			b, _ := os.ReadFile(p)
			if strings.HasPrefix(rel, "proc/") || strings.HasPrefix(rel, "sys/") {
				b = []byte(knob.SelectedWord(string(b)))
			}
			out[rel] = fmt.Sprintf("%x", sha256.Sum256(b))
		}
		return nil
	})
	return out
}

func diffStates(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, "+"+k)
		}
	}
	slices.Sort(out)
	return out
}

// TestNICApplyRollbackExact applies game-udp's NIC, interrupt, storage and CPU
// knobs to a copy of the runbook 002 host (file tree, fake ethtool, fake
// systemd), checks drift is named in human terms and re-asserted, and that
// rollback restores every IRQ affinity, the channel count, ring sizes,
// features, coalescing, NVMe queues, governors and the irqbalance state
// exactly. qdisc and route knobs act on the live host's netlink and are left
// out here (the namespace tests cover them).
func TestNICApplyRollbackExact(t *testing.T) {
	for _, mode := range []string{"stop", "ban"} {
		t.Run("irqbalance="+mode, func(t *testing.T) {
			ctx := context.Background()
			root := copyTree(t, filepath.Join("..", "host", "testdata", "hosts", "dual-i40e-nvme"))
			src, err := host.OpenRoot(root)
			if err != nil {
				t.Fatal(err)
			}
			f, err := host.Gather(ctx, src)
			if err != nil {
				t.Fatal(err)
			}
			fe := knobtest.NewEthtool(f)
			svc := &knobtest.Services{Systemd: 252, Units: map[string]string{"irqbalance.service": "active,enabled"}}
			sys := &knob.System{Root: root, Ethtool: fe, Services: svc}

			p, _ := profile.Builtin("game-udp")
			r, err := profile.Resolve(p, map[string]string{"irq.irqbalance": mode})
			if err != nil {
				t.Fatal(err)
			}
			pl, err := plan.Make(f, r, plan.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var changes []txn.Change
			for _, c := range pl.ToApply() {
				if k := knob.Kind(c.Knob); k != "qdisc" && k != "route" {
					changes = append(changes, txn.Change{Knob: c.Knob, Value: c.Desired})
				}
			}
			if len(changes) < 20 {
				t.Fatalf("only %d changes planned", len(changes))
			}
			files0, nics0, units0 := treeState(t, root), fe.Snapshot(), maps.Clone(svc.Units)

			eng := &txn.Engine{JournalPath: filepath.Join(t.TempDir(), "journal"), Sys: sys}
			res, err := eng.Apply(ctx, changes, journal.Meta{Profile: "game-udp", Persist: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Changed) != len(changes) {
				t.Fatalf("changed %d of %d", len(res.Changed), len(changes))
			}
			readFile := func(p string) string {
				b, _ := os.ReadFile(filepath.Join(root, p))
				return strings.TrimSpace(string(b))
			}
			if got := readFile("proc/irq/27/smp_affinity_list"); got != "1" {
				t.Errorf("i40e-eth0-TxRx-0 affinity %q, want 1", got)
			}
			if got := readFile("proc/irq/35/smp_affinity_list"); got != "9" {
				t.Errorf("i40e-eth0-TxRx-8 affinity %q, want 9", got)
			}
			n := fe.NICs["eth0"]
			if n.Channels.Combined != 9 || n.Rings.Rx != 1024 || n.Coalesce["rx-usecs"] != 5 || n.Coalesce["adaptive-rx"] != 0 {
				t.Errorf("eth0 after apply: channels %d rings %d coalesce %v", n.Channels.Combined, n.Rings.Rx, n.Coalesce)
			}
			switch mode {
			case "stop":
				if svc.Units["irqbalance.service"] != "inactive,disabled" {
					t.Errorf("irqbalance %s", svc.Units["irqbalance.service"])
				}
			case "ban":
				conf := readFile("etc/sysconfig/irqbalance")
				if !strings.Contains(conf, "IRQBALANCE_BANNED_CPULIST=1-9,21-29") || !strings.Contains(conf, "--banirq=35") || svc.Units["irqbalance.service"] != "active,enabled" {
					t.Errorf("ban: %s\n%v", conf, svc.Calls)
				}
			}

			// irqbalance (or anyone) moves an interrupt back: status names it.
			os.WriteFile(filepath.Join(root, "proc/irq/28/smp_affinity_list"), []byte("0\n"), 0o644)
			n.Channels.Combined = 40
			st, err := eng.Status(ctx, txn.StatusOptions{})
			if err != nil {
				t.Fatal(err)
			}
			words := strings.Join(driftWords(st.Drift), "\n")
			for _, want := range []string{"irq 28 i40e-eth0-TxRx-1: applied cpu 2, now cpu 0", "eth0 channels combined: applied 9, now 40"} {
				if !strings.Contains(words, want) {
					t.Errorf("status does not say %q:\n%s", want, words)
				}
			}
			// The timer's re-assertion puts both back.
			ra, err := eng.Reassert(ctx)
			if err != nil || len(ra.Moved) != 2 || len(ra.Failed) != 0 {
				t.Fatalf("reassert: %+v, %v", ra, err)
			}
			if st, _ := eng.Status(ctx, txn.StatusOptions{}); len(st.Drift) != 0 {
				t.Errorf("drift after reassert: %+v", st.Drift)
			}

			if _, err := eng.Rollback(ctx, txn.RollbackOptions{}); err != nil {
				t.Fatal(err)
			}
			if d := diffStates(files0, treeState(t, root)); len(d) > 0 {
				t.Errorf("files not restored exactly: %v", d)
			}
			if nics := fe.Snapshot(); !reflect.DeepEqual(nics0, nics) {
				t.Errorf("NIC state not restored:\n%+v\n%+v", nics0["eth0"], nics["eth0"])
			}
			if !reflect.DeepEqual(units0, svc.Units) {
				t.Errorf("services %v, want %v", svc.Units, units0)
			}
		})
	}
}
