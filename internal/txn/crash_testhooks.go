//go:build lowlat_testhooks

package txn

import (
	"fmt"
	"os"
	"syscall"
)

// LOWLAT_TEST_CRASH="write:3" makes the process SIGKILL itself right after the
// third knob write ("intent:3": after the third intent is journaled, before the
// write). Compiled only into test builds.
func init() {
	// LOWLAT_TEST_BOOT_ID pretends the host rebooted.
	bootIDOverride = os.Getenv("LOWLAT_TEST_BOOT_ID")
	// LOWLAT_TEST_WATCHDOG_ROOT places the watchdog as on the host whose
	// /proc and /run are below it (one without cgroup mounts: it shares
	// the apply's cgroup).
	watchdogRootOverride = os.Getenv("LOWLAT_TEST_WATCHDOG_ROOT")
	want := os.Getenv("LOWLAT_TEST_CRASH")
	if want == "" {
		return
	}
	crashAt = func(stage string, n int) {
		if fmt.Sprintf("%s:%d", stage, n) == want {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
}
