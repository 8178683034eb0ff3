//go:build linux

package knob

import (
	"errors"
	"fmt"

	"github.com/lowlat/lowlat/internal/host"
	"golang.org/x/sys/unix"
)

// liveEthtool is the live host's Ethtool: host.LiveEthtool's ioctls (one
// socket per call, in the calling thread's network namespace; the comment
// there says why), with their errnos sorted into the errors an apply acts on.
type liveEthtool struct{ io host.LiveEthtool }

// ethtoolErr maps an ioctl errno for a query (set=false) or a change.
func ethtoolErr(err error, set bool) error {
	var errno unix.Errno
	if !errors.As(err, &errno) {
		return err
	}
	switch errno {
	case unix.ENODEV, unix.ENXIO:
		return fmt.Errorf("%w (%w)", ErrNoDevice, errno)
	case unix.EOPNOTSUPP:
		if set {
			return NotWritable(errno)
		}
		return fmt.Errorf("%w (%w)", ErrNotSupported, errno)
	case unix.EPERM, unix.EACCES:
		if set {
			return NotWritable(errno)
		}
		return errno
	}
	return errno
}

func (l liveEthtool) Driver(iface string) (string, error) {
	name, err := l.io.Driver(iface)
	return name, ethtoolErr(err, false)
}

func (l liveEthtool) Channels(iface string) (host.Channels, error) {
	c, err := l.io.Channels(iface)
	return c, ethtoolErr(err, false)
}

func (l liveEthtool) SetChannels(iface string, c host.Channels) error {
	return ethtoolErr(l.io.SetChannels(iface, c), true)
}

func (l liveEthtool) Rings(iface string) (host.Rings, error) {
	r, err := l.io.Rings(iface)
	return r, ethtoolErr(err, false)
}

func (l liveEthtool) SetRings(iface string, r host.Rings) error {
	return ethtoolErr(l.io.SetRings(iface, r), true)
}

func (l liveEthtool) Coalesce(iface string) (Coalesce, error) {
	c, err := l.io.Coalesce(iface)
	return Coalesce(c), ethtoolErr(err, false)
}

func (l liveEthtool) SetCoalesce(iface string, c Coalesce) error {
	return ethtoolErr(l.io.SetCoalesce(iface, c), true)
}

func (l liveEthtool) Features(iface string) (map[string]Feature, error) {
	fs, err := l.io.Features(iface)
	if err != nil {
		return nil, ethtoolErr(err, false)
	}
	out := make(map[string]Feature, len(fs))
	for name, st := range fs {
		out[name] = Feature{Active: st.Active, Changeable: st.Changeable}
	}
	return out, nil
}

func (l liveEthtool) SetFeatures(iface string, want map[string]bool) error {
	return ethtoolErr(l.io.SetFeatures(iface, want), true)
}

func (l liveEthtool) Stats(iface string) (map[string]uint64, error) {
	s, err := l.io.Stats(iface)
	return s, ethtoolErr(err, false)
}
