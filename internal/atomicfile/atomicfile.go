// Package atomicfile writes files so that a crash or a full disk leaves
// either the old content or the new, never a mix, and the change survives
// a power cut: the journal, the files knobs own and the results the CLI
// writes all depend on that.
package atomicfile

import (
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Write writes data to path via a temporary file in the same directory,
// fsyncs it, renames it into place and fsyncs the directory.
func Write(path string, data []byte, perm os.FileMode) error {
	return WriteOwned(path, data, perm, -1, -1)
}

// WriteOwned is Write giving the file an owner and group too (-1 leaves
// that id as the writer's). The temporary file gets its mode and owner
// before the rename, so path never exists with the wrong ones.
func WriteOwned(path string, data []byte, perm os.FileMode, uid, gid int) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if uid >= 0 || gid >= 0 {
		if err := f.Chown(uid, gid); err != nil {
			f.Close()
			return err
		}
	}
	// After the chown, which clears set-user-id and set-group-id bits.
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(dir)
}

// SyncDir makes a directory's entries (a create, rename or unlink) durable.
// Filesystems that cannot sync a directory say EINVAL, which is not an error.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, unix.EINVAL) {
		return err
	}
	return nil
}
