//go:build linux

package host

import "os"

// liveReaders returns the rtnetlink and ethtool readers of the running host.
func liveReaders() (Netlink, Ethtooler) { return NewLiveNetlink(), LiveEthtool{} }

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
