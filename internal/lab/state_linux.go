//go:build linux

package lab

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lowlat/lowlat/internal/autorate"
	"github.com/lowlat/lowlat/internal/nsthread"
	"github.com/lowlat/lowlat/internal/sockops"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NSPrefix starts the name of every namespace the lab creates:
// NSPrefix + "<run>-client", "-provider", "-server".
const NSPrefix = "lowlat-lab-"

// TempBase is where runs make their temporary directories ("lowlat-lab-*").
var TempBase = os.TempDir()

// StateDir holds one state file per run. It is on /run (tmpfs), like the
// namespaces' bind mounts, so both vanish together at reboot.
var StateDir = "/run/lowlat/lab"

// state is what a run registers before it creates anything, so Clean can
// remove it after a crash.
type state struct {
	ID       string    `json:"id"`
	Scenario string    `json:"scenario"`
	PID      int       `json:"pid"`
	Start    uint64    `json:"start_ticks"` // /proc/PID/stat starttime: tells a reused pid apart
	Started  time.Time `json:"started"`
	// Namespaces are registered before each is created.
	Namespaces []string `json:"namespaces"`
	TempDir    string   `json:"temp_dir,omitempty"`
	// Procs are child processes the run started (qemu for lab vm).
	Procs []procRef `json:"procs,omitempty"`
}

type procRef struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start_ticks"`
}

var idRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,19}$`)

// ValidID checks a user-chosen run id: it becomes part of namespace names.
func ValidID(id string) error {
	if !idRE.MatchString(id) {
		return fmt.Errorf("run id %q: want 1-20 characters of a-z, 0-9 and '-', starting with a letter or digit", id)
	}
	return nil
}

func newID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *state) path() string { return filepath.Join(StateDir, s.ID+".json") }

// save writes the state atomically (temp file, fsync, rename).
func (s *state) save() error {
	if err := os.MkdirAll(StateDir, 0o755); err != nil {
		return fmt.Errorf("lab state: %w", err)
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := s.path() + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("lab state %s: %w", tmp, err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.path())
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("lab state %s: %w", s.path(), err)
	}
	return nil
}

func (s *state) remove() error {
	if err := os.Remove(s.path()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("lab state: %w", err)
	}
	return nil
}

// claim registers a new run; it fails when the id is in use by a state file.
func claim(id, scenario string) (*state, error) {
	st := &state{ID: id, Scenario: scenario, PID: os.Getpid(), Start: procStart(os.Getpid()), Started: time.Now().UTC()}
	if err := os.MkdirAll(StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("lab state: %w", err)
	}
	f, err := os.OpenFile(st.path(), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("lab run id %s is in use (%s exists; 'lowlat lab clean' removes finished runs): %w", id, st.path(), ErrNameTaken)
	}
	if err != nil {
		return nil, fmt.Errorf("lab state: %w", err)
	}
	f.Close()
	if err := st.save(); err != nil {
		os.Remove(st.path())
		return nil, err
	}
	return st, nil
}

func loadStates() ([]*state, error) {
	ents, err := os.ReadDir(StateDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lab state: %w", err)
	}
	var out []*state
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(StateDir, e.Name()))
		if err != nil {
			continue
		}
		var s state
		if json.Unmarshal(b, &s) != nil || s.ID == "" {
			// A torn or foreign file: keep its name so Clean removes it.
			s = state{ID: strings.TrimSuffix(e.Name(), ".json")}
		}
		out = append(out, &s)
	}
	return out, nil
}

// procStart returns the start time of pid in clock ticks since boot (field
// 22 of /proc/PID/stat), 0 when the process does not exist.
func procStart(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may contain spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0
	}
	n, _ := strconv.ParseUint(f[19], 10, 64)
	return n
}

// alive reports whether pid still runs the process that was recorded.
func alive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	s := procStart(pid)
	return s != 0 && (start == 0 || s == start)
}

// Clean removes everything earlier lab runs left: their namespaces (with
// every veth, ifb, qdisc and route inside), any process still inside those
// namespaces, the child processes they recorded, their temporary
// directories and state files; then any namespace named NSPrefix* and any
// temporary directory "lowlat-lab-*" no live run claims. Runs whose process
// is alive are left alone unless force is set.
func Clean(force bool) (*CleanReport, error) {
	rep := &CleanReport{Namespaces: []string{}, Processes: []int{}, TempDirs: []string{}, States: []string{}, Cgroups: []string{}, Sockops: []string{}, Files: []string{}}
	states, err := loadStates()
	if err != nil {
		return rep, err
	}
	live := map[string]bool{} // namespaces and temp dirs of live runs
	for _, s := range states {
		if s.PID != os.Getpid() && alive(s.PID, s.Start) && !force {
			rep.Running = append(rep.Running, fmt.Sprintf("%s (%s, pid %d)", s.ID, s.Scenario, s.PID))
			for _, n := range s.Namespaces {
				live[n] = true
			}
			live[s.TempDir] = true
			continue
		}
		if force && s.PID != os.Getpid() && alive(s.PID, s.Start) {
			if err := syscall.Kill(s.PID, syscall.SIGKILL); err == nil {
				rep.Processes = append(rep.Processes, s.PID)
			}
		}
		for _, p := range s.Procs {
			if alive(p.PID, p.Start) {
				if err := syscall.Kill(p.PID, syscall.SIGKILL); err == nil {
					rep.Processes = append(rep.Processes, p.PID)
				}
			}
		}
		for _, n := range s.Namespaces {
			rep.removeNS(n)
		}
		if s.TempDir != "" && isLabTempDir(s.TempDir) {
			if _, err := os.Stat(s.TempDir); err == nil {
				if err := os.RemoveAll(s.TempDir); err != nil {
					rep.Errors = append(rep.Errors, err.Error())
				} else {
					rep.TempDirs = append(rep.TempDirs, s.TempDir)
				}
			}
		}
		if err := s.remove(); err != nil {
			rep.Errors = append(rep.Errors, err.Error())
		} else {
			rep.States = append(rep.States, s.path())
		}
	}
	// Orphans: a run killed between creating a namespace and saving the state
	// cannot have one (names are registered first), but a state directory
	// removed by hand, or an older lowlat, can leave some.
	names, err := listLabNS()
	if err != nil {
		rep.Errors = append(rep.Errors, err.Error())
	}
	for _, n := range names {
		if !live[n] && !contains(rep.Namespaces, n) {
			rep.removeNS(n)
		}
	}
	rep.removeCgroups(live)
	if len(rep.Running) == 0 {
		// A killed capped-uplink-varying run leaves its autorate's policy
		// (journaled in the run's own journal, gone with its temp dir)
		// and, when the daemon was killed too, its pid and state files.
		for _, f := range []string{autorate.PolicyPath(ClientIf), autorate.PIDPath(ClientIf), autorate.StatePath(ClientIf)} {
			if err := os.Remove(f); err == nil {
				rep.Files = append(rep.Files, f)
			} else if !errors.Is(err, os.ErrNotExist) {
				rep.Errors = append(rep.Errors, err.Error())
			}
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(TempBase, "lowlat-lab-*"))
	for _, d := range dirs {
		if !live[d] && isLabTempDir(d) {
			if err := os.RemoveAll(d); err == nil {
				rep.TempDirs = append(rep.TempDirs, d)
			}
		}
	}
	sort.Ints(rep.Processes)
	if len(rep.Errors) > 0 {
		return rep, fmt.Errorf("lab clean: %s", strings.Join(rep.Errors, "; "))
	}
	return rep, nil
}

func isLabTempDir(d string) bool {
	return filepath.Dir(filepath.Clean(d)) == filepath.Clean(TempBase) && strings.HasPrefix(filepath.Base(d), "lowlat-lab-")
}

// removeNS kills every process inside the named namespace, then removes it.
func (rep *CleanReport) removeNS(name string) {
	p := filepath.Join(NetnsDir, name)
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return // gone already
	}
	// Only a mounted namespace has processes to stop; a plain file is what a
	// failed bind mount leaves.
	var sfs unix.Statfs_t
	if unix.Statfs(p, &sfs) == nil && sfs.Type == unix.NSFS_MAGIC {
		rep.clearSockops(name, p)
		for _, pid := range procsInNetns(st.Ino) {
			if pid == os.Getpid() {
				continue
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
				rep.Processes = append(rep.Processes, pid)
			}
		}
	}
	if err := deleteNamedNS(name); err != nil {
		rep.Errors = append(rep.Errors, err.Error())
		return
	}
	rep.Namespaces = append(rep.Namespaces, name)
}

// clearSockops removes the sock_ops entries a run's fix left in the
// namespace at path: they are keyed by the namespace and outlive it in bpffs
// (and attached to the host's cgroups) unless removed while it exists.
// sockops.Clear looks before it loads anything: a namespace without pins
// costs a thread and a mount-table read.
func (rep *CleanReport) clearSockops(name, path string) {
	h, err := netns.GetFromPath(path)
	if err != nil {
		rep.Errors = append(rep.Errors, fmt.Sprintf("netns %s: %v", name, err))
		return
	}
	defer h.Close()
	var sels []sockops.Selector
	if err := nsthread.OnNewThread(func() error {
		if err := nsthread.NS(h).Join(); err != nil {
			return err
		}
		var err error
		sels, err = sockops.Clear()
		return err
	}); err != nil {
		rep.Errors = append(rep.Errors, fmt.Sprintf("netns %s: %v", name, err))
	}
	for _, sel := range sels {
		rep.Sockops = append(rep.Sockops, name+": "+sel.String())
	}
}

// removeCgroups removes the client applications' cgroups (App.OwnProcess)
// of runs that are gone: named NSPrefix*, below the unified hierarchy.
func (rep *CleanReport) removeCgroups(live map[string]bool) {
	root, err := sockops.Cgroup2Root()
	if err != nil {
		return // no unified hierarchy: no run made one
	}
	dirs, _ := filepath.Glob(filepath.Join(root, NSPrefix+"*"))
	for _, d := range dirs {
		if live[filepath.Base(d)] {
			continue
		}
		// Its processes lived in the run's namespace and were stopped with
		// it.
		if err := removeCgroup(d); err != nil {
			rep.Errors = append(rep.Errors, fmt.Sprintf("remove cgroup %s: %v", d, err))
		} else {
			rep.Cgroups = append(rep.Cgroups, d)
		}
	}
}

// procsInNetns lists the processes whose network namespace has inode ino.
func procsInNetns(ino uint64) []int {
	ents, _ := os.ReadDir("/proc")
	want := "net:[" + strconv.FormatUint(ino, 10) + "]"
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/net"); err == nil && l == want {
			out = append(out, pid)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
