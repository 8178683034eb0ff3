package txn

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// SpawnWatchdog starts exe as a detached dead-man process ("lowlat
// __watchdog ..."): its own session, no terminal, stdio on /dev/null, so it
// outlives the apply, its shell and its SSH connection. It returns the pid.
func SpawnWatchdog(exe, journalPath, txnID string, deadline time.Time, extraArgs ...string) (int, error) {
	args := append([]string{"__watchdog", "--journal", journalPath, "--txn", txnID, "--deadline", deadline.UTC().Format(time.RFC3339Nano)}, extraArgs...)
	cmd := exec.Command(exe, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer devnull.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s __watchdog: %w", exe, err)
	}
	pid := cmd.Process.Pid
	// Not waited for: it is reparented to init when we exit.
	cmd.Process.Release()
	return pid, nil
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
