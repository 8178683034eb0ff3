package knob

import (
	"path/filepath"
)

// System is where knobs act: the file trees for sysctls, sysfs and config
// files. Tests point Root at a temporary directory; netlink knobs always act on
// the calling thread's network namespace.
type System struct {
	// Root prefixes every file path ("" = the live host).
	Root string
}

// Live is the running host.
var Live = &System{}

func (s *System) path(p string) string {
	if s == nil || s.Root == "" {
		return p
	}
	return filepath.Join(s.Root, p)
}
