package knob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Services is the seam for the service manager. lowlat changes services only
// through systemd (systemctl): on a host without it there is no reliable way to
// stop a daemon for good and start it again exactly as it was, so service
// knobs are not writable there.
type Services interface {
	// State returns the unit's active state ("active", "inactive", "failed",
	// ...) and unit file state ("enabled", "disabled", "masked", "static",
	// "not-found", ...).
	State(unit string) (active, unitFile string, err error)
	// Run runs one systemctl verb on the unit: start, stop, enable, disable,
	// mask, unmask, try-restart; "daemon-reload" takes no unit.
	Run(verb, unit string) error
	// Version is the systemd version ("systemd 252 (...)" -> 252).
	Version() (int, error)
}

// ErrNoSystemd is ErrNotWritable for hosts where systemd is not PID 1.
var ErrNoSystemd = NotWritable(errors.New("systemd does not run here"))

// systemctl is the live Services. It runs systemctl(1): the unit state lives in
// PID 1 and systemctl is its stable interface (D-Bus would be the alternative).
type systemctl struct {
	sys  *System
	once sync.Once
	ver  int
	verr error
}

// SystemdRuns reports whether systemd is PID 1 on sys (sd_booted(3):
// /run/systemd/system exists).
func SystemdRuns(sys *System) bool {
	fi, err := os.Stat(sys.path("/run/systemd/system"))
	return err == nil && fi.IsDir()
}

func (s *systemctl) check() error {
	if s.sys != nil && s.sys.Root != "" {
		return fmt.Errorf("%w: no service manager for the tree at %s", ErrNotSupported, s.sys.Root)
	}
	if !SystemdRuns(s.sys) {
		return ErrNoSystemd
	}
	return nil
}

func (s *systemctl) State(unit string) (string, string, error) {
	if err := s.check(); err != nil {
		return "", "", err
	}
	// is-active and is-enabled print the state and exit non-zero for
	// anything but active/enabled: the output is what counts.
	active, _ := exec.Command("systemctl", "is-active", "--", unit).Output()
	enabled, _ := exec.Command("systemctl", "is-enabled", "--", unit).Output()
	a, e := strings.TrimSpace(string(active)), strings.TrimSpace(string(enabled))
	if a == "" {
		return "", "", fmt.Errorf("systemctl is-active %s: no answer", unit)
	}
	if e == "" {
		// Older systemd prints nothing for a missing unit file.
		e = "not-found"
	}
	return a, e, nil
}

func (s *systemctl) Run(verb, unit string) error {
	if err := s.check(); err != nil {
		return err
	}
	args := []string{verb}
	if unit != "" {
		args = append(args, "--", unit)
	}
	var stderr bytes.Buffer
	cmd := exec.Command("systemctl", args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("systemctl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

var systemdVersionRE = regexp.MustCompile(`^systemd (\d+)`)

func (s *systemctl) Version() (int, error) {
	s.once.Do(func() {
		if s.verr = s.check(); s.verr != nil {
			return
		}
		out, err := exec.Command("systemctl", "--version").Output()
		if err != nil {
			s.verr = fmt.Errorf("systemctl --version: %w", err)
			return
		}
		s.ver, s.verr = ParseSystemdVersion(string(out))
	})
	return s.ver, s.verr
}

// ParseSystemdVersion reads the version from systemctl --version output.
func ParseSystemdVersion(out string) (int, error) {
	m := systemdVersionRE.FindStringSubmatch(strings.TrimSpace(out))
	if m == nil {
		return 0, fmt.Errorf("systemctl --version: unexpected output %q", firstLine(out))
	}
	return strconv.Atoi(m[1])
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// serviceKnob is a systemd unit's state: "service/irqbalance.service" with
// values "<active>,<unit file state>" ("active,enabled", "inactive,disabled")
// or Absent when the unit is not installed.
type serviceKnob struct {
	sys  *System
	unit string
}

var unitNameRE = regexp.MustCompile(`^[A-Za-z0-9:_.\\@-]+\.(service|socket|timer)$`)

func newService(sys *System, rest string) (Knob, error) {
	if !unitNameRE.MatchString(rest) {
		return nil, fmt.Errorf("service knob %q: want service/<unit>.service", rest)
	}
	return &serviceKnob{sys: sys, unit: rest}, nil
}

func (k *serviceKnob) ID() string { return "service/" + k.unit }

// activeWord folds systemd's active states into the two a knob sets.
func activeWord(s string) string {
	switch s {
	case "active", "activating", "reloading", "refreshing":
		return "active"
	}
	return "inactive"
}

func (k *serviceKnob) Read(ctx context.Context) (string, error) {
	a, e, err := ServicesOf(k.sys).State(k.unit)
	if err != nil {
		return "", fmt.Errorf("%s: %w", k.ID(), err)
	}
	if e == "not-found" && activeWord(a) == "inactive" {
		return Absent, nil
	}
	return activeWord(a) + "," + e, nil
}

func splitService(v string) (active, file string, err error) {
	active, file, ok := strings.Cut(v, ",")
	if !ok || (active != "active" && active != "inactive") || file == "" {
		return "", "", fmt.Errorf("bad service state %q (want active|inactive,<unit file state>)", v)
	}
	return active, file, nil
}

func (k *serviceKnob) Validate(v string) error {
	if v == Absent {
		return nil
	}
	_, _, err := splitService(v)
	return err
}

// Write brings the unit to the state: stop before disabling, enable before
// starting, unmask before either, so each step is allowed.
func (k *serviceKnob) Write(ctx context.Context, value string) error {
	m := ServicesOf(k.sys)
	curA, curF, err := m.State(k.unit)
	if err != nil {
		return fmt.Errorf("%s: %w", k.ID(), err)
	}
	curA = activeWord(curA)
	if value == Absent {
		if curF == "not-found" {
			return nil
		}
		return fmt.Errorf("%s: the unit is installed now; lowlat does not uninstall it", k.ID())
	}
	wantA, wantF, err := splitService(value)
	if err != nil {
		return fmt.Errorf("%s: %w", k.ID(), err)
	}
	if curF == "not-found" {
		if wantA == "inactive" {
			return nil // nothing to stop
		}
		return fmt.Errorf("%s: unit not installed", k.ID())
	}
	run := func(verb string) error {
		if err := m.Run(verb, k.unit); err != nil {
			return fmt.Errorf("%s: %w", k.ID(), err)
		}
		return nil
	}
	if wantA == "inactive" && curA == "active" {
		if err := run("stop"); err != nil {
			return err
		}
	}
	if wantF != curF && !fileSatisfies(curF, wantF) {
		if curF == "masked" || curF == "masked-runtime" {
			if err := run("unmask"); err != nil {
				return err
			}
		}
		verb := map[string]string{"enabled": "enable", "disabled": "disable", "masked": "mask"}[wantF]
		if verb == "" && wantF != "disabled" && curF != "masked" {
			return fmt.Errorf("%s: cannot make the unit file state %q (from %q)", k.ID(), wantF, curF)
		}
		if verb != "" {
			if err := run(verb); err != nil {
				return err
			}
		}
	}
	if wantA == "active" && curA != "active" {
		if err := run("start"); err != nil {
			return err
		}
	}
	return nil
}

// fileSatisfies: a masked unit is more than disabled.
func fileSatisfies(live, want string) bool {
	return live == want || (want == "disabled" && (live == "masked" || live == "masked-runtime"))
}

func (k *serviceKnob) Satisfied(live, desired string) bool {
	if live == Absent || desired == Absent {
		if live == Absent && desired != Absent {
			a, f, err := splitService(desired)
			return err == nil && a == "inactive" && (f == "disabled" || f == "masked")
		}
		return live == desired
	}
	la, lf, err1 := splitService(live)
	da, df, err2 := splitService(desired)
	return err1 == nil && err2 == nil && la == da && fileSatisfies(lf, df)
}

// Same is exact: a rollback restores "enabled" even where "masked" would
// satisfy "disabled".
func (k *serviceKnob) Same(a, b string) bool { return a == b }
