//go:build linux

package nsthread

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// threadPath is the calling thread's network namespace link. /proc/thread-self
// arrived in 3.17; the task path works on every kernel lowlat supports (3.10).
// /proc/self/ns/net would be wrong: it is the thread group leader's, and the
// leader may be a thread some goroutine moved elsewhere.
func threadPath() string {
	const self = "/proc/thread-self/ns/net"
	if _, err := os.Lstat(self); err == nil {
		return self
	}
	return fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
}

// Current opens the calling thread's network namespace, so goroutines the
// caller starts can Join it. The caller closes it.
func Current() (NS, error) {
	p := threadPath()
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open own network namespace %s: %w", p, err)
	}
	return NS(fd), nil
}

// Close releases the namespace's file descriptor.
func (ns NS) Close() error {
	if err := unix.Close(int(ns)); err != nil {
		return fmt.Errorf("close network namespace: %w", err)
	}
	return nil
}

// Join moves the calling goroutine's thread into ns and locks the goroutine to
// it for good, so the thread is discarded when the goroutine ends. A thread
// already in ns is left alone and the goroutine stays free to move between
// threads (no setns(2), which would need CAP_SYS_ADMIN even to stay put). On
// error the thread has not moved and the goroutine is not locked.
func (ns NS) Join() error {
	runtime.LockOSThread()
	same, err := ns.isCurrent()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("join network namespace: %w", err)
	}
	if same {
		runtime.UnlockOSThread()
		return nil
	}
	if err := unix.Setns(int(ns), unix.CLONE_NEWNET); err != nil {
		// setns(2) changes nothing when it fails: the thread may go back
		// to the pool.
		runtime.UnlockOSThread()
		return fmt.Errorf("join network namespace: setns: %w", err)
	}
	return nil
}

// isCurrent reports whether the calling thread is in ns (namespaces are the
// same when their nsfs inodes are).
func (ns NS) isCurrent() (bool, error) {
	var want, have unix.Stat_t
	if err := unix.Fstat(int(ns), &want); err != nil {
		return false, fmt.Errorf("fstat namespace fd %d: %w", int(ns), err)
	}
	p := threadPath()
	if err := unix.Stat(p, &have); err != nil {
		return false, fmt.Errorf("stat %s: %w", p, err)
	}
	return want.Dev == have.Dev && want.Ino == have.Ino, nil
}

// RunDir is where named network namespaces are bind-mounted (iproute2's
// NETNS_RUN_DIR).
const RunDir = "/run/netns"

// PrepareRunDir makes RunDir a shared mount point, as 'ip netns add' does
// the first time it runs on a machine. It must happen before the first
// namespace is named there: if 'ip netns add' did it later, its bind mount
// of RunDir onto itself would cover the namespaces already mounted below,
// and those could never be deleted (unlink fails with EBUSY) until the
// cover is unmounted by hand.
func PrepareRunDir() error {
	if err := os.MkdirAll(RunDir, 0o755); err != nil {
		return fmt.Errorf("prepare %s: %w", RunDir, err)
	}
	err := unix.Mount("", RunDir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if err == nil {
		return nil
	}
	if err != unix.EINVAL {
		return fmt.Errorf("prepare %s: make shared: %w", RunDir, err)
	}
	// Not a mount point yet: bind it onto itself first.
	if err := unix.Mount(RunDir, RunDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("prepare %s: bind: %w", RunDir, err)
	}
	if err := unix.Mount("", RunDir, "none", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("prepare %s: make shared: %w", RunDir, err)
	}
	return nil
}
