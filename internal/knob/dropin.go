package knob

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// dropinKnob is a systemd drop-in file lowlat owns:
// "dropin/gateway.service/50-lowlat-cpus.conf" is
// /etc/systemd/system/gateway.service.d/50-lowlat-cpus.conf. Its value is the
// file's FileValue, like a file knob; after each write systemd reloads
// its unit files (where systemd runs), so the drop-in is what the next start
// of the service uses, and a rollback takes it back the same way.
type dropinKnob struct {
	file fileKnob
	sys  *System
	unit string
	name string
}

// DropinID returns the knob ID of a drop-in of unit.
func DropinID(unit, name string) string { return "dropin/" + unit + "/" + name }

// DropinPath is where the drop-in lives.
func DropinPath(unit, name string) string {
	return "/etc/systemd/system/" + unit + ".d/" + name
}

func newDropin(sys *System, rest string) (Knob, error) {
	unit, name, ok := strings.Cut(rest, "/")
	if !ok || !unitNameRE.MatchString(unit) || !strings.HasSuffix(name, ".conf") || strings.ContainsAny(name, "/ ") || strings.HasPrefix(name, ".") {
		return nil, fmt.Errorf("dropin knob %q: want dropin/<unit>.service/<name>.conf", rest)
	}
	return &dropinKnob{file: fileKnob{sys: sys, path: DropinPath(unit, name)}, sys: sys, unit: unit, name: name}, nil
}

func (k *dropinKnob) ID() string { return DropinID(k.unit, k.name) }

func (k *dropinKnob) Read(ctx context.Context) (string, error) { return k.file.Read(ctx) }

func (k *dropinKnob) Write(ctx context.Context, value string) error {
	if err := k.file.Write(ctx, value); err != nil {
		return err
	}
	err := ServicesOf(k.sys).Run("daemon-reload", "")
	if errors.Is(err, ErrNoSystemd) || errors.Is(err, ErrNotSupported) {
		return nil // the next boot's systemd reads it
	}
	if err != nil {
		return fmt.Errorf("%s: %w", k.ID(), err)
	}
	return nil
}

func (k *dropinKnob) Satisfied(live, desired string) bool { return k.file.Satisfied(live, desired) }

// Same compares content, mode and owner, as for a file.
func (k *dropinKnob) Same(a, b string) bool { return k.file.Same(a, b) }
