package knob

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/lowlat/lowlat/internal/host"
)

// Ethtool is the seam for the ethtool ioctls (SIOCETHTOOL): what "ethtool -l/-L,
// -g/-G, -k/-K, -c/-C, -i, -S" do. The live implementation opens one socket per
// call in the calling thread's network namespace; knobtest.Ethtool stands in for it
// in tests. Errors wrap ErrNoDevice for an interface that does not exist,
// ErrNotWritable for a driver that refuses a change (EOPNOTSUPP, EPERM) and
// ErrNotSupported for a query the driver does not implement.
type Ethtool interface {
	Channels(iface string) (host.Channels, error)
	SetChannels(iface string, c host.Channels) error
	Rings(iface string) (host.Rings, error)
	SetRings(iface string, r host.Rings) error
	Coalesce(iface string) (Coalesce, error)
	SetCoalesce(iface string, c Coalesce) error
	Features(iface string) (map[string]Feature, error)
	SetFeatures(iface string, want map[string]bool) error
	Stats(iface string) (map[string]uint64, error)
	Driver(iface string) (string, error)
}

// Feature is one offload feature (ETH_SS_FEATURES name, as "ethtool -k" lists
// the long names): whether it is on, and whether the driver lets it change
// (false is ethtool's "[fixed]").
type Feature struct {
	Active     bool `json:"active"`
	Changeable bool `json:"changeable"`
}

// Coalesce is ethtool -c: every parameter by its ethtool -C name. A set writes
// all of them back, so parameters lowlat does not change keep their values.
type Coalesce map[string]uint32

// CoalesceParams are the ethtool -C names, in struct ethtool_coalesce order.
var CoalesceParams = host.CoalesceParams

// FeatureGroups maps ethtool -K short names to the kernel feature names they
// switch together (after ethtool's off_flag_def). "tso" is IPv4 and IPv6 TCP
// segmentation only: ethtool -K tso also flips the ECN and IP-ID-mangling
// variants, which drivers leave off on purpose, and a latency tool has no
// business changing IP ID behaviour. Members a kernel lacks are ignored.
var FeatureGroups = map[string][]string{
	"lro":    {"rx-lro"},
	"gro":    {"rx-gro"},
	"gso":    {"tx-generic-segmentation"},
	"tso":    {"tx-tcp-segmentation", "tx-tcp6-segmentation"},
	"sg":     {"tx-scatter-gather", "tx-scatter-gather-fraglist"},
	"rx":     {"rx-checksum"},
	"rxhash": {"rx-hashing"},
	"ntuple": {"rx-ntuple-filter"},
	"rxvlan": {"rx-vlan-hw-parse"},
	"txvlan": {"tx-vlan-hw-insert"},
	"ufo":    {"tx-udp-fragmentation"},
	"gro-hw": {"rx-gro-hw"},
}

// ethtoolGroups are the parts of an ethtool knob ID.
var ethtoolGroups = map[string][]string{
	"channels": {"combined", "rx", "tx", "other"},
	"ring":     {"rx", "tx"},
	"coalesce": CoalesceParams,
	"feature":  nil, // any short or kernel feature name
}

// EthtoolID returns the knob ID "ethtool/<iface>/<group>/<name>".
func EthtoolID(iface, group, name string) string {
	return "ethtool/" + iface + "/" + group + "/" + name
}

// ValidIfname reports whether s can be an interface name (IFNAMSIZ, no slash or
// space), so it can be part of a knob ID and a sysfs path.
func ValidIfname(s string) bool {
	return s != "" && len(s) <= 15 && s != "." && s != ".." && !strings.ContainsAny(s, "/ \t\n:")
}

// ethtoolKnob is one ethtool setting of one interface.
type ethtoolKnob struct {
	sys   *System
	iface string
	group string
	name  string
}

func parseEthtoolID(rest string) (iface, group, name string, err error) {
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) != 3 || !ValidIfname(parts[0]) {
		return "", "", "", fmt.Errorf("ethtool knob %q: want ethtool/<iface>/<channels|ring|feature|coalesce>/<name>", rest)
	}
	iface, group, name = parts[0], parts[1], parts[2]
	names, ok := ethtoolGroups[group]
	if !ok {
		return "", "", "", fmt.Errorf("ethtool knob %q: unknown group %q (known: channels, ring, feature, coalesce)", rest, group)
	}
	if group == "feature" {
		if name == "" || strings.ContainsAny(name, "/ ") {
			return "", "", "", fmt.Errorf("ethtool knob %q: bad feature name", rest)
		}
		return iface, group, name, nil
	}
	if !slices.Contains(names, name) {
		return "", "", "", fmt.Errorf("ethtool knob %q: unknown %s setting %q (known: %s)", rest, group, name, strings.Join(names, ", "))
	}
	return iface, group, name, nil
}

func newEthtool(sys *System, rest string) (Knob, error) {
	iface, group, name, err := parseEthtoolID(rest)
	if err != nil {
		return nil, err
	}
	return &ethtoolKnob{sys: sys, iface: iface, group: group, name: name}, nil
}

func (k *ethtoolKnob) ID() string { return EthtoolID(k.iface, k.group, k.name) }

func (k *ethtoolKnob) backend() (Ethtool, error) { return EthtoolOf(k.sys) }

func (k *ethtoolKnob) errf(op string, err error) error {
	return fmt.Errorf("ethtool %s: %s %s %s: %w", k.iface, op, k.group, k.name, err)
}

// isOnOff reports whether the knob's values are on/off rather than numbers.
func (k *ethtoolKnob) isOnOff() bool {
	return k.group == "feature" || (k.group == "coalesce" && strings.HasPrefix(k.name, "adaptive-"))
}

func (k *ethtoolKnob) Validate(v string) error {
	if v == Absent {
		return nil
	}
	if k.group == "feature" {
		if v == "on" || v == "off" {
			return nil
		}
		if _, err := parseFeatureDetail(v); err != nil {
			return err
		}
		return nil
	}
	if k.isOnOff() {
		if v != "on" && v != "off" {
			return fmt.Errorf("want on or off, not %q", v)
		}
		return nil
	}
	if _, err := strconv.ParseUint(v, 10, 32); err != nil {
		return fmt.Errorf("want a number, not %q", v)
	}
	return nil
}

// Read returns the value, or Absent when the interface no longer exists (so a
// rollback of a NIC that vanished has nothing left to restore).
func (k *ethtoolKnob) Read(ctx context.Context) (string, error) {
	e, err := k.backend()
	if err != nil {
		return "", err
	}
	v, err := k.read(e)
	if errors.Is(err, ErrNoDevice) {
		return Absent, nil
	}
	return v, err
}

func (k *ethtoolKnob) read(e Ethtool) (string, error) {
	switch k.group {
	case "channels":
		c, err := e.Channels(k.iface)
		if err != nil {
			return "", k.errf("get", err)
		}
		return strconv.FormatUint(uint64(channelCount(c, k.name)), 10), nil
	case "ring":
		r, err := e.Rings(k.iface)
		if err != nil {
			return "", k.errf("get", err)
		}
		if k.name == "rx" {
			return strconv.FormatUint(uint64(r.Rx), 10), nil
		}
		return strconv.FormatUint(uint64(r.Tx), 10), nil
	case "coalesce":
		c, err := e.Coalesce(k.iface)
		if err != nil {
			return "", k.errf("get", err)
		}
		return formatCoalesce(k.name, c[k.name]), nil
	}
	fs, err := e.Features(k.iface)
	if err != nil {
		return "", k.errf("get", err)
	}
	members := FeatureMembers(k.name, fs)
	if len(members) == 0 {
		return "", k.errf("get", fmt.Errorf("%w: driver has no feature %q", ErrNotSupported, k.name))
	}
	return FeatureValue(members, fs), nil
}

func formatCoalesce(name string, v uint32) string {
	if strings.HasPrefix(name, "adaptive-") {
		if v != 0 {
			return "on"
		}
		return "off"
	}
	return strconv.FormatUint(uint64(v), 10)
}

func channelCount(c host.Channels, name string) uint32 {
	switch name {
	case "combined":
		return c.Combined
	case "rx":
		return c.Rx
	case "tx":
		return c.Tx
	}
	return c.Other
}

func channelMax(c host.Channels, name string) uint32 {
	switch name {
	case "combined":
		return c.MaxCombined
	case "rx":
		return c.MaxRx
	case "tx":
		return c.MaxTx
	}
	return c.MaxOther
}

// FeatureMembers returns the kernel features a short or kernel name stands for
// that the driver reports.
func FeatureMembers(name string, fs map[string]Feature) []string {
	var out []string
	if group, ok := FeatureGroups[name]; ok {
		for _, m := range group {
			if _, ok := fs[m]; ok {
				out = append(out, m)
			}
		}
		return out
	}
	if _, ok := fs[name]; ok {
		return []string{name}
	}
	return nil
}

// FeatureValue is the value of a feature group: "on" or "off" when every member
// the driver lets change agrees (fixed members are ignored, as ethtool -K
// ignores them), else each member's state ("tx-tcp-segmentation=on,
// tx-tcp6-segmentation=off"), so a rollback can restore a mixed state exactly.
func FeatureValue(members []string, fs map[string]Feature) string {
	var changeable []string
	for _, m := range members {
		if fs[m].Changeable {
			changeable = append(changeable, m)
		}
	}
	if len(changeable) == 0 {
		changeable = members // all fixed: report what they are
	}
	on, off := 0, 0
	for _, m := range changeable {
		if fs[m].Active {
			on++
		} else {
			off++
		}
	}
	switch {
	case off == 0:
		return "on"
	case on == 0:
		return "off"
	}
	var parts []string
	for _, m := range changeable {
		parts = append(parts, m+"="+onOff(fs[m].Active))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func parseFeatureDetail(v string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, p := range strings.Split(v, ",") {
		name, val, ok := strings.Cut(p, "=")
		if !ok || name == "" || (val != "on" && val != "off") {
			return nil, fmt.Errorf("bad feature value %q (want on, off or name=on|off,...)", v)
		}
		out[name] = val == "on"
	}
	return out, nil
}

func (k *ethtoolKnob) Write(ctx context.Context, value string) error {
	if err := k.Validate(value); err != nil {
		return fmt.Errorf("%s: %w", k.ID(), err)
	}
	e, err := k.backend()
	if err != nil {
		return err
	}
	if value == Absent {
		// Restoring a device that vanished: nothing is left to restore.
		if _, err := e.Driver(k.iface); errors.Is(err, ErrNoDevice) {
			return nil
		}
		return fmt.Errorf("%s: %s exists again: cannot set %s", k.ID(), k.iface, Absent)
	}
	switch k.group {
	case "channels":
		return k.writeChannels(e, value)
	case "ring":
		n, _ := strconv.ParseUint(value, 10, 32)
		r, err := e.Rings(k.iface)
		if err != nil {
			return k.errf("set", err)
		}
		max := r.RxMax
		if k.name == "tx" {
			max = r.TxMax
		}
		if max == 0 {
			return k.errf("set", notWritablef("the driver reports no %s ring size", k.name))
		}
		if uint32(n) > max || n == 0 {
			return k.errf("set", fmt.Errorf("%d is outside 1..%d (the driver's maximum)", n, max))
		}
		if k.name == "rx" {
			r.Rx = uint32(n)
		} else {
			r.Tx = uint32(n)
		}
		if err := e.SetRings(k.iface, r); err != nil {
			return k.errf("set", err)
		}
		return nil
	case "coalesce":
		c, err := e.Coalesce(k.iface)
		if err != nil {
			return k.errf("set", err)
		}
		var n uint64
		switch value {
		case "on":
			n = 1
		case "off":
			n = 0
		default:
			n, _ = strconv.ParseUint(value, 10, 32)
		}
		c = cloneCoalesce(c)
		c[k.name] = uint32(n)
		if err := e.SetCoalesce(k.iface, c); err != nil {
			return k.errf("set", err)
		}
		return nil
	}
	return k.writeFeature(e, value)
}

func cloneCoalesce(c Coalesce) Coalesce {
	out := Coalesce{}
	for k, v := range c {
		out[k] = v
	}
	return out
}

func (k *ethtoolKnob) writeFeature(e Ethtool, value string) error {
	fs, err := e.Features(k.iface)
	if err != nil {
		return k.errf("set", err)
	}
	members := FeatureMembers(k.name, fs)
	if len(members) == 0 {
		return k.errf("set", notWritablef("the driver has no feature %q", k.name))
	}
	want := map[string]bool{}
	if value == "on" || value == "off" {
		for _, m := range members {
			if fs[m].Changeable {
				want[m] = value == "on"
			}
		}
		if len(want) == 0 {
			// ethtool prints these as "[fixed]".
			return k.errf("set", notWritablef("%s is fixed %s by the driver", strings.Join(members, ", "), FeatureValue(members, fs)))
		}
	} else {
		detail, _ := parseFeatureDetail(value)
		for m, on := range detail {
			if f, ok := fs[m]; ok && f.Changeable {
				want[m] = on
			}
		}
	}
	if err := e.SetFeatures(k.iface, want); err != nil {
		return k.errf("set", err)
	}
	return nil
}

// writeChannels changes a channel count. Drivers re-request their queue
// interrupts when the count changes and some reset their affinity to the
// driver's own hint, so the interface's IRQ affinities are read before and
// written back after: changing queues must not move interrupts as a side
// effect (that would make a rollback of the IRQ placement inexact). A driver
// that renumbers its interrupts makes the planned IRQ knobs refer to other
// vectors: that is an error, and the transaction rolls back.
func (k *ethtoolKnob) writeChannels(e Ethtool, value string) error {
	n, _ := strconv.ParseUint(value, 10, 32)
	c, err := e.Channels(k.iface)
	if err != nil {
		return k.errf("set", err)
	}
	max := channelMax(c, k.name)
	if max == 0 {
		return k.errf("set", notWritablef("the driver has no %s channels", k.name))
	}
	if uint32(n) > max {
		return k.errf("set", fmt.Errorf("%d is more than the driver's maximum of %d", n, max))
	}
	if channelCount(c, k.name) == uint32(n) {
		return nil
	}
	switch k.name {
	case "combined":
		c.Combined = uint32(n)
	case "rx":
		c.Rx = uint32(n)
	case "tx":
		c.Tx = uint32(n)
	default:
		c.Other = uint32(n)
	}
	before := snapshotAffinity(k.sys, k.iface)
	if err := e.SetChannels(k.iface, c); err != nil {
		return k.errf("set", err)
	}
	after := snapshotAffinity(k.sys, k.iface)
	for irq, was := range before {
		now, ok := after[irq]
		if !ok || now == was {
			continue
		}
		p := k.sys.path(fmt.Sprintf("/proc/irq/%d/smp_affinity_list", irq))
		// Best effort: an interrupt that is gone or kernel-managed has no
		// affinity to keep.
		_ = writeExisting(p, was+"\n")
	}
	if len(before) > 0 && len(after) > 0 && !sameKeys(before, after) {
		return k.errf("set", fmt.Errorf("changing channels renumbered %s's interrupts (%d before, %d after): the planned IRQ placement no longer matches; change the channels alone first (--skip irq.placement --set ethtool.channels.combined=N), then plan and apply again", k.iface, len(before), len(after)))
	}
	return nil
}

// sameKeys reports whether the vectors after a change are the ones before, as
// far as a changed queue count allows: vectors may be added (more queues) or
// released (fewer), but numbers that vanish while new ones appear mean the
// driver renumbered them.
func sameKeys(before, after map[int]string) bool {
	added, removed := false, false
	for irq := range after {
		if _, ok := before[irq]; !ok {
			added = true
		}
	}
	for irq := range before {
		if _, ok := after[irq]; !ok {
			removed = true
		}
	}
	return !(added && removed)
}

// NICIRQs returns the interrupt numbers of an interface's device from sysfs
// msi_irqs (on the PCI function, which for virtio-net is the parent of the
// virtio device), under sys's root.
func NICIRQs(sys *System, iface string) []int {
	dev, err := filepath.EvalSymlinks(sys.path("/sys/class/net/" + iface + "/device"))
	if err != nil {
		return nil
	}
	for i := 0; i < 3; i++ {
		ents, err := os.ReadDir(filepath.Join(dev, "msi_irqs"))
		if err == nil {
			var out []int
			for _, e := range ents {
				if n, err := strconv.Atoi(e.Name()); err == nil {
					out = append(out, n)
				}
			}
			sort.Ints(out)
			return out
		}
		dev = filepath.Dir(dev)
	}
	return nil
}

func snapshotAffinity(sys *System, iface string) map[int]string {
	out := map[int]string{}
	for _, irq := range NICIRQs(sys, iface) {
		b, err := os.ReadFile(sys.path(fmt.Sprintf("/proc/irq/%d/smp_affinity_list", irq)))
		if err == nil {
			out[irq] = strings.TrimSpace(string(b))
		}
	}
	return out
}

func (k *ethtoolKnob) Satisfied(live, desired string) bool {
	if live == Absent || desired == Absent {
		return live == desired
	}
	return live == desired
}

// Same is exact equality. A device that vanished is not "restored": see
// Vanished.
func (k *ethtoolKnob) Same(a, b string) bool { return a == b }
