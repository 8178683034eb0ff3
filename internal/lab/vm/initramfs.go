package vm

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// initramfs collects the guest's root filesystem before it is written as a
// newc cpio. The guest uses the merged-/usr layout of current Debian: /bin,
// /sbin, /lib and /lib64 are symlinks into /usr, and every path added is
// stored under its /usr form, so "/sbin/tc" and "/usr/sbin/tc" are one file,
// as on the host.
type initramfs struct {
	entries map[string]*irEntry // canonical path, no leading slash
}

type irEntry struct {
	mode         fs.FileMode // type bits and permissions
	src          string      // host file to copy (regular files)
	data         []byte      // contents when src is empty
	target       string      // symlink target
	major, minor uint32      // device nodes
	busybox      bool        // a busybox applet link, which real programs replace
}

// mergedUsr are the top-level directories that are symlinks into /usr.
var mergedUsr = []string{"bin", "sbin", "lib", "lib64"}

func newInitramfs() *initramfs {
	ir := &initramfs{entries: map[string]*irEntry{}}
	for _, d := range mergedUsr {
		ir.entries["usr/"+d] = &irEntry{mode: fs.ModeDir | 0o755}
		ir.entries[d] = &irEntry{mode: fs.ModeSymlink | 0o777, target: "usr/" + d}
	}
	for _, d := range []string{"dev", "proc", "sys", "tmp", "run", "root", "etc", "out", "var", "mnt"} {
		ir.dir("/" + d)
	}
	ir.entries["tmp"].mode = fs.ModeDir | fs.ModeSticky | 0o777
	ir.entries["root"].mode = fs.ModeDir | 0o700
	ir.entries["var/tmp"] = &irEntry{mode: fs.ModeSymlink | 0o777, target: "/tmp"}
	// As on Debian: netns.NewNamed and "ip netns" bind-mount under /var/run/netns.
	ir.entries["var/run"] = &irEntry{mode: fs.ModeSymlink | 0o777, target: "/run"}
	ir.entries["var/lock"] = &irEntry{mode: fs.ModeSymlink | 0o777, target: "/run/lock"}
	// The kernel opens /dev/console for init's stdio before /init can mount
	// devtmpfs, so the node must be in the archive.
	ir.entries["dev/console"] = &irEntry{mode: fs.ModeDevice | fs.ModeCharDevice | 0o600, major: 5, minor: 1}
	ir.entries["dev/null"] = &irEntry{mode: fs.ModeDevice | fs.ModeCharDevice | 0o666, major: 1, minor: 3}
	return ir
}

// canonicalPath cleans an absolute guest path and rewrites it to its merged-
// /usr form without the leading slash: "/sbin/ip" -> "usr/sbin/ip".
func canonicalPath(p string) (string, error) {
	if !path.IsAbs(p) {
		return "", fmt.Errorf("guest path %q is not absolute", p)
	}
	c := strings.TrimPrefix(path.Clean(p), "/")
	if c == "" {
		return "", fmt.Errorf("guest path %q names the root", p)
	}
	first, _, _ := strings.Cut(c, "/")
	for _, d := range mergedUsr {
		if first == d {
			return "usr/" + c, nil
		}
	}
	return c, nil
}

func (ir *initramfs) put(p string, e *irEntry) error {
	c, err := canonicalPath(p)
	if err != nil {
		return err
	}
	if old, ok := ir.entries[c]; ok && old.mode.IsDir() && e.mode.IsDir() {
		return nil
	}
	for d := path.Dir(c); d != "."; d = path.Dir(d) {
		if old, ok := ir.entries[d]; ok {
			if old.mode&fs.ModeSymlink != 0 {
				return fmt.Errorf("guest path %s: %s is a symlink", p, d)
			}
			if !old.mode.IsDir() {
				return fmt.Errorf("guest path %s: %s is not a directory", p, d)
			}
			continue
		}
		ir.entries[d] = &irEntry{mode: fs.ModeDir | 0o755}
	}
	ir.entries[c] = e
	return nil
}

func (ir *initramfs) dir(p string) error {
	return ir.put(p, &irEntry{mode: fs.ModeDir | 0o755})
}

func (ir *initramfs) data(p string, b []byte, perm fs.FileMode) error {
	return ir.put(p, &irEntry{mode: perm.Perm(), data: b})
}

func (ir *initramfs) symlink(p, target string) error {
	return ir.put(p, &irEntry{mode: fs.ModeSymlink | 0o777, target: target})
}

// hostFile copies the host file src (following symlinks) to guest path p.
func (ir *initramfs) hostFile(p, src string, perm fs.FileMode) error {
	st, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("initramfs %s: %w", p, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("initramfs %s: %s is not a regular file", p, src)
	}
	if perm == 0 {
		perm = st.Mode().Perm()
	}
	return ir.put(p, &irEntry{mode: perm.Perm(), src: src})
}

// hostTree copies a host file or directory tree to guest path p, keeping
// symlinks inside the tree as symlinks.
func (ir *initramfs) hostTree(p, src string) error {
	st, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("initramfs %s: %w", p, err)
	}
	if !st.IsDir() {
		return ir.hostFile(p, src, 0)
	}
	return filepath.WalkDir(src, func(hp string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, hp)
		if err != nil {
			return err
		}
		gp := path.Join(p, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			return ir.dir(gp)
		case d.Type()&fs.ModeSymlink != 0:
			t, err := os.Readlink(hp)
			if err != nil {
				return err
			}
			return ir.symlink(gp, t)
		case d.Type().IsRegular():
			return ir.hostFile(gp, hp, 0)
		default:
			return nil // sockets, fifos, devices: not copied
		}
	})
}

// hostBinary copies a host program to the same guest path together with its
// ELF interpreter and shared libraries.
func (ir *initramfs) hostBinary(p string, libs *libResolver) error {
	if err := ir.hostFile(p, p, 0); err != nil {
		return err
	}
	deps, err := libs.resolve(p)
	if err != nil {
		return fmt.Errorf("host binary %s: %w", p, err)
	}
	for _, d := range deps {
		if err := ir.hostFile(d, libs.hostFile(d), 0o755); err != nil {
			return fmt.Errorf("host binary %s: %w", p, err)
		}
	}
	return nil
}

// busyboxApplets lists a busybox binary's applets with their install paths
// ("sbin/ip", "bin/sh"…).
func busyboxApplets(bin string) ([]string, error) {
	out, err := exec.Command(bin, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("busybox %s --list-full: %w", bin, err)
	}
	var applets []string
	for _, line := range strings.Split(string(out), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			applets = append(applets, line)
		}
	}
	return applets, nil
}

// busybox installs the busybox binary at /usr/bin/busybox and a link for each
// applet that no real program already provides: a busybox "ip" must not
// shadow iproute2's on PATH.
func (ir *initramfs) busybox(bin string, applets []string, libs *libResolver) error {
	if err := ir.hostFile("/usr/bin/busybox", bin, 0o755); err != nil {
		return err
	}
	if static, err := isStaticELF(bin); err != nil {
		return err
	} else if !static {
		deps, err := libs.resolve(bin)
		if err != nil {
			return fmt.Errorf("busybox: %w", err)
		}
		for _, d := range deps {
			if err := ir.hostFile(d, libs.hostFile(d), 0o755); err != nil {
				return err
			}
		}
	}
	real := map[string]bool{}
	for p, e := range ir.entries {
		if e.mode.IsRegular() && isPathDir(path.Dir(p)) {
			real[path.Base(p)] = true
		}
	}
	for _, line := range applets {
		if real[path.Base(line)] {
			continue
		}
		c, err := canonicalPath("/" + line)
		if err != nil {
			continue
		}
		if _, taken := ir.entries[c]; taken {
			continue
		}
		if err := ir.put("/"+line, &irEntry{mode: fs.ModeSymlink | 0o777, target: "/usr/bin/busybox", busybox: true}); err != nil {
			return err
		}
	}
	return nil
}

// guestPATH is the PATH the guest command gets.
const guestPATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func isPathDir(canonDir string) bool {
	switch canonDir {
	case "usr/local/sbin", "usr/local/bin", "usr/sbin", "usr/bin":
		return true
	}
	return false
}

// lookPath finds a command name on the guest PATH and returns its absolute
// path if it is a real program (not a busybox applet link), or "".
func (ir *initramfs) lookPath(name string) string {
	for _, d := range []string{"usr/local/sbin", "usr/local/bin", "usr/sbin", "usr/bin"} {
		e, ok := ir.entries[d+"/"+name]
		if !ok {
			continue
		}
		if e.busybox {
			return ""
		}
		return "/" + d + "/" + name
	}
	return ""
}

// writeTo writes the archive, parents before children.
func (ir *initramfs) writeTo(w io.Writer) error {
	names := make([]string, 0, len(ir.entries))
	for n := range ir.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	cw := newCPIOWriter(w)
	for _, n := range names {
		e := ir.entries[n]
		var err error
		switch {
		case e.mode.IsDir():
			err = cw.Dir(n, e.mode&(fs.ModePerm|fs.ModeSticky))
		case e.mode&fs.ModeSymlink != 0:
			err = cw.Symlink(n, e.target)
		case e.mode&fs.ModeDevice != 0:
			err = cw.Device(n, e.mode, e.major, e.minor)
		case e.src != "":
			err = copyHostFile(cw, n, e)
		default:
			err = cw.File(n, e.mode, int64(len(e.data)), bytes.NewReader(e.data))
		}
		if err != nil {
			return err
		}
	}
	return cw.Close()
}

func copyHostFile(cw *cpioWriter, name string, e *irEntry) error {
	f, err := os.Open(e.src)
	if err != nil {
		return fmt.Errorf("initramfs %s: %w", name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("initramfs %s: %w", name, err)
	}
	return cw.File(name, e.mode, st.Size(), f)
}
