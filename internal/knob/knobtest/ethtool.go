// Package knobtest holds in-memory stand-ins for the knobs' non-file
// backends, for tests: an ethtool that behaves like a driver (and like the
// drivers that misbehave) and a systemd service manager. A test puts them in
// its own knob.System (Ethtool, Services); production code never imports this
// package.
package knobtest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/knob"
	"golang.org/x/sys/unix"
)

// Ethtool is an in-memory knob.Ethtool: NICs with channel counts, rings,
// coalescing and features that behave like a driver's (limits checked, fixed
// features refused), plus the misbehaviours tests need: a driver that refuses
// a kind of change, one that accepts a change and keeps the old value, and a
// NIC that vanishes after some number of changes.
type Ethtool struct {
	mu   sync.Mutex
	NICs map[string]*NIC
	// Refuse makes a set of a group ("channels", "ring", "coalesce",
	// "feature") fail with this errno (EOPNOTSUPP or EPERM), as cloud NICs do.
	Refuse map[string]unix.Errno
	// Ignore makes a set of a group succeed without changing anything: a
	// driver whose read-back disagrees with what it accepted.
	Ignore map[string]bool
	// VanishAfter removes an interface once that many sets (on any
	// interface) have succeeded: the next set finds it gone (ENODEV), as
	// when a NIC is unplugged mid-apply. 0: never.
	VanishAfter map[string]int
	// OnSetChannels runs after a channel change (tests use it to move IRQ
	// affinities the way drivers do).
	OnSetChannels func(iface string, c host.Channels)
	// Sets counts successful changes.
	Sets int
}

// NIC is one interface of an Ethtool. A nil part is a query the driver
// does not support (EOPNOTSUPP).
type NIC struct {
	Driver   string
	Channels *host.Channels
	Rings    *host.Rings
	Coalesce knob.Coalesce
	Features map[string]knob.Feature
	Stats    map[string]uint64
}

var _ knob.Ethtool = (*Ethtool)(nil)

// NewEthtool returns a fake with the NICs' ethtool facts from f: every
// interface with an ethtool record, its features changeable unless the record
// lists them as fixed.
func NewEthtool(f *host.Facts) *Ethtool {
	fe := &Ethtool{NICs: map[string]*NIC{}}
	for _, ifc := range f.Interfaces {
		if ifc.Ethtool == nil {
			continue
		}
		et := ifc.Ethtool
		n := &NIC{Driver: et.Driver, Stats: maps.Clone(et.Stats)}
		if et.Channels != nil {
			c := *et.Channels
			n.Channels = &c
		}
		if et.Rings != nil {
			r := *et.Rings
			n.Rings = &r
		}
		if et.Coalesce != nil {
			n.Coalesce = knob.Coalesce{}
			for _, p := range knob.CoalesceParams {
				n.Coalesce[p] = et.Coalesce[p]
			}
		}
		if et.Features != nil {
			n.Features = map[string]knob.Feature{}
			for name, on := range et.Features {
				n.Features[name] = knob.Feature{Active: on, Changeable: !slices.Contains(et.Fixed, name)}
			}
		}
		fe.NICs[ifc.Name] = n
	}
	return fe
}

func (f *Ethtool) nic(iface string) (*NIC, error) {
	n, ok := f.NICs[iface]
	if !ok {
		return nil, fmt.Errorf("%s: %w (%w)", iface, knob.ErrNoDevice, unix.ENODEV)
	}
	return n, nil
}

func unsupported() error { return fmt.Errorf("%w (%w)", knob.ErrNotSupported, unix.EOPNOTSUPP) }

// set runs a change of group on iface under the lock.
func (f *Ethtool) set(iface, group string, apply func(n *NIC) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, after := range f.VanishAfter {
		if after > 0 && f.Sets >= after {
			delete(f.NICs, name)
		}
	}
	n, err := f.nic(iface)
	if err != nil {
		return err
	}
	if e, ok := f.Refuse[group]; ok {
		return knob.NotWritable(e)
	}
	if f.Ignore[group] {
		f.Sets++
		return nil
	}
	if err := apply(n); err != nil {
		return err
	}
	f.Sets++
	return nil
}

// Driver reports the NIC's driver name.
func (f *Ethtool) Driver(iface string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.nic(iface)
	if err != nil {
		return "", err
	}
	return n.Driver, nil
}

// Channels is ethtool -l.
func (f *Ethtool) Channels(iface string) (host.Channels, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.nic(iface)
	if err != nil {
		return host.Channels{}, err
	}
	if n.Channels == nil {
		return host.Channels{}, unsupported()
	}
	return *n.Channels, nil
}

// SetChannels is ethtool -L, with the kernel's limit checks.
func (f *Ethtool) SetChannels(iface string, c host.Channels) error {
	err := f.set(iface, "channels", func(n *NIC) error {
		if n.Channels == nil {
			return knob.NotWritable(unix.EOPNOTSUPP)
		}
		m := *n.Channels
		if c.Combined > m.MaxCombined || c.Rx > m.MaxRx || c.Tx > m.MaxTx || c.Other > m.MaxOther {
			return unix.EINVAL
		}
		if c.Combined+c.Rx == 0 || c.Combined+c.Tx == 0 {
			return unix.EINVAL
		}
		n.Channels.Combined, n.Channels.Rx, n.Channels.Tx, n.Channels.Other = c.Combined, c.Rx, c.Tx, c.Other
		return nil
	})
	if err == nil && f.OnSetChannels != nil {
		f.OnSetChannels(iface, c)
	}
	return err
}

// Rings is ethtool -g.
func (f *Ethtool) Rings(iface string) (host.Rings, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.nic(iface)
	if err != nil {
		return host.Rings{}, err
	}
	if n.Rings == nil {
		return host.Rings{}, unsupported()
	}
	return *n.Rings, nil
}

// SetRings is ethtool -G.
func (f *Ethtool) SetRings(iface string, r host.Rings) error {
	return f.set(iface, "ring", func(n *NIC) error {
		if n.Rings == nil {
			return knob.NotWritable(unix.EOPNOTSUPP)
		}
		if r.Rx > n.Rings.RxMax || r.Tx > n.Rings.TxMax {
			return unix.EINVAL
		}
		n.Rings.Rx, n.Rings.Tx = r.Rx, r.Tx
		return nil
	})
}

// Coalesce is ethtool -c.
func (f *Ethtool) Coalesce(iface string) (knob.Coalesce, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.nic(iface)
	if err != nil {
		return nil, err
	}
	if n.Coalesce == nil {
		return nil, unsupported()
	}
	return maps.Clone(n.Coalesce), nil
}

// SetCoalesce is ethtool -C.
func (f *Ethtool) SetCoalesce(iface string, c knob.Coalesce) error {
	return f.set(iface, "coalesce", func(n *NIC) error {
		if n.Coalesce == nil {
			return knob.NotWritable(unix.EOPNOTSUPP)
		}
		n.Coalesce = maps.Clone(c)
		return nil
	})
}

// Features is ethtool -k.
func (f *Ethtool) Features(iface string) (map[string]knob.Feature, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.nic(iface)
	if err != nil {
		return nil, err
	}
	if n.Features == nil {
		return nil, unsupported()
	}
	return maps.Clone(n.Features), nil
}

// SetFeatures is ethtool -K. Like the kernel, it silently keeps fixed
// features as they are.
func (f *Ethtool) SetFeatures(iface string, want map[string]bool) error {
	return f.set(iface, "feature", func(n *NIC) error {
		if n.Features == nil {
			return knob.NotWritable(unix.EOPNOTSUPP)
		}
		for name, on := range want {
			ft, ok := n.Features[name]
			if !ok {
				return errors.New("unsupported feature " + name)
			}
			if ft.Changeable {
				ft.Active = on
				n.Features[name] = ft
			}
		}
		return nil
	})
}

// Stats is ethtool -S.
func (f *Ethtool) Stats(iface string) (map[string]uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.nic(iface)
	if err != nil {
		return nil, err
	}
	if n.Stats == nil {
		return nil, unsupported()
	}
	return maps.Clone(n.Stats), nil
}

// Snapshot returns a copy of every NIC's state, for before/after comparisons.
func (f *Ethtool) Snapshot() map[string]NIC {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]NIC{}
	for name, n := range f.NICs {
		c := NIC{Driver: n.Driver, Coalesce: maps.Clone(n.Coalesce), Features: maps.Clone(n.Features), Stats: maps.Clone(n.Stats)}
		if n.Channels != nil {
			ch := *n.Channels
			c.Channels = &ch
		}
		if n.Rings != nil {
			r := *n.Rings
			c.Rings = &r
		}
		out[name] = c
	}
	return out
}
