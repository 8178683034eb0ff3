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
			return "", fmt.Errorf("cgroup %s does not exist under %s", sel.Cgroup, root)
		}
		return dir, nil
	}
	if dir := filepath.Join(root, "system.slice", sel.Service); isDir(dir) {
		return dir, nil
	}
	var found string
	stop := errors.New("found")
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.Count(strings.TrimPrefix(p, root), "/") > 4 {
			return fs.SkipDir
		}
		if d.Name() == sel.Service {
			found = p
			return stop
		}
		return nil
	})
	if found == "" {
		return "", fmt.Errorf("unknown service %s: no cgroup of that name under %s (not running, or not a systemd service on the unified hierarchy)", sel.Service, root)
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
