//go:build linux

package knob

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// autorateMarker is what an autorate daemon's command line holds ("lowlat
// autorate run eth0"): a pid file left by a daemon that was killed may name
// a pid the kernel has since given to another process, which must not get
// the daemon's SIGTERM.
var autorateMarker = []byte("autorate")

// autorateRuns reports whether pid is a running autorate daemon. When /proc
// cannot tell, a live pid is taken for the daemon: stopping it is what keeps
// it off the qdisc a rollback restores next.
func autorateRuns(pid int) bool {
	if !processRuns(pid) {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ESRCH)
	}
	// An exiting process has no command line left: it runs no code of its
	// own any more.
	return bytes.Contains(cmdline, autorateMarker)
}

// processRuns reports whether pid is a process that has not exited. A
// zombie has (it only waits for its parent to collect it).
func processRuns(pid int) bool {
	if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return false
	}
	if err != nil {
		return true
	}
	// pid (comm) STATE ...: comm may hold spaces and parentheses.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		if s := stat[i+2]; s == 'Z' || s == 'X' {
			return false
		}
	}
	return true
}

// terminate sends pid SIGTERM; a pid already gone is no error.
func terminate(pid int) error {
	if err := unix.Kill(pid, unix.SIGTERM); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	return nil
}
