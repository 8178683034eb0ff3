//go:build linux

package cli

import (
	"fmt"
	"os"
	"syscall"
)

// replaceable says why the file at path, in dir, could not be replaced by
// a rename from this process, or nil: in a sticky directory only the
// file's owner, the directory's owner and root (CAP_FOWNER) may.
func replaceable(path, dir string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil // nothing to replace
	}
	di, err := os.Stat(dir)
	if err != nil || di.Mode()&os.ModeSticky == 0 {
		return nil
	}
	uid := os.Geteuid()
	fs, ok1 := fi.Sys().(*syscall.Stat_t)
	ds, ok2 := di.Sys().(*syscall.Stat_t)
	if uid == 0 || !ok1 || !ok2 || int(fs.Uid) == uid || int(ds.Uid) == uid {
		return nil
	}
	return fmt.Errorf("exists in the sticky directory %s and belongs to uid %d: it cannot be replaced (remove it, or choose another path)", dir, fs.Uid)
}
