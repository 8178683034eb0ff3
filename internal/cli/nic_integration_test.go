//go:build linux

package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/cli"
)

// TestIntegrationPinRollback: lowlat pin writes its drop-in as a journaled
// change (below --unit-root here, so the host's /etc is untouched), status
// sees it in force, and rollback removes it.
func TestIntegrationPinRollback(t *testing.T) {
	w := newWorld(t)
	dir := t.TempDir()
	r := w.mustRun("pin", "--service", "gateway", "--cpus", "0", "--unit-root", dir, "--yes", "--json")
	var res struct {
		Txn  string `json:"txn"`
		Path string `json:"path"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Txn == "" {
		t.Fatalf("pin --json: %v\n%s", err, r.stdout)
	}
	b, err := os.ReadFile(filepath.Join(dir, "etc/systemd/system/gateway.service.d/50-lowlat-cpus.conf"))
	if err != nil || !strings.Contains(string(b), "[Service]\nCPUAffinity=0\n") {
		t.Fatalf("drop-in: %v\n%s", err, b)
	}
	st := w.mustRun("status", "--json")
	if !strings.Contains(st.stdout, res.Txn) || !strings.Contains(st.stdout, `"drift": []`) {
		t.Errorf("status after pin: %s", st.stdout)
	}
	// Someone edits the drop-in: status names the knob as drifted.
	os.WriteFile(res.Path, []byte("[Service]\nCPUAffinity=1\n"), 0o644)
	if st := w.run(nil, "status"); st.code != cli.ExitDrift {
		t.Errorf("status after an edit: exit %d\n%s", st.code, st.stdout)
	}
	os.WriteFile(res.Path, b, 0o644)
	w.mustRun("rollback")
	if _, err := os.Stat(res.Path); !os.IsNotExist(err) {
		t.Errorf("drop-in still there after rollback: %v", err)
	}
}

// TestIntegrationReassertNothingToDo: the timer's command on a journal with
// nothing in force says so and succeeds.
func TestIntegrationReassertNothingToDo(t *testing.T) {
	w := newWorld(t)
	r := w.mustRun("reassert", "--json")
	if !strings.Contains(r.stdout, `"checked": 0`) {
		t.Errorf("reassert: %s", r.stdout)
	}
}
