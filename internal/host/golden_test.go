package host_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/test/hostgen"
)

var update = flag.Bool("update", false, "rewrite testdata/hosts/*.golden.json")

// fixtureNames lists the committed fixture trees.
func fixtureNames(t testing.TB) []string {
	ents, err := os.ReadDir(filepath.Join("testdata", "hosts"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	if len(names) < 4 {
		t.Fatalf("expected at least 4 fixture hosts, found %v", names)
	}
	return names
}

// gatherTree gathers a tree the way --root does, with the run-dependent
// fields fixed so the result can be compared with a golden file.
func gatherTree(t testing.TB, dir string) *host.Facts {
	t.Helper()
	src, err := host.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	f, err := host.Gather(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	f.Tool = "test"
	f.CapturedAt = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Source = "root:" + filepath.ToSlash(dir)
	return f
}

func TestGoldenFixtures(t *testing.T) {
	for _, name := range fixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			f := gatherTree(t, filepath.Join("testdata", "hosts", name))
			var got bytes.Buffer
			if err := host.Save(&got, f); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "hosts", name+".golden.json")
			if *update {
				if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/host -update)", err)
			}
			if !bytes.Equal(want, got.Bytes()) {
				t.Errorf("%s differs from Gather (-want +got):\n%s", golden, lineDiff(string(want), got.String()))
			}
			if len(f.Errors) > 0 {
				t.Errorf("fixture %s has read errors: %v", name, f.Errors)
			}
		})
	}
}

// lineDiff shows the first differing lines, enough to see what changed.
func lineDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(wl), len(gl)) && shown < 20; i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			fmt.Fprintf(&b, "line %d:\n- %s\n+ %s\n", i+1, w, g)
			shown++
		}
	}
	return b.String()
}

// TestFixtureConsistency checks what IRQ and NUMA planning relies on, on
// every fixture and the synthetic 256-CPU host: SMT siblings, NUMA nodes,
// device locality, MSI vectors and IRQ affinities agree with each other.
func TestFixtureConsistency(t *testing.T) {
	hosts := map[string]*host.Facts{}
	for _, name := range fixtureNames(t) {
		hosts[name] = gatherTree(t, filepath.Join("testdata", "hosts", name))
	}
	big, err := hostgen.Synthetic256().Facts()
	if err != nil {
		t.Fatal(err)
	}
	hosts["synthetic-256"] = big
	for name, f := range hosts {
		t.Run(name, func(t *testing.T) { checkConsistent(t, f) })
	}
	if n := len(big.CPUs); n != 256 {
		t.Errorf("synthetic host has %d CPUs", n)
	}
	if n := len(big.NUMA); n != 4 {
		t.Errorf("synthetic host has %d nodes", n)
	}
	nic := big.Interface("ens3f0np0")
	if nic == nil || len(big.DeviceIRQs("ens3f0np0")) != 65 {
		t.Errorf("synthetic mlx5 NIC: want 65 vectors (async + 64 comp)")
	}
}

func checkConsistent(t *testing.T, f *host.Facts) {
	t.Helper()
	byID := map[int]host.CPU{}
	for _, c := range f.CPUs {
		byID[c.ID] = c
	}
	var online []int
	for _, c := range f.CPUs {
		if c.Online {
			online = append(online, c.ID)
		}
		if !slices.Contains(c.Siblings, c.ID) {
			t.Errorf("cpu %d: siblings %v lack itself", c.ID, c.Siblings)
		}
		for _, s := range c.Siblings {
			o := byID[s]
			if o.Core != c.Core || o.Package != c.Package || o.Node != c.Node || !slices.Equal(o.Siblings, c.Siblings) {
				t.Errorf("cpu %d and sibling %d disagree: %+v vs %+v", c.ID, s, c, o)
			}
		}
	}
	inNode := map[int]int{}
	for _, n := range f.NUMA {
		for _, c := range n.CPUs {
			if prev, dup := inNode[c]; dup {
				t.Errorf("cpu %d in nodes %d and %d", c, prev, n.ID)
			}
			inNode[c] = n.ID
			if byID[c].Node != n.ID {
				t.Errorf("cpu %d: node %d, but node%d lists it", c, byID[c].Node, n.ID)
			}
		}
	}
	if len(f.NUMA) > 0 && len(inNode) != len(f.CPUs) {
		t.Errorf("NUMA nodes cover %d of %d CPUs", len(inNode), len(f.CPUs))
	}
	irqs := map[int]host.IRQ{}
	for _, q := range f.IRQs {
		if q.Num < 0 {
			continue
		}
		irqs[q.Num] = q
		if len(q.Counts) != len(f.CPUs) {
			t.Errorf("irq %d: %d counts for %d CPUs", q.Num, len(q.Counts), len(f.CPUs))
		}
		for _, c := range q.Affinity {
			if !slices.Contains(online, c) {
				t.Errorf("irq %d: affinity cpu %d not online", q.Num, c)
			}
		}
		for _, c := range q.EffectiveAffinity {
			if !slices.Contains(q.Affinity, c) {
				t.Errorf("irq %d: effective cpu %d outside affinity %v", q.Num, c, q.Affinity)
			}
		}
		// Counts only grow on CPUs the IRQ was delivered to; with no
		// migration in these fixtures that is the effective CPU.
		if len(q.EffectiveAffinity) == 1 && len(q.Counts) > 0 {
			for cpu, n := range q.Counts {
				if n > 0 && cpu != q.EffectiveAffinity[0] && f.Source != "live" && !strings.Contains(f.Source, "virtio") {
					t.Errorf("irq %d %s: %d interrupts on cpu %d, effective %v", q.Num, q.Name, n, cpu, q.EffectiveAffinity)
				}
			}
		}
	}
	for _, ifc := range f.Interfaces {
		if ifc.NUMANode >= 0 {
			var node []int
			for _, n := range f.NUMA {
				if n.ID == ifc.NUMANode {
					node = n.CPUs
				}
			}
			if !slices.Equal(node, ifc.LocalCPUs) {
				t.Errorf("%s: local_cpulist %v, node %d has %v", ifc.Name, ifc.LocalCPUs, ifc.NUMANode, node)
			}
		}
		for _, q := range f.DeviceIRQs(ifc.Name) {
			if !slices.Contains(ifc.MSIIRQs, q.Num) {
				t.Errorf("%s: irq %d %q not in msi_irqs %v", ifc.Name, q.Num, q.Name, ifc.MSIIRQs)
			}
			if q.Node != ifc.NUMANode && q.Node >= 0 {
				t.Errorf("%s: irq %d node %d, device node %d", ifc.Name, q.Num, q.Node, ifc.NUMANode)
			}
		}
		if ifc.Physical() && ifc.Up {
			queues := 0
			for _, q := range f.DeviceIRQs(ifc.Name) {
				if o, ok := host.ParseIRQName(q.Name); ok && o.IsQueue() {
					queues++
				}
			}
			if ifc.Ethtool != nil && ifc.Ethtool.Channels != nil {
				ch := ifc.Ethtool.Channels
				if want := int(ch.Combined + max(ch.Rx, ch.Tx)); want != queues && ifc.Driver != "virtio_net" {
					t.Errorf("%s: %d queue IRQs, ethtool says %d channels", ifc.Name, queues, want)
				}
			}
			if len(ifc.RPS) != queues && ifc.Driver != "virtio_net" {
				t.Errorf("%s: %d rx queues in sysfs, %d queue IRQs", ifc.Name, len(ifc.RPS), queues)
			}
		}
	}
	for _, b := range f.Block {
		for _, n := range b.MSIIRQs {
			q, ok := irqs[n]
			if !ok {
				t.Errorf("%s: msi irq %d not in /proc/interrupts", b.Name, n)
				continue
			}
			if strings.HasPrefix(b.Name, "nvme") && !strings.HasPrefix(q.Name, strings.TrimSuffix(b.Name, "n1")+"q") {
				t.Errorf("%s: msi irq %d is %q", b.Name, n, q.Name)
			}
		}
	}
}

// TestFixturesMatchGenerator keeps the committed trees in step with hostgen:
// gathering a tree from disk must give what the generator's in-memory tree
// gives. Regenerate with go test ./test/hostgen -write-fixtures.
func TestFixturesMatchGenerator(t *testing.T) {
	for _, s := range hostgen.Fixtures() {
		t.Run(s.Name, func(t *testing.T) {
			disk := gatherTree(t, filepath.Join("testdata", "hosts", s.Name))
			mem, err := s.Facts()
			if err != nil {
				t.Fatal(err)
			}
			mem.Tool, mem.CapturedAt, mem.Source = disk.Tool, disk.CapturedAt, disk.Source
			var a, b bytes.Buffer
			host.Save(&a, disk)
			host.Save(&b, mem)
			if a.String() != b.String() {
				t.Errorf("tree on disk differs from hostgen (-disk +generated):\n%s", lineDiff(a.String(), b.String()))
			}
		})
	}
}
