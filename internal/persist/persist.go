// Package persist turns an apply into the files that make it survive a reboot:
// /etc/sysctl.d/99-lowlat.conf for sysctls (applied by systemd-sysctl or the
// distribution's boot scripts), and a systemd oneshot unit that re-applies the
// qdisc, route and sysfs knobs once the network is up. The files are knob
// changes themselves, so they are journaled with the rest and rollback removes
// them.
package persist

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/lowlat/lowlat/internal/knob"
)

// Paths of the files lowlat writes.
const (
	SysctlFile = "/etc/sysctl.d/99-lowlat.conf"
	UnitFile   = "/etc/systemd/system/lowlat-boot.service"
	UnitWants  = "/etc/systemd/system/multi-user.target.wants/lowlat-boot.service"
	// The timer re-asserts interrupt affinities, queue steering and the
	// irqbalance state every 5 minutes (runbook 002: irqbalance, a driver
	// reset or a NIC flap moves interrupts back).
	ReassertService = "/etc/systemd/system/lowlat-reassert.service"
	ReassertTimer   = "/etc/systemd/system/lowlat-reassert.timer"
	ReassertWants   = "/etc/systemd/system/timers.target.wants/lowlat-reassert.timer"
)

// Reasserted are the knob kinds the timer re-asserts: the ones something
// else on the host changes behind lowlat's back.
var Reasserted = map[string]bool{"irq": true, "queue": true, "ethtool": true, "service": true}

// deviceKinds are re-applied by the boot unit: nothing else restores them
// after a reboot.
var deviceKinds = map[string]bool{"qdisc": true, "route": true, "sysfs": true, "ethtool": true, "irq": true, "queue": true,
	"service": true, "cpufreq": true, "block": true}

// nicOf returns the interface an ethtool or queue knob acts on, or "".
func nicOf(id string) string {
	kind, rest, _ := strings.Cut(id, "/")
	if kind != "ethtool" && kind != "queue" {
		return ""
	}
	iface, _, _ := strings.Cut(rest, "/")
	return iface
}

// Setting is one knob and the value it should have after a reboot.
type Setting struct {
	Knob  string
	Value string
}

// Options describe the host and the invocation.
type Options struct {
	Profile string
	// Exe is the absolute path of the lowlat binary the unit runs.
	Exe string
	// Journal is the journal path the unit passes on.
	Journal string
	// Systemd says whether systemd runs this host (the unit is only written then).
	Systemd bool
	// Root prefixes the files' paths ("" or "/" for the host itself).
	Root string
}

func (o Options) path(p string) string {
	if o.Root == "" || o.Root == "/" {
		return p
	}
	return filepath.Join(o.Root, p)
}

// Changes returns the knob changes that persist settings, and notes for the
// user (e.g. no systemd: device knobs will not come back after a reboot).
func Changes(settings []Setting, o Options) ([]Change, []string) {
	var sysctls, nics []string
	devices, reassert := 0, 0
	for _, s := range settings {
		kind := knob.Kind(s.Knob)
		switch {
		case kind == "sysctl":
			name := strings.TrimPrefix(s.Knob, "sysctl/")
			sysctls = append(sysctls, fmt.Sprintf("%s = %s", name, s.Value))
		case deviceKinds[kind]:
			devices++
		}
		if Reasserted[kind] {
			reassert++
		}
		if n := nicOf(s.Knob); n != "" && !slices.Contains(nics, n) {
			nics = append(nics, n)
		}
	}
	sort.Strings(nics)
	sort.Strings(sysctls)
	var out []Change
	var notes []string
	if len(sysctls) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "# Written by lowlat (profile %s). 'lowlat rollback' removes this file.\n", o.Profile)
		for _, l := range sysctls {
			b.WriteString(l + "\n")
		}
		out = append(out, Change{Knob: "file" + o.path(SysctlFile), Value: b.String()})
	}
	if devices > 0 {
		if !o.Systemd {
			notes = append(notes, fmt.Sprintf("systemd does not run here: %d device change(s) (qdisc, route, sysfs, NIC, interrupt) will not be re-applied at boot (run 'lowlat boot' from your init scripts, after the NICs are up)", devices))
		} else {
			// The NICs whose queues and interrupts the unit sets must exist
			// and be up: their device units, then network-online.
			var devUnits string
			for _, n := range nics {
				u := "sys-subsystem-net-devices-" + systemdEscape(n) + ".device"
				devUnits += "Wants=" + u + "\nAfter=" + u + "\n"
			}
			unit := fmt.Sprintf(`# Written by lowlat (profile %s). 'lowlat rollback' removes this unit.
[Unit]
Description=lowlat: re-apply persisted qdisc, route, sysfs, NIC and interrupt settings
Wants=network-online.target
After=network-online.target systemd-sysctl.service
`+devUnits+`
[Service]
Type=oneshot
ExecStart=%s boot --journal %s
RemainAfterExit=yes

[Install]
WantedBy=multi-user.target
`, o.Profile, o.Exe, o.Journal)
			out = append(out, Change{Knob: "file" + o.path(UnitFile), Value: unit}, Change{Knob: "link" + o.path(UnitWants), Value: UnitFile})
			if reassert > 0 {
				svc := fmt.Sprintf(`# Written by lowlat (profile %s). 'lowlat rollback' removes this unit.
[Unit]
Description=lowlat: re-assert persisted interrupt affinity, queue and irqbalance settings
After=lowlat-boot.service

[Service]
Type=oneshot
ExecStart=%s reassert --journal %s
`, o.Profile, o.Exe, o.Journal)
				timer := fmt.Sprintf(`# Written by lowlat (profile %s). 'lowlat rollback' removes this timer.
[Unit]
Description=lowlat: re-assert interrupt affinity every 5 minutes (irqbalance or a driver reset moves it back)

[Timer]
OnBootSec=5min
OnUnitActiveSec=5min

[Install]
WantedBy=timers.target
`, o.Profile)
				out = append(out, Change{Knob: "file" + o.path(ReassertService), Value: svc}, Change{Knob: "file" + o.path(ReassertTimer), Value: timer},
					Change{Knob: "link" + o.path(ReassertWants), Value: ReassertTimer})
				notes = append(notes, "lowlat-reassert.timer re-asserts interrupt and queue settings every 5 minutes from the next boot; to start it now: systemctl daemon-reload && systemctl start lowlat-reassert.timer")
			}
		}
	}
	return out, notes
}

// systemdEscape escapes an interface name for a device unit name as
// systemd-escape --path does for the characters interface names may hold.
func systemdEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == ':', c == '.' && i > 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "\\x%02x", c)
		}
	}
	return b.String()
}

// Change is a file to write.
type Change struct {
	Knob  string
	Value string
}
