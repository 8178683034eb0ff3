//go:build !linux

package lab

import (
	"context"
	"errors"
	"runtime"
)

// ErrNotSupported: the lab needs Linux network namespaces.
var ErrNotSupported = errors.New("lab: network namespaces need Linux, not " + runtime.GOOS)

// ErrNameTaken reports that a namespace of the chosen name already exists.
var ErrNameTaken = errors.New("network namespace name already taken")

// ErrInterrupted wraps the error of a run stopped by its context.
var ErrInterrupted = errors.New("interrupted")

// Run is not supported outside Linux.
func Run(ctx context.Context, name string, opts Options) (*Result, error) {
	return nil, ErrNotSupported
}

// Clean is not supported outside Linux.
func Clean(force bool) (*CleanReport, error) { return nil, ErrNotSupported }

// ValidID accepts every id outside Linux (nothing uses it).
func ValidID(id string) error { return nil }

func trackVM(ctx context.Context, name string) (string, func()) { return "", func() {} }
