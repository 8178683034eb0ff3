package hostgen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExtractTTAR reads the ttar script's encoding: directories, files with
// and without a last newline, escaped and real zero bytes, links and modes.
func TestExtractTTAR(t *testing.T) {
	archive := strings.Join([]string{
		"# Archive created by ttar -c -f x.ttar fixtures",
		"Directory: fixtures",
		"Mode: 755",
		"# ttar - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -",
		"Path: fixtures/proc/cmdline",
		"Lines: 1",
		"vmlinuz rootNULLBYTEquietEOF",
		"Mode: 644",
		"# ttar - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -",
		"Path: fixtures/proc/literal",
		"Lines: 2",
		`a \NULLBYTE and \EOF`,
		"",
		"Mode: 444",
		"# ttar - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -",
		"Path: fixtures/proc/empty",
		"Lines: 0",
		"Mode: 644",
		"# ttar - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -",
		"Path: fixtures/proc/self",
		"SymlinkTo: 26231",
		"",
	}, "\n")
	dst := t.TempDir()
	if err := ExtractTTAR(strings.NewReader(archive), dst); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"fixtures/proc/cmdline": "vmlinuz root\x00quiet",
		"fixtures/proc/literal": "a NULLBYTE and EOF\n\n",
		"fixtures/proc/empty":   "",
	}
	for p, want := range files {
		b, err := os.ReadFile(filepath.Join(dst, p))
		if err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", p, b, err, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(dst, "fixtures/proc/literal")); err != nil || fi.Mode().Perm() != 0o444 {
		t.Errorf("mode of literal: %v %v, want 0444", fi.Mode(), err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "fixtures/proc/self")); err != nil || l != "26231" {
		t.Errorf("self -> %q, %v; want 26231", l, err)
	}
	if err := ExtractTTAR(strings.NewReader("Path: ../escape\nLines: 0\n"), t.TempDir()); err == nil {
		t.Error("a path leaving the archive was accepted")
	}
}
