//go:build linux

package autorate

import "golang.org/x/sys/unix"

// alive reports whether a process with this pid exists.
func alive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || err == unix.EPERM
}
