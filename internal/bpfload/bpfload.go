// Package bpfload holds what lowlat's two BPF users (internal/sockops, the
// enforcer; internal/passive, the measurements) do the same way: how a
// failed bpf() call is explained to the operator, and how a half-built set
// of kernel objects is taken down again so that a failure leaves nothing
// attached.
package bpfload

import (
	"errors"
	"fmt"
	"io"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Error names what failed and says plainly when the cause is a missing
// privilege (privilege says which) or a kernel without BPF, wrapping
// unsupported in that case.
func Error(what, privilege string, unsupported, err error) error {
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("%s: %w (%s)", what, err, privilege)
	case errors.Is(err, unix.ENOSYS), errors.Is(err, ebpf.ErrNotSupported):
		return fmt.Errorf("%s: this kernel has no BPF support (%v): %w", what, err, unsupported)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Stack closes what was opened, newest first: links before the programs
// they hold, programs before their maps.
type Stack []io.Closer

// Push adds c to the stack.
func (s *Stack) Push(c io.Closer) { *s = append(*s, c) }

// PushFunc adds a closing function that cannot fail, such as
// (*ebpf.Collection).Close.
func (s *Stack) PushFunc(f func()) { s.Push(closeFunc(f)) }

type closeFunc func()

func (f closeFunc) Close() error { f(); return nil }

// Close closes everything on the stack, newest first, and empties it. It
// returns the first error.
func (s *Stack) Close() error {
	var first error
	for i := len(*s) - 1; i >= 0; i-- {
		if err := (*s)[i].Close(); err != nil && first == nil {
			first = err
		}
	}
	*s = nil
	return first
}
