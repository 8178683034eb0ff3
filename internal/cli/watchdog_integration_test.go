//go:build linux

package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/cgroup"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/testnet"
)

// watchdogJSON is what apply --confirm --json says of its watchdog.
type watchdogJSON struct {
	Txn      string   `json:"txn"`
	Notes    []string `json:"notes"`
	Watchdog *struct {
		PID       int    `json:"pid"`
		Unit      string `json:"unit"`
		Cgroup    string `json:"cgroup"`
		OwnCgroup bool   `json:"own_cgroup"`
		Note      string `json:"note"`
	} `json:"watchdog"`
}

func applyWatchdogJSON(t *testing.T, w *world, env []string, args ...string) watchdogJSON {
	t.Helper()
	r := w.run(env, append([]string{"apply", "--yes", "--json"}, args...)...)
	var out watchdogJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != 0 || out.Watchdog == nil {
		t.Fatalf("apply --json: exit %d, %v, watchdog %v\nstdout: %s\nstderr: %s", r.code, err, out.Watchdog, r.stdout, r.stderr)
	}
	return out
}

// TestIntegrationWatchdogOwnCgroup: the watchdog of apply --confirm runs
// out of the apply's cgroup, and says where: here (no systemd) in
// lowlat's own cgroup at the root of the cgroup hierarchy, which holds it
// and only it, and which it removes as it exits; an empty one a killed
// watchdog left is removed by the next apply. Where systemd runs, in its
// transient scope.
func TestIntegrationWatchdogOwnCgroup(t *testing.T) {
	w := newWorld(t)
	hs, err := cgroup.FS{}.Hierarchies()
	if err != nil {
		t.Fatalf("cgroups: %v", err)
	}
	systemd := knob.SystemdRuns(knob.Live)
	const stale = "lowlat-watchdog-19990101T000000Z-dead00"
	if !systemd {
		for _, h := range hs {
			if err := os.Mkdir(filepath.Join(h.Dir, stale), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(filepath.Join(h.Dir, stale)) })
		}
	}

	out := applyWatchdogJSON(t, w, nil, append([]string{"--confirm", "60s"}, profileArgs("live-edge")...)...)
	wd := out.Watchdog
	tx := journalState(t, w.journal).Txns[0]
	if wd.PID != tx.Meta.WatchdogPID || syscall.Kill(wd.PID, 0) != nil || !wd.OwnCgroup || wd.Note != "" {
		t.Errorf("watchdog %+v (journal: pid %d), want the running watchdog in a cgroup of its own, no note", *wd, tx.Meta.WatchdogPID)
	}
	ms, err := cgroup.FS{}.Of(wd.PID)
	if err != nil {
		t.Fatal(err)
	}
	if systemd {
		unit := "lowlat-watchdog-" + out.Txn + ".scope"
		if wd.Unit != unit || filepath.Base(cgroup.Main(ms)) != unit {
			t.Errorf("watchdog in unit %q, cgroup %q; want %s", wd.Unit, cgroup.Main(ms), unit)
		}
	} else {
		name := "lowlat-watchdog-" + out.Txn
		if wd.Unit != "" || wd.Cgroup != "/"+name {
			t.Errorf("watchdog in unit %q, cgroup %q; want lowlat's own /%s", wd.Unit, wd.Cgroup, name)
		}
		for _, h := range hs {
			if p, _ := cgroup.In(ms, h.Hierarchy()); p != "/"+name {
				t.Errorf("%s: the watchdog is in %q, want /%s", h.Dir, p, name)
			}
			if procs, _ := os.ReadFile(filepath.Join(h.Dir, name, "cgroup.procs")); strings.TrimSpace(string(procs)) != fmt.Sprint(wd.PID) {
				t.Errorf("%s/%s holds %q, want the watchdog %d alone", h.Dir, name, procs, wd.PID)
			}
			if _, err := os.Stat(filepath.Join(h.Dir, stale)); err == nil {
				t.Errorf("the empty %s/%s a killed watchdog left is still there", h.Dir, stale)
			}
		}
		t.Cleanup(func() {
			for _, h := range hs {
				os.Remove(filepath.Join(h.Dir, name))
			}
		})
	}

	// Confirmed: the watchdog ends, and leaves nothing behind.
	w.mustRun("confirm")
	if !waitFor(5*time.Second, func() bool { return syscall.Kill(wd.PID, 0) != nil }) {
		t.Fatal("the watchdog of a confirmed apply still runs")
	}
	if !systemd {
		for _, h := range hs {
			if _, err := os.Stat(filepath.Join(h.Dir, "lowlat-watchdog-"+out.Txn)); err == nil {
				t.Errorf("%s: the watchdog's cgroup outlived it", h.Dir)
			}
		}
	}
	w.mustRun("rollback")
}

// TestIntegrationWatchdogSharesItsCgroup: where no cgroup of lowlat's own
// can be made (here a host root without cgroup mounts, the test build's
// LOWLAT_TEST_WATCHDOG_ROOT), the apply still starts its watchdog, in its
// own cgroup, and says so in one line, and --json carries it; the
// watchdog still rolls the change back at the deadline.
func TestIntegrationWatchdogSharesItsCgroup(t *testing.T) {
	w := newWorld(t)
	before := w.snapshot()
	root := t.TempDir()
	for p, c := range map[string]string{
		"proc/self/mountinfo": "25 30 0:23 / /sys rw - sysfs sysfs rw\n",
		"proc/self/cgroup":    "0::/user.slice/user-1000.slice/session-9.scope\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"LOWLAT_TEST_WATCHDOG_ROOT=" + root}
	const shares = "note: watchdog: it shares this apply's cgroup /user.slice/user-1000.slice/session-9.scope (no cgroup hierarchy's root is mounted here): "

	r := w.run(env, append([]string{"apply", "--yes", "--confirm", "3s"}, profileArgs("live-edge")...)...)
	if r.code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var lines []string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.Contains(l, "watchdog") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.HasPrefix(lines[0], shares) || !strings.Contains(lines[0], "nothing rolls this change back at its deadline") {
		t.Errorf("apply's lines on its watchdog %q, want one: %q...", lines, shares)
	}
	if !waitFor(15*time.Second, func() bool { return w.snapshot() == before }) {
		t.Fatalf("a watchdog in the apply's cgroup did not roll back 15 s after a 3 s deadline:\n%s", testnet.DiffLines(before, w.snapshot()))
	}

	out := applyWatchdogJSON(t, w, env, append([]string{"--confirm", "60s"}, profileArgs("live-edge")...)...)
	wd := out.Watchdog
	if wd.OwnCgroup || wd.Unit != "" || wd.Cgroup != "/user.slice/user-1000.slice/session-9.scope" || !strings.HasPrefix("note: "+wd.Note, shares) || syscall.Kill(wd.PID, 0) != nil {
		t.Errorf("--json watchdog %+v, want it running, sharing the apply's cgroup, with the note", *wd)
	}
	if len(out.Notes) == 0 || out.Notes[len(out.Notes)-1] != wd.Note {
		t.Errorf("notes %q lack the watchdog's %q", out.Notes, wd.Note)
	}
	w.mustRun("rollback")
	if !waitFor(5*time.Second, func() bool { return syscall.Kill(wd.PID, 0) != nil }) {
		t.Error("rollback left the watchdog running")
	}
}
