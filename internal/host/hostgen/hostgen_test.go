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
		dir := filepath.Join("..", "testdata", "hosts", s.Name)
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteTree(dir); err != nil {
			t.Fatal(err)
		}
	}
}
