package persist

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/knob"
)

// TestUnitsVerify has systemd's own parser check the units apply writes:
// systemd-analyze verify reads them offline, so a misspelt key, a bad
// service type, an unknown dependency or an ExecStart that is not
// executable fails here instead of at the user's next boot.
func TestUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze (Debian package systemd) is needed to check the boot units: apt-get install systemd")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A binary and journal path that need quoting: a space, a specifier
	// character and a variable sign.
	dir := filepath.Join(t.TempDir(), "low lat 100%$x")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	quoted := filepath.Join(dir, "lowlat bin")
	if err := os.Symlink(exe, quoted); err != nil {
		t.Fatal(err)
	}
	exe = quoted
	settings := []Setting{
		{Knob: "sysctl/net.ipv4.tcp_congestion_control", Value: "bbr"},
		{Knob: "qdisc/eth0/root", Value: "fq_codel"},
		{Knob: "irq/27/affinity", Value: "1 (i40e-eth0-TxRx-0)"},
		{Knob: "queue/enp1s0-1/rx-0/rps_cpus", Value: "3"},
	}
	ch, _ := Changes(settings, Options{ID: "20261123T101010Z-abc123", Profile: "game-udp", Exe: exe, Journal: filepath.Join(dir, "state dir", "journal"), Systemd: true, Root: dir})
	var units []string
	for _, c := range ch {
		p, ok := strings.CutPrefix(c.Knob, "file")
		if !ok || !strings.HasPrefix(p, filepath.Join(dir, "etc/systemd/system")) || strings.Contains(p, ".service.d/") {
			continue
		}
		// systemd-analyze resolves a timer's service by name in its own
		// directory: write them side by side under their real names.
		p = filepath.Join(dir, filepath.Base(p))
		if err := os.WriteFile(p, []byte(knob.ParseFileValue(c.Value).Content), 0o644); err != nil {
			t.Fatal(err)
		}
		units = append(units, p)
	}
	if len(units) != 3 {
		t.Fatalf("want the boot service, reassert service and timer, got %v", units)
	}
	verify(t, analyze, units)
}

// TestPackagedUnits checks the units the package ships: systemd-analyze
// verify accepts them, and below their header they are the very units an
// apply writes for the same binary and journal.
func TestPackagedUnits(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze (Debian package systemd) is needed to check the boot units: apt-get install systemd")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	journal := "/var/lib/lowlat/journal"
	pkg := Packaged(exe, journal)
	if len(pkg) != 3 {
		t.Fatalf("want 3 units, got %d", len(pkg))
	}
	written := map[string]string{}
	settings := []Setting{{Knob: "irq/27/affinity", Value: "1"}}
	ch, _ := Changes(settings, Options{ID: "x", Exe: exe, Journal: journal, Systemd: true})
	for _, c := range ch {
		if p, ok := strings.CutPrefix(c.Knob, "file"); ok {
			written[filepath.Base(p)] = knob.ParseFileValue(c.Value).Content
		}
	}
	dir := t.TempDir()
	var units []string
	for name, text := range pkg {
		if !strings.HasPrefix(text, packagedHeader) {
			t.Errorf("%s: does not open with the package's header", name)
		}
		if w, ok := written[name]; !ok || strings.TrimPrefix(w, writtenHeader) != strings.TrimPrefix(text, packagedHeader) {
			t.Errorf("%s: differs from the unit an apply writes:\n%s\n--- apply writes:\n%s", name, text, w)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		units = append(units, p)
	}
	verify(t, analyze, units)
}

// verify runs systemd-analyze verify on units and fails on any complaint
// about them.
func verify(t *testing.T, analyze string, units []string) {
	t.Helper()
	out, err := exec.Command(analyze, append([]string{"verify", "--recursive-errors=no"}, units...)...).CombinedOutput()
	// verify exits 0 on warnings about a file (an unknown key is ignored
	// with a warning): any line naming our units is a failure too.
	var ours []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "lowlat-") {
			ours = append(ours, l)
		}
	}
	if err != nil || len(ours) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, strings.Join(ours, "\n"))
	}
}
