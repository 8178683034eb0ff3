//go:build linux

package lab

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// trackVM registers a lab vm run (as root) so that "lab clean" finds what a
// killed run left: its work directory and qemu (which also dies by itself
// through its parent-death signal). It returns the work directory and the
// function that ends the run's registration.
func trackVM(ctx context.Context, name string) (string, func()) {
	if os.Geteuid() != 0 {
		return "", func() {}
	}
	st, err := claim(newID(), name+" (vm)")
	if err != nil {
		return "", func() {}
	}
	tmp, err := os.MkdirTemp(TempBase, "lowlat-lab-"+st.ID+"-")
	if err != nil {
		st.remove()
		return "", func() {}
	}
	st.TempDir = tmp
	_ = st.save()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			for _, pid := range children(os.Getpid()) {
				if !containsProc(st.Procs, pid) {
					st.Procs = append(st.Procs, procRef{PID: pid, Start: procStart(pid)})
					_ = st.save()
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return filepath.Join(tmp, "vm"), func() {
		cancel()
		<-done
		os.RemoveAll(tmp)
		st.remove()
	}
}

func containsProc(ps []procRef, pid int) bool {
	for _, p := range ps {
		if p.PID == pid {
			return true
		}
	}
	return false
}

// children lists the child processes of pid (of all its threads).
func children(pid int) []int {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}
