//go:build linux

package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/lowlat/lowlat/internal/nsthread"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NetnsDir is where named network namespaces are bind-mounted (iproute2's
// convention, so "ip netns exec" works on a running lab). Unit tests point
// it elsewhere; netns.NewNamed always uses /run/netns.
var NetnsDir = nsthread.RunDir

// ErrNameTaken reports that a namespace of the chosen name already exists.
var ErrNameTaken = errors.New("network namespace name already taken")

// NS is one named network namespace of a lab run.
type NS struct {
	Name   string
	handle netns.NsHandle
}

// createNS creates a named namespace. It refuses a name that exists (the
// bind-mount file is created with O_EXCL by netns.NewNamed), so a run never
// adopts, and later deletes, someone else's namespace.
func createNS(name string) (*NS, error) {
	if _, err := os.Lstat(filepath.Join(NetnsDir, name)); err == nil {
		return nil, fmt.Errorf("netns %s: %w (a previous run? 'lowlat lab clean' removes lab leftovers)", name, ErrNameTaken)
	}
	var h netns.NsHandle
	// /run/netns first becomes a mount point, as 'ip netns add' would make
	// it: if that happened later it would strand the lab's namespaces.
	err := nsthread.PrepareRunDir()
	if err == nil {
		err = nsthread.OnNewThread(func() error {
			var err error
			h, err = netns.NewNamed(name)
			return err
		})
	}
	switch {
	case errors.Is(err, unix.EEXIST):
		return nil, fmt.Errorf("netns %s: %w", name, ErrNameTaken)
	case errors.Is(err, unix.EPERM) || errors.Is(err, os.ErrPermission):
		return nil, fmt.Errorf("create netns %s: %w", name, os.ErrPermission)
	case err != nil:
		// NewNamed leaves the mount point behind when the bind mount fails.
		_ = netns.DeleteNamed(name)
		return nil, fmt.Errorf("create netns %s: %w", name, err)
	}
	return &NS{Name: name, handle: h}, nil
}

// Do runs f on a thread inside the namespace. Sockets (netlink included)
// that f creates belong to the namespace; so do files it opens below
// /proc/sys/net. f must not start goroutines that create sockets unless they
// enter the namespace themselves.
func (n *NS) Do(f func() error) error {
	return nsthread.OnNewThread(func() error {
		if err := nsthread.NS(n.handle).Join(); err != nil {
			return fmt.Errorf("netns %s: %w", n.Name, err)
		}
		return f()
	})
}

// close releases the handle and removes the name; the kernel frees the
// namespace, with its veths, ifbs, qdiscs and routes, once nothing holds it.
func (n *NS) close() error {
	if n == nil {
		return nil
	}
	n.handle.Close()
	return deleteNamedNS(n.Name)
}

// deleteNamedNS unmounts and removes /run/netns/name; a name that is gone
// already is not an error.
func deleteNamedNS(name string) error {
	p := filepath.Join(NetnsDir, name)
	if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("delete netns %s: unmount: %w", name, err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete netns %s: %w", name, err)
	}
	return nil
}

// listLabNS returns the names in NetnsDir that start with NSPrefix.
func listLabNS() ([]string, error) {
	ents, err := os.ReadDir(NetnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", NetnsDir, err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), NSPrefix) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
