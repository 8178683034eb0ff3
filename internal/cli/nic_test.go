package cli

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/knob/knobtest"
	"github.com/lowlat/lowlat/internal/txn"
	"golang.org/x/sys/unix"
)

// TestApplyWritable: a knob the driver refuses (EOPNOTSUPP) is left out and
// the rest applied in a fresh transaction; a read-back mismatch is not
// forgiven.
func TestApplyWritable(t *testing.T) {
	ctx := context.Background()
	fe := &knobtest.Ethtool{NICs: map[string]*knobtest.NIC{"eth0": {
		Rings:    &host.Rings{RxMax: 4096, TxMax: 4096, Rx: 512, Tx: 512},
		Coalesce: knob.Coalesce{"rx-usecs": 50},
		Features: map[string]knob.Feature{"rx-lro": {Active: true, Changeable: true}},
	}}, Refuse: map[string]unix.Errno{"coalesce": unix.EOPNOTSUPP}}
	sys := &knob.System{Root: t.TempDir(), Ethtool: fe}
	eng := &txn.Engine{JournalPath: filepath.Join(t.TempDir(), "journal"), Sys: sys}
	changes := []txn.Change{
		{Knob: "ethtool/eth0/ring/rx", Value: "1024"},
		{Knob: "ethtool/eth0/coalesce/rx-usecs", Value: "5"},
		{Knob: "ethtool/eth0/feature/lro", Value: "off"},
	}
	res, err := eng.Apply(ctx, changes, journal.Meta{Profile: "t"})
	var dropped []txn.Item
	if res != nil {
		dropped = res.Skipped
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changed) != 2 || len(dropped) != 1 || dropped[0].Knob != "ethtool/eth0/coalesce/rx-usecs" || !strings.Contains(dropped[0].Error, "not writable here") {
		t.Fatalf("changed %+v dropped %+v", res.Changed, dropped)
	}
	if fe.NICs["eth0"].Rings.Rx != 1024 || fe.NICs["eth0"].Features["rx-lro"].Active {
		t.Error("the writable knobs were not applied")
	}
	if _, err := eng.Rollback(ctx, txn.RollbackOptions{}); err != nil {
		t.Fatal(err)
	}
	if fe.NICs["eth0"].Rings.Rx != 512 || !fe.NICs["eth0"].Features["rx-lro"].Active {
		t.Error("rollback did not restore")
	}
	fe.Refuse = nil
	fe.Ignore = map[string]bool{"ring": true}
	_, err = eng.Apply(ctx, changes, journal.Meta{Profile: "t"})
	var ae *txn.ApplyError
	if !errors.As(err, &ae) || ae.Knob != "ethtool/eth0/ring/rx" || !strings.Contains(err.Error(), "kernel reports") {
		t.Errorf("read-back mismatch: %v", err)
	}
	if fe.NICs["eth0"].Features["rx-lro"].Active != true || fe.NICs["eth0"].Coalesce["rx-usecs"] != 50 {
		t.Error("a failed apply left changes behind")
	}
}

// TestApplyNICVanishes: a NIC unplugged mid-apply fails the transaction with
// an error naming it; everything else is rolled back, and the vanished NIC's
// knobs need no restore.
func TestApplyNICVanishes(t *testing.T) {
	for _, tt := range []struct {
		after      int
		knob, want string
	}{
		{2, "ethtool/eth0/ring/tx", "ethtool eth0: set ring tx: eth0: no such device"},
		{3, "ethtool/eth0/feature/lro", "ethtool eth0: set feature lro: eth0: no such device"},
	} {
		ctx := context.Background()
		nic := func() *knobtest.NIC {
			return &knobtest.NIC{Rings: &host.Rings{RxMax: 4096, TxMax: 4096, Rx: 512, Tx: 512},
				Features: map[string]knob.Feature{"rx-lro": {Active: true, Changeable: true}}}
		}
		fe := &knobtest.Ethtool{NICs: map[string]*knobtest.NIC{"eth0": nic(), "eth1": nic()}, VanishAfter: map[string]int{"eth0": tt.after}}
		sys := &knob.System{Root: t.TempDir(), Ethtool: fe}
		eng := &txn.Engine{JournalPath: filepath.Join(t.TempDir(), "journal"), Sys: sys}
		res, err := eng.Apply(ctx, []txn.Change{
			{Knob: "ethtool/eth1/ring/rx", Value: "1024"},
			{Knob: "ethtool/eth0/ring/rx", Value: "1024"},
			{Knob: "ethtool/eth0/ring/tx", Value: "1024"},
			{Knob: "ethtool/eth0/feature/lro", Value: "off"},
		}, journal.Meta{Profile: "t"})
		var dropped []txn.Item
		if res != nil {
			dropped = res.Skipped
		}
		var ae *txn.ApplyError
		if !errors.As(err, &ae) || ae.Knob != tt.knob || len(ae.RollbackFailed) != 0 || len(dropped) != 0 || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("vanish after %d sets: %v (dropped %v)", tt.after, err, dropped)
			continue
		}
		if fe.NICs["eth1"].Rings.Rx != 512 {
			t.Error("eth1 not rolled back")
		}
		if st, err := eng.Status(ctx, txn.StatusOptions{}); err != nil || st.Txn != nil {
			t.Errorf("status after the failed apply: %+v, %v", st, err)
		}
	}
}
