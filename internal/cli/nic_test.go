package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/doctor"
	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/testnet"
	"github.com/lowlat/lowlat/internal/txn"
	"golang.org/x/sys/unix"
)

func TestParseThreadStat(t *testing.T) {
	line := "4242 (my game) srv) S 1 4242 4242 0 -1 4194624 1200 0 0 0 731 42 0 0 20 0 8 0 123456 1000000 2000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 5 0 0 0 0 0\n"
	st, ok := parseThreadStat([]byte(line))
	if !ok || st.comm != "my game) srv" || st.ticks != 773 || st.cpu != 5 || st.kernel {
		t.Errorf("parsed %+v %v", st, ok)
	}
	kt := "15 (ksoftirqd/1) S 2 0 0 0 -1 69238848 0 0 0 0 0 97 0 0 20 0 1 0 12 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 1 0 0 0 0 0\n"
	if st, ok := parseThreadStat([]byte(kt)); !ok || !st.kernel || st.ticks != 97 || st.cpu != 1 {
		t.Errorf("kernel thread %+v %v", st, ok)
	}
	if _, ok := parseThreadStat([]byte("1 (init S 1")); ok {
		t.Error("truncated line accepted")
	}
}

// TestLiveSampler watches this host for a short window while a goroutine
// burns CPU: that thread must be among the busiest, with its share and CPU.
// The machine is shared with other tests, so the share asked for is modest
// and one retry is allowed.
func TestLiveSampler(t *testing.T) {
	testnet.Heavy(t, "samples the whole machine's CPU")
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	defer close(stop)
	for attempt := 1; ; attempt++ {
		s, err := liveSampler{root: "/proc"}.Sample(nil, 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if s.Window < 300*time.Millisecond || len(s.Ksoftirqd) == 0 {
			t.Fatalf("sample %+v", s)
		}
		var mine *doctor.ThreadLoad
		for i, th := range s.Threads {
			if th.PID == os.Getpid() && th.Share >= 0.1 && th.CPU >= 0 {
				mine = &s.Threads[i]
				break
			}
		}
		if mine != nil {
			return
		}
		if attempt == 2 {
			t.Fatalf("this test's spinning thread (pid %d) not among the busiest: %+v", os.Getpid(), s.Threads)
		}
		t.Logf("retrying once: the spinning thread got too little CPU on a busy machine: %+v", s.Threads)
	}
}

// The live sampler test is heavy: a plain "go test ./..." leaves it out.
func TestLiveSamplerIsHeavy(t *testing.T) {
	testnet.CheckHeavy(t, "TestLiveSampler")
}

// TestApplyWritable: a knob the driver refuses (EOPNOTSUPP) is left out and
// the rest applied in a fresh transaction; a read-back mismatch is not
// forgiven.
func TestApplyWritable(t *testing.T) {
	ctx := context.Background()
	sys := &knob.System{Root: t.TempDir()}
	fe := &knob.FakeEthtool{NICs: map[string]*knob.FakeNIC{"eth0": {
		Rings:    &host.Rings{RxMax: 4096, TxMax: 4096, Rx: 512, Tx: 512},
		Coalesce: knob.Coalesce{"rx-usecs": 50},
		Features: map[string]knob.Feature{"rx-lro": {Active: true, Changeable: true}},
	}}, Refuse: map[string]unix.Errno{"coalesce": unix.EOPNOTSUPP}}
	knob.UseEthtool(sys, fe)
	defer knob.Detach(sys)
	eng := &txn.Engine{JournalPath: filepath.Join(t.TempDir(), "journal"), Sys: sys}
	changes := []txn.Change{
		{Knob: "ethtool/eth0/ring/rx", Value: "1024"},
		{Knob: "ethtool/eth0/coalesce/rx-usecs", Value: "5"},
		{Knob: "ethtool/eth0/feature/lro", Value: "off"},
	}
	res, dropped, err := applyWritable(ctx, eng, changes, journal.Meta{Profile: "t"})
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
	_, _, err = applyWritable(ctx, eng, changes, journal.Meta{Profile: "t"})
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
		sys := &knob.System{Root: t.TempDir()}
		nic := func() *knob.FakeNIC {
			return &knob.FakeNIC{Rings: &host.Rings{RxMax: 4096, TxMax: 4096, Rx: 512, Tx: 512},
				Features: map[string]knob.Feature{"rx-lro": {Active: true, Changeable: true}}}
		}
		fe := &knob.FakeEthtool{NICs: map[string]*knob.FakeNIC{"eth0": nic(), "eth1": nic()}, VanishAfter: map[string]int{"eth0": tt.after}}
		knob.UseEthtool(sys, fe)
		eng := &txn.Engine{JournalPath: filepath.Join(t.TempDir(), "journal"), Sys: sys}
		_, dropped, err := applyWritable(ctx, eng, []txn.Change{
			{Knob: "ethtool/eth1/ring/rx", Value: "1024"},
			{Knob: "ethtool/eth0/ring/rx", Value: "1024"},
			{Knob: "ethtool/eth0/ring/tx", Value: "1024"},
			{Knob: "ethtool/eth0/feature/lro", Value: "off"},
		}, journal.Meta{Profile: "t"})
		knob.Detach(sys)
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
