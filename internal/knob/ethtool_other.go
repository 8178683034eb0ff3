//go:build !linux

package knob

import (
	"fmt"
	"runtime"

	"github.com/lowlat/lowlat/internal/host"
)

// liveEthtool has no ioctls outside Linux.
type liveEthtool struct{}

func notLinux() error { return fmt.Errorf("ethtool: %w on %s", ErrNotSupported, runtime.GOOS) }

func (liveEthtool) Driver(string) (string, error)               { return "", notLinux() }
func (liveEthtool) Channels(string) (host.Channels, error)      { return host.Channels{}, notLinux() }
func (liveEthtool) SetChannels(string, host.Channels) error     { return notLinux() }
func (liveEthtool) Rings(string) (host.Rings, error)            { return host.Rings{}, notLinux() }
func (liveEthtool) SetRings(string, host.Rings) error           { return notLinux() }
func (liveEthtool) Coalesce(string) (Coalesce, error)           { return nil, notLinux() }
func (liveEthtool) SetCoalesce(string, Coalesce) error          { return notLinux() }
func (liveEthtool) Features(string) (map[string]Feature, error) { return nil, notLinux() }
func (liveEthtool) SetFeatures(string, map[string]bool) error   { return notLinux() }
func (liveEthtool) Stats(string) (map[string]uint64, error)     { return nil, notLinux() }
