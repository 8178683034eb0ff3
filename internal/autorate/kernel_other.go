//go:build !linux

package autorate

import (
	"errors"
	"runtime"
)

// KernelShaper is only implemented on Linux.
func KernelShaper(iface string) (Shaper, error) {
	return nil, errors.New("autorate: not supported on " + runtime.GOOS)
}

// CounterShaper is only implemented on Linux.
func CounterShaper(iface string, base uint64) Shaper { return nil }
