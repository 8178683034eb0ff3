package plan

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/irqplan"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/profile"
)

// nicSettings are a profile's ethtool, irq, nvme and cpu settings by key.
type nicSettings map[string]profile.Setting

func (s nicSettings) value(key, def string) string {
	if v, ok := s[key]; ok {
		return v.Value
	}
	return def
}

// nicRows plans the NIC, interrupt, NVMe and CPU settings. The rows come in
// apply order: the irqbalance decision first (it must not move interrupts
// while they are placed), channel counts before the interrupts of the queues
// they create, interrupts before software steering. A rollback runs in
// reverse, so irqbalance comes back last, after every interrupt is home.
func nicRows(f *host.Facts, ifaces []*host.Interface, ss nicSettings, opts Options) (devs, sysctls []Change, _ *irqplan.Plan, _ error) {
	if len(ss) == 0 {
		return nil, nil, nil, nil
	}
	var ip *irqplan.Plan
	placement, placed := ss["irq.placement"]
	if placed && placement.Value == "numa-local" {
		o := irqplan.Options{Ifaces: names(ifaces), Reserve: opts.ReserveCPUs, NVMe: ss.value("irq.nvme", "separate") == "separate",
			RPS: ss.value("irq.rps", "off") == "auto"}
		if q := ss.value("irq.queues", "auto"); q != "auto" {
			o.MaxQueues, _ = strconv.Atoi(q)
		}
		if c, ok := ss["ethtool.channels.combined"]; ok {
			o.Queues, _ = strconv.Atoi(c.Value)
		}
		if r := ss.value("irq.rfs", "0"); r != "0" {
			o.RFSEntries, _ = strconv.Atoi(r)
		}
		var err error
		if ip, err = irqplan.Make(f, o); err != nil {
			return nil, nil, nil, err
		}
	}

	var service, channels, ethtool, irqs, queues, storage, cpu []Change
	if s, ok := ss["irq.irqbalance"]; ok {
		service = irqbalanceRows(f, s, ip, opts)
	}
	for _, ifc := range ifaces {
		channels = append(channels, channelRows(f, ifc, ss, ip)...)
		ethtool = append(ethtool, ethtoolRows(f, ifc, ss)...)
	}
	if ip != nil {
		irqs, queues, sysctls = placementRows(f, placement, ss, ip)
	}
	storage = nvmeRows(f, ss)
	if s, ok := ss["cpu.governor"]; ok {
		cpu = append(cpu, governorRow(f, s))
	}
	// irqbalance, NVMe queues and CPU governors belong to the whole host:
	// a lowlat running in another network namespace (a container, a test)
	// plans for that namespace and leaves them alone.
	if f.Netns == "other" {
		for _, part := range [][]Change{service, storage, cpu} {
			for i := range part {
				if part[i].Action != Skip {
					part[i].hostWide()
				}
			}
		}
	}
	for _, part := range [][]Change{service, channels, ethtool, irqs, queues, storage, cpu} {
		devs = append(devs, part...)
	}
	return devs, sysctls, ip, nil
}

// channelRows sets the combined channel count: the placement's (queues =
// IRQ CPUs), or the profile's explicit count.
func channelRows(f *host.Facts, ifc *host.Interface, ss nicSettings, ip *irqplan.Plan) []Change {
	var out []Change
	for _, item := range []string{"combined", "rx", "tx", "other"} {
		s, explicit := ss["ethtool.channels."+item]
		if item == "combined" && ip != nil {
			for _, n := range ip.NICs {
				if n.Iface != ifc.Name || n.Skip != "" || n.Channels == 0 {
					continue
				}
				src := ss["irq.placement"]
				c := row(src, knob.EthtoolID(ifc.Name, "channels", "combined"))
				c.Current, c.Desired = strconv.Itoa(n.CurrentChannels), strconv.Itoa(n.Channels)
				c.Reason = fmt.Sprintf("one queue per interrupt CPU (%d CPUs on node %d: %s; the driver allows %d): more queues than CPUs share CPUs and jitter (runbook 002)",
					len(n.CPUs), n.Node, host.FormatCPUList(n.CPUs), n.MaxChannels)
				if explicit {
					c.Setting, c.Source = s.Key, s.Source
					c.Reason = s.Why
				}
				c.decide(c.Current == c.Desired)
				out = append(out, c)
			}
			continue
		}
		if !explicit {
			continue
		}
		c := row(s, knob.EthtoolID(ifc.Name, "channels", item))
		c.Desired = s.Value
		et := ifc.Ethtool
		if et == nil || et.Channels == nil {
			c.Current = ethtoolCurrent(f, ifc)
			c.unsupported(ethtoolMissing(f, ifc, "channels"))
			out = append(out, c)
			continue
		}
		cur := map[string]uint32{"combined": et.Channels.Combined, "rx": et.Channels.Rx, "tx": et.Channels.Tx, "other": et.Channels.Other}[item]
		max := map[string]uint32{"combined": et.Channels.MaxCombined, "rx": et.Channels.MaxRx, "tx": et.Channels.MaxTx, "other": et.Channels.MaxOther}[item]
		c.Current = strconv.Itoa(int(cur))
		n, _ := strconv.Atoi(s.Value)
		switch {
		case max == 0:
			c.unsupported(fmt.Sprintf("%s's driver (%s) has no %s channels", ifc.Name, et.Driver, item))
		case uint32(n) > max:
			c.Desired = strconv.Itoa(int(max))
			c.Note = fmt.Sprintf("the driver allows at most %d", max)
			c.decide(c.Current == c.Desired)
		default:
			c.decide(c.Current == c.Desired)
		}
		out = append(out, c)
	}
	return out
}

// ethtoolUnknown says why the facts have no ethtool answer for ifc (the
// query failed, or there was no ethtool reader), or "".
func ethtoolUnknown(f *host.Facts, ifc *host.Interface) string {
	if e := f.ErrorFor("ethtool:" + ifc.Name); e != "" {
		return fmt.Sprintf("the ethtool settings of %s could not be read (%s)", ifc.Name, e)
	}
	return ""
}

// ethtoolCurrent is the Current of a row whose ethtool value is missing:
// unknown when it could not be read, absent when the driver has none.
func ethtoolCurrent(f *host.Facts, ifc *host.Interface) string {
	if ethtoolUnknown(f, ifc) != "" {
		return Unknown
	}
	return "-"
}

func ethtoolMissing(f *host.Facts, ifc *host.Interface, query string) string {
	if why := ethtoolUnknown(f, ifc); why != "" {
		return why
	}
	if ifc.Ethtool == nil {
		return fmt.Sprintf("no ethtool data for %s (the driver answers no ethtool queries, or the facts lack them)", ifc.Name)
	}
	if e := ifc.Ethtool.Errors[query]; e != "" {
		return fmt.Sprintf("%s's driver (%s) does not report %s: %s", ifc.Name, ifc.Ethtool.Driver, query, e)
	}
	return fmt.Sprintf("%s's driver (%s) does not report %s", ifc.Name, ifc.Ethtool.Driver, query)
}

// ethtoolRows plans rings, features and coalescing of one interface.
func ethtoolRows(f *host.Facts, ifc *host.Interface, ss nicSettings) []Change {
	var keys []string
	for k := range ss {
		if strings.HasPrefix(k, "ethtool.") && !strings.HasPrefix(k, "ethtool.channels.") {
			keys = append(keys, k)
		}
	}
	// Profile order.
	sort.Slice(keys, func(i, j int) bool {
		return ss[keys[i]].Pos.Line < ss[keys[j]].Pos.Line || (ss[keys[i]].Pos.Line == ss[keys[j]].Pos.Line && keys[i] < keys[j])
	})
	var out []Change
	et := ifc.Ethtool
	for _, k := range keys {
		s := ss[k]
		group, item, _ := strings.Cut(strings.TrimPrefix(k, "ethtool."), ".")
		c := row(s, knob.EthtoolID(ifc.Name, group, item))
		c.Desired = s.Value
		c.Current = ethtoolCurrent(f, ifc)
		switch group {
		case "ring":
			if et == nil || et.Rings == nil {
				c.unsupported(ethtoolMissing(f, ifc, "rings"))
				break
			}
			cur, max := et.Rings.Rx, et.Rings.RxMax
			if item == "tx" {
				cur, max = et.Rings.Tx, et.Rings.TxMax
			}
			c.Current = strconv.Itoa(int(cur))
			if max == 0 {
				c.unsupported(fmt.Sprintf("%s's driver (%s) reports no %s ring size", ifc.Name, et.Driver, item))
				break
			}
			n, _ := strconv.Atoi(s.Value)
			if s.Value == "max" || uint32(n) > max {
				if s.Value != "max" {
					c.Note = fmt.Sprintf("%s is above the driver's maximum", s.Value)
				}
				n = int(max)
			}
			c.Desired = strconv.Itoa(n)
			c.decide(c.Current == c.Desired)
		case "feature":
			if et == nil || et.Features == nil {
				c.unsupported(ethtoolMissing(f, ifc, "features"))
				break
			}
			fs := map[string]knob.Feature{}
			for name, on := range et.Features {
				fs[name] = knob.Feature{Active: on, Changeable: !slices.Contains(et.Fixed, name)}
			}
			members := knob.FeatureMembers(item, fs)
			if len(members) == 0 {
				c.unsupported(fmt.Sprintf("%s's driver (%s) has no %s feature", ifc.Name, et.Driver, item))
				break
			}
			c.Current = knob.FeatureValue(members, fs)
			changeable := false
			for _, m := range members {
				changeable = changeable || fs[m].Changeable
			}
			if !changeable && c.Current != c.Desired {
				c.unsupported(fmt.Sprintf("%s is fixed %s by %s's driver (%s)", strings.Join(members, ", "), c.Current, ifc.Name, et.Driver))
				break
			}
			c.decide(c.Current == c.Desired)
		case "coalesce":
			if et == nil || et.Coalesce == nil {
				c.unsupported(ethtoolMissing(f, ifc, "coalesce"))
				break
			}
			if v, ok := et.Coalesce[item]; ok {
				c.Current = strconv.Itoa(int(v))
				if strings.HasPrefix(item, "adaptive-") {
					c.Current = map[bool]string{true: "on", false: "off"}[v != 0]
				}
				c.decide(c.Current == c.Desired)
			} else {
				c.Note = "current value not in the facts; apply reads it"
				c.decide(false)
			}
			if strings.HasPrefix(item, "rx-usecs") || strings.HasPrefix(item, "tx-usecs") {
				if a := et.Coalesce["adaptive-"+item[:2]]; a != 0 && c.Action == Set && !ss.has("ethtool.coalesce.adaptive-"+item[:2]) {
					c.Note = strings.TrimPrefix(c.Note+"; adaptive-"+item[:2]+" is on and will change it under load", "; ")
				}
			}
		}
		out = append(out, c)
	}
	return out
}

func (s nicSettings) has(key string) bool { _, ok := s[key]; return ok }

// placementRows are the interrupt affinities and software steering of a
// placement.
func placementRows(f *host.Facts, s profile.Setting, ss nicSettings, ip *irqplan.Plan) (irqs, queues, sysctls []Change) {
	hk := ""
	if len(ip.Housekeeping) > 0 {
		hk = "; CPUs " + host.FormatCPUList(ip.Housekeeping) + " (CPU 0's core) keep the kernel's housekeeping"
	}
	irqbalanceNote := ""
	if f.IRQBalance.Running && ss.value("irq.irqbalance", "keep") == "keep" {
		irqbalanceNote = "irqbalance runs and will move this back: set irq.irqbalance to stop or ban"
	}
	for _, n := range ip.NICs {
		if n.Skip != "" {
			c := row(s, "irq/*/affinity")
			c.Current, c.Desired = "-", "-"
			c.unsupported(n.Skip)
			irqs = append(irqs, c)
			continue
		}
		for _, pl := range n.IRQs {
			c := row(s, knob.IRQID(pl.IRQ))
			c.Current = knob.IRQValue(pl.Current, pl.Name)
			c.Desired = knob.IRQValue(pl.CPUs, pl.Name)
			c.Reason = fmt.Sprintf("%s queue %d on CPU %d of its node %d: one queue interrupt per CPU, one thread per core%s (runbook 002)", n.Iface, pl.Queue, pl.CPUs[0], n.Node, hk)
			c.Note = irqbalanceNote
			c.decide(slices.Equal(pl.Current, pl.CPUs))
			affinityUnknown(f, &c, pl.Current, pl.Name)
			irqs = append(irqs, c)
		}
		ifc := f.Interface(n.Iface)
		for _, q := range n.RPS {
			c := row(s, knob.QueueID(n.Iface, q.Queue, "rps_cpus"))
			c.Reason = fmt.Sprintf("%s has %d hardware queue(s) for %d CPUs meant for its packets: RPS spreads receive work over CPUs %s (hex mask, 32-bit groups)", n.Iface, max(n.Channels, 1), len(n.Pool), host.FormatCPUList(q.CPUs))
			queues = append(queues, maskRow(f, c, ifc.RPS, q))
		}
		for _, q := range n.XPS {
			c := row(s, knob.QueueID(n.Iface, q.Queue, "xps_cpus"))
			c.Reason = fmt.Sprintf("transmit from CPUs %s through %s, whose completion interrupt is on one of them", host.FormatCPUList(q.CPUs), q.Queue)
			queues = append(queues, maskRow(f, c, ifc.XPS, q))
		}
		if n.FlowCnt > 0 {
			for _, q := range n.RPS {
				c := row(ss["irq.rfs"], knob.QueueID(n.Iface, q.Queue, "rps_flow_cnt"))
				cur, ok := ifc.RPSFlowCnt[q.Queue]
				c.Current, c.Desired = strconv.Itoa(cur), strconv.Itoa(n.FlowCnt)
				if e := f.ErrorFor(queuesSource); !ok && ifc.RPSFlowCnt == nil && e != "" {
					c.Current = Unknown
					c.unsupported(fmt.Sprintf("the queues of %s could not be read (%s: %s)", n.Iface, queuesSource, e))
				} else if !ok {
					c.Current = "-"
					c.unsupported(fmt.Sprintf("%s has no rps_flow_cnt (kernel without CONFIG_RPS)", q.Queue))
				} else {
					c.decide(cur == n.FlowCnt)
				}
				queues = append(queues, c)
			}
		}
		if len(n.RPS) == 0 && ss.value("irq.rps", "off") == "auto" {
			// Hardware queues cover the CPUs: software steering only adds
			// an inter-processor interrupt per packet (runbook 000).
			var rx []string
			for q, m := range ifc.RPS {
				if l, err := host.ParseCPUMask(m); err == nil && len(l) > 0 {
					rx = append(rx, q)
				}
			}
			sort.Strings(rx)
			for _, q := range rx {
				c := row(s, knob.QueueID(n.Iface, q, "rps_cpus"))
				c.Current, c.Desired = ifc.RPS[q], irqplan.Mask(f, nil)
				c.Reason = fmt.Sprintf("%s has a hardware queue per CPU: RPS on top only adds an IPI per packet (runbook 000: RPS hurts small-packet UDP)", n.Iface)
				c.decide(false)
				queues = append(queues, c)
			}
		}
	}
	if ip.RFSEntries > 0 {
		c := row(ss["irq.rfs"], "sysctl/net.core.rps_sock_flow_entries")
		c.Desired = strconv.Itoa(ip.RFSEntries)
		if cur, ok := f.Sysctls["net.core.rps_sock_flow_entries"]; ok {
			c.Current = cur
			c.decide(cur == c.Desired)
		} else {
			c.Current = "-"
			c.unsupported("net.core.rps_sock_flow_entries is not visible here (it exists only in the initial network namespace, with CONFIG_RPS)")
		}
		sysctls = append(sysctls, c)
	}
	for _, nv := range ip.NVMe {
		if nv.Skip != "" {
			c := row(s, "irq/*/affinity")
			c.Current, c.Desired = nv.Ctrl, "-"
			c.unsupported(nv.Skip)
			irqs = append(irqs, c)
			continue
		}
		for _, pl := range nv.IRQs {
			c := row(s, knob.IRQID(pl.IRQ))
			c.Current = knob.IRQValue(pl.Current, pl.Name)
			c.Desired = knob.IRQValue(pl.CPUs, pl.Name)
			c.Reason = fmt.Sprintf("%s I/O queue %d on CPU %d: NVMe on CPUs %s of node %d, apart from the NIC's (runbook 002)", nv.Ctrl, pl.Queue, pl.CPUs[0], host.FormatCPUList(nv.CPUs), nv.Node)
			c.Note = irqbalanceNote
			c.decide(slices.Equal(pl.Current, pl.CPUs))
			affinityUnknown(f, &c, pl.Current, pl.Name)
			irqs = append(irqs, c)
		}
	}
	return irqs, queues, sysctls
}

// affinityUnknown marks an interrupt row whose current affinity could not
// be read: the knob writes the affinity without needing the old one (apply
// reads and journals it first), so the change stays planned, as unknown.
func affinityUnknown(f *host.Facts, c *Change, cur []int, name string) {
	if len(cur) > 0 {
		return
	}
	why := "not in the facts"
	if e := f.ErrorFor("/proc/irq/*/smp_affinity_list"); e != "" {
		why = "/proc/irq/*/smp_affinity_list: " + e
	}
	c.Current = Unknown + knob.IRQValue(nil, name) // "? (eth0-TxRx-3)"
	c.Note = joinNotes(c.Note, "current affinity unknown ("+why+"); apply reads it before writing")
}

func maskRow(f *host.Facts, c Change, live map[string]string, q irqplan.QueueCPUs) Change {
	c.Desired = irqplan.Mask(f, q.CPUs)
	cur, ok := live[q.Queue]
	if !ok && live == nil {
		if e := f.ErrorFor(queuesSource); e != "" {
			c.Current = Unknown
			c.unsupported(fmt.Sprintf("the queues of the interface could not be read (%s: %s)", queuesSource, e))
			return c
		}
	}
	if !ok {
		c.Current = "-"
		c.unsupported(fmt.Sprintf("%s has no %s file (a single-queue device, or a kernel without CONFIG_RPS/XPS)", q.Queue, c.Knob[strings.LastIndexByte(c.Knob, '/')+1:]))
		return c
	}
	c.Current = cur
	l, _ := host.ParseCPUMask(cur)
	c.decide(slices.Equal(l, q.CPUs))
	return c
}

// queuesSource is where the facts record that an interface's queues
// directory could not be read.
const queuesSource = "/sys/class/net/*/queues"

// irqbalanceRows stops irqbalance, or bans the planned CPUs and interrupts in
// its configuration.
func irqbalanceRows(f *host.Facts, s profile.Setting, ip *irqplan.Plan, opts Options) []Change {
	ib := f.IRQBalance
	running := "inactive"
	if ib.Running {
		running = "active"
	}
	// Without the process list, whether irqbalance runs is unknown.
	procs := f.ErrorFor("/proc")
	if procs != "" {
		running = Unknown
	}
	switch s.Value {
	case "stop":
		c := row(s, "service/"+knob.IRQBalanceUnit)
		c.Current, c.Desired = running, "inactive,disabled"
		if ib.UnitFile != "" {
			c.Current = running + "," + ib.UnitFile
		}
		switch {
		case procs != "" && !f.Systemd:
			c.unsupported("whether irqbalance runs is unknown (/proc: " + procs + "), and systemd does not run here: lowlat changes services only through systemd")
		case procs != "":
			// Stopping and disabling needs no knowledge of the current
			// state: apply reads and journals it before writing.
			c.decide(false)
			c.Note = "whether irqbalance runs is unknown (/proc: " + procs + "); apply reads it before stopping it"
		case !f.Systemd && ib.Running:
			c.unsupported(fmt.Sprintf("irqbalance runs (pid %d) but systemd does not: lowlat changes services only through systemd; stop it with your init system, or the interrupt placement will be undone", ib.PID))
		case !f.Systemd:
			c.unsupported("systemd does not run here and irqbalance is not running: nothing to stop")
		case !ib.Running && ib.ConfigPath == "" && ib.UnitFile == "":
			c.Action, c.Supported = OK, true
			c.Note = "irqbalance is not installed or not running"
		case !ib.Running && (ib.UnitFile == "disabled" || ib.UnitFile == "masked"):
			c.Action, c.Supported = OK, true
			c.Note = "irqbalance is stopped and " + ib.UnitFile + ": it will not start at boot"
		default:
			c.decide(false)
			switch {
			case !ib.Running && ib.UnitFile == "enabled":
				c.Note = "not running now, but enabled: apply disables it so it does not start at boot"
			case !ib.Running:
				c.Note = "not running now; whether it starts at boot is not known here: apply disables it"
			}
		}
		return []Change{c}
	case "ban":
		path := ib.ConfigPath
		c := row(s, "irqbalance"+path)
		if path == "" {
			c.Knob = "irqbalance/etc/default/irqbalance"
			c.Current, c.Desired = "-", "-"
			c.unsupported("no irqbalance configuration file (/etc/sysconfig/irqbalance or /etc/default/irqbalance) to ban CPUs in; use irq.irqbalance = \"stop\"")
			return []Change{c}
		}
		var cur []string
		for _, v := range knob.IRQBalanceVars {
			if val, ok := ib.Config[v]; ok {
				cur = append(cur, knob.IRQBalanceAssign(v, val))
			}
		}
		c.Current = strings.Join(cur, "\n")
		if ip == nil {
			c.Desired = c.Current
			c.unsupported("irq.irqbalance = \"ban\" bans the CPUs and interrupts irq.placement plans; this profile places none")
			return []Change{c}
		}
		banned := append(append([]int(nil), ip.IRQCPUs...), ip.AppCPUs...)
		var args []string
		for _, a := range strings.Fields(ib.Config["IRQBALANCE_ARGS"]) {
			if !strings.HasPrefix(a, "--banirq=") && !strings.HasPrefix(a, "-i") {
				args = append(args, a)
			}
		}
		var placed []int
		for _, n := range ip.NICs {
			for _, pl := range n.IRQs {
				placed = append(placed, pl.IRQ)
			}
		}
		for _, nv := range ip.NVMe {
			for _, pl := range nv.IRQs {
				placed = append(placed, pl.IRQ)
			}
		}
		sort.Ints(placed)
		for _, irq := range placed {
			args = append(args, "--banirq="+strconv.Itoa(irq))
		}
		nbits := 0
		for _, cpu := range f.CPUs {
			nbits = max(nbits, cpu.ID+1)
		}
		c.Desired = strings.Join([]string{
			knob.IRQBalanceAssign("IRQBALANCE_ARGS", strings.Join(args, " ")),
			knob.IRQBalanceAssign("IRQBALANCE_BANNED_CPULIST", host.FormatCPUList(banned)),
			knob.IRQBalanceAssign("IRQBALANCE_BANNED_CPUS", host.FormatCPUMask(banned, nbits)),
		}, "\n")
		c.Reason = fmt.Sprintf("irqbalance keeps other interrupts off CPUs %s (interrupt and application CPUs) and leaves the %d placed interrupts alone (--banirq); the list form for irqbalance >= 1.8, the hex mask for older ones", host.FormatCPUList(banned), len(placed))
		if !f.Systemd && ib.Running {
			c.unsupported("irqbalance runs without systemd: lowlat cannot restart it to load banned CPUs; use irq.irqbalance = \"stop\"")
			return []Change{c}
		}
		c.decide(false)
		if c.Current != "" && knobSatisfied(c.Knob, c.Current, c.Desired) {
			c.Action = OK
		}
		return []Change{c}
	}
	return nil
}

func knobSatisfied(id, live, desired string) bool {
	k, err := knob.New(&knob.System{Root: "/nonexistent"}, id)
	return err == nil && k.Satisfied(live, desired)
}

// nvmeRows sets every NVMe namespace's request queue.
func nvmeRows(f *host.Facts, ss nicSettings) []Change {
	want := map[string]profile.Setting{}
	for _, p := range []string{"scheduler", "nr_requests", "rq_affinity"} {
		if s, ok := ss["nvme."+p]; ok {
			want[p] = s
		}
	}
	if len(want) == 0 {
		return nil
	}
	var src profile.Setting
	for _, p := range []string{"scheduler", "rq_affinity", "nr_requests"} {
		if s, ok := want[p]; ok {
			src = s
			break
		}
	}
	var out []Change
	for _, b := range f.Block {
		if irqplan.NVMeController(b.Name) == "" {
			continue
		}
		c := row(src, "block/"+b.Name+"/queue")
		// A queue file that could not be read is unknown ("?"), not 0.
		known := func(n int) string {
			if n < 0 {
				return Unknown
			}
			return strconv.Itoa(n)
		}
		cur := map[string]string{"scheduler": b.Scheduler, "nr_requests": known(b.NrRequests), "rq_affinity": known(b.RqAffinity)}
		if b.Scheduler == "" {
			cur["scheduler"] = Unknown
		}
		c.Current = knob.FormatBlockValue(cur)
		d := map[string]string{}
		var whys, notes []string
		for p, s := range want {
			d[p] = s.Value
			whys = append(whys, s.Why)
		}
		sort.Strings(whys)
		const unread = "/sys/block/*/queue/"
		if _, ok := d["scheduler"]; ok && len(b.Schedulers) == 0 {
			// Which schedulers the queue offers decides what may be set.
			notes = append(notes, "the offered schedulers could not be read ("+unread+"scheduler): scheduler left as is")
			delete(d, "scheduler")
		}
		if sch, ok := d["scheduler"]; ok && len(b.Schedulers) > 0 && !slices.Contains(b.Schedulers, sch) {
			notes = append(notes, fmt.Sprintf("no %s scheduler here (offers %s): scheduler left as is", sch, strings.Join(b.Schedulers, " ")))
			delete(d, "scheduler")
		}
		if _, ok := d["nr_requests"]; ok && (b.NrRequests < 0 || b.Scheduler == "") {
			// Its limit depends on the current depth and scheduler.
			notes = append(notes, "the current nr_requests and scheduler could not be read ("+unread+"): nr_requests left as is")
			delete(d, "nr_requests")
		}
		if _, ok := d["rq_affinity"]; ok && b.RqAffinity < 0 {
			notes = append(notes, "the current rq_affinity could not be read ("+unread+"rq_affinity); apply reads it before writing")
		}
		if nr, ok := d["nr_requests"]; ok {
			n, _ := strconv.Atoi(nr)
			finalSched := d["scheduler"]
			if finalSched == "" {
				finalSched = b.Scheduler
			}
			// With no elevator nr_requests cannot exceed the hardware tag
			// depth, which is what it is after selecting "none"; runbook
			// 002's 1024 is refused on a 1023-deep NVMe queue.
			if finalSched == "none" && b.Scheduler == "none" && n > b.NrRequests {
				d["nr_requests"] = strconv.Itoa(b.NrRequests)
				notes = append(notes, fmt.Sprintf("nr_requests %d is above the hardware queue depth %d (the limit with scheduler none)", n, b.NrRequests))
			}
		}
		c.Desired = knob.FormatBlockValue(d)
		c.Reason = strings.Join(dedupe(whys), "; ")
		c.Note = strings.Join(notes, "; ")
		if len(d) == 0 {
			c.unsupported(c.Note)
		} else {
			ok := true
			for p, v := range d {
				ok = ok && cur[p] == v
			}
			c.decide(ok)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		c := row(src, "block/*/queue")
		c.Current, c.Desired = "-", "-"
		c.unsupported("no NVMe devices here")
		out = append(out, c)
	}
	return out
}

// governorRow sets every CPU's frequency governor.
func governorRow(f *host.Facts, s profile.Setting) Change {
	c := row(s, "cpufreq/governor")
	c.Desired = s.Value
	by := map[int]string{}
	for _, cpu := range f.CPUs {
		if cpu.Online && cpu.Governor != "" {
			by[cpu.ID] = cpu.Governor
		}
	}
	if len(by) == 0 {
		c.Current = "-"
		c.unsupported("no CPU has a frequency governor here (no cpufreq driver: a VM, or the BIOS controls frequency)")
		return c
	}
	c.Current = knob.GovernorValue(by)
	c.decide(c.Current == c.Desired)
	return c
}
