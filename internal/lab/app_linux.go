//go:build linux

package lab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/lowlat/lowlat/internal/sockops"
	"golang.org/x/sys/unix"
)

// appCgroup is the cgroup v2 directory a client application of its own
// runs in (App.OwnProcess): named after the run's client namespace, directly
// below the unified hierarchy's root.
type appCgroup struct {
	rel, dir string
}

// newAppCgroup makes the run's client cgroup.
func newAppCgroup(t *Topology) (*appCgroup, error) {
	root, err := sockops.Cgroup2Root()
	if err != nil {
		return nil, fmt.Errorf("client application's cgroup: %w", err)
	}
	rel := "/" + t.Client.Name
	dir := filepath.Join(root, rel)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("client application's cgroup: %w", err)
	}
	return &appCgroup{rel: rel, dir: dir}, nil
}

// remove deletes the cgroup once its processes are gone; the kernel may take
// a moment to empty it after the last one exits.
func (c *appCgroup) remove() error {
	if c == nil {
		return nil
	}
	if err := removeCgroup(c.dir); err != nil {
		return fmt.Errorf("remove the client application's cgroup: %w", err)
	}
	return nil
}

// removeCgroup removes an empty cgroup directory, waiting up to 5 s for the
// kernel to finish emptying it after its last process exited. A cgroup
// already gone is removed.
func removeCgroup(dir string) error {
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := os.Remove(dir)
		if err == nil || os.IsNotExist(err) {
			return nil
		}
		if time.Now().After(end) {
			return err
		}
	}
}

// runApp runs lowlat with args as the client application: a process of its
// own, born in the client namespace (forked from a thread inside it) and in
// the cgroup cg (CLONE_INTO_CGROUP, so not one of its sockets is made
// outside it). It returns the standard output; the process is bounded by its
// own --duration and by ctx.
func (e *env) runApp(cg *appCgroup, args ...string) ([]byte, error) {
	bin := e.opts.Lowlat
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("client application: %w", err)
		}
		bin = exe
	}
	fd, err := unix.Open(cg.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("client application: open cgroup %s: %w", cg.dir, err)
	}
	defer unix.Close(fd)
	var stdout, stderr strings.Builder
	cmd := exec.CommandContext(e.ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	cmd.WaitDelay = 2 * time.Second
	if err := e.t.Client.Do(cmd.Start); err != nil {
		return nil, fmt.Errorf("client application %s: %w", strings.Join(append([]string{filepath.Base(bin)}, args...), " "), err)
	}
	if err := cmd.Wait(); err != nil {
		if ctxErr := e.ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, fmt.Errorf("client application %s: %w: %s", strings.Join(append([]string{filepath.Base(bin)}, args...), " "), err, strings.TrimSpace(stderr.String()))
	}
	return []byte(stdout.String()), nil
}
