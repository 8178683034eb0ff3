//go:build linux

package knob

import (
	"errors"
	"fmt"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"
)

// liveEthtool is the ioctl backend. It opens a socket per call: the socket's
// network namespace decides which interface a name means, and knobs run on
// whatever thread (namespace) their caller is on.
type liveEthtool struct{}

func withEthtool(f func(e *ethtool.Ethtool) error) error {
	e, err := ethtool.NewEthtool()
	if err != nil {
		return fmt.Errorf("ethtool socket: %w", err)
	}
	defer e.Close()
	return f(e)
}

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

func (liveEthtool) Driver(iface string) (string, error) {
	var name string
	err := withEthtool(func(e *ethtool.Ethtool) error {
		info, err := e.DriverInfo(iface)
		name = info.Driver
		return err
	})
	return name, ethtoolErr(err, false)
}

func (liveEthtool) Channels(iface string) (host.Channels, error) {
	var out host.Channels
	err := withEthtool(func(e *ethtool.Ethtool) error {
		c, err := e.GetChannels(iface)
		out = host.Channels{MaxRx: c.MaxRx, MaxTx: c.MaxTx, MaxOther: c.MaxOther, MaxCombined: c.MaxCombined,
			Rx: c.RxCount, Tx: c.TxCount, Other: c.OtherCount, Combined: c.CombinedCount}
		return err
	})
	return out, ethtoolErr(err, false)
}

func (liveEthtool) SetChannels(iface string, c host.Channels) error {
	err := withEthtool(func(e *ethtool.Ethtool) error {
		_, err := e.SetChannels(iface, ethtool.Channels{MaxRx: c.MaxRx, MaxTx: c.MaxTx, MaxOther: c.MaxOther, MaxCombined: c.MaxCombined,
			RxCount: c.Rx, TxCount: c.Tx, OtherCount: c.Other, CombinedCount: c.Combined})
		return err
	})
	return ethtoolErr(err, true)
}

func (liveEthtool) Rings(iface string) (host.Rings, error) {
	var out host.Rings
	err := withEthtool(func(e *ethtool.Ethtool) error {
		r, err := e.GetRing(iface)
		out = host.Rings{RxMax: r.RxMaxPending, TxMax: r.TxMaxPending, Rx: r.RxPending, Tx: r.TxPending}
		return err
	})
	return out, ethtoolErr(err, false)
}

func (liveEthtool) SetRings(iface string, r host.Rings) error {
	err := withEthtool(func(e *ethtool.Ethtool) error {
		cur, err := e.GetRing(iface)
		if err != nil {
			return err
		}
		// Mini and jumbo rings keep their values.
		cur.RxPending, cur.TxPending = r.Rx, r.Tx
		_, err = e.SetRing(iface, cur)
		return err
	})
	return ethtoolErr(err, true)
}

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

func (liveEthtool) Coalesce(iface string) (Coalesce, error) {
	out := Coalesce{}
	err := withEthtool(func(e *ethtool.Ethtool) error {
		c, err := e.GetCoalesce(iface)
		if err != nil {
			return err
		}
		for i, p := range coalesceFields(&c) {
			out[CoalesceParams[i]] = *p
		}
		return nil
	})
	return out, ethtoolErr(err, false)
}

func (liveEthtool) SetCoalesce(iface string, c Coalesce) error {
	var sc ethtool.Coalesce
	for i, p := range coalesceFields(&sc) {
		*p = c[CoalesceParams[i]]
	}
	err := withEthtool(func(e *ethtool.Ethtool) error {
		_, err := e.SetCoalesce(iface, sc)
		return err
	})
	return ethtoolErr(err, true)
}

func (liveEthtool) Features(iface string) (map[string]Feature, error) {
	out := map[string]Feature{}
	err := withEthtool(func(e *ethtool.Ethtool) error {
		fs, err := e.FeaturesWithState(iface)
		for name, st := range fs {
			out[name] = Feature{Active: st.Active, Changeable: st.Available}
		}
		return err
	})
	return out, ethtoolErr(err, false)
}

func (liveEthtool) SetFeatures(iface string, want map[string]bool) error {
	if len(want) == 0 {
		return nil
	}
	err := withEthtool(func(e *ethtool.Ethtool) error { return e.Change(iface, want) })
	return ethtoolErr(err, true)
}

func (liveEthtool) Stats(iface string) (map[string]uint64, error) {
	var out map[string]uint64
	err := withEthtool(func(e *ethtool.Ethtool) error {
		s, err := e.Stats(iface)
		out = s
		return err
	})
	return out, ethtoolErr(err, false)
}
