package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// FS is the host's cgroups as seen below Root ("" is the live host): the
// mount table and each process's cgroups from Root/proc, the hierarchies
// at Root plus where the table says they are mounted. A fixture tree with
// a proc/self/mountinfo and the cgroup directories it names stands in for
// the host in tests.
type FS struct {
	Root string
}

func (fs FS) path(p string) string {
	if fs.Root == "" {
		return p
	}
	return filepath.Join(fs.Root, p)
}

// ErrNoHierarchy is the error of a host where no cgroup hierarchy root is
// mounted in reach (none mounted, or only a container's own cgroup bound
// where the hierarchy's root would be).
var ErrNoHierarchy = errors.New("no cgroup hierarchy's root is mounted here")

// ErrPopulated is the error of a cgroup that should be empty but holds a
// process.
var ErrPopulated = errors.New("a process is already in it")

// Mounts returns the cgroup mounts of this process's mount namespace.
func (fs FS) Mounts() ([]Mount, error) {
	p := fs.path("/proc/self/mountinfo")
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("cgroup mounts: %w", err)
	}
	defer f.Close()
	ms, err := ParseMountinfo(f)
	if err != nil {
		return nil, fmt.Errorf("cgroup mounts: read %s: %w", p, err)
	}
	return ms, nil
}

// Of returns the cgroups process pid is in (0: this process).
func (fs FS) Of(pid int) ([]Membership, error) {
	who := "self"
	if pid != 0 {
		who = strconv.Itoa(pid)
	}
	p := fs.path("/proc/" + who + "/cgroup")
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("cgroups of process %s: %w", who, err)
	}
	ms, err := ParseProcCgroup(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("cgroups of process %s: %s: %w", who, p, err)
	}
	return ms, nil
}

// Hierarchies returns the hierarchies a cgroup of lowlat's own goes in:
// the unified one (cgroup v2) wherever it is mounted, alone or beside v1
// hierarchies (systemd's "hybrid" layout, where systemd and other service
// managers track processes in the unified one); else every v1 hierarchy,
// as a v1 service manager may track and kill in any of them. Each is its
// last listed mount of the hierarchy's root ("/") whose directory shows a
// cgroup.procs here: an earlier mount may be covered by a later one (a
// namespace's own /sys over the host's).
func (fs FS) Hierarchies() ([]Mount, error) {
	all, err := fs.Mounts()
	if err != nil {
		return nil, err
	}
	last := map[string]Mount{}
	var order []string
	var bound []string
	for _, m := range all {
		if m.Root != "/" {
			bound = append(bound, fmt.Sprintf("%s from %s", m.Hierarchy(), m.Root))
			continue
		}
		if _, err := os.Stat(fs.path(filepath.Join(m.Dir, "cgroup.procs"))); err != nil {
			continue
		}
		h := m.Hierarchy()
		if _, seen := last[h]; !seen {
			order = append(order, h)
		}
		last[h] = m
	}
	if v2, ok := last["cgroup2"]; ok {
		return []Mount{v2}, nil
	}
	var out []Mount
	for _, h := range order {
		out = append(out, last[h])
	}
	if len(out) == 0 {
		if len(bound) > 0 {
			return nil, fmt.Errorf("%w (mounted only below their roots: %s)", ErrNoHierarchy, strings.Join(bound, ", "))
		}
		return nil, ErrNoHierarchy
	}
	return out, nil
}

// Own is a cgroup of lowlat's own: Name at the root of each of Mounts.
type Own struct {
	fs     FS
	Name   string
	Mounts []Mount
}

// Own returns the cgroup name at the root of each hierarchy it goes in
// (Hierarchies), without creating it.
func (fs FS) Own(name string) (*Own, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00\n") {
		return nil, fmt.Errorf("cgroup name %q: want one path element", name)
	}
	hs, err := fs.Hierarchies()
	if err != nil {
		return nil, err
	}
	return &Own{fs: fs, Name: name, Mounts: hs}, nil
}

// Path is the cgroup's path from the root of each of its hierarchies.
func (o *Own) Path() string { return "/" + o.Name }

func (o *Own) dir(m Mount) string { return o.fs.path(filepath.Join(m.Dir, o.Name)) }

// Create makes the cgroup in every hierarchy. One that already exists is
// taken as it is when it is empty (a process of its own that was killed
// left it), and refused with ErrPopulated when a process is in it.
func (o *Own) Create() error {
	for _, m := range o.Mounts {
		dir := o.dir(m)
		err := os.Mkdir(dir, 0o755)
		if errors.Is(err, os.ErrExist) {
			pids, perr := readProcs(dir)
			if perr != nil {
				return fmt.Errorf("cgroup %s: exists, and %w", dir, perr)
			}
			if len(pids) > 0 {
				return fmt.Errorf("cgroup %s: %w (pid %s)", dir, ErrPopulated, strings.Join(pids, ", "))
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("cgroup %s: create: %w", dir, err)
		}
		if err := initCpuset(m, o.fs.path(m.Dir), dir); err != nil {
			return err
		}
	}
	return nil
}

// initCpuset gives a new v1 cpuset cgroup its parent's CPUs and memory
// nodes: it starts with none, and the kernel refuses to move a process
// into it until it has some.
func initCpuset(m Mount, parent, dir string) error {
	if m.Version != 1 || !slices.Contains(m.Controllers, "cpuset") {
		return nil
	}
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		b, err := os.ReadFile(filepath.Join(parent, f))
		if err != nil {
			return fmt.Errorf("cgroup %s: read %s: %w", parent, f, err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return fmt.Errorf("cgroup %s: write %s %q: %w", dir, f, strings.TrimSpace(string(b)), err)
		}
	}
	return nil
}

// Attach moves process pid into the cgroup in every hierarchy, and checks
// that the kernel lists it there. A cgroup removed meanwhile (another
// lowlat's Sweep took it for a leftover) is made again.
func (o *Own) Attach(pid int) error {
	for _, m := range o.Mounts {
		dir := o.dir(m)
		err := writeProcs(dir, pid)
		if errors.Is(err, os.ErrNotExist) {
			if err = os.Mkdir(dir, 0o755); err == nil {
				if err = initCpuset(m, o.fs.path(m.Dir), dir); err == nil {
					err = writeProcs(dir, pid)
				}
			}
		}
		if err != nil {
			return err
		}
		pids, err := readProcs(dir)
		if err != nil {
			return err
		}
		if !slices.Contains(pids, strconv.Itoa(pid)) {
			return fmt.Errorf("cgroup %s: pid %d was moved there but is not listed in cgroup.procs", dir, pid)
		}
	}
	return nil
}

// Remove deletes the cgroup from every hierarchy; the kernel refuses
// (EBUSY) while a process is in it. Missing ones are not an error.
func (o *Own) Remove() error {
	var errs []error
	for _, m := range o.Mounts {
		if err := os.Remove(o.dir(m)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("cgroup %s: remove: %w", o.dir(m), err))
		}
	}
	return errors.Join(errs...)
}

// Leave moves process pid out of the cgroup name, to the root of each
// hierarchy where it is in it, and removes the cgroup there: what a
// process of its own does just before it exits, so that nothing is left
// behind. A process that is not in it changes nothing.
func (fs FS) Leave(name string, pid int) error {
	o, err := fs.Own(name)
	if err != nil {
		return err
	}
	ms, err := fs.Of(pid)
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range o.Mounts {
		if p, ok := In(ms, m.Hierarchy()); !ok || p != o.Path() {
			continue
		}
		if err := writeProcs(fs.path(m.Dir), pid); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.Remove(o.dir(m)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("cgroup %s: remove: %w", o.dir(m), err))
		}
	}
	return errors.Join(errs...)
}

// Sweep removes, at the root of every hierarchy, the empty cgroups whose
// names start with prefix, except keep: those whose process was killed
// before it could Leave. A cgroup a process is in stays (the kernel
// refuses to remove it anyway).
func (fs FS) Sweep(prefix, keep string) {
	hs, err := fs.Hierarchies()
	if err != nil {
		return
	}
	for _, m := range hs {
		root := fs.path(m.Dir)
		entries, err := os.ReadDir(root)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) || e.Name() == keep {
				continue
			}
			dir := filepath.Join(root, e.Name())
			if pids, err := readProcs(dir); err == nil && len(pids) == 0 {
				os.Remove(dir)
			}
		}
	}
}

func writeProcs(dir string, pid int) error {
	p := filepath.Join(dir, "cgroup.procs")
	if err := os.WriteFile(p, []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return fmt.Errorf("cgroup %s: move pid %d: %w", dir, pid, err)
	}
	return nil
}

func readProcs(dir string) ([]string, error) {
	p := filepath.Join(dir, "cgroup.procs")
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: read cgroup.procs: %w", dir, err)
	}
	return strings.Fields(string(b)), nil
}
