package sockops

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// errNoCgroup marks a cgroup or service selector that has no cgroup now:
// the cgroup was removed, the service is not running.
var errNoCgroup = errors.New("no cgroup")

type noCgroupError string

func (e noCgroupError) Error() string        { return string(e) }
func (e noCgroupError) Is(target error) bool { return target == errNoCgroup }

// CgroupOf returns the cgroup v2 directory a cgroup or service selector
// attaches at. A service is found by its unit's directory in the unified
// hierarchy (system.slice first); one that is not running has none.
func CgroupOf(sel Selector) (string, error) {
	root, err := Cgroup2Root()
	if err != nil {
		return "", err
	}
	if sel.Cgroup != "" {
		dir := filepath.Join(root, sel.Cgroup)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return "", noCgroupError(fmt.Sprintf("cgroup %s does not exist under %s", sel.Cgroup, root))
		}
		return dir, nil
	}
	return serviceCgroup(root, sel.Service)
}

// serviceCgroup finds the cgroup of the system service name below root.
// systemd puts a system service's cgroup in its slice, and slices in
// slices ("a-b.slice" in "a.slice"): the search goes down slices only. A
// user's service manager (user@UID.service) and a container (a scope or a
// service with a systemd of its own) run units with names of their own in
// cgroups delegated to them, below a unit that is not a slice: a unit of
// the same name there is not this one.
func serviceCgroup(root, name string) (string, error) {
	if dir := filepath.Join(root, "system.slice", name); isDir(dir) {
		return dir, nil
	}
	var found string
	stop := errors.New("found")
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || p == root {
			return nil
		}
		switch {
		case d.Name() == name:
			found = p
			return stop
		case !strings.HasSuffix(d.Name(), ".slice"), strings.Count(strings.TrimPrefix(p, root), "/") > 8:
			return fs.SkipDir
		}
		return nil
	})
	if found == "" {
		return "", noCgroupError(fmt.Sprintf("unknown service %s: no cgroup of that name in a slice under %s (not running, or not a systemd system service on the unified hierarchy)", name, root))
	}
	return found, nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// cgroupPIDs lists the processes of the cgroup at dir and of every cgroup
// below it.
func cgroupPIDs(dir string) (map[int]bool, error) {
	pids := map[int]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		f, err := os.Open(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if n, err := strconv.Atoi(sc.Text()); err == nil {
				pids[n] = true
			}
		}
		return sc.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("processes of cgroup %s: %w", dir, err)
	}
	return pids, nil
}

// PIDsOf lists the processes a cgroup or service selector covers.
func PIDsOf(sel Selector) (map[int]bool, error) {
	dir, err := CgroupOf(sel)
	if err != nil {
		return nil, err
	}
	return cgroupPIDs(dir)
}
