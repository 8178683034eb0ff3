package knob

import (
	"errors"
	"fmt"
	"sync"
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

// backends are the non-file seams of a System: ethtool ioctls and the service
// manager. The live host uses the real ones; tests attach fakes to their own
// System with UseEthtool and UseServices. They are kept beside System rather
// than in it so a System stays a plain value describing file trees.
type backends struct {
	ethtool  Ethtool
	services Services
}

var attached sync.Map // *System -> *backends

func backendsOf(sys *System) *backends {
	if sys == nil {
		return nil
	}
	if b, ok := attached.Load(sys); ok {
		return b.(*backends)
	}
	return nil
}

func attach(sys *System, f func(b *backends)) {
	v, _ := attached.LoadOrStore(sys, &backends{})
	f(v.(*backends))
}

// UseEthtool makes ethtool knobs on sys talk to e instead of the ioctls (tests,
// fixtures).
func UseEthtool(sys *System, e Ethtool) { attach(sys, func(b *backends) { b.ethtool = e }) }

// UseServices makes service knobs on sys use m instead of systemctl.
func UseServices(sys *System, m Services) { attach(sys, func(b *backends) { b.services = m }) }

// Detach forgets the fakes attached to sys.
func Detach(sys *System) { attached.Delete(sys) }

// EthtoolOf returns the ethtool backend knobs on sys use: an attached one, the
// live ioctls for the live host, or an error for a file tree without one.
func EthtoolOf(sys *System) (Ethtool, error) {
	if b := backendsOf(sys); b != nil && b.ethtool != nil {
		return b.ethtool, nil
	}
	if sys == nil || sys.Root == "" {
		return liveEthtool{}, nil
	}
	return nil, fmt.Errorf("ethtool: %w: no ethtool backend for the tree at %s", ErrNotSupported, sys.Root)
}

// ServicesOf returns the service manager knobs on sys use.
func ServicesOf(sys *System) Services {
	if b := backendsOf(sys); b != nil && b.services != nil {
		return b.services
	}
	return &systemctl{sys: sys}
}
