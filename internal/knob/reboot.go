package knob

import "strings"

// volatileKinds are the kinds whose settings live only in the running
// kernel: a reboot gives them back their boot-time values, whatever lowlat
// wrote.
var volatileKinds = map[string]bool{
	"sysctl": true, "sysfs": true, "qdisc": true, "route": true, "ethtool": true,
	"irq": true, "queue": true, "cpufreq": true, "block": true,
	// bpffs is in memory, and connections end with the boot; so does a
	// mount.
	"sockopt": true, "socket": true, "bpffs": true,
	// An nftables table is kernel state too.
	"mss": true,
}

// deviceKinds act on a device that can disappear (an interface unplugged
// or renamed, an interrupt freed, a disk removed); they read Absent then.
var deviceKinds = map[string]bool{"ethtool": true, "irq": true, "queue": true, "block": true}

// Vanished reports whether the device knob id acts on has disappeared: it
// reads live as Absent while before is a value it had. Nothing is left to
// restore, and nothing was restored: a rollback says so instead of claiming
// the knob is back.
func Vanished(id, live, before string) bool {
	return deviceKinds[Kind(id)] && live == Absent && before != Absent
}

// SurvivesReboot reports whether the value applied to knob id is still in
// force after a reboot when nothing re-applies it. Files, links, drop-ins and
// irqbalance's configuration are on disk and survive; kernel settings do not.
// A service survives unless the boot itself undoes it: a unit stopped but
// left enabled is started again, and a runtime mask or enablement (in /run)
// is gone. When in doubt the answer is true, the safe
// side: a knob taken for surviving is still rolled back and checked for
// drift, while one taken for lost would be forgotten while still in force.
func SurvivesReboot(id, value string) bool {
	kind := Kind(id)
	if volatileKinds[kind] {
		return false
	}
	if kind == "service" && value != Absent {
		active, file, err := splitService(value)
		if err != nil {
			return true
		}
		return !(active == "inactive" && file == "enabled") && !strings.HasSuffix(file, "-runtime")
	}
	return true
}

// contestedKinds are changed behind lowlat's back by other software on the
// host: irqbalance moves interrupts, a driver reset or a NIC flap resets
// queue steering and ethtool settings, a package upgrade starts a service
// again (runbook 002 re-asserts affinity every 5 minutes for this), a
// service restart re-creates its cgroup without the sock_ops program, a
// firewall reload (nftables.service's "flush ruleset", firewalld) deletes
// every nftables table, an MSS clamp's included.
var contestedKinds = map[string]bool{"irq": true, "queue": true, "ethtool": true, "service": true, "sockopt": true, "mss": true}

// Contested reports whether knob id is of a kind other software moves, the
// ones 'lowlat reassert' (lowlat-reassert.timer) puts back.
func Contested(id string) bool { return contestedKinds[Kind(id)] }
