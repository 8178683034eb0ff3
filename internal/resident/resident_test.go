package resident

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestMappingsReadOnlyOfPath(t *testing.T) {
	maps := filepath.Join(t.TempDir(), "maps")
	const text = `00400000-00bff000 r-xp 00000000 fe:00 1234 /usr/bin/lowlat two
00bff000-01462000 r--p 007ff000 fe:00 1234 /usr/bin/lowlat two
01462000-014d8000 rw-p 01062000 fe:00 1234 /usr/bin/lowlat two
014d8000-01500000 r--p 00000000 fe:00 99 /usr/bin/lowlat
33d0bf000000-33d0bf800000 rw-p 00000000 00:00 0
7ffc1a3f2000-7ffc1a413000 rw-p 00000000 00:00 0 [stack]
`
	if err := os.WriteFile(maps, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := mappings(maps, "/usr/bin/lowlat two")
	if err != nil {
		t.Fatal(err)
	}
	want := []Mapping{{0x400000, 0xbff000, "r-xp"}, {0xbff000, 0x1462000, "r--p"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("mappings = %+v, want %+v", got, want)
	}
}

func TestMappingsBadRange(t *testing.T) {
	maps := filepath.Join(t.TempDir(), "maps")
	if err := os.WriteFile(maps, []byte("zz-00bff000 r-xp 0 fe:00 1 /x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := mappings(maps, "/x"); err == nil || !strings.Contains(err.Error(), `bad range "zz-00bff000"`) {
		t.Fatalf("err = %v, want a bad range naming it", err)
	}
}

// exeRSS sums the Rss of this executable's read-only mappings, in KiB.
func exeRSS(t *testing.T) int {
	t.Helper()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in, kb := false, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 5 && strings.Contains(fs[0], "-") && !strings.HasSuffix(fs[0], ":") {
			in = len(fs) >= 6 && strings.Join(fs[5:], " ") == exe && !strings.Contains(fs[1], "w")
			continue
		}
		if in && len(fs) == 3 && fs[0] == "Rss:" {
			n, err := strconv.Atoi(fs[1])
			if err != nil {
				t.Fatal(err)
			}
			kb += n
		}
	}
	return kb
}

// TestReleaseShrinksExecutable pages this test binary out and checks that
// what stays resident of it is what the test runs: a fraction of the
// mappings that were resident before.
func TestReleaseShrinksExecutable(t *testing.T) {
	before := exeRSS(t)
	n, err := Release()
	if err != nil {
		t.Fatalf("Release: %v", err)
	}
	after := exeRSS(t)
	t.Logf("advised %d KiB; executable RSS %d -> %d KiB", n/1024, before, after)
	if n == 0 {
		t.Fatal("Release advised no mapping of the executable")
	}
	if after*2 > before {
		t.Fatalf("executable RSS %d -> %d KiB: not halved", before, after)
	}
}
