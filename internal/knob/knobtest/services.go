package knobtest

import (
	"fmt"
	"strings"
	"sync"

	"github.com/lowlat/lowlat/internal/knob"
)

// Services is an in-memory knob.Services: units with their active and unit
// file states, changed by the verbs the way systemctl changes them.
type Services struct {
	mu sync.Mutex
	// Units maps a unit to "active,enabled"-style state; missing units are
	// not-found.
	Units map[string]string
	// Calls records every Run, "verb unit".
	Calls []string
	// Systemd is the Version reported (0: systemd not running, Run and
	// State fail with knob.ErrNoSystemd).
	Systemd int
}

var _ knob.Services = (*Services)(nil)

// State implements knob.Services.
func (f *Services) State(unit string) (string, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Systemd == 0 {
		return "", "", knob.ErrNoSystemd
	}
	v, ok := f.Units[unit]
	if !ok {
		return "inactive", "not-found", nil
	}
	a, e, _ := strings.Cut(v, ",")
	return a, e, nil
}

// Run implements knob.Services.
func (f *Services) Run(verb, unit string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Systemd == 0 {
		return knob.ErrNoSystemd
	}
	f.Calls = append(f.Calls, strings.TrimSpace(verb+" "+unit))
	if unit == "" {
		return nil
	}
	v, ok := f.Units[unit]
	if !ok {
		return fmt.Errorf("Unit %s not found.", unit)
	}
	a, e, _ := strings.Cut(v, ",")
	switch verb {
	case "start":
		if e == "masked" {
			return fmt.Errorf("Unit %s is masked.", unit)
		}
		a = "active"
	case "stop":
		a = "inactive"
	case "enable":
		if e == "masked" {
			return fmt.Errorf("Unit file %s is masked.", unit)
		}
		e = "enabled"
	case "disable":
		if e != "masked" {
			e = "disabled"
		}
	case "mask":
		e = "masked"
	case "unmask":
		if e == "masked" {
			e = "disabled"
		}
	case "try-restart":
	default:
		return fmt.Errorf("fake systemctl: unknown verb %q", verb)
	}
	f.Units[unit] = a + "," + e
	return nil
}

// Version implements knob.Services.
func (f *Services) Version() (int, error) {
	if f.Systemd == 0 {
		return 0, knob.ErrNoSystemd
	}
	return f.Systemd, nil
}
