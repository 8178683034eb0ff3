//go:build linux

package lab

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// fakeDirs points the state, namespace and temporary directories of Clean at
// a test's own directories.
func fakeDirs(t *testing.T) (state, netns, tmp string) {
	t.Helper()
	base := t.TempDir()
	state, netns, tmp = filepath.Join(base, "state"), filepath.Join(base, "netns"), filepath.Join(base, "tmp")
	for _, d := range []string{state, netns, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	oldS, oldN, oldT := StateDir, NetnsDir, TempBase
	StateDir, NetnsDir, TempBase = state, netns, tmp
	t.Cleanup(func() { StateDir, NetnsDir, TempBase = oldS, oldN, oldT })
	return
}

func touch(t *testing.T, p string) {
	t.Helper()
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

func TestClaimRefusesATakenID(t *testing.T) {
	fakeDirs(t)
	st, err := claim("abc", "nagle-small-messages")
	if err != nil {
		t.Fatal(err)
	}
	if st.PID != os.Getpid() || st.Start == 0 {
		t.Errorf("state %+v", st)
	}
	if _, err := claim("abc", "x"); err == nil {
		t.Fatal("a second claim of the same id succeeded")
	}
	if err := st.remove(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "-x", "Caps", "a/b", "waytoolongidentifier-xyz"} {
		if ValidID(bad) == nil {
			t.Errorf("ValidID(%q) accepted", bad)
		}
	}
}

func TestClean(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("Clean unmounts namespace files: needs root")
	}
	_, netns, tmp := fakeDirs(t)
	// A run whose process is gone: everything it registered goes.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadTmp := filepath.Join(tmp, "lowlat-lab-dead-1")
	os.Mkdir(deadTmp, 0o755)
	touch(t, filepath.Join(netns, "lowlat-lab-dead-client"))
	(&state{ID: "dead", PID: dead.Process.Pid, Start: 1, Namespaces: []string{"lowlat-lab-dead-client", "lowlat-lab-dead-provider"}, TempDir: deadTmp}).save()
	// A live run (a sleeping child stands in for it): left alone.
	live := exec.Command("sleep", "30")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Process.Kill(); live.Wait() })
	time.Sleep(50 * time.Millisecond)
	liveTmp := filepath.Join(tmp, "lowlat-lab-live-1")
	os.Mkdir(liveTmp, 0o755)
	touch(t, filepath.Join(netns, "lowlat-lab-live-server"))
	(&state{ID: "live", Scenario: "first-frame", PID: live.Process.Pid, Start: procStart(live.Process.Pid), Namespaces: []string{"lowlat-lab-live-server"}, TempDir: liveTmp}).save()
	// Orphans no state claims, and things that are not the lab's.
	touch(t, filepath.Join(netns, "lowlat-lab-orphan-client"))
	touch(t, filepath.Join(netns, "someone-else"))
	os.Mkdir(filepath.Join(tmp, "lowlat-lab-orphan-2"), 0o755)
	os.Mkdir(filepath.Join(tmp, "lowlat-vm-keep"), 0o755)
	os.WriteFile(filepath.Join(StateDir, "torn.json"), []byte("{"), 0o644)

	rep, err := Clean(false)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"lowlat-lab-dead-client", "lowlat-lab-orphan-client"}; !slices.Equal(rep.Namespaces, want) {
		t.Errorf("namespaces removed %v, want %v", rep.Namespaces, want)
	}
	if len(rep.Running) != 1 {
		t.Errorf("running %v, want the live run", rep.Running)
	}
	for _, p := range []string{filepath.Join(netns, "lowlat-lab-dead-client"), filepath.Join(netns, "lowlat-lab-orphan-client"), deadTmp,
		filepath.Join(tmp, "lowlat-lab-orphan-2"), filepath.Join(StateDir, "dead.json"), filepath.Join(StateDir, "torn.json")} {
		if exists(p) {
			t.Errorf("%s is still there", p)
		}
	}
	for _, p := range []string{filepath.Join(netns, "lowlat-lab-live-server"), liveTmp, filepath.Join(StateDir, "live.json"),
		filepath.Join(netns, "someone-else"), filepath.Join(tmp, "lowlat-vm-keep")} {
		if !exists(p) {
			t.Errorf("%s was removed", p)
		}
	}
	if !alive(live.Process.Pid, procStart(live.Process.Pid)) {
		t.Fatal("the live run's process was killed without --force")
	}

	rep, err = Clean(true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rep.Processes, live.Process.Pid) || !slices.Equal(rep.Namespaces, []string{"lowlat-lab-live-server"}) {
		t.Errorf("--force: %+v", rep)
	}
	live.Wait()
	if exists(liveTmp) || exists(filepath.Join(StateDir, "live.json")) {
		t.Error("--force left the live run's files")
	}
	rep, _ = Clean(false)
	if len(rep.Namespaces)+len(rep.Processes)+len(rep.TempDirs)+len(rep.States) != 0 {
		t.Errorf("a second clean found %+v", rep)
	}
}
