//go:build linux

package host

import (
	"errors"
	"fmt"
	"sort"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"
)

// LiveEthtool is lowlat's one wrapper of the ethtool ioctls (SIOCETHTOOL):
// what ethtool -i, -l/-L, -g/-G, -c/-C, -k/-K and -S do. The ioctls work back
// to 3.10 kernels, unlike the ethtool netlink family. Gather reads NIC facts
// with Ethtool; the ethtool knobs read and change settings with the rest.
// Errors from a query or a change are the ioctl's (an errno, unwrapped, for
// the caller to classify) or say that the socket could not be opened.
//
// Every call opens its own socket and closes it before returning. The kernel
// looks an interface name up in the network namespace of the socket, fixed
// when the socket is created, not in the caller's: a socket kept across calls
// would go on naming the interfaces of the namespace it was opened in after
// its user moved (the lab gathers and applies on threads it moved into
// namespaces, and knobs run on whatever thread their caller is on), and an
// open socket keeps its namespace alive after the namespace is deleted. A
// socket costs a socket(2) and a close(2), microseconds next to ioctls that
// take the driver's lock.
type LiveEthtool struct{}

// withSocket runs f with a socket of the calling thread's network namespace.
func withSocket(f func(e *ethtool.Ethtool) error) error {
	e, err := ethtool.NewEthtool()
	if err != nil {
		return fmt.Errorf("ethtool socket: %w", err)
	}
	defer e.Close()
	return f(e)
}

// query runs one read with a socket of its own.
func query[T any](get func(e *ethtool.Ethtool) (T, error)) (T, error) {
	var out T
	err := withSocket(func(e *ethtool.Ethtool) error {
		var err error
		out, err = get(e)
		return err
	})
	return out, err
}

// Ethtool returns what the driver of iface reports, for Gather; nil without
// an error when the interface has no ethtool support at all (lo). Each query
// the driver does not support is recorded in Ethtool.Errors rather than
// failing.
func (LiveEthtool) Ethtool(iface string) (*Ethtool, error) {
	var out *Ethtool
	err := withSocket(func(e *ethtool.Ethtool) error {
		info, err := e.DriverInfo(iface)
		if err != nil {
			if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENODEV) {
				return nil
			}
			return fmt.Errorf("ethtool %s: driver info: %w", iface, err)
		}
		out = &Ethtool{Driver: info.Driver, Version: info.Version, Firmware: info.FwVersion, BusInfo: info.BusInfo, Errors: map[string]string{}}
		note := func(what string, err error) {
			if err != nil {
				out.Errors[what] = err.Error()
			}
		}
		if ch, err := channels(e, iface); err == nil {
			out.Channels = &ch
		} else {
			note("channels", err)
		}
		if r, err := rings(e, iface); err == nil {
			out.Rings = &r
		} else {
			note("rings", err)
		}
		if c, err := coalesce(e, iface); err == nil {
			out.Coalesce = make(map[string]uint32, len(factCoalesce))
			for _, p := range factCoalesce {
				out.Coalesce[p] = c[p]
			}
		} else {
			note("coalesce", err)
		}
		if fs, err := features(e, iface); err == nil {
			out.Features = make(map[string]bool, len(fs))
			for name, st := range fs {
				out.Features[name] = st.Active
				if !st.Changeable {
					out.Fixed = append(out.Fixed, name)
				}
			}
			sort.Strings(out.Fixed)
		} else {
			note("features", err)
		}
		if s, err := e.Stats(iface); err == nil {
			out.Stats = s
		} else {
			note("stats", err)
		}
		if len(out.Errors) == 0 {
			out.Errors = nil
		}
		return nil
	})
	return out, err
}

// Driver is the driver's name (ethtool -i).
func (LiveEthtool) Driver(iface string) (string, error) {
	return query(func(e *ethtool.Ethtool) (string, error) {
		info, err := e.DriverInfo(iface)
		return info.Driver, err
	})
}

func channels(e *ethtool.Ethtool, iface string) (Channels, error) {
	c, err := e.GetChannels(iface)
	return Channels{MaxRx: c.MaxRx, MaxTx: c.MaxTx, MaxOther: c.MaxOther, MaxCombined: c.MaxCombined,
		Rx: c.RxCount, Tx: c.TxCount, Other: c.OtherCount, Combined: c.CombinedCount}, err
}

// Channels is ethtool -l.
func (LiveEthtool) Channels(iface string) (Channels, error) {
	return query(func(e *ethtool.Ethtool) (Channels, error) { return channels(e, iface) })
}

// SetChannels is ethtool -L.
func (LiveEthtool) SetChannels(iface string, c Channels) error {
	return withSocket(func(e *ethtool.Ethtool) error {
		_, err := e.SetChannels(iface, ethtool.Channels{MaxRx: c.MaxRx, MaxTx: c.MaxTx, MaxOther: c.MaxOther, MaxCombined: c.MaxCombined,
			RxCount: c.Rx, TxCount: c.Tx, OtherCount: c.Other, CombinedCount: c.Combined})
		return err
	})
}

func rings(e *ethtool.Ethtool, iface string) (Rings, error) {
	r, err := e.GetRing(iface)
	return Rings{RxMax: r.RxMaxPending, TxMax: r.TxMaxPending, Rx: r.RxPending, Tx: r.TxPending}, err
}

// Rings is ethtool -g.
func (LiveEthtool) Rings(iface string) (Rings, error) {
	return query(func(e *ethtool.Ethtool) (Rings, error) { return rings(e, iface) })
}

// SetRings is ethtool -G for the rx and tx rings; mini and jumbo rings keep
// their sizes.
func (LiveEthtool) SetRings(iface string, r Rings) error {
	return withSocket(func(e *ethtool.Ethtool) error {
		cur, err := e.GetRing(iface)
		if err != nil {
			return err
		}
		cur.RxPending, cur.TxPending = r.Rx, r.Tx
		_, err = e.SetRing(iface, cur)
		return err
	})
}

// coalesceFields are struct ethtool_coalesce's fields in CoalesceParams order.
func coalesceFields(c *ethtool.Coalesce) []*uint32 {
	return []*uint32{
		&c.RxCoalesceUsecs, &c.RxMaxCoalescedFrames, &c.RxCoalesceUsecsIrq, &c.RxMaxCoalescedFramesIrq,
		&c.TxCoalesceUsecs, &c.TxMaxCoalescedFrames, &c.TxCoalesceUsecsIrq, &c.TxMaxCoalescedFramesIrq,
		&c.StatsBlockCoalesceUsecs, &c.UseAdaptiveRxCoalesce, &c.UseAdaptiveTxCoalesce,
		&c.PktRateLow, &c.RxCoalesceUsecsLow, &c.RxMaxCoalescedFramesLow, &c.TxCoalesceUsecsLow, &c.TxMaxCoalescedFramesLow,
		&c.PktRateHigh, &c.RxCoalesceUsecsHigh, &c.RxMaxCoalescedFramesHigh, &c.TxCoalesceUsecsHigh, &c.TxMaxCoalescedFramesHigh,
		&c.RateSampleInterval,
	}
}

func coalesce(e *ethtool.Ethtool, iface string) (map[string]uint32, error) {
	c, err := e.GetCoalesce(iface)
	if err != nil {
		return nil, err
	}
	out := make(map[string]uint32, len(CoalesceParams))
	for i, p := range coalesceFields(&c) {
		out[CoalesceParams[i]] = *p
	}
	return out, nil
}

// Coalesce is ethtool -c: every parameter by its CoalesceParams name.
func (LiveEthtool) Coalesce(iface string) (map[string]uint32, error) {
	return query(func(e *ethtool.Ethtool) (map[string]uint32, error) { return coalesce(e, iface) })
}

// SetCoalesce is ethtool -C. It writes every parameter (a missing name as 0),
// so c should hold them all.
func (LiveEthtool) SetCoalesce(iface string, c map[string]uint32) error {
	var sc ethtool.Coalesce
	for i, p := range coalesceFields(&sc) {
		*p = c[CoalesceParams[i]]
	}
	return withSocket(func(e *ethtool.Ethtool) error {
		_, err := e.SetCoalesce(iface, sc)
		return err
	})
}

func features(e *ethtool.Ethtool, iface string) (map[string]FeatureState, error) {
	fs, err := e.FeaturesWithState(iface)
	if err != nil {
		return nil, err
	}
	out := make(map[string]FeatureState, len(fs))
	for name, st := range fs {
		out[name] = FeatureState{Active: st.Active, Changeable: st.Available}
	}
	return out, nil
}

// Features is ethtool -k, by the kernel's feature names.
func (LiveEthtool) Features(iface string) (map[string]FeatureState, error) {
	return query(func(e *ethtool.Ethtool) (map[string]FeatureState, error) { return features(e, iface) })
}

// SetFeatures is ethtool -K, by the kernel's feature names.
func (LiveEthtool) SetFeatures(iface string, want map[string]bool) error {
	if len(want) == 0 {
		return nil
	}
	return withSocket(func(e *ethtool.Ethtool) error { return e.Change(iface, want) })
}

// Stats is ethtool -S.
func (LiveEthtool) Stats(iface string) (map[string]uint64, error) {
	return query(func(e *ethtool.Ethtool) (map[string]uint64, error) { return e.Stats(iface) })
}
