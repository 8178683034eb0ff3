//go:build !linux

package mssclamp

import (
	"fmt"
	"runtime"
)

// nftables is Linux's.
func errOS() error { return fmt.Errorf("mss clamp: nftables: %w on %s", ErrNotSupported, runtime.GOOS) }

// Write is Linux's.
func Write(iface string, mss int) error { return errOS() }

// Remove is Linux's.
func Remove(iface string) error { return errOS() }

// Read is Linux's.
func Read(iface string) (State, error) { return State{}, errOS() }

// List is Linux's.
func List() (map[string]State, error) { return nil, errOS() }

// Probe is Linux's.
func Probe() error { return errOS() }
