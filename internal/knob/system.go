package knob

import (
	"path/filepath"
)

// System is where knobs act: the file trees for sysctls, sysfs and config
// files, and the backends for what is not a file. Tests point Root at a
// temporary directory and set the backends to fakes (package knobtest);
// netlink knobs always act on the calling thread's network namespace.
type System struct {
	// Root prefixes every file path ("" = the live host).
	Root string
	// Ethtool answers ethtool knobs. nil: the ioctls on the live host, and
	// ErrNotSupported for a file tree, which has no NICs to ask.
	Ethtool Ethtool
	// Services is the service manager of service, drop-in and irqbalance
	// knobs. nil: systemctl, on the live host only.
	Services Services
}

// Live is the running host.
var Live = &System{}

func (s *System) path(p string) string {
	if s == nil || s.Root == "" {
		return p
	}
	return filepath.Join(s.Root, p)
}
