// These tests use the fakes in knobtest, which imports knob: they live in
// knob_test, and the dot import keeps them reading as the package's own.
package knob_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/host"
	. "github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/knob/knobtest"
	"golang.org/x/sys/unix"
)

func fakeNIC() *knobtest.Ethtool {
	return &knobtest.Ethtool{NICs: map[string]*knobtest.NIC{"eth0": {
		Driver:   "i40e",
		Channels: &host.Channels{MaxCombined: 64, MaxOther: 1, Combined: 40, Other: 1},
		Rings:    &host.Rings{RxMax: 4096, TxMax: 4096, Rx: 512, Tx: 512},
		Coalesce: Coalesce{"rx-usecs": 50, "tx-usecs": 50, "adaptive-rx": 1, "adaptive-tx": 1},
		Features: map[string]Feature{
			"rx-lro": {Active: true, Changeable: true}, "rx-gro": {Active: true, Changeable: true},
			"tx-generic-segmentation": {Active: true, Changeable: true},
			"tx-tcp-segmentation":     {Active: true, Changeable: true}, "tx-tcp6-segmentation": {Active: false, Changeable: true},
			"tx-tcp-ecn-segmentation": {Active: false, Changeable: false},
			"rx-hashing":              {Active: true, Changeable: false},
		},
		Stats: map[string]uint64{"rx_missed_errors": 3},
	}}}
}

func ethSys(t *testing.T, fe *knobtest.Ethtool) *System {
	return &System{Root: t.TempDir(), Ethtool: fe}
}

func mustKnob(t *testing.T, sys *System, id string) Knob {
	t.Helper()
	k, err := New(sys, id)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func read(t *testing.T, k Knob) string {
	t.Helper()
	v, err := k.Read(context.Background())
	if err != nil {
		t.Fatalf("%s: read: %v", k.ID(), err)
	}
	return v
}

func TestEthtoolKnobs(t *testing.T) {
	ctx := context.Background()
	sys := ethSys(t, fakeNIC())
	tests := []struct {
		id, before, set string
	}{
		{"ethtool/eth0/channels/combined", "40", "8"},
		{"ethtool/eth0/ring/rx", "512", "1024"},
		{"ethtool/eth0/ring/tx", "512", "1024"},
		{"ethtool/eth0/coalesce/rx-usecs", "50", "5"},
		{"ethtool/eth0/coalesce/adaptive-rx", "on", "off"},
		{"ethtool/eth0/feature/lro", "on", "off"},
		{"ethtool/eth0/feature/gro", "on", "off"},
		{"ethtool/eth0/feature/rx-gro", "on", "off"},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			k := mustKnob(t, sys, tt.id)
			if got := read(t, k); got != tt.before {
				t.Fatalf("before = %q, want %q", got, tt.before)
			}
			if err := k.Write(ctx, tt.set); err != nil {
				t.Fatal(err)
			}
			if err := Verify(ctx, k, tt.set); err != nil {
				t.Fatal(err)
			}
			if err := k.Write(ctx, tt.before); err != nil {
				t.Fatal(err)
			}
			if got := read(t, k); !Same(k, got, tt.before) {
				t.Errorf("restored %q, reads %q", tt.before, got)
			}
		})
	}
}

// TestEthtoolFeatureGroups: tso is several kernel features; a mixed state
// reads as each member's state and is restored exactly; fixed members are
// ignored, and a group with only fixed members is not writable.
func TestEthtoolFeatureGroups(t *testing.T) {
	ctx := context.Background()
	fe := fakeNIC()
	sys := ethSys(t, fe)
	tso := mustKnob(t, sys, "ethtool/eth0/feature/tso")
	mixed := read(t, tso)
	if mixed != "tx-tcp-segmentation=on,tx-tcp6-segmentation=off" {
		t.Fatalf("tso = %q", mixed)
	}
	if err := tso.Write(ctx, "on"); err != nil {
		t.Fatal(err)
	}
	if got := read(t, tso); got != "on" {
		t.Errorf("tso after on = %q (the fixed ecn member must not count)", got)
	}
	if fe.NICs["eth0"].Features["tx-tcp-ecn-segmentation"].Active {
		t.Error("a fixed feature changed")
	}
	if err := tso.Write(ctx, mixed); err != nil {
		t.Fatal(err)
	}
	if got := read(t, tso); got != mixed {
		t.Errorf("restored %q, reads %q", mixed, got)
	}
	rxhash := mustKnob(t, sys, "ethtool/eth0/feature/rxhash")
	if err := rxhash.Write(ctx, "off"); !errors.Is(err, ErrNotWritable) || !strings.Contains(err.Error(), "fixed") {
		t.Errorf("fixed feature write: %v", err)
	}
	if _, err := mustKnob(t, sys, "ethtool/eth0/feature/ntuple").Read(ctx); !errors.Is(err, ErrNotSupported) {
		t.Errorf("absent feature read: %v", err)
	}
}

func TestEthtoolRefusals(t *testing.T) {
	ctx := context.Background()
	t.Run("EOPNOTSUPP and EPERM are not writable here", func(t *testing.T) {
		fe := fakeNIC()
		fe.Refuse = map[string]unix.Errno{"coalesce": unix.EOPNOTSUPP, "ring": unix.EPERM}
		sys := ethSys(t, fe)
		for _, id := range []string{"ethtool/eth0/coalesce/rx-usecs", "ethtool/eth0/ring/rx"} {
			err := mustKnob(t, sys, id).Write(ctx, "64")
			if !errors.Is(err, ErrNotWritable) || !errors.Is(err, ErrNotSupported) {
				t.Errorf("%s: %v, want ErrNotWritable", id, err)
			}
		}
	})
	t.Run("unsupported query", func(t *testing.T) {
		fe := fakeNIC()
		fe.NICs["eth0"].Coalesce = nil
		sys := ethSys(t, fe)
		k := mustKnob(t, sys, "ethtool/eth0/coalesce/rx-usecs")
		if _, err := k.Read(ctx); !errors.Is(err, ErrNotSupported) || errors.Is(err, ErrNotWritable) {
			t.Errorf("read: %v", err)
		}
	})
	t.Run("driver accepts and reads back something else", func(t *testing.T) {
		fe := fakeNIC()
		fe.Ignore = map[string]bool{"ring": true}
		sys := ethSys(t, fe)
		k := mustKnob(t, sys, "ethtool/eth0/ring/rx")
		if err := k.Write(ctx, "1024"); err != nil {
			t.Fatal(err)
		}
		err := Verify(ctx, k, "1024")
		if err == nil || errors.Is(err, ErrNotWritable) || !strings.Contains(err.Error(), `wrote "1024" but the kernel reports "512"`) {
			t.Errorf("verify: %v", err)
		}
	})
	t.Run("limits", func(t *testing.T) {
		sys := ethSys(t, fakeNIC())
		if err := mustKnob(t, sys, "ethtool/eth0/channels/combined").Write(ctx, "65"); err == nil || !strings.Contains(err.Error(), "maximum of 64") {
			t.Errorf("too many channels: %v", err)
		}
		if err := mustKnob(t, sys, "ethtool/eth0/channels/rx").Write(ctx, "4"); !errors.Is(err, ErrNotWritable) {
			t.Errorf("rx channels on a combined-only NIC: %v", err)
		}
		if err := mustKnob(t, sys, "ethtool/eth0/ring/rx").Write(ctx, "8192"); err == nil || !strings.Contains(err.Error(), "1..4096") {
			t.Errorf("ring above max: %v", err)
		}
	})
	t.Run("vanished and unknown interfaces", func(t *testing.T) {
		fe := fakeNIC()
		fe.VanishAfter = map[string]int{"eth0": 1}
		sys := ethSys(t, fe)
		k := mustKnob(t, sys, "ethtool/eth0/ring/rx")
		if err := k.Write(ctx, "1024"); err != nil {
			t.Fatal(err)
		}
		err := mustKnob(t, sys, "ethtool/eth0/feature/gro").Write(ctx, "off")
		if !errors.Is(err, ErrNoDevice) || !strings.Contains(err.Error(), "ethtool eth0") {
			t.Errorf("write to a vanished NIC: %v", err)
		}
		if v := read(t, k); v != Absent {
			t.Errorf("read of a vanished NIC = %q, want Absent", v)
		}
		if Same(k, Absent, "512") || Same(k, "512", Absent) {
			t.Error("a vanished NIC compares as restored: Same must be symmetric and exact")
		}
		if !Vanished(k.ID(), Absent, "512") || Vanished(k.ID(), "512", Absent) || Vanished("file/etc/x", Absent, "x") {
			t.Error("Vanished: only a device knob that reads Absent where it had a value")
		}
		if err := k.Write(ctx, Absent); err != nil {
			t.Errorf("restoring Absent on a vanished NIC: %v", err)
		}
		if err := mustKnob(t, sys, "ethtool/eth9/ring/rx").Write(ctx, "1"); !errors.Is(err, ErrNoDevice) {
			t.Errorf("unknown interface: %v", err)
		}
	})
}

// nicTree writes an interface whose PCI device has msi_irqs, and /proc/irq
// entries with action directories, below a fresh root.
func nicTree(t *testing.T, irqs map[string]string) *System {
	t.Helper()
	root := t.TempDir()
	dev := filepath.Join(root, "sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0")
	must(t, os.MkdirAll(filepath.Join(dev, "net/eth0/queues/rx-0"), 0o755))
	must(t, os.MkdirAll(filepath.Join(dev, "msi_irqs"), 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "sys/class/net"), 0o755))
	must(t, os.Symlink("../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/net/eth0", filepath.Join(root, "sys/class/net/eth0")))
	must(t, os.Symlink("../../../0000:3b:00.0", filepath.Join(dev, "net/eth0/device")))
	for irq, name := range irqs {
		must(t, os.WriteFile(filepath.Join(dev, "msi_irqs", irq), []byte("msix\n"), 0o644))
		d := filepath.Join(root, "proc/irq", irq)
		must(t, os.MkdirAll(filepath.Join(d, name), 0o755))
		must(t, os.WriteFile(filepath.Join(d, "smp_affinity_list"), []byte("0\n"), 0o644))
		must(t, os.WriteFile(filepath.Join(d, "effective_affinity_list"), []byte("0\n"), 0o644))
	}
	must(t, os.WriteFile(filepath.Join(dev, "net/eth0/queues/rx-0/rps_cpus"), []byte("00000000,00000000\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dev, "net/eth0/queues/rx-0/rps_flow_cnt"), []byte("0\n"), 0o644))
	return &System{Root: root}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestIRQKnob(t *testing.T) {
	ctx := context.Background()
	sys := nicTree(t, map[string]string{"45": "i40e-eth0-TxRx-3"})
	k := mustKnob(t, sys, "irq/45/affinity")
	if v := read(t, k); v != "0 (i40e-eth0-TxRx-3)" {
		t.Fatalf("read = %q", v)
	}
	if err := k.Write(ctx, "4 (i40e-eth0-TxRx-3)"); err != nil {
		t.Fatal(err)
	}
	if err := Verify(ctx, k, "4 (i40e-eth0-TxRx-3)"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(sys.Root, "proc/irq/45/smp_affinity_list")); string(b) != "4\n" {
		t.Errorf("smp_affinity_list = %q", b)
	}
	if !k.Satisfied("4 (i40e-eth0-TxRx-3)", "4") || k.Satisfied("4 (a)", "4 (b)") || k.Satisfied("4", "5") {
		t.Error("Satisfied: names count only when both sides know them")
	}
	// The number now belongs to another vector: refuse.
	err := k.Write(ctx, "5 (i40e-eth1-TxRx-0)")
	if err == nil || !strings.Contains(err.Error(), "interrupt numbers changed") {
		t.Errorf("name guard: %v", err)
	}
	if err := k.Write(ctx, "0-3,x"); err == nil {
		t.Error("bad list accepted")
	}
	gone := mustKnob(t, sys, "irq/99/affinity")
	if v := read(t, gone); v != Absent {
		t.Errorf("missing irq reads %q", v)
	}
	if err := gone.Write(ctx, "1"); !errors.Is(err, ErrNoDevice) {
		t.Errorf("write to a missing irq: %v", err)
	}
	if got := IRQEffective(sys, 45); len(got) != 1 || got[0] != 0 {
		t.Errorf("effective = %v", got)
	}
	for _, bad := range []string{"irq/45", "irq/x/affinity", "irq/45/smp_affinity", "irq/-1/affinity", "irq/045/affinity"} {
		if _, err := New(sys, bad); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
}

// TestChannelsKeepIRQAffinity: a driver that resets its vectors' affinity
// when channels change must not move them; a driver that renumbers them is an
// error.
func TestChannelsKeepIRQAffinity(t *testing.T) {
	ctx := context.Background()
	sys := nicTree(t, map[string]string{"40": "i40e-eth0-TxRx-0", "41": "i40e-eth0-TxRx-1"})
	must(t, os.WriteFile(filepath.Join(sys.Root, "proc/irq/40/smp_affinity_list"), []byte("6\n"), 0o644))
	fe := fakeNIC()
	fe.OnSetChannels = func(string, host.Channels) {
		for _, irq := range []string{"40", "41"} {
			os.WriteFile(filepath.Join(sys.Root, "proc/irq", irq, "smp_affinity_list"), []byte("0-39\n"), 0o644)
		}
	}
	sys.Ethtool = fe
	k := mustKnob(t, sys, "ethtool/eth0/channels/combined")
	if err := k.Write(ctx, "8"); err != nil {
		t.Fatal(err)
	}
	for irq, want := range map[string]string{"40": "6\n", "41": "0\n"} {
		if b, _ := os.ReadFile(filepath.Join(sys.Root, "proc/irq", irq, "smp_affinity_list")); string(b) != want {
			t.Errorf("irq %s affinity after a channel change = %q, want %q", irq, b, want)
		}
	}
	msi := filepath.Join(sys.Root, "sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/msi_irqs")
	fe.OnSetChannels = func(string, host.Channels) {
		os.Remove(filepath.Join(msi, "40"))
		os.WriteFile(filepath.Join(msi, "77"), nil, 0o644)
		os.MkdirAll(filepath.Join(sys.Root, "proc/irq/77"), 0o755)
		os.WriteFile(filepath.Join(sys.Root, "proc/irq/77/smp_affinity_list"), []byte("0\n"), 0o644)
	}
	if err := k.Write(ctx, "16"); err == nil || !strings.Contains(err.Error(), "renumbered") {
		t.Errorf("renumbering driver: %v", err)
	}
}

func TestQueueKnob(t *testing.T) {
	ctx := context.Background()
	sys := nicTree(t, nil)
	k := mustKnob(t, sys, "queue/eth0/rx-0/rps_cpus")
	if err := k.Write(ctx, "2-9"); err == nil || !strings.Contains(err.Error(), "hex masks") {
		t.Errorf("CPU-list form accepted: %v", err)
	}
	if err := k.Write(ctx, "000003fc"); err != nil {
		t.Fatal(err)
	}
	if !k.Satisfied(read(t, k), "00000000,000003fc") || k.Satisfied("3fc", "3fe") {
		t.Error("masks compare by CPUs, whatever their width")
	}
	fc := mustKnob(t, sys, "queue/eth0/rx-0/rps_flow_cnt")
	if !fc.Satisfied("4096", "3000") || fc.Satisfied("2048", "3000") || !fc.Satisfied("0", "0") {
		t.Error("rps_flow_cnt rounds up to a power of two")
	}
	for _, bad := range []string{"queue/eth0/rx-0/xps_cpus", "queue/eth0/tx-0/rps_cpus", "queue/eth0/rx-x/rps_cpus", "queue/eth0/rx-0", "queue/a b/rx-0/rps_cpus"} {
		if _, err := New(sys, bad); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
	if v := read(t, mustKnob(t, sys, "queue/eth9/rx-0/rps_cpus")); v != Absent {
		t.Errorf("vanished interface reads %q", v)
	}
}

func TestServiceKnob(t *testing.T) {
	ctx := context.Background()
	sys := &System{Root: t.TempDir()}
	fs := &knobtest.Services{Systemd: 252, Units: map[string]string{"irqbalance.service": "active,enabled", "masked.service": "inactive,masked"}}
	sys.Services = fs
	k := mustKnob(t, sys, "service/irqbalance.service")
	before := read(t, k)
	if before != "active,enabled" {
		t.Fatalf("before = %q", before)
	}
	if err := k.Write(ctx, "inactive,disabled"); err != nil {
		t.Fatal(err)
	}
	if err := Verify(ctx, k, "inactive,disabled"); err != nil {
		t.Fatal(err)
	}
	if err := k.Write(ctx, before); err != nil {
		t.Fatal(err)
	}
	if got := read(t, k); got != before {
		t.Errorf("restored %q, reads %q", before, got)
	}
	want := "stop irqbalance.service,disable irqbalance.service,enable irqbalance.service,start irqbalance.service"
	if got := strings.Join(fs.Calls, ","); got != want {
		t.Errorf("calls %s, want %s", got, want)
	}
	m := mustKnob(t, sys, "service/masked.service")
	if !m.Satisfied(read(t, m), "inactive,disabled") {
		t.Error("masked satisfies disabled")
	}
	absent := mustKnob(t, sys, "service/nosuch.service")
	if v := read(t, absent); v != Absent || !absent.Satisfied(v, "inactive,disabled") {
		t.Errorf("uninstalled unit reads %q", v)
	}
	if err := absent.Write(ctx, "inactive,disabled"); err != nil {
		t.Errorf("stopping an uninstalled unit: %v", err)
	}
	fs.Systemd = 0
	if _, err := k.Read(ctx); !errors.Is(err, ErrNotWritable) {
		t.Errorf("without systemd: %v", err)
	}
	if _, err := New(sys, "service/../x"); err == nil {
		t.Error("bad unit name accepted")
	}
}

func TestIRQBalanceKnob(t *testing.T) {
	ctx := context.Background()
	const orig = "# irqbalance config\n#IRQBALANCE_BANNED_CPUS=\nIRQBALANCE_ARGS=\nOTHER=1\n"
	sys := WriteTree(t, map[string]string{"/etc/sysconfig/irqbalance": orig})
	fs := &knobtest.Services{Systemd: 219, Units: map[string]string{"irqbalance.service": "active,enabled"}}
	sys.Services = fs
	k := mustKnob(t, sys, "irqbalance/etc/sysconfig/irqbalance")
	before := read(t, k)
	if before != "IRQBALANCE_ARGS=" {
		t.Fatalf("before = %q", before)
	}
	want := "IRQBALANCE_ARGS=\"--banirq=45 --banirq=46\"\nIRQBALANCE_BANNED_CPULIST=1-9\nIRQBALANCE_BANNED_CPUS=000003fe"
	if err := k.Write(ctx, want); err != nil {
		t.Fatal(err)
	}
	if err := Verify(ctx, k, want); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(sys.Root, "etc/sysconfig/irqbalance"))
	if !strings.Contains(string(b), "#IRQBALANCE_BANNED_CPUS=\nIRQBALANCE_ARGS=\"--banirq=45 --banirq=46\"\nOTHER=1\nIRQBALANCE_BANNED_CPULIST=1-9\n") {
		t.Errorf("edited file:\n%s", b)
	}
	if !k.Satisfied("IRQBALANCE_ARGS='--banirq=45  --banirq=46'\nIRQBALANCE_BANNED_CPULIST=1-9\nIRQBALANCE_BANNED_CPUS=000003fe", want) {
		t.Error("quoting must not matter")
	}
	if err := k.Write(ctx, before); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(sys.Root, "etc/sysconfig/irqbalance")); string(b) != orig {
		t.Errorf("not byte-identical after restore:\n%q\n%q", b, orig)
	}
	if strings.Join(fs.Calls, ",") != "try-restart irqbalance.service,try-restart irqbalance.service" {
		t.Errorf("calls %v", fs.Calls)
	}
	// Without systemd and with irqbalance running, lowlat cannot make it
	// reread the file.
	sys2 := WriteTree(t, map[string]string{"/etc/default/irqbalance": "", "/proc/704/comm": "irqbalance\n"})
	k2 := mustKnob(t, sys2, "irqbalance/etc/default/irqbalance")
	if err := k2.Write(ctx, "IRQBALANCE_BANNED_CPULIST=1"); !errors.Is(err, ErrNotWritable) {
		t.Errorf("irqbalance without systemd: %v", err)
	}
	if _, err := New(sys, "irqbalance/etc/passwd"); err == nil {
		t.Error("arbitrary path accepted")
	}
}

func TestCpufreqKnob(t *testing.T) {
	ctx := context.Background()
	files := map[string]string{}
	for i, g := range []string{"powersave", "powersave", "performance", "powersave"} {
		files["/sys/devices/system/cpu/cpu"+string(rune('0'+i))+"/cpufreq/scaling_governor"] = g + "\n"
	}
	sys := WriteTree(t, files)
	k := mustKnob(t, sys, "cpufreq/governor")
	before := read(t, k)
	if before != "0-1,3:powersave;2:performance" {
		t.Fatalf("before = %q", before)
	}
	if err := k.Write(ctx, "performance"); err != nil {
		t.Fatal(err)
	}
	if err := Verify(ctx, k, "performance"); err != nil {
		t.Fatal(err)
	}
	if err := k.Write(ctx, before); err != nil {
		t.Fatal(err)
	}
	if got := read(t, k); got != before {
		t.Errorf("restored %q, reads %q", before, got)
	}
	for _, tt := range []struct {
		live, desired string
		want          bool
	}{
		{"performance", "powersave", false},
		{"performance", "performance", true},
		{"0-1:performance", "performance", true},
		{"0:performance;1:powersave", "performance", false},
		{"performance", "0-3:performance", true},
	} {
		if got := k.Satisfied(tt.live, tt.desired); got != tt.want || Same(k, tt.live, tt.desired) != tt.want {
			t.Errorf("Satisfied(%q, %q) = %v", tt.live, tt.desired, got)
		}
	}
	none := mustKnob(t, &System{Root: t.TempDir()}, "cpufreq/governor")
	if _, err := none.Read(ctx); !errors.Is(err, ErrNotSupported) {
		t.Errorf("no cpufreq: %v", err)
	}
}

func TestBlockKnob(t *testing.T) {
	ctx := context.Background()
	sys := WriteTree(t, map[string]string{
		"/sys/block/nvme0n1/queue/scheduler":   "[mq-deadline] kyber none\n",
		"/sys/block/nvme0n1/queue/nr_requests": "256\n",
		"/sys/block/nvme0n1/queue/rq_affinity": "1\n",
	})
	k := mustKnob(t, sys, "block/nvme0n1/queue")
	before := read(t, k)
	if before != "scheduler=mq-deadline nr_requests=256 rq_affinity=1" {
		t.Fatalf("before = %q", before)
	}
	want := "scheduler=none rq_affinity=2"
	if err := k.Write(ctx, want); err != nil {
		t.Fatal(err)
	}
	if err := Verify(ctx, k, want); err != nil {
		t.Fatal(err)
	}
	if err := k.Write(ctx, before); err != nil {
		t.Fatal(err)
	}
	if got := read(t, k); !Same(k, got, before) {
		t.Errorf("restored %q, reads %q", before, got)
	}
	if err := k.Write(ctx, "elevator=none"); err == nil {
		t.Error("unknown setting accepted")
	}
	if v := read(t, mustKnob(t, sys, "block/nvme9n1/queue")); v != Absent {
		t.Errorf("missing device reads %q", v)
	}
}

func TestDropinKnob(t *testing.T) {
	ctx := context.Background()
	sys := &System{Root: t.TempDir()}
	fs := &knobtest.Services{Systemd: 252, Units: map[string]string{}}
	sys.Services = fs
	k := mustKnob(t, sys, "dropin/gateway.service/50-lowlat-cpus.conf")
	if err := k.Write(ctx, "[Service]\nCPUAffinity=2 3\n"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(sys.Root, "etc/systemd/system/gateway.service.d/50-lowlat-cpus.conf")); string(b) != "[Service]\nCPUAffinity=2 3\n" {
		t.Errorf("drop-in = %q", b)
	}
	if err := k.Write(ctx, Absent); err != nil {
		t.Fatal(err)
	}
	if v := read(t, k); v != Absent || strings.Join(fs.Calls, ",") != "daemon-reload,daemon-reload" {
		t.Errorf("after removal: %q, calls %v", v, fs.Calls)
	}
	for _, bad := range []string{"dropin/gateway.service/../x.conf", "dropin/gateway/x.conf", "dropin/gateway.service/x"} {
		if _, err := New(sys, bad); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
}

func TestDescribe(t *testing.T) {
	for _, tt := range []struct{ id, applied, live, want string }{
		{"irq/45/affinity", "4 (eth0-TxRx-3)", "0 (eth0-TxRx-3)", "irq 45 eth0-TxRx-3: applied cpu 4, now cpu 0"},
		{"irq/45/affinity", "4 (eth0-TxRx-3)", "0-39", "irq 45 eth0-TxRx-3: applied cpu 4, now cpus 0-39"},
		{"irq/45/affinity", "4", Absent, "irq 45: applied cpu 4, now gone"},
		{"ethtool/eth0/channels/combined", "8", "40", "eth0 channels combined: applied 8, now 40"},
		{"ethtool/eth0/feature/lro", "off", "on", "eth0 lro: applied off, now on"},
		{"queue/eth0/rx-0/rps_cpus", "3", "0", "eth0 rx-0 rps: applied cpus 0-1, now no cpu"},
		{"service/irqbalance.service", "inactive,disabled", "active,enabled", "irqbalance.service: applied stopped and disabled, now running and enabled"},
		{"sysctl/net.core.somaxconn", "4096", "128", ""},
	} {
		if got := Describe(tt.id, tt.applied, tt.live); got != tt.want {
			t.Errorf("Describe(%s, %q, %q) = %q, want %q", tt.id, tt.applied, tt.live, got, tt.want)
		}
	}
}

func TestParseSystemdVersion(t *testing.T) {
	if v, err := ParseSystemdVersion("systemd 252 (252.38-1~deb12u1)\n+PAM +AUDIT\n"); err != nil || v != 252 {
		t.Errorf("= %d, %v", v, err)
	}
	if _, err := ParseSystemdVersion("upstart 1.5"); err == nil {
		t.Error("garbage accepted")
	}
}
