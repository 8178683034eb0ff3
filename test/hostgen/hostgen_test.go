package hostgen

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var writeFixtures = flag.Bool("write-fixtures", false, "rewrite internal/host/testdata/hosts from the presets")

// TestWriteFixtures regenerates the committed fixture trees.
func TestWriteFixtures(t *testing.T) {
	if !*writeFixtures {
		t.Skip("run with -write-fixtures to regenerate the committed trees")
	}
	for _, s := range Fixtures() {
		dir := filepath.Join("..", "..", "internal", "host", "testdata", "hosts", s.Name)
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteTree(dir); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTopologyNumbering(t *testing.T) {
	g, err := DualI40E().build()
	if err != nil {
		t.Fatal(err)
	}
	// Linux x86 enumeration: first threads of socket 0, then socket 1, then
	// the second threads; core ids keep the Xeon's gaps.
	for _, tt := range []struct{ cpu, socket, coreID, node int }{
		{0, 0, 0, 0}, {9, 0, 12, 0}, {10, 1, 0, 1}, {20, 0, 0, 0}, {39, 1, 12, 1},
	} {
		c := g.cpus[tt.cpu]
		if c.socket != tt.socket || c.coreID != tt.coreID || c.node != tt.node {
			t.Errorf("cpu %d = %+v, want socket %d core_id %d node %d", tt.cpu, c, tt.socket, tt.coreID, tt.node)
		}
	}
	if sib := g.siblings(g.cpus[5]); len(sib) != 2 || sib[0] != 5 || sib[1] != 25 {
		t.Errorf("siblings of cpu 5 = %v, want [5 25]", sib)
	}
}

func TestManagedSpread(t *testing.T) {
	g, err := Synthetic256().build()
	if err != nil {
		t.Fatal(err)
	}
	groups := g.managedSpread(128)
	if len(groups) != 128 {
		t.Fatalf("%d groups", len(groups))
	}
	seen := map[int]bool{}
	for i, grp := range groups {
		// 256 CPUs over 128 vectors: each vector gets one core's two threads.
		if len(grp) != 2 || grp[1] != grp[0]+128 {
			t.Errorf("group %d = %v, want an SMT pair", i, grp)
		}
		for _, c := range grp {
			if seen[c] {
				t.Errorf("cpu %d in two groups", c)
			}
			seen[c] = true
		}
	}
	// Fewer vectors than nodes still lands them on distinct nodes first.
	if g := g.managedSpread(2); g[0][0] != 0 || g[1][0] != 32 {
		t.Errorf("2 vectors: %v", g)
	}
}

func TestWriteTreeRefusesNonEmpty(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CentOS7().WriteTree(dir); err == nil {
		t.Error("WriteTree wrote into a non-empty directory")
	}
}
