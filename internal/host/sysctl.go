package host

import (
	"errors"
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"
)

// extraSysctls are the non-net sysctls profiles and doctor look at.
var extraSysctls = []string{
	"fs.file-max",
	"fs.nr_open",
	"kernel.numa_balancing",
	"kernel.osrelease",
	"kernel.timer_migration",
	"vm.swappiness",
	"vm.zone_reclaim_mode",
}

// secretSysctls hold key material: they are never read, so they cannot end up
// in a capture a user sends to someone else.
var secretSysctls = map[string]bool{
	"tcp_fastopen_key": true,
	"stable_secret":    true,
	"netdev_rss_key":   true,
}

// SysctlPath maps a sysctl name to its /proc/sys path. Dots separate levels;
// a '/' in a name stands for a dot inside one level (an interface called
// "eth0.100" appears as net.ipv4.conf.eth0/100.rp_filter), as in sysctl(8).
func SysctlPath(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(p, "/", ".")
	}
	return "/proc/sys/" + strings.Join(parts, "/")
}

func (rd *fileReader) extraSysctls() {
	for _, name := range extraSysctls {
		read := rd.readOpt
		if name == "kernel.osrelease" {
			// Every kernel has it: its absence is a fact lost.
			read = func(p string, _ ...syscall.Errno) ([]byte, bool) { return rd.read(p) }
		}
		if b, ok := read(SysctlPath(name)); ok {
			rd.f.Sysctls[name] = trimValue(b)
		}
	}
}

// netSysctlDirs are the /proc/sys/net directories every kernel with TCP/IP
// has, in every network namespace: a tree without them lost them.
var netSysctlDirs = []string{"core", "ipv4"}

// SysctlError returns the recorded read error that explains why sysctl
// name is not in f, as "SOURCE: ERROR", or "" when nothing kept it from
// being read (the kernel does not have it). Only an error on the sysctl's
// own path or a directory above it counts (ErrorAt): a kernel/osrelease
// that could not be read says nothing about net.core.somaxconn.
func SysctlError(f *Facts, name string) string { return f.ErrorAt(SysctlPath(name)) }

// walkSysctls reads every readable file below dir. Write-only entries (route
// flush), entries whose read fails by design (EIO, EINVAL) and secrets are
// skipped without a record; only a permission error on a file meant to be
// readable is recorded, since it hides a real value.
func (rd *fileReader) walkSysctls(dir, name string) {
	rdir, ents, err := rd.r.readDirResolved(dir)
	if err != nil {
		if dir == "/proc/sys/net" || !isNotExist(err) {
			rd.fail(dir, err)
		}
		return
	}
	if dir == "/proc/sys/net" {
		for _, sub := range netSysctlDirs {
			if !slices.ContainsFunc(ents, func(e fs.DirEntry) bool { return e.Name() == sub && e.IsDir() }) {
				rd.fail(path.Join(dir, sub), errNotExist)
			}
		}
	}
	for _, e := range ents {
		n := e.Name()
		child := name + "." + strings.ReplaceAll(n, ".", "/")
		switch {
		case e.IsDir():
			rd.walkSysctls(path.Join(dir, n), child)
			continue
		case !e.Type().IsRegular() || secretSysctls[n]:
			continue
		}
		b, err := rd.r.readAt(rdir, n)
		if err != nil {
			if errors.Is(err, fs.ErrPermission) && readableMode(rd.r, path.Join(dir, n)) {
				rd.failGroup("/proc/sys/net/**", err)
			}
			continue
		}
		rd.f.Sysctls[child] = trimValue(b)
		if info, err := e.Info(); err == nil && info.Mode().Perm()&0o222 == 0 {
			rd.f.ReadOnlySysctls = append(rd.f.ReadOnlySysctls, child)
		}
	}
}

// readableMode reports whether a sysctl file's mode grants read to someone, to
// tell "denied to us" from "write-only by design".
func readableMode(r Root, p string) bool {
	fi, err := r.Stat(p)
	return err == nil && fi.Mode().Perm()&0o444 != 0
}
