//go:build linux

package knob_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/testnet"
	"github.com/lowlat/lowlat/internal/txn"
	"golang.org/x/sys/unix"
)

// withOwnSys runs f inside ns on a thread with a private mount namespace
// whose /sys is a fresh sysfs mount: sysfs shows the network devices of the
// namespace that mounted it, so queue files of the namespace's interfaces
// appear at their usual paths. The thread is thrown away afterwards.
func withOwnSys(ns *testnet.NS, f func() error) error {
	return ns.Do(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return err
		}
		if err := unix.Mount("", "/", "none", unix.MS_SLAVE|unix.MS_REC, ""); err != nil {
			return err
		}
		if err := unix.Unmount("/sys", unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return err
		}
		if err := unix.Mount("sysfs", "/sys", "sysfs", 0, ""); err != nil {
			return err
		}
		return f()
	})
}

// ethtoolK is "ethtool -k IF" run in the namespace, for a cross-check that
// does not use lowlat's ioctl code.
func ethtoolK(t *testing.T, ns *testnet.NS, iface string) string {
	t.Helper()
	path, err := exec.LookPath("ethtool")
	if err != nil {
		return ""
	}
	out, err := ns.Command(path, "-k", iface).Output()
	if err != nil {
		t.Fatalf("ethtool -k %s: %v", iface, err)
	}
	return string(out)
}

// TestIntegrationEthtoolVeth drives the real ioctls on a veth pair: features
// change and read back (cross-checked with ethtool(8)), a [fixed] feature and
// the queries veth does not implement are "not writable here"/"not
// supported", channel counts change through ETHTOOL_SCHANNELS, and a
// transaction rolls all of it back exactly. netdevsim would add rings and
// coalescing, but neither this host's kernel nor the VM's has it.
func TestIntegrationEthtoolVeth(t *testing.T) {
	ns := testnet.New(t)
	ns.Veth(t, "llnic0", "llnic1", nil, 4)
	before := ethtoolK(t, ns, "llnic0")
	ctx := context.Background()
	jpath := filepath.Join(t.TempDir(), "journal")
	err := ns.Do(func() error {
		k := func(id string) knob.Knob {
			kn, err := knob.New(knob.Live, id)
			if err != nil {
				t.Fatal(err)
			}
			return kn
		}
		gro := k("ethtool/llnic0/feature/gro")
		v, err := gro.Read(ctx)
		if err != nil {
			return err
		}
		want := map[string]string{"off": "on", "on": "off"}[v]
		if want == "" {
			t.Errorf("gro reads %q", v)
		}
		if err := gro.Write(ctx, want); err != nil {
			return err
		}
		if err := knob.Verify(ctx, gro, want); err != nil {
			return err
		}
		if err := gro.Write(ctx, v); err != nil {
			return err
		}
		if err := k("ethtool/llnic0/feature/lro").Write(ctx, "on"); !errors.Is(err, knob.ErrNotWritable) || !strings.Contains(err.Error(), "fixed") {
			t.Errorf("lro on veth (fixed off): %v", err)
		}
		for _, id := range []string{"ethtool/llnic0/ring/rx", "ethtool/llnic0/coalesce/rx-usecs"} {
			if _, err := k(id).Read(ctx); !errors.Is(err, knob.ErrNotSupported) || errors.Is(err, knob.ErrNotWritable) {
				t.Errorf("%s on veth: %v", id, err)
			}
		}
		if err := k("ethtool/llnic0/channels/combined").Write(ctx, "2"); !errors.Is(err, knob.ErrNotWritable) {
			t.Errorf("combined channels on veth (rx/tx only): %v", err)
		}
		if v, err := k("ethtool/llnone0/feature/gro").Read(ctx); err != nil || v != knob.Absent {
			t.Errorf("unknown interface reads %q, %v", v, err)
		}
		if err := k("ethtool/llnone0/feature/gro").Write(ctx, "on"); !errors.Is(err, knob.ErrNoDevice) {
			t.Errorf("unknown interface write: %v", err)
		}

		// One transaction over features and channels, then its rollback.
		eng := &txn.Engine{JournalPath: jpath, Sys: knob.Live}
		changes := []txn.Change{
			{Knob: "ethtool/llnic0/channels/rx", Value: "2"},
			{Knob: "ethtool/llnic0/channels/tx", Value: "3"},
			{Knob: "ethtool/llnic0/feature/gro", Value: want},
			{Knob: "ethtool/llnic0/feature/tso", Value: "off"},
			{Knob: "ethtool/llnic0/feature/gso", Value: "off"},
			{Knob: "ethtool/llnic0/feature/sg", Value: "off"},
		}
		if _, err := eng.Apply(ctx, changes, journal.Meta{Profile: "veth"}); err != nil {
			return err
		}
		for _, c := range changes {
			if err := knob.Verify(ctx, k(c.Knob), c.Value); err != nil {
				t.Error(err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	during := ethtoolK(t, ns, "llnic0")
	if during != "" && (!strings.Contains(during, "\ttx-tcp-segmentation: off") || !strings.Contains(during, "\ttx-tcp6-segmentation: off") || !strings.Contains(during, "scatter-gather: off")) {
		t.Errorf("ethtool(8) does not see the change:\n%s", during)
	}
	if err := ns.Do(func() error {
		_, err := (&txn.Engine{JournalPath: jpath, Sys: knob.Live}).Rollback(ctx, txn.RollbackOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if after := ethtoolK(t, ns, "llnic0"); after != before {
		t.Errorf("not identical after rollback:\n%s", testnet.DiffLines(before, after))
	}

	// A stale plan naming an interface that is gone: the transaction fails
	// on it and nothing stays changed.
	err = ns.Do(func() error {
		eng := &txn.Engine{JournalPath: jpath, Sys: knob.Live}
		_, err := eng.Apply(ctx, []txn.Change{
			{Knob: "ethtool/llnic0/feature/tso", Value: "off"},
			{Knob: "ethtool/llgone0/feature/tso", Value: "off"},
		}, journal.Meta{Profile: "stale"})
		var ae *txn.ApplyError
		if !errors.As(err, &ae) || ae.Knob != "ethtool/llgone0/feature/tso" || ae.RolledBack != 2 || !errors.Is(err, knob.ErrNoDevice) {
			t.Errorf("apply naming a missing interface: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if after := ethtoolK(t, ns, "llnic0"); after != before {
		t.Errorf("a failed apply left changes:\n%s", testnet.DiffLines(before, after))
	}
}

// TestIntegrationRPSMasks proves on a real kernel what runbook 002 got wrong:
// rps_cpus takes a hex bitmap, so its CPU-list form either fails ("0-1":
// EINVAL, which a shell loop never notices) or selects other CPUs ("1" is
// CPU 0). The comma-separated 32-bit group form is accepted and read back as
// the same CPUs. rps_flow_cnt reads back rounded up to a power of two.
func TestIntegrationRPSMasks(t *testing.T) {
	ns := testnet.New(t)
	ns.Veth(t, "llrps0", "llrps1", nil, 2)
	ctx := context.Background()
	err := withOwnSys(ns, func() error {
		file := "/sys/class/net/llrps0/queues/rx-0/rps_cpus"
		if _, err := os.Stat(file); err != nil {
			t.Skipf("no RPS on this kernel (CONFIG_RPS): %v", err)
		}
		// The runbook's form, written as echo would.
		err := os.WriteFile(file, []byte("0-1\n"), 0)
		if !errors.Is(err, syscall.EINVAL) {
			t.Errorf("writing the CPU list 0-1: %v, want EINVAL", err)
		}
		if err := os.WriteFile(file, []byte("1\n"), 0); err != nil {
			return err
		}
		k, err := knob.New(knob.Live, "queue/llrps0/rx-0/rps_cpus")
		if err != nil {
			return err
		}
		// "1" meant CPU 1 as a list; as a mask it is CPU 0.
		if v, _ := k.Read(ctx); k.Satisfied(v, "2") || !k.Satisfied(v, "1") {
			t.Errorf("after writing the list \"1\" the kernel reads %q: CPU 0, not CPU 1", v)
		}
		// The knob refuses the list form before writing anything.
		if err := k.Write(ctx, "0-1"); err == nil || !strings.Contains(err.Error(), "hex masks") {
			t.Errorf("knob accepted a CPU list: %v", err)
		}
		// Groups of 32 bits, most significant first; the kernel takes them
		// as wide as nr_cpu_ids needs and refuses wider ones (EOVERFLOW on
		// 6.x), so lowlat sizes masks from the host's CPU count.
		possible, _ := os.ReadFile("/sys/devices/system/cpu/possible")
		cpus, _ := host.ParseCPUList(string(possible))
		nbits := cpus[len(cpus)-1] + 1
		mask := host.FormatCPUMask([]int{1}, nbits)
		for _, m := range []string{mask, "0"} {
			if err := k.Write(ctx, m); err != nil {
				return err
			}
			if err := knob.Verify(ctx, k, m); err != nil {
				return err
			}
		}
		wide := host.FormatCPUMask([]int{1}, (nbits/32+1)*32+1)
		if err := k.Write(ctx, wide); nbits <= 32 && !errors.Is(err, syscall.EOVERFLOW) {
			t.Logf("a mask wider than %d CPUs (%s): %v", nbits, wide, err)
		}
		xps, _ := knob.New(knob.Live, "queue/llrps0/tx-1/xps_cpus")
		if err := xps.Write(ctx, "00000001"); err != nil {
			return err
		}
		if err := knob.Verify(ctx, xps, "1"); err != nil {
			return err
		}
		fc, _ := knob.New(knob.Live, "queue/llrps0/rx-0/rps_flow_cnt")
		if err := fc.Write(ctx, "3000"); err != nil {
			return err
		}
		if v, _ := fc.Read(ctx); v != "4096" || !fc.Satisfied(v, "3000") {
			t.Errorf("rps_flow_cnt after 3000 reads %q", v)
		}
		return fc.Write(ctx, "0")
	})
	if err != nil {
		t.Fatal(err)
	}
}
