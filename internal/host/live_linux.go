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

// processNetns is the network namespace the process started in, read during
// package initialisation (on the main thread, before any goroutine could have
// moved a thread elsewhere). /proc/self/ns/net is no reference: it shows the
// thread group leader's namespace, and a goroutine locked to the main thread
// may have moved it.
var processNetns, _ = os.Readlink("/proc/thread-self/ns/net")

// callerNetns returns a function that moves the goroutine it runs on into the
// network namespace of the calling thread, locking it to its thread for good
// (the runtime discards the thread when the goroutine ends, so the namespace
// never leaks to other goroutines). When the caller is in the process's own
// namespace it does nothing.
func callerNetns() func() {
	mine, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil || processNetns == "" || mine == processNetns {
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
