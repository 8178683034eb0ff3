package txn

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lowlat/lowlat/internal/cgroup"
	"github.com/lowlat/lowlat/internal/knob"
)

// Watchdog is a dead-man process as it was started: its pid, and where it
// runs, which decides what can end it before its deadline.
type Watchdog struct {
	PID int `json:"pid"`
	// Unit is the transient systemd scope it runs in ("" when systemd did
	// not start it).
	Unit string `json:"unit,omitempty"`
	// Cgroup is the cgroup it runs in, from its hierarchy's root (cgroup
	// v2's; name=systemd's or the first one's on a v1-only host): its
	// unit's, lowlat's own, or the apply's; "" when it could not be read.
	Cgroup string `json:"cgroup,omitempty"`
	// OwnCgroup reports that it runs in a cgroup of its own (its unit's or
	// lowlat's), not the apply's: the end of the session or service that
	// ran the apply does not take it along.
	OwnCgroup bool `json:"own_cgroup"`
	// Note says in one line what is not as it should be: why systemd did
	// not start it in a unit of its own, or that it shares the apply's
	// cgroup and what that means.
	Note string `json:"note,omitempty"`
}

// WatchdogStarter starts the dead-man process of a --confirm apply
// ("lowlat __watchdog ..."): detached (its own session, no terminal, stdio
// on /dev/null), and out of the apply's cgroup, since a service manager
// ends a session or a service by killing every process in its cgroup
// (logind's KillUserProcesses=yes when the SSH session closes, a unit's
// KillMode=control-group when it stops, cgroup.kill), and setsid does not
// leave the cgroup. So:
//
//   - where systemd is PID 1 (sd_booted(3): /run/systemd/system), systemd
//     starts it in a transient scope of its own, WatchdogUnit(txn), in
//     system.slice (systemd-run --scope): outside every session and
//     service; its name makes a second watchdog of the transaction
//     impossible, and systemd collects the scope when the watchdog exits;
//   - elsewhere, or when systemd-run fails, it is moved into a cgroup of
//     lowlat's own, lowlat-watchdog-TXN, at the root of the unified
//     hierarchy (or of every v1 hierarchy where there is none) before the
//     apply goes on; the watchdog removes it as it exits
//     (LeaveWatchdogCgroup), and the next start removes any a killed one
//     left;
//   - where neither works, it runs in the apply's cgroup, and
//     Watchdog.Note says so and what it means.
type WatchdogStarter struct {
	// Exe is the lowlat binary; Journal the journal the watchdog guards.
	Exe, Journal string
	// Root is the host's root for /proc, /run/systemd/system and the
	// cgroup mounts ("": /). Tests point it at a fixture tree.
	Root string
	// SystemdRun and Systemctl are the programs ("": systemd-run and
	// systemctl from $PATH).
	SystemdRun, Systemctl string
	// ScopeTimeout is how long systemd-run may take to start the scope
	// (0: 30 s); past it the watchdog is started without systemd.
	ScopeTimeout time.Duration
}

// SpawnWatchdog starts exe's dead-man process for transaction txnID of
// journalPath on the live host (WatchdogStarter).
func SpawnWatchdog(exe, journalPath, txnID string, deadline time.Time) (Watchdog, error) {
	return (&WatchdogStarter{Exe: exe, Journal: journalPath, Root: watchdogRootOverride}).Start(txnID, deadline)
}

const watchdogPrefix = "lowlat-watchdog-"

// WatchdogUnit is the name of the transient systemd scope the watchdog of
// transaction txnID runs in.
func WatchdogUnit(txnID string) string { return watchdogPrefix + txnID + ".scope" }

// watchdogCgroup is the name of lowlat's own cgroup for the watchdog of
// txnID where systemd does not start it. It is not a unit's name, so
// systemd never takes it for one of its own.
func watchdogCgroup(txnID string) string { return watchdogPrefix + txnID }

// txnIDRE is what may name a unit and a cgroup (journal.NewTxnID's ids:
// 20261123T100000Z-a1b2c3).
var txnIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,200}$`)

// errWatchdogRuns is a start refused because the transaction already has
// a watchdog.
var errWatchdogRuns = errors.New("a watchdog of this transaction already runs")

// Start starts the watchdog of transaction txnID, to roll it back at
// deadline unless it is confirmed. An error means no watchdog runs; a
// watchdog that runs but shares the apply's cgroup is no error, and its
// Note says so.
func (s *WatchdogStarter) Start(txnID string, deadline time.Time) (Watchdog, error) {
	if !txnIDRE.MatchString(txnID) {
		return Watchdog{}, fmt.Errorf("watchdog: transaction id %q cannot name a unit or a cgroup", txnID)
	}
	args := []string{"__watchdog", "--journal", s.Journal, "--txn", txnID, "--deadline", deadline.UTC().Format(time.RFC3339Nano)}
	var why string
	if knob.SystemdRuns(&knob.System{Root: s.Root}) {
		w, err := s.startScope(txnID, args)
		if err == nil || errors.Is(err, errWatchdogRuns) {
			return w, err
		}
		why = err.Error()
	}
	return s.startInCgroup(txnID, args, why)
}

// startScope runs the watchdog through systemd-run --scope, which asks
// systemd for the scope with itself in it, waits for the job, then execs
// the watchdog in its place: the pid the apply started is the watchdog's,
// the apply is still its parent (it may stop a hung apply), and it keeps
// the apply's environment. The watchdog is taken as started once that pid
// runs the lowlat binary; systemd-run exiting first is a failure, and its
// message is returned.
func (s *WatchdogStarter) startScope(txnID string, args []string) (Watchdog, error) {
	unit := WatchdogUnit(txnID)
	run := cmp.Or(s.SystemdRun, "systemd-run")
	// The scope is a system unit (root's default), in system.slice. No
	// --slice: a slice of lowlat's own would hold only this.
	argv := []string{"--scope", "--unit=" + unit, "--description=lowlat dead-man watchdog of transaction " + txnID,
		"--collect", "--quiet", "--no-ask-password"}
	if strings.Contains(s.Exe+s.Journal, "$") && s.expandsScopes(run) {
		// systemd 254 and later may expand $VAR in a scope's command line
		// (by default from some release on); the paths are literal.
		argv = append(argv, "--expand-environment=no")
	}
	argv = append(append(argv, "--", s.Exe), args...)
	errf := unlinkedTemp() // nil: its message is lost, not the scope
	if errf != nil {
		defer errf.Close()
	}
	cmd := exec.Command(run, argv...)
	done, err := startDetached(cmd, errf)
	if err != nil {
		return Watchdog{}, fmt.Errorf("systemd-run --scope --unit %s: %w", unit, err)
	}
	pid := cmd.Process.Pid
	timeout := cmp.Or(s.ScopeTimeout, 30*time.Second)
	limit := time.Now().Add(timeout)
	for {
		select {
		case err := <-done:
			msg := strings.TrimSpace(readAll(errf))
			if s.unitActive(unit) {
				return Watchdog{}, fmt.Errorf("systemd unit %s: %w", unit, errWatchdogRuns)
			}
			if msg == "" {
				msg = "no message"
			}
			return Watchdog{}, fmt.Errorf("systemd-run --scope --unit %s: %v: %s", unit, err, oneLine(msg))
		case <-time.After(5 * time.Millisecond):
		}
		if s.runsExe(pid) {
			break
		}
		if time.Now().After(limit) {
			cmd.Process.Kill()
			<-done
			return Watchdog{}, fmt.Errorf("systemd-run --scope --unit %s: no watchdog after %v", unit, timeout)
		}
	}
	w := Watchdog{PID: pid, Unit: unit}
	fs := cgroup.FS{Root: s.Root}
	ms, err := fs.Of(pid)
	if err != nil {
		w.Note = fmt.Sprintf("watchdog: systemd started it in %s but %v", unit, err)
		return w, nil
	}
	w.Cgroup = cgroup.Main(ms)
	for _, m := range ms {
		if filepath.Base(m.Path) == unit {
			w.OwnCgroup = true
		}
	}
	if !w.OwnCgroup {
		w.Note = fmt.Sprintf("watchdog: systemd-run reported %s started, but the watchdog runs in %s", unit, w.Cgroup)
	}
	return w, nil
}

// expandsScopes reports whether systemd-run may expand $VAR in a scope's
// command line (systemd 254 and later; true when the version cannot be
// read, so that a path is never expanded: an older systemd-run then
// refuses the option, and the watchdog starts without systemd).
func (s *WatchdogStarter) expandsScopes(run string) bool {
	out, err := exec.Command(run, "--version").Output()
	if err != nil {
		return true
	}
	v, err := knob.ParseSystemdVersion(string(out))
	return err != nil || v >= 254
}

// unitActive reports whether systemd has unit loaded and running (or
// starting, or stopping).
func (s *WatchdogStarter) unitActive(unit string) bool {
	out, _ := exec.Command(cmp.Or(s.Systemctl, "systemctl"), "is-active", "--", unit).Output()
	switch strings.TrimSpace(string(out)) {
	case "active", "activating", "deactivating", "reloading", "refreshing":
		return true
	}
	return false
}

// runsExe reports whether process pid runs s.Exe (systemd-run has exec'd
// it).
func (s *WatchdogStarter) runsExe(pid int) bool {
	a, err := os.Stat(filepath.Join(cmp.Or(s.Root, "/"), "proc", strconv.Itoa(pid), "exe"))
	if err != nil {
		return false
	}
	b, err := os.Stat(s.Exe)
	return err == nil && os.SameFile(a, b)
}

// startInCgroup starts the watchdog itself and moves it into lowlat's own
// cgroup. why is why systemd did not start it ("" where systemd does not
// run).
func (s *WatchdogStarter) startInCgroup(txnID string, args []string, why string) (Watchdog, error) {
	fs := cgroup.FS{Root: s.Root}
	name := watchdogCgroup(txnID)
	own, cgErr := fs.Own(name)
	if cgErr == nil {
		fs.Sweep(watchdogPrefix, name)
		if cgErr = own.Create(); errors.Is(cgErr, cgroup.ErrPopulated) {
			return Watchdog{}, fmt.Errorf("%w: %v", errWatchdogRuns, cgErr)
		}
	}
	cmd := exec.Command(s.Exe, args...)
	if _, err := startDetached(cmd, nil); err != nil {
		if own != nil {
			own.Remove()
		}
		return Watchdog{}, fmt.Errorf("start %s __watchdog: %w", s.Exe, err)
	}
	w := Watchdog{PID: cmd.Process.Pid}
	if cgErr == nil {
		cgErr = own.Attach(w.PID)
	}
	if cgErr == nil {
		w.Cgroup, w.OwnCgroup = own.Path(), true
		if why != "" {
			w.Note = fmt.Sprintf("watchdog: in lowlat's own cgroup %s, out of this apply's session or service, not in a systemd unit (%s)", w.Cgroup, why)
		}
		return w, nil
	}
	if own != nil {
		own.Remove() // refused while it holds the watchdog, which removes it as it exits
	}
	shared := "this apply's cgroup"
	if ms, err := fs.Of(0); err == nil {
		if p := cgroup.Main(ms); p != "" {
			w.Cgroup = p
			shared += " " + p
		}
	}
	if why != "" {
		cgErr = fmt.Errorf("%s; %w", why, cgErr)
	}
	w.Note = fmt.Sprintf("watchdog: it shares %s (%v): if the session or service that ran this apply ends, its cgroup may be killed with the watchdog in it, and then nothing rolls this change back at its deadline (a reboot still does, and so does the next root lowlat command after it)", shared, oneLine(cgErr.Error()))
	return w, nil
}

// startDetached starts cmd in a session of its own, stdin and stdout on
// /dev/null, stderr on stderr (nil: /dev/null), and returns a channel
// that gets its exit (it is waited for, so that it leaves no zombie while
// this process lives).
func startDetached(cmd *exec.Cmd, stderr *os.File) (<-chan error, error) {
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer devnull.Close()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
	if stderr != nil {
		cmd.Stderr = stderr
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return done, nil
}

// unlinkedTemp is a file for systemd-run's messages (nil where none can
// be made): deleted at once, so that nothing is left behind by a watchdog
// that keeps it as its stderr.
func unlinkedTemp() *os.File {
	f, err := os.CreateTemp("", "lowlat-systemd-run-")
	if err != nil {
		return nil
	}
	os.Remove(f.Name())
	return f
}

func readAll(f *os.File) string {
	if f == nil {
		return ""
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(f, 4096))
	return string(b)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// LeaveWatchdogCgroup is the watchdog of txnID's last act: out of
// lowlat's own cgroup, which it then removes (nothing when systemd started
// it: systemd collects its scope).
func LeaveWatchdogCgroup(txnID string) error {
	return cgroup.FS{}.Leave(watchdogCgroup(txnID), os.Getpid())
}

// BootID reads the kernel's id of the current boot.
func BootID() string {
	if bootIDOverride != "" {
		return bootIDOverride
	}
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return string(trimNL(b))
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

// When is a deadline as the messages give it: its local time of day when it
// falls on now's day, else with its date (a deadline days away, apply
// --confirm 8d or a change held for a canary's judge, is not tomorrow's
// time of day).
func When(t, now time.Time) string {
	t, now = t.Local(), now.Local()
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format(time.TimeOnly)
	}
	return t.Format(time.DateTime)
}
