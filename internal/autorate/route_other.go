//go:build !linux

package autorate

import (
	"errors"
	"runtime"
)

// kernelRoutes is only implemented on Linux.
func kernelRoutes(iface string) (int, routeLookup, error) {
	return 0, nil, errors.New("routes: not supported on " + runtime.GOOS)
}
