package sockops

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// bpffsDefault is where bpffs is mounted when nothing has mounted it yet
// (systemd mounts it there on boot; minimal systems may not).
const bpffsDefault = "/sys/fs/bpf"

// bpffs returns bpffs's mount point as this process reaches it, "" when
// nothing has mounted it.
func bpffs() (string, error) { return hostMount("bpf") }

// BPFFSToMount says where bpffs must be mounted before lowlat can pin
// anything: "" when it is mounted already (in this mount namespace or the
// host's), /sys/fs/bpf when nothing has mounted it. A mount is a change
// like any other: the plan makes it a knob, so it is journaled and a
// rollback undoes it. It returns an error when lowlat must not mount it
// here: in a private mount namespace the pins would vanish with the
// namespace, and the program with them.
func BPFFSToMount() (string, error) {
	dir, err := bpffs()
	if err != nil || dir != "" {
		return "", err
	}
	if privateMountNS() {
		return "", fmt.Errorf("bpffs is not mounted on this host, and a mount in this private mount namespace (ip netns exec?) would take lowlat's pins with it: mount it first (mount -t bpf bpf %s): %w", bpffsDefault, ErrUnsupported)
	}
	return bpffsDefault, nil
}

// privateMountNS is ownMountNS; a test build can say this process's mount
// namespace is the host's (LOWLAT_TEST_HOST_MOUNTNS), so a test can mount
// and unmount bpffs in a namespace of its own instead of the machine's.
var privateMountNS = ownMountNS

// BPFFSMounted reports whether a bpffs is mounted on dir itself and shows
// there: a directory inside a bpffs is not a mount of one, nor is a bpffs
// covered by a later mount (the host's /sys/fs/bpf under a namespace's own
// /sys, which the mount table still lists).
func BPFFSMounted(dir string) (bool, error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("bpffs %s: statfs: %w", dir, err)
	}
	if fs.Type != unix.BPF_FS_MAGIC {
		return false, nil
	}
	var st, up unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return false, fmt.Errorf("bpffs %s: stat: %w", dir, err)
	}
	if err := unix.Stat(filepath.Dir(dir), &up); err != nil {
		return false, fmt.Errorf("bpffs %s: stat its parent: %w", dir, err)
	}
	return st.Dev != up.Dev, nil
}

// MountBPFFS mounts a bpffs on dir, readable by root only (mode 0700, as
// systemd mounts it), unless one is mounted there already.
func MountBPFFS(dir string) error {
	if on, err := BPFFSMounted(dir); err != nil || on {
		return err
	}
	if privateMountNS() {
		return fmt.Errorf("mount bpffs on %s: this is a private mount namespace (ip netns exec?), and the mount would vanish with it, lowlat's pins with it: %w", dir, ErrUnsupported)
	}
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		return fmt.Errorf("mount bpffs on %s: %w", dir, err)
	}
	return nil
}

// ErrPinned marks a bpffs that holds pins: it is not unmounted.
var ErrPinned = errors.New("holds pins")

// preloaded are the iterators a kernel with CONFIG_BPF_PRELOAD (5.10) puts
// in every bpffs it mounts: the kernel's own, they go with the mount.
var preloaded = map[string]bool{"maps.debug": true, "progs.debug": true}

// BPFFSHeld says why the bpffs mounted on dir must stay mounted: an error
// wrapping ErrPinned that names what is pinned at its top (but the
// kernel's own), which would be lost with it, and the programs attached
// through it. Nothing mounted there, or nothing pinned, is nil.
func BPFFSHeld(dir string) error {
	on, err := BPFFSMounted(dir)
	if err != nil || !on {
		return err
	}
	return held(dir)
}

// held is BPFFSHeld for a dir known to hold a bpffs.
func held(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("bpffs %s: %w", dir, err)
	}
	var pins []string
	for _, e := range ents {
		if !preloaded[e.Name()] {
			pins = append(pins, e.Name())
		}
	}
	if len(pins) > 0 {
		sort.Strings(pins)
		return fmt.Errorf("bpffs on %s %w (%s): left mounted", dir, ErrPinned, strings.Join(pins, ", "))
	}
	return nil
}

// UnmountBPFFS unmounts the bpffs on dir, only when nothing is pinned
// there (BPFFSHeld): a bpffs holding pins (someone else's, made since
// lowlat mounted it) stays mounted, and the error says why. Nothing
// mounted there is not an error.
func UnmountBPFFS(dir string) error {
	on, err := BPFFSMounted(dir)
	if err != nil || !on {
		return err
	}
	if err := held(dir); err != nil {
		return err
	}
	if err := unix.Unmount(dir, 0); err != nil {
		return fmt.Errorf("unmount bpffs on %s: %w", dir, err)
	}
	return nil
}
