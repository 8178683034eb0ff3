//go:build linux

package host

// liveReaders returns the rtnetlink and ethtool readers of the running host.
func liveReaders() (Netlink, Ethtooler) { return NewLiveNetlink(), NewLiveEthtool() }
