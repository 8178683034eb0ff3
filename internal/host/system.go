package host

import (
	"errors"
	"os"
	"path"
	"strconv"
	"strings"
)

// THP keys in Facts.Sysfs.
const (
	SysfsTHPEnabled = "kernel/mm/transparent_hugepage/enabled"
	SysfsTHPDefrag  = "kernel/mm/transparent_hugepage/defrag"
)

// thp reads the transparent huge page settings. A kernel without THP has
// no transparent_hugepage directory, but every kernel has /sys/kernel/mm:
// a tree without it did not keep it, and THP is unknown there.
func (rd *fileReader) thp() {
	found := false
	for _, k := range []string{SysfsTHPEnabled, SysfsTHPDefrag} {
		if b, ok := rd.readOpt("/sys/" + k); ok {
			sel, _ := ParseSelection(string(b))
			rd.f.Sysfs[k] = sel
			found = true
		}
	}
	if !found {
		if _, err := rd.r.Stat("/sys/kernel/mm"); err != nil {
			rd.fail("/sys/kernel/mm", err)
		}
	}
}

// AutorateDir is where lowlat autorate keeps its policies, one
// <iface>.policy each (autorate.PolicyDir; host does not import autorate,
// whose daemon reads the host).
const AutorateDir = "/etc/lowlat/autorate"

// autorateDir is AutorateDir, or where LOWLAT_AUTORATE_POLICIES moves it
// (autorate.PolicyDirEnv: tests beside the package tests).
func autorateDir() string {
	if d := os.Getenv("LOWLAT_AUTORATE_POLICIES"); d != "" {
		return d
	}
	return AutorateDir
}

// autorate reads the autorate policies in AutorateDir.
func (rd *fileReader) autorate() {
	dir := autorateDir()
	ents, err := rd.r.ReadDir(dir)
	if err != nil {
		if !isNotExist(err) {
			rd.fail(dir, err)
		}
		return
	}
	for _, e := range ents {
		iface, ok := strings.CutSuffix(e.Name(), ".policy")
		if !ok || iface == "" || e.IsDir() {
			continue
		}
		p := path.Join(dir, e.Name())
		b, err := rd.r.ReadFile(p)
		if err != nil {
			if !isNotExist(err) {
				rd.fail(p, err)
			}
			continue
		}
		if rd.f.Autorate == nil {
			rd.f.Autorate = map[string]string{}
		}
		rd.f.Autorate[iface] = strings.TrimSpace(string(b))
	}
}

// irqbalanceConfigs are where distributions keep irqbalance's settings: Red Hat
// and SUSE first, then Debian and Ubuntu.
var irqbalanceConfigs = []string{"/etc/sysconfig/irqbalance", "/etc/default/irqbalance"}

// irqbalance finds a running irqbalance by scanning /proc/PID/comm and reads
// its config file.
func (rd *fileReader) irqbalance() {
	ib := &rd.f.IRQBalance
	names, err := rd.r.ReadDirNames("/proc")
	if err != nil {
		rd.fail("/proc", err)
	} else {
		// Other processes' names are not recorded for a capture: only the
		// irqbalance one matters, and the rest is private.
		quiet := rd.r
		quiet.rec = nil
		pid, lowest := -1, -1
		for _, n := range names {
			id, err := strconv.Atoi(n)
			if err != nil {
				continue
			}
			if lowest < 0 || id < lowest {
				lowest = id
			}
			b, err := quiet.ReadFile("/proc/" + n + "/comm")
			if err != nil {
				continue // the process exited, or is hidden from us
			}
			if strings.TrimSpace(string(b)) == "irqbalance" && (pid < 0 || id < pid) {
				pid = id
			}
		}
		switch {
		case lowest < 0:
			// Every host has processes: a /proc without any is a tree that
			// did not keep them, and says nothing about irqbalance.
			rd.fail("/proc", errors.New("no process directories"))
		case pid < 0 && rd.r.rec != nil:
			// A capture keeps one process directory (not its files), so
			// the copy too has processes, none of them irqbalance.
			rd.r.rec.dir("/proc/" + strconv.Itoa(lowest))
		}
		if pid > 0 {
			ib.Running, ib.PID = true, pid
			rd.r.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm") // recorded for a capture
			// Its arguments say which interrupts it leaves alone; a
			// process that exited meanwhile just leaves them unknown.
			if b, err := rd.r.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil {
				if f := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"); len(f) > 0 {
					ib.Args = append([]string{}, f[1:]...)
				}
			}
		}
	}
	ib.UnitFile = rd.unitFileState("irqbalance.service")
	for _, p := range irqbalanceConfigs {
		b, err := rd.r.ReadFile(p)
		if err != nil {
			if !isNotExist(err) {
				rd.fail(p, err)
			}
			continue
		}
		ib.ConfigPath = p
		vars := parseShellVars(b)
		if len(vars) > 0 {
			ib.Config = vars
		}
		if v := vars["IRQBALANCE_BANNED_CPULIST"]; v != "" {
			ib.BannedCPUs = v
			if l, err := ParseCPUList(v); err == nil {
				ib.Banned = l
			} else {
				rd.fail(p, err)
			}
		} else if v := vars["IRQBALANCE_BANNED_CPUS"]; v != "" {
			ib.BannedCPUs = v
			if l, err := ParseCPUMask(v); err == nil {
				ib.Banned = l
			} else {
				rd.fail(p, err)
			}
		}
		break
	}
}

// BannedIRQs returns the interrupts irqbalance leaves alone (--banirq=N,
// --banirq N, -i N): from the running process's arguments when known, else
// from IRQBALANCE_ARGS in the config file, which a restart would load.
func (ib IRQBalance) BannedIRQs() map[int]bool {
	args := ib.Args
	if args == nil {
		args = strings.Fields(ib.Config["IRQBALANCE_ARGS"])
	}
	out := map[int]bool{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		var v string
		switch {
		case strings.HasPrefix(a, "--banirq="):
			v = strings.TrimPrefix(a, "--banirq=")
		case strings.HasPrefix(a, "-i") && len(a) > 2:
			v = a[2:]
		case (a == "--banirq" || a == "-i") && i+1 < len(args):
			i++
			v = args[i]
		default:
			continue
		}
		if n, err := strconv.Atoi(v); err == nil {
			out[n] = true
		}
	}
	return out
}

// unitDirs are where unit files live, the administrator's first.
var unitDirs = []string{"/etc/systemd/system", "/run/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system"}

// unitFileState reads what systemctl is-enabled would say of unit, from the
// files alone so a captured tree answers too: "masked" (linked to /dev/null
// in /etc), "enabled" (linked from a target's wants in /etc), "disabled"
// (installed, wanted by nothing), or "" (no such unit). The targets are the
// ones services install into; every read is one a capture records.
func (rd *fileReader) unitFileState(unit string) string {
	const etc = "/etc/systemd/system"
	if t, err := rd.r.Readlink(etc + "/" + unit); err == nil {
		if !path.IsAbs(t) {
			t = path.Join(etc, t)
		}
		if t == "/dev/null" {
			return "masked"
		}
	}
	for _, target := range []string{"multi-user.target", "graphical.target", "default.target", "sysinit.target", "network.target"} {
		if _, err := rd.r.Readlink(etc + "/" + target + ".wants/" + unit); err == nil {
			return "enabled"
		}
	}
	for _, d := range unitDirs {
		if _, err := rd.r.ReadFile(d + "/" + unit); err == nil {
			return "disabled"
		}
	}
	return ""
}

// block reads queue settings of real block devices (loop, ram and zram
// devices are skipped: nothing to tune there).
func (rd *fileReader) block() {
	ents, err := rd.r.ReadDir("/sys/block")
	if err != nil {
		rd.fail("/sys/block", err) // every kernel has it
		return
	}
	const pat = "/sys/block/*/queue/"
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, "loop") || strings.HasPrefix(name, "ram") || strings.HasPrefix(name, "zram") {
			continue
		}
		base, err := rd.r.EvalSymlinks("/sys/block/" + name)
		if err != nil {
			rd.failGroup("/sys/block/*", err)
			continue
		}
		d := BlockDev{Name: name, NUMANode: -1, RqAffinity: -1, NrRequests: -1}
		q := path.Join(base, "queue")
		if b, ok := rd.readItemAt(q, "scheduler", pat+"scheduler"); ok {
			d.Scheduler, d.Schedulers = ParseSelection(string(b))
		}
		if n, ok := rd.intAt(q, "rq_affinity", pat+"rq_affinity"); ok {
			d.RqAffinity = n
		}
		if n, ok := rd.intAt(q, "nr_requests", pat+"nr_requests"); ok {
			d.NrRequests = n
		}
		if n, ok := rd.intAt(q, "rotational", pat+"rotational"); ok {
			d.Rotational = n == 1
		}
		// NVMe: block/nvme0n1/device is the controller (nvme0), whose parent is
		// the PCI function holding numa_node and msi_irqs.
		if dev, err := rd.r.EvalSymlinks(base + "/device"); err == nil {
			if pci := rd.pciFunction(dev); pci != "" {
				d.NUMANode, _, d.MSIIRQs = rd.pciFacts(pci)
			}
		}
		rd.f.Block = append(rd.f.Block, d)
	}
}

func (rd *fileReader) systemd() {
	// sd_booted(3): systemd is PID 1 when /run/systemd/system exists.
	fi, err := rd.r.Stat("/run/systemd/system")
	rd.f.Systemd = err == nil && fi.IsDir()
}
