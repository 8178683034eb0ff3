//go:build linux

package host

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"
)

// LiveEthtool reads NIC settings with the ethtool ioctls (they work back to
// 3.10 kernels, unlike the ethtool netlink family). Each query that the driver
// does not support is recorded in Ethtool.Errors rather than failing.
type LiveEthtool struct {
	once sync.Once
	e    *ethtool.Ethtool
	err  error
}

// NewLiveEthtool returns the live reader; the socket opens on first use.
func NewLiveEthtool() *LiveEthtool { return &LiveEthtool{} }

// Close releases the ioctl socket.
func (l *LiveEthtool) Close() {
	if l.e != nil {
		l.e.Close()
	}
}

// Ethtool returns what the driver of iface reports; nil without an error when
// the interface has no ethtool support at all (lo).
func (l *LiveEthtool) Ethtool(iface string) (*Ethtool, error) {
	l.once.Do(func() { l.e, l.err = ethtool.NewEthtool() })
	if l.err != nil {
		return nil, fmt.Errorf("ethtool socket: %w", l.err)
	}
	e := l.e
	out := &Ethtool{Errors: map[string]string{}}
	info, err := e.DriverInfo(iface)
	if err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENODEV) {
			return nil, nil
		}
		return nil, fmt.Errorf("ethtool %s: driver info: %w", iface, err)
	}
	out.Driver, out.Version, out.Firmware, out.BusInfo = info.Driver, info.Version, info.FwVersion, info.BusInfo
	note := func(what string, err error) {
		if err != nil {
			out.Errors[what] = err.Error()
		}
	}
	if ch, err := e.GetChannels(iface); err == nil {
		out.Channels = &Channels{MaxRx: ch.MaxRx, MaxTx: ch.MaxTx, MaxOther: ch.MaxOther, MaxCombined: ch.MaxCombined,
			Rx: ch.RxCount, Tx: ch.TxCount, Other: ch.OtherCount, Combined: ch.CombinedCount}
	} else {
		note("channels", err)
	}
	if r, err := e.GetRing(iface); err == nil {
		out.Rings = &Rings{RxMax: r.RxMaxPending, TxMax: r.TxMaxPending, Rx: r.RxPending, Tx: r.TxPending}
	} else {
		note("rings", err)
	}
	if c, err := e.GetCoalesce(iface); err == nil {
		out.Coalesce = map[string]uint32{
			"rx-usecs": c.RxCoalesceUsecs, "rx-frames": c.RxMaxCoalescedFrames,
			"tx-usecs": c.TxCoalesceUsecs, "tx-frames": c.TxMaxCoalescedFrames,
			"adaptive-rx": c.UseAdaptiveRxCoalesce, "adaptive-tx": c.UseAdaptiveTxCoalesce,
		}
	} else {
		note("coalesce", err)
	}
	if f, err := e.FeaturesWithState(iface); err == nil {
		out.Features = make(map[string]bool, len(f))
		for name, st := range f {
			out.Features[name] = st.Active
			if !st.Available {
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
	return out, nil
}
