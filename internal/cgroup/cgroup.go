// Package cgroup holds the kernel's control groups as lowlat reads and uses
// them: which hierarchies are mounted where (/proc/self/mountinfo), which
// cgroups a process is in (/proc/PID/cgroup), and cgroups of lowlat's own at
// the root of a hierarchy, for a process that must outlive the session or
// service that started it (the dead-man watchdog of apply --confirm: a
// service manager ends a session or a service by killing every process in
// its cgroup).
//
// The parsers are pure; everything else reads and writes below a root
// directory (FS.Root), so that a fixture tree stands in for the host.
package cgroup

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Mount is one mount of a cgroup hierarchy, as mountinfo(5) lists it.
type Mount struct {
	// Dir is where it is mounted.
	Dir string
	// Root is the directory of the hierarchy mounted there: "/" for its
	// root, else a cgroup bound on Dir (a container's own, seen from
	// outside its cgroup namespace).
	Root string
	// Version is 2 for the unified hierarchy (cgroup2), 1 for the others.
	Version int
	// Controllers are a v1 hierarchy's controllers and its name=
	// ("cpu", "cpuacct"; "name=systemd"), sorted: they identify the
	// hierarchy. Empty for v2.
	Controllers []string
}

// Hierarchy names the hierarchy: "cgroup2", or a v1 one's controllers
// joined with commas, as /proc/PID/cgroup writes them ("cpu,cpuacct",
// "name=systemd").
func (m Mount) Hierarchy() string {
	if m.Version == 2 {
		return "cgroup2"
	}
	return strings.Join(m.Controllers, ",")
}

// v1Options are a cgroup v1 mount's super options that are not a
// controller or a name.
var v1Options = map[string]bool{"rw": true, "ro": true, "noprefix": true, "clone_children": true, "xattr": true, "cpuset_v2_mode": true, "all": true, "none": true, "favordynmods": true}

// ParseMountinfo returns the cgroup mounts of a mountinfo(5) file, in its
// order (a later one may cover an earlier one).
func ParseMountinfo(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 1 {
			continue
		}
		m := Mount{Root: unescape(pf[3]), Dir: unescape(pf[4])}
		switch qf[0] {
		case "cgroup2":
			m.Version = 2
		case "cgroup":
			m.Version = 1
			if len(qf) < 3 {
				continue
			}
			for _, o := range strings.Split(qf[2], ",") {
				if !v1Options[o] && !strings.HasPrefix(o, "release_agent=") {
					m.Controllers = append(m.Controllers, o)
				}
			}
			slices.Sort(m.Controllers)
		default:
			continue
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// unescape undoes mountinfo's octal escapes of space, tab, newline and
// backslash (\040, \011, \012, \134).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Membership is one line of /proc/PID/cgroup: the process's cgroup in one
// hierarchy.
type Membership struct {
	// ID is the hierarchy's id (0 for cgroup v2).
	ID int
	// Hierarchy is "cgroup2" for the unified hierarchy (the "0::" line),
	// else a v1 hierarchy's controllers as the kernel lists them
	// ("cpu,cpuacct", "name=systemd").
	Hierarchy string
	// Path is the cgroup, from the hierarchy's root as this process's
	// cgroup namespace sees it ("/user.slice/user-1000.slice/session-4.scope").
	Path string
}

// ParseProcCgroup reads a /proc/PID/cgroup file (cgroups(7)).
func ParseProcCgroup(r io.Reader) ([]Membership, error) {
	var out []Membership
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		id, rest, ok1 := strings.Cut(line, ":")
		ctrl, path, ok2 := strings.Cut(rest, ":")
		n, err := strconv.Atoi(id)
		if !ok1 || !ok2 || err != nil {
			return nil, fmt.Errorf("cgroup line %q: want ID:CONTROLLERS:PATH", line)
		}
		m := Membership{ID: n, Hierarchy: ctrl, Path: path}
		if n == 0 && ctrl == "" {
			m.Hierarchy = "cgroup2"
		} else {
			parts := strings.Split(ctrl, ",")
			slices.Sort(parts)
			m.Hierarchy = strings.Join(parts, ",")
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// In returns the path of the cgroup a process is in in hierarchy h
// (Mount.Hierarchy), and whether it is listed there.
func In(ms []Membership, h string) (string, bool) {
	for _, m := range ms {
		if m.Hierarchy == h {
			return m.Path, true
		}
	}
	return "", false
}

// Main is the process's cgroup as a service manager tracks it: the
// cgroup v2 path where there is one, else the name=systemd hierarchy's,
// else the first listed ("" with none).
func Main(ms []Membership) string {
	for _, h := range []string{"cgroup2", "name=systemd"} {
		if p, ok := In(ms, h); ok {
			return p
		}
	}
	if len(ms) > 0 {
		return ms[0].Path
	}
	return ""
}
