//go:build !linux

package knob

import (
	"fmt"
	"runtime"
)

func newQdisc(sys *System, rest string) (Knob, error) {
	return nil, fmt.Errorf("qdisc knobs: %w on %s", ErrNotSupported, runtime.GOOS)
}

func newRoute(sys *System, rest string) (Knob, error) {
	return nil, fmt.Errorf("route knobs: %w on %s", ErrNotSupported, runtime.GOOS)
}

func newSockopt(sys *System, rest string) (Knob, error) {
	return nil, fmt.Errorf("sockopt knobs: %w on %s", ErrNotSupported, runtime.GOOS)
}

func newSocket(sys *System, rest string) (Knob, error) {
	return nil, fmt.Errorf("socket knobs: %w on %s", ErrNotSupported, runtime.GOOS)
}

func newBPFFS(sys *System, rest string) (Knob, error) {
	return nil, fmt.Errorf("bpffs knobs: %w on %s", ErrNotSupported, runtime.GOOS)
}
