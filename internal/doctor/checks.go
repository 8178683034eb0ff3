package doctor

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/plan"
)

// Checks is every check, in report order.
var Checks = []Check{
	{ID: "congestion-control", Needs: []string{"sysctl:net.ipv4.tcp_congestion_control"}, Run: checkCongestion},
	{ID: "kernel-too-old-for-bbr", Needs: []string{"/proc/sys/kernel/osrelease"}, Run: checkKernelBBR},
	{ID: "qdisc-fifo-bufferbloat", Needs: []string{"netlink:qdiscs", "netlink:links"}, Run: checkRootQdiscs},
	{ID: "default-qdisc-fifo", Needs: []string{"sysctl:net.core.default_qdisc"}, Run: checkDefaultQdisc},
	{ID: "tcp-fastopen-server-off", Needs: []string{"sysctl:net.ipv4.tcp_fastopen"}, Run: checkFastOpen},
	{ID: "slow-start-after-idle", Needs: []string{"sysctl:net.ipv4.tcp_slow_start_after_idle"}, Run: checkSlowStartAfterIdle},
	{ID: "send-buffer-small", Needs: []string{"sysctl:net.ipv4.tcp_wmem"}, Run: checkSendBuffer},
	{ID: "initcwnd-default", Needs: []string{"netlink:routes"}, Run: checkInitcwnd},
	{ID: "obsolete-sysctl", Needs: []string{"sysctl:net.ipv4.tcp_fastopen"}, Run: checkObsolete},
	{ID: "thp-always", Needs: []string{"/sys/kernel/mm", "/sys/" + host.SysfsTHPEnabled}, Run: checkTHP},
	{ID: "irqbalance-running", Needs: []string{"/proc"}, Run: checkIRQBalance},
	{ID: "nic-irq-concentrated", Needs: []string{"/proc/interrupts"}, Run: checkIRQConcentration},
	{ID: "softnet-drops", Needs: []string{"/proc/net/softnet_stat"}, Run: checkSoftnet},
	{ID: "listen-overflows", Needs: []string{"/proc/net/netstat"}, Run: checkListenOverflows},
}

func num(f *host.Facts, name string) (int64, bool) {
	v, ok := f.Sysctls[name]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.Fields(v + " x")[0], 10, 64)
	return n, err == nil
}

func checkCongestion(f *host.Facts, _ Options) []Finding {
	cc, ok := f.Sysctls["net.ipv4.tcp_congestion_control"]
	if !ok || cc == "bbr" {
		return nil
	}
	avail := f.Kernel.CongestionSupport("bbr")
	if avail == host.Unknown {
		return []Finding{notCheckedRow("congestion-control", "whether this kernel has BBR",
			fmt.Sprintf("TCP uses %s, and neither the kernel config nor a module tree says whether BBR exists", cc))}
	}
	if !avail.Usable() {
		return nil // kernel-too-old-for-bbr or no module: reported there
	}
	how := "loaded"
	if !slices.Contains(f.Kernel.CongestionAvailable, "bbr") {
		how = "available as a module"
	}
	return []Finding{{
		ID: "congestion-control", Severity: Warn,
		Summary:  fmt.Sprintf("TCP uses %s while BBR is %s: loss-based congestion control fills every buffer on the path before it slows down", cc, how),
		Evidence: map[string]string{"net.ipv4.tcp_congestion_control": cc, "available": strings.Join(f.Kernel.CongestionAvailable, " "), "modules": strings.Join(f.Kernel.CongestionModules, " ")},
		Fix:      "sysctl/net.ipv4.tcp_congestion_control = bbr (profiles game-udp, live-edge, capped-uplink)",
		Source:   runbook003,
	}}
}

func checkKernelBBR(f *host.Facts, _ Options) []Finding {
	if f.Kernel.Major == 0 || f.Kernel.AtLeast(4, 9) {
		return nil
	}
	return []Finding{{
		ID: "kernel-too-old-for-bbr", Severity: Warn,
		Summary:  fmt.Sprintf("kernel %s predates BBR (4.9), fq_codel pacing fixes and per-route congestion control; runbook 000 upgraded CentOS 7's 3.10 to 5.4 first", f.Kernel.Release),
		Evidence: map[string]string{"kernel": f.Kernel.Release, "available": strings.Join(f.Kernel.CongestionAvailable, " ")},
		Fix:      "upgrade to a 5.4+ kernel (e.g. ELRepo kernel-ml on CentOS 7); until then cubic with an AQM qdisc",
		Source:   runbook000,
	}}
}

// checkRootQdiscs flags FIFO roots in front of long device queues: a bulk flow
// fills txqueuelen packets and every other packet waits behind them.
func checkRootQdiscs(f *host.Facts, _ Options) []Finding {
	var out []Finding
	for i := range f.Interfaces {
		ifc := &f.Interfaces[i]
		if ifc.Loopback || !ifc.Up || strings.HasPrefix(ifc.Name, "ifb") {
			continue
		}
		root := plan.RootSpec(ifc)
		kind := root.Kind
		if kind == "mq" && len(root.Children) > 0 {
			kind = root.Children[0].Kind
		}
		ev := map[string]string{"interface": ifc.Name, "root_qdisc": root.String(), "txqueuelen": strconv.Itoa(ifc.TxQueueLen)}
		if ifc.Root != nil {
			ev["backlog_bytes"] = strconv.FormatUint(ifc.Root.Stats.Backlog, 10)
			ev["drops"] = strconv.FormatUint(ifc.Root.Stats.Drops, 10)
		}
		switch {
		case (kind == "pfifo_fast" || kind == "pfifo" || kind == "bfifo") && ifc.TxQueueLen >= 100:
			out = append(out, Finding{
				ID: "qdisc-fifo-bufferbloat", Severity: Warn,
				Summary:  fmt.Sprintf("%s queues up to %d packets in a FIFO (%s): one bulk flow can delay every game or SSH packet by tens to thousands of ms", ifc.Name, ifc.TxQueueLen, kind),
				Evidence: ev,
				Fix:      fmt.Sprintf("qdisc/%s/root = fq_codel (profiles game-udp, realtime-tcp) or a shaper below the uplink rate (capped-uplink)", ifc.Name),
				Source:   runbook000,
			})
		case kind == "noqueue" && ifc.Physical():
			out = append(out, Finding{
				ID: "qdisc-fifo-bufferbloat", Severity: Info,
				Summary:  fmt.Sprintf("%s has no qdisc: packets queue in the driver's rings where no AQM can see them", ifc.Name),
				Evidence: ev,
				Fix:      fmt.Sprintf("qdisc/%s/root = fq_codel", ifc.Name),
				Source:   runbook000,
			})
		}
	}
	return out
}

func checkDefaultQdisc(f *host.Facts, _ Options) []Finding {
	dq, ok := f.Sysctls["net.core.default_qdisc"]
	if !ok || (dq != "pfifo_fast" && dq != "pfifo") {
		return nil
	}
	want, unknown := "", false
	for _, k := range []string{"fq_codel", "fq"} {
		if f.Kernel.Qdiscs[k].Usable() {
			want = k
			break
		}
		unknown = unknown || f.Kernel.Qdiscs[k] == host.Unknown || f.Kernel.Qdiscs[k] == ""
	}
	if want == "" && unknown {
		return []Finding{notCheckedRow("default-qdisc-fifo", "whether this kernel has fq_codel or fq",
			fmt.Sprintf("new qdiscs default to %s, and neither the kernel config nor a module tree says whether an AQM exists", dq))}
	}
	if want == "" {
		return nil
	}
	return []Finding{{
		ID: "default-qdisc-fifo", Severity: Info,
		Summary:  fmt.Sprintf("new qdiscs default to %s although %s is available (and existing roots keep theirs: default_qdisc only affects qdiscs created later)", dq, want),
		Evidence: map[string]string{"net.core.default_qdisc": dq},
		Fix:      "sysctl/net.core.default_qdisc = " + want + ", plus each interface's qdisc/IF/root (lowlat apply does both)",
		Source:   runbook000,
	}}
}

func checkFastOpen(f *host.Facts, _ Options) []Finding {
	v, ok := num(f, "net.ipv4.tcp_fastopen")
	if !ok || v&0x2 != 0 {
		return nil
	}
	return []Finding{{
		ID: "tcp-fastopen-server-off", Severity: Info,
		Summary:  fmt.Sprintf("TCP Fast Open server side is off (tcp_fastopen=%d): returning clients cannot send their request in the SYN, one extra round trip to first byte", v),
		Evidence: map[string]string{"net.ipv4.tcp_fastopen": strconv.FormatInt(v, 10)},
		Fix:      "sysctl/net.ipv4.tcp_fastopen = 3, and TCP_FASTOPEN on the listener (nginx: listen ... fastopen=256)",
		Source:   runbook004,
	}}
}

func checkSlowStartAfterIdle(f *host.Facts, _ Options) []Finding {
	v, ok := num(f, "net.ipv4.tcp_slow_start_after_idle")
	if !ok || v == 0 {
		return nil
	}
	return []Finding{{
		ID: "slow-start-after-idle", Severity: Info,
		Summary:  "connections idle for one RTO restart slow start: bursty traffic (a video GOP, a game round) pays several round trips again after each pause",
		Evidence: map[string]string{"net.ipv4.tcp_slow_start_after_idle": "1"},
		Fix:      "sysctl/net.ipv4.tcp_slow_start_after_idle = 0 (profiles realtime-tcp, live-edge)",
		Source:   runbook001,
	}}
}

func checkSendBuffer(f *host.Facts, _ Options) []Finding {
	var out []Finding
	fields := strings.Fields(f.Sysctls["net.ipv4.tcp_wmem"])
	if len(fields) == 3 {
		lo, _ := strconv.ParseInt(fields[0], 10, 64)
		def, _ := strconv.ParseInt(fields[1], 10, 64)
		hi, _ := strconv.ParseInt(fields[2], 10, 64)
		ev := map[string]string{"net.ipv4.tcp_wmem": strings.Join(fields, " ")}
		if wm, ok := f.Sysctls["net.core.wmem_max"]; ok {
			ev["net.core.wmem_max"] = wm
		}
		switch {
		case lo == def && def == hi:
			out = append(out, Finding{
				ID: "send-buffer-small", Severity: Warn,
				Summary:  fmt.Sprintf("tcp_wmem min, default and max are all %d: send-buffer autotuning is off; runbook 004 measured 1.59 -> 1.16 transactions/s forcing them to 64 KB", hi),
				Evidence: ev, Fix: "sysctl/net.ipv4.tcp_wmem = 4096 65536 16777216 (profile live-edge)", Source: runbook004,
			})
		case hi < 4<<20:
			out = append(out, Finding{
				ID: "send-buffer-small", Severity: Info,
				Summary:  fmt.Sprintf("tcp_wmem max is %d KB: one connection cannot keep more than that in flight, too little for one fast viewer on a long path (100 Mbit/s at 100 ms RTT needs 1.2 MB in flight)", hi>>10),
				Evidence: ev, Fix: "sysctl/net.ipv4.tcp_wmem = 4096 65536 16777216 and net.core.wmem_max = 16777216 (profile live-edge)", Source: runbook004,
			})
		}
	}
	if v, ok := num(f, "net.ipv4.tcp_notsent_lowat"); ok && v > 1<<20 && v != 4294967295 {
		out = append(out, Finding{
			ID: "send-buffer-small", Severity: Info,
			Summary:  fmt.Sprintf("tcp_notsent_lowat is %d MB: a stalled client can have that much stale data queued in the kernel per socket", v>>20),
			Evidence: map[string]string{"net.ipv4.tcp_notsent_lowat": strconv.FormatInt(v, 10)},
			Fix:      "sysctl/net.ipv4.tcp_notsent_lowat = 131072 (profile live-edge)", Source: runbook004,
		})
	}
	return out
}

func checkInitcwnd(f *host.Facts, _ Options) []Finding {
	var defaults []string
	var tooBig []string
	for _, r := range f.Routes {
		if r.Table != 254 || (r.Type != "" && r.Type != "unicast") || r.Dst != "default" {
			continue
		}
		name := r.Family + " default via " + r.Dev
		switch {
		case r.InitCwnd == 0:
			defaults = append(defaults, name)
		case r.InitCwnd > 64:
			tooBig = append(tooBig, fmt.Sprintf("%s initcwnd %d", name, r.InitCwnd))
		}
	}
	var out []Finding
	if len(defaults) > 0 {
		out = append(out, Finding{
			ID: "initcwnd-default", Severity: Info,
			Summary:  "default routes use the kernel's initcwnd 10 (14.6 KB): a 114 KB key frame needs 4 round trips, with initcwnd 40 it needs 2; matters for streaming and web edges",
			Evidence: map[string]string{"routes": strings.Join(defaults, "; ")},
			Fix:      "route/default/main/initcwnd = 40 (profile live-edge; roll out 20 -> 30 -> 40)",
			Source:   runbook004,
		})
	}
	if len(tooBig) > 0 {
		out = append(out, Finding{
			ID: "initcwnd-default", Severity: Warn,
			Summary:  "initcwnd above 64 segments bursts more than most clients' initial receive window (about 64 KB on Linux 4.20+) and causes loss at shallow bottlenecks",
			Evidence: map[string]string{"routes": strings.Join(tooBig, "; ")},
			Fix:      "route/default/main/initcwnd = 40",
			Source:   runbook004,
		})
	}
	return out
}

func checkObsolete(f *host.Facts, _ Options) []Finding {
	var out []Finding
	if v, ok := num(f, "net.ipv4.tcp_tw_recycle"); ok && v != 0 {
		out = append(out, Finding{
			ID: "obsolete-sysctl", Severity: Crit,
			Summary:  "tcp_tw_recycle=1 drops connections from clients behind NAT (their timestamps disagree); it was removed in Linux 4.12 for that reason",
			Evidence: map[string]string{"net.ipv4.tcp_tw_recycle": strconv.FormatInt(v, 10)},
			Fix:      "sysctl/net.ipv4.tcp_tw_recycle = 0 (use tcp_tw_reuse = 1 for outgoing connections)",
			Source:   runbook004,
		})
	}
	if v, ok := num(f, "net.ipv4.tcp_low_latency"); ok && v != 0 && f.Kernel.Major == 0 {
		out = append(out, notCheckedRow("obsolete-sysctl", "the kernel version",
			"tcp_low_latency is set, and whether this kernel ignores it (4.14 and later) depends on the version, which is unknown"))
	}
	if v, ok := num(f, "net.ipv4.tcp_low_latency"); ok && v != 0 && f.Kernel.AtLeast(4, 14) {
		out = append(out, Finding{
			ID: "obsolete-sysctl", Severity: Info,
			Summary:  "tcp_low_latency is set in runbooks but the kernel ignores it since 4.14 (the prequeue it controlled is gone): it does nothing here",
			Evidence: map[string]string{"net.ipv4.tcp_low_latency": f.Sysctls["net.ipv4.tcp_low_latency"], "kernel": f.Kernel.Release},
			Fix:      "remove it from sysctl.conf; nothing to set",
			Source:   runbook001,
		})
	}
	return out
}

func checkTHP(f *host.Facts, _ Options) []Finding {
	v := f.Sysfs[host.SysfsTHPEnabled]
	if v != "always" {
		return nil
	}
	return []Finding{{
		ID: "thp-always", Severity: Warn,
		Summary:  "transparent huge pages are 'always': compaction and khugepaged stall latency-sensitive processes for milliseconds at random",
		Evidence: map[string]string{host.SysfsTHPEnabled: v, host.SysfsTHPDefrag: f.Sysfs[host.SysfsTHPDefrag]},
		Fix:      "sysfs/kernel/mm/transparent_hugepage/enabled = never (profile game-udp)",
		Source:   runbook002,
	}}
}

func checkIRQBalance(f *host.Facts, _ Options) []Finding {
	if !f.IRQBalance.Running {
		return nil
	}
	ev := map[string]string{"pid": strconv.Itoa(f.IRQBalance.PID), "config": f.IRQBalance.ConfigPath, "banned": f.IRQBalance.BannedCPUs}
	if f.IRQBalance.Args != nil {
		ev["args"] = strings.Join(f.IRQBalance.Args, " ")
	}
	pinned := pinnedNICIRQs(f)
	// Interrupts irqbalance was told to leave alone (--banirq, as lowlat's
	// irq.irqbalance = "ban" writes) stay where they were pinned.
	banned := f.IRQBalance.BannedIRQs()
	var exposed []string
	for _, p := range pinned {
		if !banned[p.irq] {
			exposed = append(exposed, p.String())
		}
	}
	switch {
	case len(pinned) > 0 && len(exposed) == 0:
		return nil
	case len(exposed) > 0:
		ev["pinned_irqs"] = strings.Join(exposed, ", ")
		return []Finding{{
			ID: "irqbalance-running", Severity: Warn,
			Summary:  "irqbalance runs while NIC queue IRQs are pinned to single CPUs: it will move them back (runbook 002 re-asserted affinity every 5 minutes for this)",
			Evidence: ev,
			Fix:      "stop and disable irqbalance, or ban the pinned interrupts (--banirq) and their CPUs (IRQBALANCE_BANNED_CPULIST) in " + orDefault(f.IRQBalance.ConfigPath, "/etc/default/irqbalance") + " and restart it (irq.irqbalance = \"ban\")",
			Source:   runbook002,
		}}
	}
	return []Finding{{
		ID: "irqbalance-running", Severity: Info,
		Summary:  "irqbalance runs: it may move NIC interrupts between CPUs at any time, which shows as jitter; pin them deliberately or ban the CPUs you reserve",
		Evidence: ev,
		Fix:      "decide the IRQ placement (runbook 002), then stop irqbalance or ban those CPUs",
		Source:   runbook000,
	}}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// pinnedIRQ is a NIC queue interrupt whose affinity is a single CPU.
type pinnedIRQ struct{ irq, cpu int }

func (p pinnedIRQ) String() string { return fmt.Sprintf("%d->cpu%d", p.irq, p.cpu) }

// pinnedNICIRQs lists NIC queue IRQs someone pinned: affinities of one CPU
// each, spread over different CPUs (all of them on the same one is the default
// concentration problem, reported by nic-irq-concentrated).
func pinnedNICIRQs(f *host.Facts) []pinnedIRQ {
	var out []pinnedIRQ
	if len(f.CPUs) < 2 {
		return nil
	}
	cpus := map[int]bool{}
	for i := range f.Interfaces {
		if !f.Interfaces[i].Physical() {
			continue
		}
		for _, q := range f.DeviceIRQs(f.Interfaces[i].Name) {
			if len(q.Affinity) == 1 {
				out = append(out, pinnedIRQ{q.Num, q.Affinity[0]})
				cpus[q.Affinity[0]] = true
			}
		}
	}
	if len(out) < 2 || len(cpus) < 2 {
		return nil
	}
	return out
}

// checkIRQConcentration finds NICs whose queue interrupts are served mostly by
// one CPU (runbook 002: everything on CPU0, ksoftirqd/0 at 90%).
func checkIRQConcentration(f *host.Facts, _ Options) []Finding {
	var out []Finding
	for i := range f.Interfaces {
		ifc := &f.Interfaces[i]
		if !ifc.Physical() {
			continue
		}
		irqs := f.DeviceIRQs(ifc.Name)
		if len(irqs) < 2 {
			continue
		}
		perCPU := map[int]uint64{}
		var total uint64
		for _, q := range irqs {
			for cpu, n := range q.Counts {
				perCPU[cpu] += n
				total += n
			}
		}
		if total < 1000 || len(perCPU) < 2 {
			continue
		}
		top, topN := -1, uint64(0)
		for cpu, n := range perCPU {
			if n > topN || (n == topN && cpu < top) {
				top, topN = cpu, n
			}
		}
		share := float64(topN) / float64(total)
		if share < 0.6 {
			continue
		}
		out = append(out, Finding{
			ID: "nic-irq-concentrated", Severity: Warn,
			Summary:  fmt.Sprintf("%.0f%% of %s's %d queue interrupts since boot landed on CPU %d: its softirq work serializes there (and ksoftirqd/%d saturates under load)", share*100, ifc.Name, len(irqs), top, top),
			Evidence: map[string]string{"interface": ifc.Name, "irqs": strconv.Itoa(len(irqs)), "cpu": strconv.Itoa(top), "share": fmt.Sprintf("%.2f", share), "total": strconv.FormatUint(total, 10)},
			Fix:      "spread one queue IRQ per CPU on the NIC's NUMA node via /proc/irq/N/smp_affinity_list, with irqbalance stopped or banned (runbook 002)",
			Source:   runbook002,
		})
	}
	return out
}

func checkSoftnet(f *host.Facts, _ Options) []Finding {
	var drops, squeeze uint64
	var dropCPUs, squeezeCPUs []string
	for _, s := range f.Softnet {
		if s.Dropped > 0 {
			drops += s.Dropped
			dropCPUs = append(dropCPUs, fmt.Sprintf("cpu%d:%d", s.CPU, s.Dropped))
		}
		if s.TimeSqueeze > 0 {
			squeeze += s.TimeSqueeze
			squeezeCPUs = append(squeezeCPUs, fmt.Sprintf("cpu%d:%d", s.CPU, s.TimeSqueeze))
		}
	}
	var out []Finding
	if drops > 0 {
		out = append(out, Finding{
			ID: "softnet-drops", Severity: Warn,
			Summary:  fmt.Sprintf("%d packets dropped since boot because a CPU's input backlog was full", drops),
			Evidence: map[string]string{"dropped": strconv.FormatUint(drops, 10), "per_cpu": strings.Join(dropCPUs, " "), "net.core.netdev_max_backlog": f.Sysctls["net.core.netdev_max_backlog"]},
			Fix:      "spread receive work (more queues / RPS on single-queue NICs) before raising net.core.netdev_max_backlog (4096)",
			Source:   runbook000,
		})
	}
	if squeeze > 0 {
		out = append(out, Finding{
			ID: "softnet-drops", Severity: Info,
			Summary:  fmt.Sprintf("the NAPI budget ran out %d times since boot (time_squeeze): receive processing was cut short and deferred", squeeze),
			Evidence: map[string]string{"time_squeeze": strconv.FormatUint(squeeze, 10), "per_cpu": strings.Join(squeezeCPUs, " "), "net.core.netdev_budget": f.Sysctls["net.core.netdev_budget"]},
			Fix:      "spread NIC interrupts across more CPUs (runbook 002); raise net.core.netdev_budget only after",
			Source:   runbook002,
		})
	}
	return out
}

func checkListenOverflows(f *host.Facts, _ Options) []Finding {
	ext := f.SNMP["TcpExt"]
	var out []Finding
	ov, drops := ext["ListenOverflows"], ext["ListenDrops"]
	if ov > 0 {
		out = append(out, Finding{
			ID: "listen-overflows", Severity: Warn,
			Summary:  fmt.Sprintf("%d connections were dropped since boot because an accept queue was full (ListenDrops %d): clients saw a retransmitted SYN, 1 s or more of extra latency each", ov, drops),
			Evidence: map[string]string{"ListenOverflows": strconv.FormatInt(ov, 10), "ListenDrops": strconv.FormatInt(drops, 10), "net.core.somaxconn": f.Sysctls["net.core.somaxconn"], "net.ipv4.tcp_max_syn_backlog": f.Sysctls["net.ipv4.tcp_max_syn_backlog"]},
			Fix:      "sysctl/net.core.somaxconn = 4096 and a larger listen() backlog in the server (nginx: listen ... backlog=4096)",
			Source:   runbook001,
		})
	}
	if b := ext["TCPBacklogDrop"]; b > 0 {
		out = append(out, Finding{
			ID: "listen-overflows", Severity: Warn,
			Summary:  fmt.Sprintf("%d segments dropped since boot because a socket's backlog was full while the application held it (TCPBacklogDrop)", b),
			Evidence: map[string]string{"TCPBacklogDrop": strconv.FormatInt(b, 10), "net.ipv4.tcp_rmem": f.Sysctls["net.ipv4.tcp_rmem"]},
			Fix:      "find the slow reader (lowlat sockets); larger tcp_rmem only hides it",
			Source:   runbook001,
		})
	}
	return out
}
