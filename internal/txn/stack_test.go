//go:build linux

package txn_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/txn"
)

// stackStep is one thing that happens to the fake host in a stacked
// scenario: an apply, a reboot, lowlat boot, a root status, a hand edit.
type stackStep struct {
	apply   []txn.Change
	persist bool
	// reboot starts boot "boot-N+1" with every kernel file at its boot
	// value, then writes bootSysctls as systemd-sysctl would from the
	// persisted transactions' /etc/sysctl.d files.
	reboot      bool
	bootSysctls map[string]string
	// lowlatBoot runs 'lowlat boot', status a root 'lowlat status'.
	lowlatBoot, status bool
	// set writes files by hand (someone else's change), path -> content.
	set map[string]string
}

const (
	somaxconn = "proc/sys/net/core/somaxconn"
	irq27     = "proc/irq/27/smp_affinity_list"
)

func sysctlSet(v string) []txn.Change {
	return []txn.Change{{Knob: "sysctl/net.core.somaxconn", Value: v}}
}

func irqSet(v string) []txn.Change { return []txn.Change{{Knob: "irq/27/affinity", Value: v}} }

// TestStackedRebootRollback: lost-ness is decided per knob across the
// whole stack of transactions, so that 'rollback --all' after any mix of
// applies (persisted or not) and reboots ends at the value the knob had
// before the oldest change still on the path to what is live, and writes
// nothing a reboot already put back. Kernel boot values: somaxconn 4096,
// irq 27 on 0-3.
func TestStackedRebootRollback(t *testing.T) {
	tests := []struct {
		name  string
		steps []stackStep
		// wantRollback is every file after 'rollback --all'.
		wantRollback map[string]string
		// wantNewest is every file after rolling back only the newest
		// active transaction, in a copy of the scenario (nil: not checked).
		wantNewest map[string]string
	}{{
		// The sequence: the persisted transaction on top carries
		// the unpersisted one below it through the reboot.
		name: "unpersisted under persisted, sysctl",
		steps: []stackStep{
			{apply: sysctlSet("1024")},
			{apply: sysctlSet("512"), persist: true},
			{reboot: true, bootSysctls: map[string]string{somaxconn: "512"}},
			{lowlatBoot: true},
		},
		wantRollback: map[string]string{somaxconn: "4096"},
		wantNewest:   map[string]string{somaxconn: "1024"},
	}, {
		// The same with a knob lowlat boot re-applies itself.
		name: "unpersisted under persisted, interrupt",
		steps: []stackStep{
			{apply: irqSet("2")},
			{apply: irqSet("1"), persist: true},
			{reboot: true},
			{lowlatBoot: true},
		},
		wantRollback: map[string]string{irq27: "0-3"},
	}, {
		// A root status settles the journal before lowlat boot has run:
		// the persisted transaction still holds the stack.
		name: "status before boot",
		steps: []stackStep{
			{apply: irqSet("2")},
			{apply: irqSet("1"), persist: true},
			{reboot: true},
			{status: true},
			{lowlatBoot: true},
		},
		wantRollback: map[string]string{irq27: "0-3"},
	}, {
		// Unpersisted on top of persisted: the top is lost, the bottom is
		// restored.
		name: "persisted under unpersisted",
		steps: []stackStep{
			{apply: sysctlSet("1024"), persist: true},
			{apply: sysctlSet("512")},
			{reboot: true, bootSysctls: map[string]string{somaxconn: "1024"}},
			{lowlatBoot: true},
		},
		wantRollback: map[string]string{somaxconn: "4096"},
	}, {
		// The reboot comes between two unpersisted applies, and somebody
		// sets the knob by hand before the second: the second recorded
		// the hand-set value, and the first is lost (restoring its
		// previous value would undo the hand edit).
		name: "reboot between unpersisted applies",
		steps: []stackStep{
			{apply: sysctlSet("1024")},
			{reboot: true},
			{set: map[string]string{somaxconn: "2222"}},
			{apply: sysctlSet("512")},
		},
		wantRollback: map[string]string{somaxconn: "2222"},
	}, {
		// Persisted, unpersisted, reboot, unpersisted again: the path from
		// the live value skips the middle transaction the reboot undid.
		name: "path skips a lost middle",
		steps: []stackStep{
			{apply: sysctlSet("1024"), persist: true},
			{apply: sysctlSet("512")},
			{reboot: true, bootSysctls: map[string]string{somaxconn: "1024"}},
			{lowlatBoot: true},
			{apply: sysctlSet("256")},
		},
		wantRollback: map[string]string{somaxconn: "4096"},
		wantNewest:   map[string]string{somaxconn: "1024"},
	}, {
		// One transaction, two knobs: only the one a persisted transaction
		// carries through the reboot stays; the other is lost and not
		// written, whatever it is now.
		name: "per knob within a transaction",
		steps: []stackStep{
			{apply: append(sysctlSet("1024"), irqSet("2")...)},
			{apply: sysctlSet("512"), persist: true},
			{reboot: true, bootSysctls: map[string]string{somaxconn: "512"}},
			{lowlatBoot: true},
			{set: map[string]string{irq27: "1"}},
		},
		wantRollback: map[string]string{somaxconn: "4096", irq27: "1"},
	}, {
		// Two reboots: the persisted transaction carries its stack through
		// both.
		name: "two reboots",
		steps: []stackStep{
			{apply: append(sysctlSet("1024"), irqSet("2")...)},
			{apply: append(sysctlSet("512"), irqSet("1")...), persist: true},
			{reboot: true, bootSysctls: map[string]string{somaxconn: "512"}},
			{lowlatBoot: true},
			{status: true},
			{reboot: true, bootSysctls: map[string]string{somaxconn: "512"}},
			{lowlatBoot: true},
		},
		wantRollback: map[string]string{somaxconn: "4096", irq27: "0-3"},
	}, {
		// An apply in this boot before lowlat boot ran (a host without the
		// unit, or an operator quicker than it): boot leaves the newer
		// value alone, and the rollback of both ends at the boot value.
		name: "apply before lowlat boot",
		steps: []stackStep{
			{apply: irqSet("2"), persist: true},
			{reboot: true},
			{apply: irqSet("1")},
			{lowlatBoot: true},
		},
		wantRollback: map[string]string{irq27: "0-3"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, e := runStack(t, tt.steps)
			if _, err := e.Rollback(context.Background(), txn.RollbackOptions{All: true}); err != nil {
				t.Fatal(err)
			}
			checkFiles(t, h, "rollback --all", tt.wantRollback)
			if rep, err := e.Status(context.Background(), txn.StatusOptions{Recover: true}); err != nil || len(rep.Active) != 0 {
				t.Errorf("after rollback --all: %v, active %+v", err, rep.Active)
			}
			if tt.wantNewest == nil {
				return
			}
			h, e = runStack(t, tt.steps)
			if _, err := e.Rollback(context.Background(), txn.RollbackOptions{}); err != nil {
				t.Fatal(err)
			}
			checkFiles(t, h, "rollback of the newest", tt.wantNewest)
			if rep, err := e.Status(context.Background(), txn.StatusOptions{Recover: true}); err != nil || len(rep.Drift) != 0 {
				t.Errorf("after rolling back the newest: %v, drift %+v", err, rep.Drift)
			}
		})
	}
}

// runStack plays steps on a new fake host and returns it with the engine
// of its last boot. It checks that every step succeeds and that a root
// status sees no drift after each lowlat boot.
func runStack(t *testing.T, steps []stackStep) (*fakeHost, *txn.Engine) {
	t.Helper()
	ctx := context.Background()
	h := newHost(t)
	boot := 1
	e := h.engine("boot-1")
	for i, s := range steps {
		switch {
		case s.apply != nil:
			if _, err := e.Apply(ctx, s.apply, journal.Meta{Persist: s.persist}); err != nil {
				t.Fatalf("step %d: apply: %v", i, err)
			}
			h.now = h.now.Add(time.Second)
		case s.reboot:
			h.reboot()
			for p, v := range s.bootSysctls {
				h.write(p, v+"\n")
			}
			boot++
			e = h.engine(fmt.Sprintf("boot-%d", boot))
		case s.lowlatBoot:
			if _, err := e.Boot(ctx); err != nil {
				t.Fatalf("step %d: boot: %v", i, err)
			}
			if rep, err := e.Status(ctx, txn.StatusOptions{Recover: true}); err != nil || len(rep.Drift) != 0 {
				t.Fatalf("step %d: status after boot: %v, drift %+v", i, err, rep.Drift)
			}
		case s.status:
			if _, err := e.Status(ctx, txn.StatusOptions{Recover: true}); err != nil {
				t.Fatalf("step %d: status: %v", i, err)
			}
		case s.set != nil:
			for p, v := range s.set {
				h.write(p, v+"\n")
			}
		}
	}
	return h, e
}

func checkFiles(t *testing.T, h *fakeHost, after string, want map[string]string) {
	t.Helper()
	for p, v := range want {
		if got := h.read(p); got != v {
			t.Errorf("after %s: %s is %s, want %s", after, p, got, v)
		}
	}
}
