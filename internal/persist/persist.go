// Package persist turns an apply into the files that make it survive a reboot:
// one /etc/sysctl.d/zz-lowlat-<txn>.conf per transaction for its sysctls
// (applied by systemd-sysctl or the distribution's boot scripts after every
// file of the usual two-digit names, later transactions sorting after earlier
// ones), and lowlat-boot.service, a systemd
// oneshot unit that runs 'lowlat boot' once the network is up: it rolls back
// any transaction still awaiting confirmation (its watchdog died with the last
// boot) and re-applies the qdisc, route, NIC and interrupt knobs of the
// persisted ones. The files are knob changes themselves, journaled with the
// rest: a rollback removes exactly the files its own transaction added.
package persist

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/lowlat/lowlat/internal/knob"
)

// Paths of the files lowlat writes.
const (
	SysctlDir = "/etc/sysctl.d"
	UnitFile  = "/etc/systemd/system/lowlat-boot.service"
	UnitWants = "/etc/systemd/system/multi-user.target.wants/lowlat-boot.service"
	// UnitDropins holds one drop-in per persisted transaction that orders
	// the boot unit after the NICs it configures.
	UnitDropins = "/etc/systemd/system/lowlat-boot.service.d"
	// The timer re-asserts interrupt affinities, queue steering, the
	// irqbalance state and sock_ops attachments every 5 minutes (runbook
	// 002: irqbalance, a driver reset or a NIC flap moves interrupts back;
	// a service restart re-creates the cgroup a sock_ops program was
	// attached to).
	ReassertService = "/etc/systemd/system/lowlat-reassert.service"
	ReassertTimer   = "/etc/systemd/system/lowlat-reassert.timer"
	ReassertWants   = "/etc/systemd/system/timers.target.wants/lowlat-reassert.timer"
)

// SysctlPrefix starts the name of the sysctl.d file of every transaction.
//
// Both programs that apply sysctl.d at boot, systemd-sysctl and procps'
// sysctl --system, sort the files of /etc/sysctl.d, /run/sysctl.d,
// /usr/local/lib/sysctl.d, /usr/lib/sysctl.d and /lib/sysctl.d by name,
// byte by byte, whatever their directory, and of two files that set one key
// the later wins (sysctl.d(5), "Configuration Directories and Precedence";
// procps' sysctl(8), "System File Precedence"; host.SysctlConf has the
// details). Debian (before 13), Fedora and RHEL link /etc/sysctl.conf there
// as 99-sysctl.conf, and the name an older lowlat used, 99-lowlat-<txn>,
// sorted before it: a key also set in /etc/sysctl.conf went back at every
// boot. "zz-" sorts after every name that starts with a digit, as
// sysctl.d(5) recommends names to, and after nearly every other. procps
// reads /etc/sysctl.conf itself after all the files, where no name can
// follow it: plan says when it, or any file read after lowlat's, sets a key
// lowlat persists.
const SysctlPrefix = "zz-lowlat-"

// LegacySysctlPrefix is the name an older lowlat gave the same files.
const LegacySysctlPrefix = "99-lowlat-"

// SysctlFile is the sysctl.d file of transaction id.
func SysctlFile(id string) string { return SysctlDir + "/" + SysctlPrefix + id + ".conf" }

// LegacySysctlFile is the sysctl.d file of transaction id as an older lowlat
// named it: a journal that recorded it still rolls it back by that name.
func LegacySysctlFile(id string) string { return SysctlDir + "/" + LegacySysctlPrefix + id + ".conf" }

// OwnSysctlFile reports whether a sysctl.d file name (without directory) is
// one lowlat writes, by its name now or an older lowlat's.
func OwnSysctlFile(base string) bool {
	return strings.HasSuffix(base, ".conf") && (strings.HasPrefix(base, SysctlPrefix) || strings.HasPrefix(base, LegacySysctlPrefix))
}

// unitMode is the mode of every file lowlat writes: world-readable
// configuration, as systemd and sysctl expect.
const unitMode fs.FileMode = 0o644

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
	// ID is the transaction the files belong to: it names the sysctl.d file
	// and the boot unit's drop-in.
	ID      string
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

// Change is a file to write.
type Change struct {
	Knob  string
	Value string
}

func (o Options) file(p, content string) Change {
	return Change{Knob: "file" + o.path(p), Value: knob.FileContent(content, unitMode)}
}

func (o Options) link(p, target string) Change {
	return Change{Knob: "link" + o.path(p), Value: knob.LinkTo(target)}
}

// Changes returns the knob changes that persist settings, and notes for the
// user (e.g. no systemd: device knobs will not come back after a reboot).
func Changes(settings []Setting, o Options) ([]Change, []string) {
	var sysctls, nics []string
	devices, reassert := 0, 0
	for _, s := range settings {
		switch {
		case knob.Kind(s.Knob) == "sysctl":
			name := strings.TrimPrefix(s.Knob, "sysctl/")
			sysctls = append(sysctls, fmt.Sprintf("%s = %s", name, s.Value))
		case !knob.SurvivesReboot(s.Knob, s.Value):
			devices++
		}
		if knob.Contested(s.Knob) {
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
		fmt.Fprintf(&b, "# Written by lowlat (transaction %s, profile %s). 'lowlat rollback' of that transaction removes this file.\n", o.ID, o.Profile)
		for _, l := range sysctls {
			b.WriteString(l + "\n")
		}
		out = append(out, o.file(SysctlFile(o.ID), b.String()))
	}
	if devices == 0 && reassert == 0 {
		return out, notes
	}
	if !o.Systemd {
		notes = append(notes, fmt.Sprintf("systemd does not run here: %d device change(s) (qdisc, route, sysfs, NIC, interrupt) will not be re-applied at boot (run 'lowlat boot' from your init scripts, after the NICs are up)", devices))
		return out, notes
	}
	out = append(out, BootUnit(o)...)
	if len(nics) > 0 {
		// The NICs whose queues and interrupts the unit sets must exist
		// and be up: their device units, then network-online. One drop-in
		// per transaction, so the unit waits for the union of them all.
		var b strings.Builder
		fmt.Fprintf(&b, "# Written by lowlat (transaction %s, profile %s): wait for its NICs.\n[Unit]\n", o.ID, o.Profile)
		for _, n := range nics {
			u := "sys-subsystem-net-devices-" + systemdEscape(n) + ".device"
			fmt.Fprintf(&b, "Wants=%s\nAfter=%s\n", u, u)
		}
		out = append(out, o.file(UnitDropins+"/lowlat-"+o.ID+".conf", b.String()))
	}
	if reassert > 0 {
		out = append(out, o.file(ReassertService, reassertService(writtenHeader, o.Exe, o.Journal)), o.file(ReassertTimer, reassertTimer(writtenHeader)), o.link(ReassertWants, ReassertTimer))
		notes = append(notes, "lowlat-reassert.timer re-asserts interrupt, queue and sock_ops settings every 5 minutes from the next boot; to start it now: systemctl daemon-reload && systemctl start lowlat-reassert.timer")
	}
	return out, notes
}

// BootUnit is lowlat-boot.service and the link that enables it. Its content
// is the same for every transaction (for one binary and journal), so a second
// transaction that installs it changes nothing, and it stays until the last
// of them is rolled back.
func BootUnit(o Options) []Change {
	return []Change{o.file(UnitFile, bootService(writtenHeader, o.Exe, o.Journal)), o.link(UnitWants, UnitFile)}
}

// writtenHeader opens the units an apply writes to /etc/systemd/system.
const writtenHeader = "# Written by lowlat. A rollback of the transactions that wrote it removes it.\n"

// packagedHeader opens the same units as the lowlat package ships them.
const packagedHeader = `# Shipped by the lowlat package, disabled. An apply that needs it writes its
# own copy to /etc/systemd/system (with that apply's binary and journal) and
# enables it; a rollback of the transactions that wrote it removes it again.
`

// Packaged returns the units a distribution package ships in
// /usr/lib/systemd/system, by file name, for the binary exe and the journal:
// the same text as an apply writes, so the package and the apply never
// disagree on what 'lowlat boot' and 'lowlat reassert' are run with.
func Packaged(exe, journal string) map[string]string {
	return map[string]string{
		"lowlat-boot.service":     bootService(packagedHeader, exe, journal),
		"lowlat-reassert.service": reassertService(packagedHeader, exe, journal),
		"lowlat-reassert.timer":   reassertTimer(packagedHeader),
	}
}

func bootService(header, exe, journal string) string {
	return header + `[Unit]
Description=lowlat: roll back unconfirmed changes, re-apply persisted qdisc, route, NIC and interrupt settings
Wants=network-online.target
After=network-online.target systemd-sysctl.service

[Service]
Type=oneshot
ExecStart=` + execLine(exe, "boot", "--journal", journal) + `
RemainAfterExit=yes

[Install]
WantedBy=multi-user.target
`
}

func reassertService(header, exe, journal string) string {
	return header + `[Unit]
Description=lowlat: re-assert persisted interrupt affinity, queue and irqbalance settings
After=lowlat-boot.service

[Service]
Type=oneshot
ExecStart=` + execLine(exe, "reassert", "--journal", journal) + "\n"
}

func reassertTimer(header string) string {
	return header + `[Unit]
Description=lowlat: re-assert interrupt affinity every 5 minutes (irqbalance or a driver reset moves it back)

[Timer]
OnBootSec=5min
OnUnitActiveSec=5min

[Install]
WantedBy=timers.target
`
}

// Guard returns the changes an apply --confirm adds so that its dead-man
// switch outlives a reboot: when the transaction holds knobs that survive a
// reboot (a disabled service, a drop-in), lowlat-boot.service rolls it back
// at the next boot unless it was confirmed. Volatile knobs need no guard: the
// reboot itself puts them back. Without systemd there is no guard, and a
// note says what to run.
func Guard(settings []Setting, o Options) ([]Change, []string) {
	durable := 0
	for _, s := range settings {
		if knob.SurvivesReboot(s.Knob, s.Value) {
			durable++
		}
	}
	if durable == 0 {
		return nil, nil
	}
	if !o.Systemd {
		return nil, []string{fmt.Sprintf("systemd does not run here: if the host reboots before 'lowlat confirm', %d change(s) that survive a reboot stay until 'lowlat rollback' (or 'lowlat boot' from your init scripts)", durable)}
	}
	return BootUnit(o), nil
}

// execLine renders an Exec= command line whose arguments systemd reads back
// exactly (systemd.service(5), "Command lines"): each argument that is empty
// or holds whitespace, quotes, backslashes or control characters is double
// quoted with C escapes; "%" (a specifier) is doubled everywhere, and "$" (an
// environment variable) in the arguments, where systemd substitutes them
// (not in the executable's path, which systemd-analyze verify confirms).
func execLine(exe string, args ...string) string {
	out := []string{quoteExec(strings.ReplaceAll(exe, "%", "%%"))}
	for _, a := range args {
		out = append(out, execArg(a))
	}
	return strings.Join(out, " ")
}

// execArg quotes one argument after the executable.
func execArg(s string) string {
	return quoteExec(strings.NewReplacer("%", "%%", "$", "$$").Replace(s))
}

func quoteExec(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n\r\"'\\;") && !hasControl(s) {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
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
