//go:build linux

package txn_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/txn"
)

// fakeSystemd is a fixture host for WatchdogStarter: a /proc with the
// apply's cgroups and a mount table, a cgroup v2 root, and stand-ins for
// systemd-run and systemctl. The fake systemd-run records its arguments
// and plays systemd's part of --scope as its mode file says: "ok" puts
// itself in the scope (the cgroup line, the exe link of the fixture /proc)
// and execs the command in its own place, as systemd-run does; "fail"
// and "exists" print systemd-run's message and exit 1; "hang" never
// answers. The watchdog it runs is a shell that sleeps.
type fakeSystemd struct {
	t       *testing.T
	root    string
	exe     string
	starter *txn.WatchdogStarter
}

const fakeSystemdRun = `#!/bin/sh
R=%q
if [ "$1" = --version ]; then echo "systemd $(cat "$R/version") (fake)"; exit 0; fi
printf '%%s\n' "$@" >"$R/systemd-run.args"
unit=
while [ "$1" != -- ]; do
	case $1 in --unit=*) unit=${1#--unit=} ;; esac
	shift
done
shift
case $(cat "$R/mode") in
fail) echo "Failed to connect to bus: No such file or directory" >&2; exit 1 ;;
exists) echo "Failed to start transient scope unit: Unit $unit already exists." >&2; exit 1 ;;
hang) exec sleep 60 ;;
outside) unit=elsewhere.scope ;;
esac
mkdir -p "$R/proc/$$"
echo "0::/system.slice/$unit" >"$R/proc/$$/cgroup"
FAKE_SCOPE=1 exec "$@"
`

// fakeLowlat stands in for the watchdog: started by the fake systemd-run,
// its /proc/PID/exe is lowlat from its exec on, in the fixture /proc as in
// the kernel's (the starter waits for that). Started without, it forks
// nothing, so that nothing writes the fixture once it is killed.
const fakeLowlat = `#!/bin/sh
[ -z "$FAKE_SCOPE" ] || { mkdir -p %[1]q/proc/$$ && ln -s %[2]q %[1]q/proc/$$/exe; }
exec sleep 30
`

const fakeSystemctl = `#!/bin/sh
if [ "$(cat %q)" = exists ]; then echo active; else echo inactive; exit 3; fi
`

func newFakeSystemd(t *testing.T, systemd bool, mode string) *fakeSystemd {
	t.Helper()
	root := t.TempDir()
	f := &fakeSystemd{t: t, root: root, exe: filepath.Join(root, "bin/lowlat")}
	f.file("mode", mode)
	f.file("version", "257")
	f.file("proc/self/cgroup", "0::/user.slice/user-1000.slice/session-7.scope\n")
	f.file("proc/self/mountinfo", "30 25 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n")
	f.file("sys/fs/cgroup/cgroup.procs", "1\n")
	if systemd {
		if err := os.MkdirAll(filepath.Join(root, "run/systemd/system"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f.script("bin/systemd-run", fmt.Sprintf(fakeSystemdRun, root))
	f.script("bin/systemctl", fmt.Sprintf(fakeSystemctl, filepath.Join(root, "mode")))
	f.script("bin/lowlat", fmt.Sprintf(fakeLowlat, root, f.exe))
	f.starter = &txn.WatchdogStarter{Exe: f.exe, Journal: "/var/lib/lowlat/journal", Root: root,
		SystemdRun: filepath.Join(root, "bin/systemd-run"), Systemctl: filepath.Join(root, "bin/systemctl")}
	return f
}

func (f *fakeSystemd) file(p, content string) {
	f.t.Helper()
	full := filepath.Join(f.root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeSystemd) script(p, content string) {
	f.t.Helper()
	f.file(p, content)
	if err := os.Chmod(filepath.Join(f.root, p), 0o755); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeSystemd) read(p string) string {
	b, _ := os.ReadFile(filepath.Join(f.root, p))
	return string(b)
}

// start starts the watchdog of transaction T1; a process it started is
// killed when the test ends.
func (f *fakeSystemd) start() (txn.Watchdog, error) {
	f.t.Helper()
	w, err := f.starter.Start("T1", time.Date(2026, 11, 23, 10, 2, 0, 0, time.UTC))
	if w.PID > 0 {
		// Gone, with the commands the stand-in runs (its session, its
		// group), before the fixture is removed.
		f.t.Cleanup(func() {
			syscall.Kill(-w.PID, syscall.SIGKILL)
			for i := 0; i < 500 && syscall.Kill(-w.PID, 0) == nil; i++ {
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	return w, err
}

func (f *fakeSystemd) args() []string {
	return strings.Split(strings.TrimSuffix(f.read("systemd-run.args"), "\n"), "\n")
}

// TestWatchdogInSystemdScope: where systemd runs, the watchdog is the
// process systemd-run --scope execs in a transient scope named after the
// transaction, collected when it ends; the pid started is the watchdog's.
func TestWatchdogInSystemdScope(t *testing.T) {
	f := newFakeSystemd(t, true, "ok")
	w, err := f.start()
	if err != nil {
		t.Fatal(err)
	}
	want := txn.Watchdog{PID: w.PID, Unit: "lowlat-watchdog-T1.scope", Cgroup: "/system.slice/lowlat-watchdog-T1.scope", OwnCgroup: true}
	if w != want || w.PID <= 0 {
		t.Errorf("(-want +got)\n-%+v\n+%+v", want, w)
	}
	args := f.args()
	for _, a := range []string{"--scope", "--unit=lowlat-watchdog-T1.scope", "--collect", "--quiet", "--no-ask-password"} {
		if !slices.Contains(args, a) {
			t.Errorf("systemd-run without %s: %q", a, args)
		}
	}
	cmd := []string{"--", f.exe, "__watchdog", "--journal", "/var/lib/lowlat/journal", "--txn", "T1", "--deadline", "2026-11-23T10:02:00Z"}
	if i := slices.Index(args, "--"); i < 0 || !slices.Equal(args[i:], cmd) {
		t.Errorf("systemd-run's command %q, want %q", args, cmd)
	}
	if slices.Contains(args, "--expand-environment=no") {
		t.Errorf("--expand-environment=no without a $ in the command: %q", args)
	}
	// It runs: the process systemd-run became, no longer systemd-run.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", w.PID))
	if err != nil || strings.Contains(string(b), "systemd-run") {
		t.Errorf("pid %d runs %q (%v), want the watchdog", w.PID, b, err)
	}
	if _, err := os.Stat(filepath.Join(f.root, "sys/fs/cgroup/lowlat-watchdog-T1")); err == nil {
		t.Error("a cgroup of lowlat's own was made beside the scope")
	}
}

// TestWatchdogScopeWithoutTemp: no file for systemd-run's messages (an
// unwritable $TMPDIR) is no reason to go without the scope.
func TestWatchdogScopeWithoutTemp(t *testing.T) {
	f := newFakeSystemd(t, true, "ok")
	t.Setenv("TMPDIR", filepath.Join(f.root, "missing"))
	w, err := f.start()
	if err != nil || w.Unit != "lowlat-watchdog-T1.scope" || !w.OwnCgroup {
		t.Errorf("watchdog %+v, %v; want it in its scope", w, err)
	}
}

// TestWatchdogScopeNotJoined: a watchdog systemd-run started that is not
// in its scope after all is not taken for one that is.
func TestWatchdogScopeNotJoined(t *testing.T) {
	f := newFakeSystemd(t, true, "outside")
	w, err := f.start()
	if err != nil {
		t.Fatal(err)
	}
	if w.OwnCgroup || w.Cgroup != "/system.slice/elsewhere.scope" || !strings.Contains(w.Note, "runs in /system.slice/elsewhere.scope") {
		t.Errorf("watchdog %+v, want it reported outside its scope", w)
	}
}

// TestWatchdogScopeLiteralPaths: a $ in the journal's path is not
// expanded by a systemd-run that would (254 and later); an older one,
// which does not expand a scope's command and does not know the option,
// is not given it.
func TestWatchdogScopeLiteralPaths(t *testing.T) {
	for _, tt := range []struct {
		version string
		want    bool
	}{{"257", true}, {"254", true}, {"253", false}, {"garbage", true}} {
		t.Run(tt.version, func(t *testing.T) {
			f := newFakeSystemd(t, true, "ok")
			f.file("version", tt.version)
			f.starter.Journal = "/srv/$HOME/journal"
			if _, err := f.start(); err != nil {
				t.Fatal(err)
			}
			args := f.args()
			if got := slices.Contains(args, "--expand-environment=no"); got != tt.want {
				t.Errorf("systemd %s: --expand-environment=no %v, want %v: %q", tt.version, got, tt.want, args)
			}
			if !slices.Contains(args, "/srv/$HOME/journal") {
				t.Errorf("the journal's path not passed as it is: %q", args)
			}
		})
	}
}

// TestWatchdogScopeRefusedTwice: systemd refuses a second scope of the
// same name while the first runs: no second watchdog of the transaction
// starts, in a scope or anywhere else.
func TestWatchdogScopeRefusedTwice(t *testing.T) {
	f := newFakeSystemd(t, true, "exists")
	w, err := f.start()
	if err == nil || !strings.Contains(err.Error(), "lowlat-watchdog-T1.scope") || !strings.Contains(err.Error(), "already runs") {
		t.Errorf("a second watchdog of one transaction: %+v, %v; want refused", w, err)
	}
	if w.PID != 0 {
		t.Errorf("pid %d started", w.PID)
	}
	if _, err := os.Stat(filepath.Join(f.root, "sys/fs/cgroup/lowlat-watchdog-T1")); err == nil {
		t.Error("the refused watchdog was started in a cgroup of lowlat's own instead")
	}
}

// TestWatchdogScopeFallsBack: when systemd-run fails or does not answer,
// the watchdog starts in lowlat's own cgroup, and the note says why not
// in a unit.
func TestWatchdogScopeFallsBack(t *testing.T) {
	for _, tt := range []struct {
		mode, why string
	}{
		{"fail", "Failed to connect to bus: No such file or directory"},
		{"hang", "no watchdog after 300ms"},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			f := newFakeSystemd(t, true, tt.mode)
			f.starter.ScopeTimeout = 300 * time.Millisecond
			w, err := f.start()
			if err != nil {
				t.Fatal(err)
			}
			if w.Unit != "" || w.Cgroup != "/lowlat-watchdog-T1" || !w.OwnCgroup || w.PID <= 0 {
				t.Errorf("watchdog %+v, want it in lowlat's own cgroup", w)
			}
			if !strings.Contains(w.Note, "not in a systemd unit") || !strings.Contains(w.Note, tt.why) || strings.Contains(w.Note, "\n") {
				t.Errorf("note %q, want one line with why: %q", w.Note, tt.why)
			}
			if got := f.read("sys/fs/cgroup/lowlat-watchdog-T1/cgroup.procs"); got != fmt.Sprint(w.PID) {
				t.Errorf("lowlat's cgroup holds %q, want the watchdog's pid %d", got, w.PID)
			}
		})
	}
}

// TestWatchdogWithoutSystemd: without systemd, lowlat's own cgroup; a
// second one of the transaction is refused while the first is in it.
func TestWatchdogWithoutSystemd(t *testing.T) {
	f := newFakeSystemd(t, false, "ok")
	w, err := f.start()
	if err != nil {
		t.Fatal(err)
	}
	if w.Unit != "" || w.Cgroup != "/lowlat-watchdog-T1" || !w.OwnCgroup || w.Note != "" {
		t.Errorf("watchdog %+v, want it in lowlat's own cgroup, no note", w)
	}
	if f.read("systemd-run.args") != "" {
		t.Error("systemd-run ran where systemd does not")
	}
	again, err := f.start()
	if err == nil || !strings.Contains(err.Error(), "already runs") || again.PID != 0 {
		t.Errorf("a second watchdog: %+v, %v; want refused", again, err)
	}
}

// TestWatchdogSharesItsCgroup: where no cgroup of lowlat's own can be
// made, the watchdog still runs, in the apply's cgroup, and the note says
// which, why, and what that means, in one line.
func TestWatchdogSharesItsCgroup(t *testing.T) {
	f := newFakeSystemd(t, false, "ok")
	f.file("proc/self/mountinfo", "25 30 0:23 / /sys rw - sysfs sysfs rw\n")
	w, err := f.start()
	if err != nil {
		t.Fatal(err)
	}
	if w.PID <= 0 || w.OwnCgroup || w.Cgroup != "/user.slice/user-1000.slice/session-7.scope" {
		t.Errorf("watchdog %+v, want it running in the apply's cgroup", w)
	}
	for _, s := range []string{"shares this apply's cgroup /user.slice/user-1000.slice/session-7.scope", "no cgroup hierarchy", "nothing rolls this change back at its deadline"} {
		if !strings.Contains(w.Note, s) {
			t.Errorf("note %q, want %q", w.Note, s)
		}
	}
	if strings.Contains(w.Note, "\n") {
		t.Errorf("note of more than one line: %q", w.Note)
	}
}

// TestWatchdogBadID: an id that cannot name a unit or a cgroup starts
// nothing.
func TestWatchdogBadID(t *testing.T) {
	f := newFakeSystemd(t, true, "ok")
	for _, id := range []string{"", "../x", "a b", "-x"} {
		if w, err := f.starter.Start(id, time.Now()); err == nil || w.PID != 0 {
			t.Errorf("id %q: %+v, %v", id, w, err)
		}
	}
}
