package knob

import (
	"errors"
	"fmt"
)

// ErrNotWritable marks a setting the host shows but refuses to change:
// EOPNOTSUPP or EPERM from a driver (cloud NICs, virtio), a feature ethtool
// reports as [fixed], a kernel-managed interrupt. Errors wrapping it also
// match ErrNotSupported. An apply can leave such a knob out and go on with the
// rest; a read-back that differs from a write that was accepted is a different
// failure and never matches.
var ErrNotWritable = errors.New("not writable here")

// ErrNoDevice marks a device that does not exist (any more): an interface or
// interrupt that vanished between plan and apply.
var ErrNoDevice = errors.New("no such device")

type notWritable struct{ cause error }

func (e *notWritable) Error() string {
	if e.cause == nil {
		return ErrNotWritable.Error()
	}
	return ErrNotWritable.Error() + " (" + e.cause.Error() + ")"
}

func (e *notWritable) Is(target error) bool {
	return target == ErrNotWritable || target == ErrNotSupported
}

func (e *notWritable) Unwrap() error { return e.cause }

// NotWritable wraps cause (an errno, a reason) as ErrNotWritable.
func NotWritable(cause error) error { return &notWritable{cause: cause} }

// notWritablef is NotWritable with a formatted reason.
func notWritablef(format string, args ...any) error {
	return &notWritable{cause: fmt.Errorf(format, args...)}
}

// EthtoolOf returns the ethtool backend knobs on sys use: sys.Ethtool, the
// live ioctls for the live host, or an error for a file tree without one.
func EthtoolOf(sys *System) (Ethtool, error) {
	switch {
	case sys != nil && sys.Ethtool != nil:
		return sys.Ethtool, nil
	case sys == nil || sys.Root == "":
		return liveEthtool{}, nil
	}
	return nil, fmt.Errorf("ethtool: %w: no ethtool backend for the tree at %s", ErrNotSupported, sys.Root)
}

// ServicesOf returns the service manager knobs on sys use: sys.Services, or
// systemctl (which refuses a file tree).
func ServicesOf(sys *System) Services {
	if sys != nil && sys.Services != nil {
		return sys.Services
	}
	return &systemctl{sys: sys}
}
