//go:build linux

package host

import (
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// liveReaders returns the rtnetlink and ethtool readers of the running host.
func liveReaders() (Netlink, Ethtooler) { return NewLiveNetlink(), NewLiveEthtool() }

// netnsKind compares our network namespace with init's (pid 1). Reading pid
// 1's namespace link needs privilege; without it the answer is unknown ("").
func netnsKind() string {
	// thread-self: the lab gathers on a thread it moved into a namespace.
	self, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		return ""
	}
	init, err := os.Readlink("/proc/1/ns/net")
	if err != nil {
		return ""
	}
	if self == init {
		return "init"
	}
	return "other"
}

// callerNetns returns a function that moves the goroutine it runs on into the
// network namespace of the calling thread, locking it to its thread for good
// (the runtime discards the thread when the goroutine ends, so the namespace
// never leaks to other goroutines). When the caller is in the process's own
// namespace it does nothing.
func callerNetns() func() {
	self, err1 := os.Readlink("/proc/self/ns/net")
	mine, err2 := os.Readlink("/proc/thread-self/ns/net")
	if err1 != nil || err2 != nil || self == mine {
		return func() {}
	}
	fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return func() {}
	}
	return func() {
		defer unix.Close(fd)
		runtime.LockOSThread()
		unix.Setns(fd, unix.CLONE_NEWNET)
	}
}
