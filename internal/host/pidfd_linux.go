package host

import (
	"os"

	"golang.org/x/sys/unix"
)

// pidfdWorks tries pidfd_open and pidfd_getfd on this process, which is the
// only reliable answer: seccomp filters in containers and backports make the
// kernel version a guess.
func pidfdWorks() bool {
	pfd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return false
	}
	defer unix.Close(pfd)
	// Duplicating our own fd needs no privilege (same process).
	fd, err := unix.PidfdGetfd(pfd, pfd, 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}
