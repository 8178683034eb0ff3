//go:build !linux

package host

// liveReaders has nothing to offer off Linux: facts come from files only.
func liveReaders() (Netlink, Ethtooler) { return nil, nil }

func netnsKind() string { return "" }
