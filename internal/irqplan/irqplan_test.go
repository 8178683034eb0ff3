package irqplan

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/test/hostgen"
)

var fixtures = []string{"virtio-vm", "dual-i40e-nvme", "epyc-25g", "centos7-3.10"}

func load(t testing.TB, name string) *host.Facts {
	t.Helper()
	var f *host.Facts
	var err error
	if name == "synthetic-256" {
		f, err = hostgen.Synthetic256().Facts()
	} else {
		var src host.Source
		src, err = host.OpenRoot(filepath.Join("..", "host", "testdata", "hosts", name))
		if err == nil {
			f, err = host.Gather(context.Background(), src)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func defaultIfaces(f *host.Facts) []string {
	var out []string
	for _, r := range f.Routes {
		if r.Dst == "default" && r.Table == 254 && !slices.Contains(out, r.Dev) {
			out = append(out, r.Dev)
		}
	}
	return out
}

func cpu(f *host.Facts, id int) host.CPU {
	for _, c := range f.CPUs {
		if c.ID == id {
			return c
		}
	}
	return host.CPU{ID: id, Node: -1}
}

// checkRules verifies the placement rules on any plan.
func checkRules(t *testing.T, f *host.Facts, o Options, p *Plan) {
	t.Helper()
	excluded := map[int]bool{}
	for _, c := range append(append([]int{}, o.Reserve...), f.IsolatedCPUs...) {
		excluded[c] = true
		for _, s := range cpu(f, c).Siblings {
			excluded[s] = true
		}
	}
	coreOwner := map[string]int{} // core (siblings) -> the one CPU with hard IRQs
	for _, c := range p.IRQCPUs {
		key := host.FormatCPUList(cpu(f, c).Siblings)
		if other, ok := coreOwner[key]; ok && other != c {
			t.Errorf("SMT siblings %d and %d both take hard interrupts", other, c)
		}
		coreOwner[key] = c
		if excluded[c] {
			t.Errorf("CPU %d is reserved or isolated (or a sibling of one) but takes interrupts", c)
		}
	}
	for _, n := range p.NICs {
		if n.Skip != "" {
			continue
		}
		ifc := f.Interface(n.Iface)
		if n.Channels > 0 && n.Channels != len(n.CPUs) && n.Channels <= len(n.Pool) {
			t.Errorf("%s: %d channels for %d IRQ CPUs", n.Iface, n.Channels, len(n.CPUs))
		}
		perCPU := map[int]int{}
		for _, pl := range n.IRQs {
			if len(pl.CPUs) != 1 {
				t.Errorf("%s irq %d: want one CPU, got %v", n.Iface, pl.IRQ, pl.CPUs)
				continue
			}
			c := pl.CPUs[0]
			if len(ifc.LocalCPUs) > 0 && !slices.Contains(ifc.LocalCPUs, c) {
				t.Errorf("%s irq %d on CPU %d, outside the NIC's local CPUs %s", n.Iface, pl.IRQ, c, host.FormatCPUList(ifc.LocalCPUs))
			}
			if q, ok := perCPU[c]; ok && q != pl.Queue {
				t.Errorf("%s: queues %d and %d share CPU %d", n.Iface, q, pl.Queue, c)
			}
			perCPU[c] = pl.Queue
			if pl.Queue >= n.Channels && n.Channels > 0 {
				t.Errorf("%s: queue %d placed beyond the %d channels", n.Iface, pl.Queue, n.Channels)
			}
		}
	}
	for _, nv := range p.NVMe {
		for _, pl := range nv.IRQs {
			for _, n := range p.NICs {
				if slices.Contains(n.CPUs, pl.CPUs[0]) {
					t.Errorf("%s irq %d shares CPU %d with %s", nv.Ctrl, pl.IRQ, pl.CPUs[0], n.Iface)
				}
			}
		}
	}
	for _, c := range p.AppCPUs {
		if slices.Contains(p.IRQCPUs, c) {
			t.Errorf("application CPU %d also takes hard interrupts", c)
		}
	}
}

// TestFixturePlacements checks the rules on every fixture host and the 256-CPU
// one, and the placements the golden plans encode (reviewed by hand).
func TestFixturePlacements(t *testing.T) {
	want := map[string]struct {
		iface    string
		cpus     string
		channels int
		app      string
		rps      string
	}{
		// 2 vCPUs, no SMT, one queue pair: the queue's interrupts go to CPU 1
		// (CPU 0's core kept last), RPS spreads the one rx queue over both.
		"virtio-vm": {"eth0", "1", 1, "0", "rx-0:0-1"},
		// Node 0 = cores 0-9 (threads 0-9 and 20-29); CPU 0's core stays
		// with the kernel; one thread of cores 1-9 each; 40 -> 9 queues;
		// the application gets the other threads of those cores.
		"dual-i40e-nvme": {"eth0", "1-9", 9, "21-29", ""},
		// One node of 32 cores: 31 queue CPUs (CPU 0's core kept), 63 -> 31.
		"epyc-25g": {"ens1f0np0", "1-31", 31, "33-63", ""},
		// 8 cores x 2 threads: cores 1-7, 16 -> 7 queues.
		"centos7-3.10": {"eth0", "1-7", 7, "9-15", ""},
		// NIC on node 2 (socket 1's first half: cores 64-95, threads
		// 192-223): 32 queue CPUs, 64 -> 32 channels. CPU 0 is on node 0, so
		// no core is spared on node 2.
		"synthetic-256": {"ens3f0np0", "64-95", 32, "192-223", ""},
	}
	for _, h := range append(fixtures, "synthetic-256") {
		t.Run(h, func(t *testing.T) {
			f := load(t, h)
			o := Options{Ifaces: defaultIfaces(f), NVMe: true, RPS: true, RFSEntries: 32768}
			p, err := Make(f, o)
			if err != nil {
				t.Fatal(err)
			}
			checkRules(t, f, o, p)
			w := want[h]
			if len(p.NICs) != 1 || p.NICs[0].Iface != w.iface {
				t.Fatalf("NICs = %+v", p.NICs)
			}
			n := p.NICs[0]
			if got := host.FormatCPUList(n.CPUs); got != w.cpus || n.Channels != w.channels {
				t.Errorf("IRQ CPUs %s channels %d, want %s and %d", got, n.Channels, w.cpus, w.channels)
			}
			if got := host.FormatCPUList(p.AppCPUs); got != w.app {
				t.Errorf("application CPUs %s, want %s", got, w.app)
			}
			var rps []string
			for _, q := range n.RPS {
				rps = append(rps, q.Queue+":"+host.FormatCPUList(q.CPUs))
			}
			if got := strings.Join(rps, " "); got != w.rps {
				t.Errorf("RPS %q, want %q", got, w.rps)
			}
			for _, nv := range p.NVMe {
				if !nv.Managed || nv.Skip == "" || len(nv.IRQs) > 0 {
					t.Errorf("%s on kernel %s must be kernel-managed: %+v", nv.Ctrl, f.Kernel.Release, nv)
				}
			}
		})
	}
}

// TestNVMeSeparateCPUs: on a kernel where NVMe interrupts can be moved they
// get CPUs of their own node, apart from the NIC's.
func TestNVMeSeparateCPUs(t *testing.T) {
	f := load(t, "dual-i40e-nvme")
	f.Kernel.Major, f.Kernel.Minor = 4, 4
	o := Options{Ifaces: []string{"eth0"}, NVMe: true}
	p, err := Make(f, o)
	if err != nil {
		t.Fatal(err)
	}
	checkRules(t, f, o, p)
	got := map[string]string{}
	for _, nv := range p.NVMe {
		if nv.Managed || len(nv.IRQs) != 40 {
			t.Fatalf("%s: %+v", nv.Ctrl, nv)
		}
		got[nv.Ctrl] = host.FormatCPUList(nv.CPUs)
		for _, pl := range nv.IRQs {
			if !slices.Contains(nv.CPUs, pl.CPUs[0]) {
				t.Errorf("%s irq %d on %v", nv.Ctrl, pl.IRQ, pl.CPUs)
			}
		}
	}
	// nvme0 is on node 0 with the NIC: the top two eligible cores; nvme1 on
	// node 1: its top two.
	if got["nvme0"] != "8-9" || got["nvme1"] != "18-19" {
		t.Errorf("NVMe CPUs %v", got)
	}
	if c := host.FormatCPUList(p.NICs[0].CPUs); c != "1-7" || p.NICs[0].Channels != 7 {
		t.Errorf("NIC CPUs %s, %d channels", c, p.NICs[0].Channels)
	}
}

func TestReserveAndIsolated(t *testing.T) {
	f := load(t, "dual-i40e-nvme")
	o := Options{Ifaces: []string{"eth0"}, Reserve: []int{5, 6, 7}}
	p, err := Make(f, o)
	if err != nil {
		t.Fatal(err)
	}
	checkRules(t, f, o, p)
	if c := host.FormatCPUList(p.NICs[0].CPUs); c != "1-4,8-9" {
		t.Errorf("with 5-7 reserved: IRQ CPUs %s", c)
	}
	if a := host.FormatCPUList(p.AppCPUs); a != "5-7" {
		t.Errorf("application CPUs %s, want the reserved ones", a)
	}
	// A reserved thread's sibling (25 is 5's) is excluded as well.
	p2, err := Make(f, Options{Ifaces: []string{"eth0"}, Reserve: []int{25}})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(p2.NICs[0].CPUs, 5) {
		t.Error("the sibling of a reserved CPU takes interrupts")
	}
	iso := load(t, "dual-i40e-nvme")
	iso.IsolatedCPUs = []int{1, 2, 21, 22}
	o3 := Options{Ifaces: []string{"eth0"}}
	p3, err := Make(iso, o3)
	if err != nil {
		t.Fatal(err)
	}
	checkRules(t, iso, o3, p3)
	if c := host.FormatCPUList(p3.NICs[0].CPUs); c != "3-9" {
		t.Errorf("with 1-2 isolated: %s", c)
	}
}

func TestBadInput(t *testing.T) {
	f := load(t, "dual-i40e-nvme")
	// Every core of node 0 reserved: nothing left for eth0.
	_, err := Make(f, Options{Ifaces: []string{"eth0"}, Reserve: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}})
	if !errors.Is(err, ErrNoCPUs) || !strings.Contains(err.Error(), "eth0 on node 0") {
		t.Errorf("reserve covering the node: %v", err)
	}
	if _, err := Make(f, Options{Ifaces: []string{"eth0"}, Reserve: []int{40}}); err == nil || !strings.Contains(err.Error(), "reserved CPU 40 does not exist") {
		t.Errorf("reserved CPU beyond the host: %v", err)
	}
	if _, err := Make(f, Options{Ifaces: []string{"wlan9"}}); err == nil || !strings.Contains(err.Error(), `unknown interface "wlan9"`) {
		t.Errorf("unknown interface: %v", err)
	}
	if _, err := Make(&host.Facts{}, Options{}); err == nil {
		t.Error("facts without CPUs accepted")
	}
	// A down port has no queue interrupts requested: nothing to place, said.
	p, err := Make(f, Options{Ifaces: []string{"eth1"}})
	if err != nil || p.NICs[0].Skip == "" {
		t.Errorf("down port: %+v, %v", p.NICs, err)
	}
	// lo is not a device with interrupts.
	p, err = Make(f, Options{Ifaces: []string{"lo"}})
	if err != nil || !strings.Contains(p.NICs[0].Skip, "virtual device") {
		t.Errorf("lo: %+v, %v", p.NICs, err)
	}
}

// TestTwoNICsSplitTheNode: two ports on one node do not put their queue 0 on
// the same CPU.
func TestTwoNICsSplitTheNode(t *testing.T) {
	f := load(t, "epyc-25g")
	f.Interface("ens1f1np1").Up = true
	o := Options{Ifaces: []string{"ens1f0np0", "ens1f1np1"}}
	p, err := Make(f, o)
	if err != nil {
		t.Fatal(err)
	}
	checkRules(t, f, o, p)
	a, b := p.NICs[0].CPUs, p.NICs[1].CPUs
	for _, c := range a {
		if slices.Contains(b, c) {
			t.Errorf("both NICs on CPU %d", c)
		}
	}
	if len(a) != 15 || len(b) != 16 {
		t.Errorf("split %d/%d", len(a), len(b))
	}
}

// TestMaxQueuesAndRPS: capping queues below the pool leaves CPUs meant for
// packets without a queue: only then are RPS and XPS planned.
func TestMaxQueuesAndRPS(t *testing.T) {
	f := load(t, "centos7-3.10")
	p, err := Make(f, Options{Ifaces: []string{"eth0"}, RPS: true, Queues: 2, RFSEntries: 32768})
	if err != nil {
		t.Fatal(err)
	}
	n := p.NICs[0]
	if n.Channels != 2 || len(n.RPS) != 2 || len(n.XPS) != 2 || n.FlowCnt != 16384 {
		t.Fatalf("%+v", n)
	}
	if a, b := host.FormatCPUList(n.RPS[0].CPUs), host.FormatCPUList(n.RPS[1].CPUs); a != "1,3,5,7" || b != "2,4,6" {
		t.Errorf("RPS rx-0 %s rx-1 %s", a, b)
	}
	if Mask(f, n.RPS[0].CPUs) != "00aa" {
		t.Errorf("mask %s", Mask(f, n.RPS[0].CPUs))
	}
	p, _ = Make(f, Options{Ifaces: []string{"eth0"}, RPS: true})
	if len(p.NICs[0].RPS) != 0 {
		t.Error("RPS planned although the hardware has a queue per CPU")
	}
}

func BenchmarkMake256(b *testing.B) {
	f := load(b, "synthetic-256")
	o := Options{Ifaces: defaultIfaces(f), NVMe: true, RPS: true}
	for b.Loop() {
		if _, err := Make(f, o); err != nil {
			b.Fatal(err)
		}
	}
}
