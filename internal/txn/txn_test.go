//go:build linux

package txn_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/knob/knobtest"
	"github.com/lowlat/lowlat/internal/persist"
	"github.com/lowlat/lowlat/internal/txn"
)

// These tests run without root, on a file tree standing in for /proc, /sys
// and /etc, with an in-memory service manager and NICs: they reach every
// path of Apply, Rollback, Status, Confirm, Boot, Reassert and the watchdog.

// fakeHost is a host tree and the engine of one boot on it.
type fakeHost struct {
	t    *testing.T
	root string
	sys  *knob.System
	svc  *knobtest.Services
	eth  *knobtest.Ethtool
	jp   string
	now  time.Time
	// watchdogs are the "running" watchdog pids.
	watchdogs map[int]bool
}

// Initial values of the tree: kernel files a reboot resets to these.
var kernelFiles = map[string]string{
	"proc/sys/net/core/somaxconn":                "4096\n",
	"proc/sys/net/ipv4/tcp_fastopen":             "1\n",
	"sys/kernel/mm/transparent_hugepage/enabled": "always madvise [never]\n",
	"proc/irq/27/smp_affinity_list":              "0-3\n",
}

func newHost(t *testing.T) *fakeHost {
	t.Helper()
	root := t.TempDir()
	h := &fakeHost{t: t, root: root, jp: filepath.Join(t.TempDir(), "journal"),
		now: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC), watchdogs: map[int]bool{}}
	h.svc = &knobtest.Services{Systemd: 252, Units: map[string]string{"irqbalance.service": "active,enabled"}}
	h.eth = &knobtest.Ethtool{NICs: map[string]*knobtest.NIC{"eth0": {Rings: &host.Rings{RxMax: 4096, TxMax: 4096, Rx: 512, Tx: 512}}}}
	h.sys = &knob.System{Root: root, Ethtool: h.eth, Services: h.svc}
	h.reboot()
	if err := os.MkdirAll(filepath.Join(root, "etc/systemd/system"), 0o755); err != nil {
		t.Fatal(err)
	}
	return h
}

// reboot puts every kernel file back to its boot value.
func (h *fakeHost) reboot() {
	h.t.Helper()
	for p, c := range kernelFiles {
		full := filepath.Join(h.root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			h.t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			h.t.Fatal(err)
		}
	}
	h.eth.NICs["eth0"].Rings.Rx = 512
	h.watchdogs = map[int]bool{}
}

func (h *fakeHost) engine(boot string) *txn.Engine {
	return &txn.Engine{JournalPath: h.jp, Sys: h.sys, BootID: boot, Now: func() time.Time { return h.now },
		StartWatchdog: func(id string, deadline time.Time) (txn.Watchdog, error) {
			h.watchdogs[4242] = true
			return txn.Watchdog{PID: 4242}, nil
		},
		ProcessRuns: func(pid int, marker string) bool { return h.watchdogs[pid] }}
}

func (h *fakeHost) read(p string) string {
	b, err := os.ReadFile(filepath.Join(h.root, p))
	if errors.Is(err, os.ErrNotExist) {
		return "<none>"
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func (h *fakeHost) write(p, c string) {
	h.t.Helper()
	if err := os.WriteFile(filepath.Join(h.root, p), []byte(c), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

func (h *fakeHost) exists(p string) bool {
	_, err := os.Lstat(filepath.Join(h.root, p))
	return err == nil
}

const dropin = "dropin/gw.service/50-lowlat-cpus.conf"

// mixed is a transaction with knobs of both kinds: volatile (a sysctl, THP,
// an interrupt, a NIC ring) and surviving a reboot (irqbalance disabled, a
// CPUAffinity drop-in).
func mixed() []txn.Change {
	return []txn.Change{
		{Knob: "sysctl/net.core.somaxconn", Value: "1024"},
		{Knob: "sysfs/kernel/mm/transparent_hugepage/enabled", Value: "madvise"},
		{Knob: "irq/27/affinity", Value: "2"},
		{Knob: "ethtool/eth0/ring/rx", Value: "1024"},
		{Knob: "service/irqbalance.service", Value: "inactive,disabled"},
		{Knob: dropin, Value: knob.FileContent("[Service]\nCPUAffinity=2-3\n", 0o644)},
	}
}

func mustApply(t *testing.T, e *txn.Engine, changes []txn.Change, meta journal.Meta) *txn.Result {
	t.Helper()
	res, err := e.Apply(context.Background(), changes, meta)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func state(t *testing.T, h *fakeHost) *journal.State {
	t.Helper()
	st, err := journal.ReadState(h.jp)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestRebootLosesOnlyVolatileKnobs: after a reboot, a transaction applied
// without --persist is partly lost: its kernel settings are back to their
// boot values, its drop-in and disabled irqbalance are still in force, and a
// rollback restores exactly those (and touches no lost knob).
func TestRebootLosesOnlyVolatileKnobs(t *testing.T) {
	h := newHost(t)
	ctx := context.Background()
	res := mustApply(t, h.engine("boot-1"), mixed(), journal.Meta{Profile: "game-udp"})
	if h.svc.Units["irqbalance.service"] != "inactive,disabled" || !h.exists("etc/systemd/system/gw.service.d/50-lowlat-cpus.conf") {
		t.Fatal("apply did not take")
	}
	h.reboot()
	// After the reboot someone sets somaxconn by hand: not lowlat's.
	h.write("proc/sys/net/core/somaxconn", "2222\n")
	e := h.engine("boot-2")

	// A reader without root sees the same as root, and writes nothing.
	view, err := e.Status(ctx, txn.StatusOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := e.Status(ctx, txn.StatusOptions{Recover: true})
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*txn.StatusReport{"read-only": view, "root": rep} {
		if len(r.Lost) != 0 || len(r.PartlyLost) != 1 || r.PartlyLost[0] != res.Txn {
			t.Errorf("%s: lost %v partly %v, want %s partly lost", name, r.Lost, r.PartlyLost, res.Txn)
		}
		if len(r.Active) != 1 || r.Active[0].Knobs != 2 || r.Active[0].Lost != 4 || r.Checked != 2 || len(r.Drift) != 0 {
			t.Errorf("%s: active %+v checked %d drift %+v; want 2 knobs in force, 4 lost, no drift", name, r.Active, r.Checked, r.Drift)
		}
	}
	tx := state(t, h).Txns[0]
	if tx.Status != journal.Applied || len(tx.Lost) != 4 {
		t.Fatalf("journal after status: %s, lost %d", tx.Status, len(tx.Lost))
	}
	// Drift of a surviving knob is still seen.
	h.svc.Units["irqbalance.service"] = "active,enabled"
	if r, _ := e.Status(ctx, txn.StatusOptions{}); len(r.Drift) != 1 || r.Drift[0].Knob != "service/irqbalance.service" {
		t.Errorf("drift of the service: %+v", r.Drift)
	}
	h.svc.Units["irqbalance.service"] = "inactive,disabled"

	rb, err := e.Rollback(ctx, txn.RollbackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rb.Changed) != 2 || h.svc.Units["irqbalance.service"] != "active,enabled" {
		t.Errorf("rollback changed %+v; irqbalance %s", rb.Changed, h.svc.Units["irqbalance.service"])
	}
	if h.exists("etc/systemd/system/gw.service.d") {
		t.Error("the drop-in (and the directory it created) survived the rollback")
	}
	if got := h.read("proc/sys/net/core/somaxconn"); got != "2222" {
		t.Errorf("rollback wrote a lost sysctl: somaxconn %s, want 2222 as set after the reboot", got)
	}
	if st := state(t, h); st.Txns[0].Status != journal.RolledBack {
		t.Errorf("after rollback: %s", st.Txns[0].Status)
	}
}

// TestRebootVolatileOnlyIsLost: a transaction of kernel settings only is
// lost as a whole, and there is nothing left to roll back.
func TestRebootVolatileOnlyIsLost(t *testing.T) {
	h := newHost(t)
	ctx := context.Background()
	res := mustApply(t, h.engine("boot-1"), mixed()[:2], journal.Meta{Profile: "p"})
	h.reboot()
	e := h.engine("boot-2")
	rep, err := e.Status(ctx, txn.StatusOptions{Recover: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Lost) != 1 || rep.Lost[0] != res.Txn || rep.Txn != nil || len(rep.Active) != 0 {
		t.Errorf("status: %+v", rep)
	}
	rb, err := e.Rollback(ctx, txn.RollbackOptions{})
	if err != nil || rb.Txn != "" {
		t.Errorf("rollback of nothing: %+v, %v", rb, err)
	}
}

// TestConfirmPersistNeverReappliedAtBoot: with --confirm and --persist, the
// files that would bring the transaction back at boot wait for confirm; a
// reboot before confirm rolls it back at boot (its watchdog died), and boot
// writes none of its knobs again.
func TestConfirmPersistNeverReappliedAtBoot(t *testing.T) {
	h := newHost(t)
	ctx := context.Background()
	id, _ := applyConfirmPersist(t, h, h.engine("boot-1"))
	sysctlFile := strings.TrimPrefix(persist.SysctlFile(id), "/")
	if h.exists(sysctlFile) {
		t.Fatal("the sysctl.d file of an unconfirmed transaction was written: systemd-sysctl would apply it at boot")
	}
	if !h.exists("etc/systemd/system/lowlat-boot.service") {
		t.Fatal("no boot unit to roll the unconfirmed transaction back after a reboot")
	}
	h.reboot()
	b := h.engine("boot-2")
	res, err := b.Boot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.RolledBack) != 1 || res.RolledBack[0] != id {
		t.Errorf("boot rolled back %v, want %s", res.RolledBack, id)
	}
	if got := h.read("sys/kernel/mm/transparent_hugepage/enabled"); got != "always madvise [never]" || h.eth.NICs["eth0"].Rings.Rx != 512 {
		t.Errorf("boot re-applied an unconfirmed transaction: THP %q, ring %d", got, h.eth.NICs["eth0"].Rings.Rx)
	}
	if h.svc.Units["irqbalance.service"] != "active,enabled" || h.exists("etc/systemd/system/lowlat-boot.service") || h.exists("etc/systemd/system/gw.service.d") {
		t.Errorf("boot left what survives a reboot: irqbalance %s", h.svc.Units["irqbalance.service"])
	}
	if _, err := b.Confirm(ctx); err == nil {
		t.Error("confirm after the rollback at boot succeeded")
	}
}

// TestConfirmPersistThenBoot: confirm writes the deferred files within the
// transaction; at the next boot, boot re-applies the volatile knobs (not the
// sysctls: /etc/sysctl.d does that), and a rollback removes the files too.
func TestConfirmPersistThenBoot(t *testing.T) {
	h := newHost(t)
	ctx := context.Background()
	e := h.engine("boot-1")
	id, files := applyConfirmPersist(t, h, e)
	cres, err := e.Confirm(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The boot unit is in the transaction already (the guard): confirm
	// writes the rest.
	if cres.Txn != id || len(cres.Changed) != len(files)-2 {
		t.Errorf("confirm wrote %d of the %d deferred files that were not written yet", len(cres.Changed), len(files)-2)
	}
	sysctlFile := strings.TrimPrefix(persist.SysctlFile(id), "/")
	if !strings.Contains(h.read(sysctlFile), "net.core.somaxconn = 1024") {
		t.Errorf("sysctl file after confirm: %q", h.read(sysctlFile))
	}
	h.reboot()
	b := h.engine("boot-2")
	// Before boot runs, status sees the persisted knobs as drift (boot
	// has not put them back yet): persisted transactions are never lost.
	if r, _ := b.Status(ctx, txn.StatusOptions{Recover: true}); len(r.Lost)+len(r.PartlyLost) != 0 || len(r.Drift) == 0 {
		t.Errorf("status before boot: lost %v %v drift %d", r.Lost, r.PartlyLost, len(r.Drift))
	}
	if _, err := b.Boot(ctx); err != nil {
		t.Fatal(err)
	}
	if got := h.read("sys/kernel/mm/transparent_hugepage/enabled"); got != "madvise" || h.read("proc/irq/27/smp_affinity_list") != "2" || h.eth.NICs["eth0"].Rings.Rx != 1024 {
		t.Errorf("boot did not re-apply: THP %q irq %q ring %d", got, h.read("proc/irq/27/smp_affinity_list"), h.eth.NICs["eth0"].Rings.Rx)
	}
	if got := h.read("proc/sys/net/core/somaxconn"); got != "4096" {
		t.Errorf("boot wrote a sysctl (%s): that is systemd-sysctl's job", got)
	}
	if _, err := b.Rollback(ctx, txn.RollbackOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		p, _ := strings.CutPrefix(f.Knob, "file/")
		if p == f.Knob {
			p, _ = strings.CutPrefix(f.Knob, "link/")
		}
		if h.exists(p) {
			t.Errorf("rollback left %s", p)
		}
	}
}

// applyConfirmPersist applies mixed() as 'apply --confirm 10m --persist'
// does: the guard unit in the transaction, the persistence files deferred.
func applyConfirmPersist(t *testing.T, h *fakeHost, e *txn.Engine) (string, []persist.Change) {
	t.Helper()
	id := e.NewID()
	changes := mixed()
	var settings []persist.Setting
	for _, c := range changes {
		settings = append(settings, persist.Setting{Knob: c.Knob, Value: c.Value})
	}
	o := persist.Options{ID: id, Profile: "game-udp", Exe: "/usr/bin/lowlat", Journal: h.jp, Systemd: true}
	files, _ := persist.Changes(settings, o)
	guard, _ := persist.Guard(settings, o)
	for _, g := range guard {
		changes = append(changes, txn.Change{Knob: g.Knob, Value: g.Value})
	}
	var deferred []journal.Change
	for _, f := range files {
		deferred = append(deferred, journal.Change{Knob: f.Knob, Value: f.Value})
	}
	deadline := h.now.Add(10 * time.Minute)
	if _, err := e.ApplyAs(context.Background(), id, changes, journal.Meta{Profile: "game-udp", Persist: true, ConfirmBy: &deadline, Deferred: deferred}); err != nil {
		t.Fatal(err)
	}
	return id, files
}

// TestConfirmDeferredFailure: a deferred file that cannot be written undoes
// the ones written before it, and the transaction stays unconfirmed under
// its watchdog.
func TestConfirmDeferredFailure(t *testing.T) {
	h := newHost(t)
	ctx := context.Background()
	e := h.engine("boot-1")
	h.write("etc/blocker", "a file where a directory should be")
	deadline := h.now.Add(time.Minute)
	deferred := []journal.Change{
		{Knob: "file/etc/sysctl.d/99-lowlat-x.conf", Value: knob.FileContent("a = 1\n", 0o644)},
		{Knob: "file/etc/blocker/unit.conf", Value: knob.FileContent("x\n", 0o644)},
	}
	mustApply(t, e, mixed()[:1], journal.Meta{ConfirmBy: &deadline, Deferred: deferred})
	if _, err := e.Confirm(ctx); err == nil || !strings.Contains(err.Error(), "still unconfirmed") {
		t.Fatalf("confirm: %v", err)
	}
	if h.exists("etc/sysctl.d/99-lowlat-x.conf") {
		t.Error("the deferred file written before the failure was kept")
	}
	st := state(t, h)
	if !st.Txns[0].PendingConfirm() {
		t.Errorf("transaction after a failed confirm: %s confirmed %v", st.Txns[0].Status, st.Txns[0].Confirmed)
	}
}

// TestDeferredNeedsConfirm: deferred changes without a deadline are refused
// before anything is written.
func TestDeferredNeedsConfirm(t *testing.T) {
	h := newHost(t)
	_, err := h.engine("b").Apply(context.Background(), mixed()[:1], journal.Meta{Deferred: []journal.Change{{Knob: "file/etc/x", Value: "x"}}})
	if err == nil || h.exists("etc/x") || h.read("proc/sys/net/core/somaxconn") != "4096" {
		t.Errorf("apply with deferred changes and no deadline: %v", err)
	}
}

// TestReassertOnlyInForce: after a reboot, re-assertion leaves alone an
// interrupt setting the reboot undid (non-persisted), still puts back a
// disabled irqbalance that something started, and, for a persisted
// transaction, leaves its volatile knobs to boot, then keeps them.
func TestReassertOnlyInForce(t *testing.T) {
	h := newHost(t)
	ctx := context.Background()
	mustApply(t, h.engine("boot-1"), mixed(), journal.Meta{})
	h.reboot()
	h.svc.Units["irqbalance.service"] = "active,enabled" // a package upgrade
	e := h.engine("boot-2")
	ra, err := e.Reassert(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.read("proc/irq/27/smp_affinity_list") != "0-3" || h.eth.NICs["eth0"].Rings.Rx != 512 {
		t.Errorf("reassert brought back settings the reboot undid: irq %s ring %d", h.read("proc/irq/27/smp_affinity_list"), h.eth.NICs["eth0"].Rings.Rx)
	}
	if len(ra.Moved) != 1 || ra.Moved[0].Knob != "service/irqbalance.service" || h.svc.Units["irqbalance.service"] != "inactive,disabled" {
		t.Errorf("reassert: %+v; irqbalance %s", ra, h.svc.Units["irqbalance.service"])
	}

	// A persisted transaction: its interrupt comes back through boot, and
	// only then is it re-asserted.
	h2 := newHost(t)
	mustApply(t, h2.engine("boot-1"), mixed()[2:4], journal.Meta{Persist: true})
	h2.reboot()
	e2 := h2.engine("boot-2")
	if ra, _ := e2.Reassert(ctx); ra.Checked != 0 || h2.read("proc/irq/27/smp_affinity_list") != "0-3" {
		t.Errorf("before boot: reassert checked %d, irq %s", ra.Checked, h2.read("proc/irq/27/smp_affinity_list"))
	}
	if _, err := e2.Boot(ctx); err != nil {
		t.Fatal(err)
	}
	h2.write("proc/irq/27/smp_affinity_list", "0\n") // irqbalance moves it
	if ra, _ := e2.Reassert(ctx); len(ra.Moved) != 1 || h2.read("proc/irq/27/smp_affinity_list") != "2" {
		t.Errorf("after boot: %+v, irq %s", ra, h2.read("proc/irq/27/smp_affinity_list"))
	}
}

// TestTwoPersistedTransactions: each persisted transaction keeps its own
// sysctl.d file; rolling back the newer one removes only its own file, and
// the boot unit stays while the older one needs it.
func TestTwoPersistedTransactions(t *testing.T) {
	h := newHost(t)
	ctx := context.Background()
	e := h.engine("boot-1")
	apply := func(profile string, c txn.Change) string {
		id := e.NewID()
		files, _ := persist.Changes([]persist.Setting{{Knob: c.Knob, Value: c.Value}, {Knob: "irq/27/affinity", Value: "2"}},
			persist.Options{ID: id, Profile: profile, Exe: "/usr/bin/lowlat", Journal: h.jp, Systemd: true})
		changes := []txn.Change{c, {Knob: "irq/27/affinity", Value: "2"}}
		for _, f := range files {
			changes = append(changes, txn.Change{Knob: f.Knob, Value: f.Value})
		}
		if _, err := e.ApplyAs(ctx, id, changes, journal.Meta{Profile: profile, Persist: true}); err != nil {
			t.Fatal(err)
		}
		h.now = h.now.Add(time.Second)
		return id
	}
	id1 := apply("game-udp", txn.Change{Knob: "sysctl/net.core.somaxconn", Value: "1024"})
	id2 := apply("live-edge", txn.Change{Knob: "sysctl/net.ipv4.tcp_fastopen", Value: "3"})
	f1, f2 := strings.TrimPrefix(persist.SysctlFile(id1), "/"), strings.TrimPrefix(persist.SysctlFile(id2), "/")
	if !strings.Contains(h.read(f1), "somaxconn = 1024") || !strings.Contains(h.read(f2), "tcp_fastopen = 3") || strings.Contains(h.read(f2), "somaxconn") {
		t.Fatalf("sysctl files:\n%s\n%s", h.read(f1), h.read(f2))
	}
	if _, err := e.Rollback(ctx, txn.RollbackOptions{}); err != nil {
		t.Fatal(err)
	}
	if h.exists(f2) || !h.exists(f1) || !h.exists("etc/systemd/system/lowlat-boot.service") {
		t.Errorf("after rolling back %s: its file %v, the other's %v, boot unit %v", id2, h.exists(f2), h.exists(f1), h.exists("etc/systemd/system/lowlat-boot.service"))
	}
	if _, err := e.Rollback(ctx, txn.RollbackOptions{}); err != nil {
		t.Fatal(err)
	}
	if h.exists(f1) || h.exists("etc/systemd/system/lowlat-boot.service") || h.exists("etc/systemd/system/lowlat-boot.service.d") {
		t.Error("rolling back the last persisted transaction left files behind")
	}
}

// TestOrphanedConfirm: a transaction past its deadline whose watchdog is
// gone is rolled back by the next settling command, and apply says what to
// do instead of "awaits confirmation".
func TestOrphanedConfirm(t *testing.T) {
	h := newHost(t)
	ctx := context.Background()
	e := h.engine("boot-1")
	deadline := h.now.Add(time.Minute)
	res := mustApply(t, e, mixed()[:1], journal.Meta{ConfirmBy: &deadline})
	h.now = h.now.Add(2 * time.Minute)
	delete(h.watchdogs, 4242) // OOM-killed
	if _, err := e.Apply(ctx, mixed()[1:2], journal.Meta{}); err == nil || !strings.Contains(err.Error(), "watchdog") {
		t.Errorf("apply over an orphaned transaction: %v", err)
	}
	view, _ := e.Status(ctx, txn.StatusOptions{})
	if len(view.Overdue) != 1 || !strings.Contains(view.Overdue[0], "is gone") {
		t.Errorf("read-only status overdue: %v", view.Overdue)
	}
	rep, err := e.Status(ctx, txn.StatusOptions{Recover: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Txn != nil || h.read("proc/sys/net/core/somaxconn") != "4096" || !strings.Contains(strings.Join(rep.Notes, "\n"), res.Txn) {
		t.Errorf("status as root did not roll back %s: %+v", res.Txn, rep)
	}
}

// TestRollbackVanishedDevice: a NIC unplugged after the apply is reported
// as gone, not as restored, and the rollback completes.
func TestRollbackVanishedDevice(t *testing.T) {
	h := newHost(t)
	ctx := context.Background()
	e := h.engine("boot-1")
	mustApply(t, e, mixed()[:4], journal.Meta{})
	delete(h.eth.NICs, "eth0")
	os.RemoveAll(filepath.Join(h.root, "proc/irq/27"))
	res, err := e.Rollback(ctx, txn.RollbackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gone := map[string]bool{}
	for _, g := range res.Gone {
		gone[g.Knob] = true
	}
	if len(res.Gone) != 2 || !gone["ethtool/eth0/ring/rx"] || !gone["irq/27/affinity"] || len(res.Changed) != 2 {
		t.Errorf("gone %+v changed %+v", res.Gone, res.Changed)
	}
	if st := state(t, h); st.Txns[0].Status != journal.RolledBack {
		t.Errorf("status %s", st.Txns[0].Status)
	}
}

// TestWatchdogStopsHungApply: at the deadline the apply that started the
// watchdog still holds the journal (hung): the watchdog stops it and rolls
// back. Another holder is waited for, and status says so.
func TestWatchdogStopsHungApply(t *testing.T) {
	flock, err := exec.LookPath("flock")
	if err != nil {
		t.Fatal("flock (util-linux) is needed")
	}
	h := newHost(t)
	ctx := context.Background()
	e := h.engine("boot-1")
	e.Now = time.Now
	deadline := time.Now().Add(200 * time.Millisecond)
	res := mustApply(t, e, mixed()[:1], journal.Meta{ConfirmBy: &deadline})

	hold := func() *exec.Cmd {
		t.Helper()
		// -o: the lock stays with flock itself, not the sleep it runs.
		cmd := exec.Command(flock, "-o", "-x", h.jp, "sleep", "30")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		for i := 0; i < 100; i++ {
			j, err := journal.Open(h.jp, journal.ReadOnly)
			if errors.Is(err, journal.ErrLocked) {
				return cmd
			}
			if err == nil {
				j.Close()
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatal("flock did not take the journal")
		return nil
	}

	// Somebody else holds the journal: the watchdog waits, status reports.
	other := hold()
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	_, err = e.Watchdog(wctx, res.Txn, deadline, 1)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("watchdog with another holder: %v, want it to keep waiting", err)
	}
	rep, err := e.Status(ctx, txn.StatusOptions{Recover: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Locked == "" || len(rep.Overdue) != 1 || !strings.Contains(rep.Overdue[0], "waits for the journal lock held by pid") {
		t.Errorf("status while the watchdog waits: locked %q overdue %v", rep.Locked, rep.Overdue)
	}
	other.Process.Kill()
	other.Wait()

	// The hung apply itself holds it: stopped, then rolled back.
	hung := hold()
	start := time.Now()
	wres, err := e.Watchdog(ctx, res.Txn, deadline, hung.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if len(wres.RolledBack) != 1 || h.read("proc/sys/net/core/somaxconn") != "4096" {
		t.Errorf("watchdog result %+v, somaxconn %s", wres, h.read("proc/sys/net/core/somaxconn"))
	}
	if hung.Wait() == nil || time.Since(start) > txn.WatchdogGrace {
		t.Errorf("the hung apply was not stopped promptly (%v)", time.Since(start))
	}
}

// A peeking status (lowlat monitor's, once a minute) reads the journal
// without its lock: it never competes with an apply for it, so it finds
// no holder to report even while a writer holds the journal, and still
// reads the transactions in force.
func TestStatusPeekTakesNoLock(t *testing.T) {
	h := newHost(t)
	e := h.engine("boot-1")
	mustApply(t, e, mixed()[:1], journal.Meta{})
	w, err := journal.Open(e.JournalPath, journal.ReadWrite) // a writer in progress
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rep, err := e.Status(context.Background(), txn.StatusOptions{Peek: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Locked != "" || len(rep.Active) != 1 || rep.Txn == nil {
		t.Errorf("peek: locked %q, %d active", rep.Locked, len(rep.Active))
	}
	// Without Peek, the same read meets the writer's lock.
	if rep, err := e.Status(context.Background(), txn.StatusOptions{}); err != nil || rep.Locked == "" {
		t.Errorf("locking status: %v, locked %q", err, rep.Locked)
	}
}
