package monitor

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnitVerify has systemd's own parser check the lowlat-monitor.service
// the repository ships (deploy/systemd): systemd-analyze verify reads it
// offline, so a misspelt key or a bad directive fails here, not on the
// operator's host. The binary path is pointed at this test binary (verify
// wants an executable); man pages come with the package, not the test.
func TestUnitVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze (Debian package systemd) is needed to check the unit: apt-get install systemd")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../../deploy/systemd/lowlat-monitor.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for _, want := range []string{"ExecStart=/usr/bin/lowlat monitor --config /etc/lowlat/monitor.toml", "ExecReload=/bin/kill -HUP $MAINPID", "RestartForceExitStatus=SIGHUP", "WantedBy=multi-user.target"} {
		if !strings.Contains(unit, want) {
			t.Errorf("unit lacks %q", want)
		}
	}
	p := filepath.Join(t.TempDir(), "lowlat-monitor.service")
	if err := os.WriteFile(p, []byte(strings.ReplaceAll(unit, "/usr/bin/lowlat", exe)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", "--recursive-errors=no", p).CombinedOutput()
	// verify exits 0 on some warnings (an unknown key is ignored with a
	// warning): any line naming the unit is a failure too.
	var ours []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "lowlat-monitor") {
			ours = append(ours, l)
		}
	}
	if err != nil || len(ours) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
