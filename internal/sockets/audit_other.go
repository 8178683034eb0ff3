//go:build !linux

package sockets

import (
	"context"
	"errors"
	"runtime"
)

// ErrNoProcess is returned by Audit when Filter.PID names no process.
var ErrNoProcess = errors.New("no such process")

// Audit is only implemented on Linux.
func Audit(ctx context.Context, cfg Config) (*Report, error) {
	return nil, errors.New("sockets: not supported on " + runtime.GOOS)
}

// Collect is only implemented on Linux; elsewhere it reads proxy
// configurations only.
func Collect(ctx context.Context, fsys FS) *Summary {
	return &Summary{Error: "sockets: not supported on " + runtime.GOOS, Proxies: ReadProxies(fsys, nil)}
}

// Connections is only implemented on Linux.
func Connections() ([]Socket, error) {
	return nil, errors.New("sockets: not supported on " + runtime.GOOS)
}
