// Package mssclamp clamps TCP's maximum segment size on the connections that
// cross one interface, so that a slow shaper (capped-uplink's, at 1 Mbit/s)
// never holds a full 1514-byte frame: serializing one takes 12.1 ms there,
// once at the shaper and once more at the provider, most of the delay floor
// a shaper that knows the cap still leaves.
//
// The clamp is an nftables table of lowlat's own per interface,
// "inet lowlat_mss_IFACE", written and read over netlink (never by parsing
// nft's output). It rewrites the MSS option of SYNs and SYN-ACKs, only
// downwards, in two base chains:
//
//   - prerouting, on packets arriving through the interface: the SYN-ACK a
//     local or a forwarded connection gets from upstream, so this side sends
//     smaller segments up through the shaper;
//   - postrouting, on packets leaving through it: the SYN (or SYN-ACK) going
//     upstream, so the peer sends smaller segments too.
//
// Those two hooks cover local and forwarded connections alike; input,
// forward and output each cover only one kind (TestIntegrationHooks
// measures which hook clamps which connection).
//
// One table per interface, rather than one lowlat table with chains per
// interface, makes each clamp one kernel object that one journaled knob
// owns whole: a write replaces the table in one atomic batch, a rollback
// deletes it, and two interfaces' clamps, applied and rolled back by
// different transactions, never share a table whose existence one of them
// would have to decide. Tables of other software are never touched.
package mssclamp

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Frame geometry on Ethernet, in bytes. A segment carrying an MSS of N (the
// option's value, IPv4) is a frame of N + FrameOverhead on the wire as a
// shaper counts it (no preamble or FCS); Linux puts a timestamp option in
// every segment, so N - Timestamps of it are payload.
const (
	EthernetHeader = 14
	IPv4Header     = 20
	IPv6Header     = 40
	TCPHeader      = 20
	// Timestamps is the TCP timestamp option (with its padding) in each
	// segment: the MSS option counts it as payload, the connection's
	// snd_mss (tcp_info) does not.
	Timestamps = 12
	// FrameOverhead is the frame's bytes beside the MSS: 54.
	FrameOverhead = EthernetHeader + IPv4Header + TCPHeader
	// HeaderBytes are the bytes of a full segment's frame that are not
	// payload: 66.
	HeaderBytes = FrameOverhead + Timestamps
	// FullFrame is a full-sized Ethernet frame (1500-byte MTU).
	FullFrame = 1514
	// MinMSS is the least clamp: 536, the MSS every IPv4 host must accept
	// (RFC 9293) and what a host assumes without the option.
	MinMSS = 536
	// MaxMSS is the largest MSS option IPv4 can carry a segment for.
	MaxMSS = 65535 - IPv4Header - TCPHeader
	// DefaultTarget is auto's serialization time for a full segment's frame:
	// 4 ms keeps the two frame times a packet can wait behind (the shaper's
	// and the provider's) under 10 ms, within cake's 5 ms target plus one
	// frame, and at 2 Mbit/s and up (1000-byte frames and more) it costs
	// under 7 % of the rate in headers.
	DefaultTarget = 4 * time.Millisecond
	// MinTarget and MaxTarget bound a target given by hand.
	MinTarget = 500 * time.Microsecond
	MaxTarget = 100 * time.Millisecond
)

// IPv6MSS is the IPv6 clamp that gives the same frames as the IPv4 clamp
// mss: its header is 20 bytes longer.
func IPv6MSS(mss int) int { return mss - (IPv6Header - IPv4Header) }

// FrameTime is how long a frame of n bytes takes at rateBits bit/s.
func FrameTime(n int, rateBits uint64) time.Duration {
	if rateBits == 0 {
		return 0
	}
	return time.Duration(float64(n) * 8 / float64(rateBits) * float64(time.Second))
}

// HeaderShare is the share of a full segment's frame that headers take
// with a clamp of mss: 66 / (mss + 54).
func HeaderShare(mss int) float64 {
	return float64(HeaderBytes) / float64(mss+FrameOverhead)
}

// Auto returns the clamp whose full frame takes at most target at rateBits
// bit/s, at least MinMSS; ok is false when a full 1514-byte frame already
// takes no longer than target: no clamp is needed.
func Auto(rateBits uint64, target time.Duration) (mss int, ok bool) {
	frame := int(float64(rateBits) / 8 * target.Seconds())
	if frame >= FullFrame {
		return 0, false
	}
	return max(frame-FrameOverhead, MinMSS), true
}

// Setting is a profile's clamp setting ([mss.clamp]): "off", "auto"
// (with "target=4ms" after it, the target for auto) or a byte count.
type Setting struct {
	// Auto takes the clamp from the shaper's lowest rate (Auto).
	Auto bool
	// MSS is a clamp given by hand; 0 with Auto false is off.
	MSS int
	// Target is auto's serialization time (DefaultTarget when not given).
	Target time.Duration
}

// Off reports whether the setting asks for no clamp.
func (s Setting) Off() bool { return !s.Auto && s.MSS == 0 }

// String is the canonical form.
func (s Setting) String() string {
	var v string
	switch {
	case s.Auto:
		v = "auto"
	case s.MSS > 0:
		v = strconv.Itoa(s.MSS)
	default:
		v = "off"
	}
	return v + " target=" + s.Target.String()
}

// ParseSetting parses "auto", "off" or a byte count, optionally followed
// by "target=DURATION".
func ParseSetting(v string) (Setting, error) {
	f := strings.Fields(v)
	if len(f) == 0 {
		return Setting{}, errors.New("empty clamp (want auto, off or a byte count)")
	}
	s := Setting{Target: DefaultTarget}
	switch f[0] {
	case "auto":
		s.Auto = true
	case "off":
	default:
		n, err := ParseMSS(f[0])
		if err != nil {
			return Setting{}, err
		}
		s.MSS = n
	}
	for _, kv := range f[1:] {
		k, val, ok := strings.Cut(kv, "=")
		if !ok || k != "target" {
			return Setting{}, fmt.Errorf("%q: want target=DURATION after the clamp (e.g. target=4ms)", kv)
		}
		d, err := time.ParseDuration(val)
		if err != nil || d < MinTarget || d > MaxTarget {
			return Setting{}, fmt.Errorf("target %q: want a time from %s to %s, e.g. 4ms", val, MinTarget, MaxTarget)
		}
		s.Target = d
	}
	return s, nil
}

// ParseMSS parses a clamp in bytes, MinMSS..MaxMSS.
func ParseMSS(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("clamp %q: want auto, off or a byte count from %d to %d", v, MinMSS, MaxMSS)
	}
	if n < MinMSS || n > MaxMSS {
		return 0, fmt.Errorf("clamp %d bytes: want %d to %d (%d is the least every IPv4 host accepts)", n, MinMSS, MaxMSS, MinMSS)
	}
	return n, nil
}

// TablePrefix starts the name of each of lowlat's clamp tables.
const TablePrefix = "lowlat_mss_"

// Table is the name of iface's clamp table (family inet).
func Table(iface string) string { return TablePrefix + iface }

// ErrNotSupported marks a kernel that cannot clamp: no nf_tables, no inet
// family, or no TCP option rewriting (the exthdr set, Linux 4.14).
var ErrNotSupported = errors.New("not supported by this kernel")

// State is what iface's clamp table holds.
type State struct {
	// MSS is the clamp of a table exactly as lowlat writes it; 0 with
	// Unmanaged empty is no table.
	MSS int
	// Unmanaged says how a table of that name differs from what lowlat
	// writes (changed by hand or by other software).
	Unmanaged string
}

// Present reports whether there is a table.
func (s State) Present() bool { return s.MSS > 0 || s.Unmanaged != "" }

// UnmanagedPrefix starts the value of a table lowlat did not write as it is.
const UnmanagedPrefix = "@unmanaged: "

// String is the state as the knob mss/IFACE reads it, "" for no table: the
// clamp in bytes ("536") or "@unmanaged: how it differs".
func (s State) String() string {
	switch {
	case s.Unmanaged != "":
		return UnmanagedPrefix + s.Unmanaged
	case s.MSS > 0:
		return strconv.Itoa(s.MSS)
	}
	return ""
}
