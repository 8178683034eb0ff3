//go:build linux

package nsthread

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary the helper of TestRunDirCoveredByIPNetns.
const helperEnv = "LOWLAT_RUNDIR_HELPER"

// TestRunDirCoveredByIPNetns: on a machine where /run/netns is not yet a
// mount point, a namespace named there and then an 'ip netns add' beside it
// strand the first namespace (its file cannot be removed, EBUSY) unless
// PrepareRunDir ran before it was named. Each case runs in a private mount
// namespace (unshare -m) on a tmpfs of its own at /run, so the machine's
// own /run/netns is never touched.
func TestRunDirCoveredByIPNetns(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mount and network namespaces need root")
	}
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed (util-linux, iproute2): %v", tool, err)
		}
	}
	for _, prepare := range []bool{false, true} {
		// A fresh tmpfs on /run: /run/netns is a plain directory there,
		// and everything made in it goes with the mount namespace.
		script := `mount -t tmpfs lowlat-rundir /run && mkdir /run/netns && exec "$0" -test.run='^TestRunDirCoveredByIPNetns$' -test.count=1`
		cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", script, os.Args[0])
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%v", helperEnv, prepare))
		out, _ := cmd.CombinedOutput()
		got := string(out)
		switch {
		case prepare && !strings.Contains(got, "removed: ok"):
			t.Errorf("with PrepareRunDir the namespace was stranded:\n%s", got)
		case !prepare && !strings.Contains(got, "removed: device or resource busy"):
			t.Errorf("without PrepareRunDir the namespace should be stranded (the test's premise):\n%s", got)
		}
	}
}

func init() {
	v := os.Getenv(helperEnv)
	if v == "" {
		return
	}
	os.Unsetenv(helperEnv)
	err := coverHelper(v == "true")
	switch {
	case err == nil:
		fmt.Println("removed: ok")
	case errors.Is(err, unix.EBUSY):
		fmt.Println("removed: device or resource busy")
	default:
		fmt.Println("helper:", err)
	}
	os.Exit(0)
}

// coverHelper names a namespace under /run/netns (after PrepareRunDir when
// prepare), lets 'ip netns add' name another, and removes the first.
func coverHelper(prepare bool) error {
	if prepare {
		if err := PrepareRunDir(); err != nil {
			return err
		}
	}
	a := filepath.Join(RunDir, "lowlat-rundir-a")
	if err := os.WriteFile(a, nil, 0o444); err != nil {
		return err
	}
	if err := OnNewThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return err
		}
		return unix.Mount(threadPath(), a, "none", unix.MS_BIND, "")
	}); err != nil {
		return fmt.Errorf("name %s: %w", a, err)
	}
	if out, err := exec.Command("ip", "netns", "add", "lowlat-rundir-b").CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns add: %v: %s", err, out)
	}
	_ = unix.Unmount(a, unix.MNT_DETACH)
	return os.Remove(a)
}
