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
	"sort"
	"strings"

	"github.com/lowlat/lowlat/internal/knob"
)

// Paths of the files lowlat writes.
const (
	SysctlFile = "/etc/sysctl.d/99-lowlat.conf"
	UnitFile   = "/etc/systemd/system/lowlat-boot.service"
	UnitWants  = "/etc/systemd/system/multi-user.target.wants/lowlat-boot.service"
)

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
	var sysctls []string
	devices := 0
	for _, s := range settings {
		switch knob.Kind(s.Knob) {
		case "sysctl":
			name := strings.TrimPrefix(s.Knob, "sysctl/")
			sysctls = append(sysctls, fmt.Sprintf("%s = %s", name, s.Value))
		case "qdisc", "route", "sysfs":
			devices++
		}
	}
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
			notes = append(notes, fmt.Sprintf("systemd does not run here: %d qdisc/route/sysfs change(s) will not be re-applied at boot (run 'lowlat boot' from your init scripts)", devices))
		} else {
			unit := fmt.Sprintf(`# Written by lowlat (profile %s). 'lowlat rollback' removes this unit.
[Unit]
Description=lowlat: re-apply persisted qdisc, route and sysfs settings
Wants=network-online.target
After=network-online.target systemd-sysctl.service

[Service]
Type=oneshot
ExecStart=%s boot --journal %s
RemainAfterExit=yes

[Install]
WantedBy=multi-user.target
`, o.Profile, o.Exe, o.Journal)
			out = append(out, Change{Knob: "file" + o.path(UnitFile), Value: unit}, Change{Knob: "link" + o.path(UnitWants), Value: UnitFile})
		}
	}
	return out, notes
}

// Change is a file to write.
type Change struct {
	Knob  string
	Value string
}
