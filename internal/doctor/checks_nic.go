package doctor

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/irqplan"
)

// The NIC, interrupt and storage checks of runbooks 000 and 002. Most read
// the facts, so they run on captures too; two questions need the host now
// (are the drop counters moving? which threads are busy, and on which node?)
// and go through the Sampler seam, which only the live command line sets:
// on a capture they say they could not sample.
func init() {
	Checks = append(Checks,
		Check{ID: "nic-drops", Run: checkNICDrops},
		Check{ID: "nic-lro-on", Run: checkLRO},
		Check{ID: "nic-coalesce-high", Run: checkCoalesce},
		Check{ID: "nic-queues-exceed-cpus", Run: checkQueues},
		Check{ID: "irq-smt-siblings", Needs: []string{"/proc/interrupts", "/sys/devices/system/cpu/cpu*/topology/thread_siblings_list"}, Run: checkSMTSiblings},
		Check{ID: "nvme-irq-concentrated", Needs: []string{"/proc/interrupts", "/sys/block"}, Run: checkNVMeConcentration},
		Check{ID: "softirq-imbalance", Needs: []string{"/proc/softirqs"}, Run: checkSoftirq},
		Check{ID: "nic-numa-remote", Needs: []string{"/sys/devices/system/node", "/sys/devices/system/node/node*/cpulist"}, Run: checkNUMARemote},
	)
}

// Sample is what a Sampler saw over its window.
type Sample struct {
	Window time.Duration
	// NICDeltas are the ethtool -S counters that grew during the window, by
	// interface.
	NICDeltas map[string]map[string]uint64
	// Ksoftirqd is each CPU's ksoftirqd/N share of the window (0..1).
	Ksoftirqd map[int]float64
	// Threads are the busiest user-space threads, busiest first.
	Threads []ThreadLoad
	// Errors says what could not be read, by source.
	Errors map[string]string
}

// ThreadLoad is one thread's CPU use during the window.
type ThreadLoad struct {
	PID, TID int
	Comm     string
	// Share of one CPU (0..1).
	Share float64
	// CPU is the CPU it last ran on.
	CPU int
}

// Sampler reads live counters twice, window apart. The command line sets
// LiveSampler for live facts; tests set a fake.
type Sampler interface {
	Sample(ifaces []string, window time.Duration) (*Sample, error)
}

// DefaultSampleWindow is how long doctor watches the live host. 200 ms keeps
// a doctor run under 300 ms and still sees a NIC that drops one packet per
// 200 ms or more; runbook 002's 20-60 rx_no_desc per minute needs a longer
// look ("lowlat doctor --sample 5s").
const DefaultSampleWindow = 200 * time.Millisecond

// takeSample runs the sampler once for a doctor run (the checks share one
// window), or says why it did not, and whether that is a failure (the
// sampler was asked and could not) rather than a choice (a capture,
// --sample 0).
func takeSample(f *host.Facts, o Options) (*Sample, string, bool) {
	switch {
	case f.Source != "live":
		return nil, fmt.Sprintf("not sampled: the facts are from %s, not this host now", orDefault(f.Source, "elsewhere")), false
	case o.Sampler == nil || o.SampleWindow <= 0:
		return nil, "not sampled: sampling is off (doctor --sample 0)", false
	}
	var ifaces []string
	for _, i := range f.Interfaces {
		if i.Physical() && i.Ethtool != nil && i.Ethtool.Stats != nil {
			ifaces = append(ifaces, i.Name)
		}
	}
	s, err := o.Sampler.Sample(ifaces, o.SampleWindow)
	if err != nil {
		return nil, "not sampled: " + err.Error(), true
	}
	return s, "", false
}

// sample is what this run's sampler saw (see Run).
func sample(o Options) (*Sample, string) { return o.sample, o.sampleErr }

// unsampled returns why a sampled check cannot count as passed: the sampler
// failed, or could not read a source the check needs (Sample.Errors keys,
// matched as prefixes). "" when the sample it needs is there, or sampling
// was not asked for.
func unsampled(o Options, sources ...string) string {
	if o.sampleFailed {
		return o.sampleErr
	}
	if o.sample == nil {
		return ""
	}
	var keys []string
	for k := range o.sample.Errors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, src := range sources {
			if strings.HasPrefix(k, src) {
				return fmt.Sprintf("not sampled: %s: %s", k, o.sample.Errors[k])
			}
		}
	}
	return ""
}

// notSampled is the row of a sampled check that found nothing it could
// vouch for: what it could not watch, counted as not checked.
func notSampled(id, why string) []Finding {
	return []Finding{{ID: id, Severity: Info, NotChecked: true,
		Summary:  "not checked on the live host: " + strings.TrimPrefix(why, "not sampled: "),
		Evidence: map[string]string{"sampled": why},
		Fix:      "run lowlat doctor as root on the host itself (the live sample needs ethtool and /proc/PID/task)"}}
}

// withEthtoolUnread adds to a check's rows the not-checked row of the up
// physical interfaces whose ethtool settings could not be read, if any: a
// check that needs them cannot vouch for those.
func withEthtoolUnread(f *host.Facts, id string, out []Finding) []Finding {
	var names, whys []string
	for _, ifc := range f.Interfaces {
		if !ifc.Physical() || !ifc.Up {
			continue
		}
		if e := f.ErrorFor("ethtool:" + ifc.Name); e != "" {
			names = append(names, ifc.Name)
			whys = append(whys, fmt.Sprintf("ethtool:%s: %s", ifc.Name, e))
		}
	}
	if len(names) == 0 {
		return out
	}
	return append(out, notCheckedRow(id, "the ethtool settings of "+strings.Join(names, ", "), strings.Join(whys, "; ")))
}

// dropCounterRE matches ethtool -S names that count packets lost by the NIC
// or its driver, across drivers: rx_missed_errors, rx_no_buffer_count
// (igb/ixgbe), rx_no_dma_resources, port.rx_dropped and rx_no_desc (i40e),
// rx_out_of_buffer and rx_discards_phy (mlx5), rx_queue_N_drops (virtio),
// tx_timeout(_count), fifo errors, allocation failures.
var dropCounterRE = regexp.MustCompile(`(?i)(drop|miss|no_?buf|no_?desc|no_dma|out_of_buffer|discard|timeout|fifo_err|over_?run|alloc_fail)`)

// DropCounter reports whether an ethtool -S counter counts lost packets.
func DropCounter(name string) bool {
	return dropCounterRE.MatchString(name) && !strings.Contains(name, "xdp")
}

func checkNICDrops(f *host.Facts, o Options) []Finding {
	var out []Finding
	var unread, whys []string
	s, why := sample(o)
	for i := range f.Interfaces {
		ifc := &f.Interfaces[i]
		if !ifc.Physical() {
			continue
		}
		total := map[string]uint64{}
		if ifc.Ethtool != nil {
			for k, v := range ifc.Ethtool.Stats {
				if v > 0 && DropCounter(k) {
					total[k] = v
				}
			}
		}
		for _, k := range []string{"rx_missed_errors", "rx_fifo_errors", "rx_over_errors"} {
			if v := ifc.Stats[k]; v > 0 && len(total) == 0 {
				total["statistics/"+k] = v
			}
		}
		var now map[string]uint64
		if s != nil {
			now = map[string]uint64{}
			for k, v := range s.NICDeltas[ifc.Name] {
				if v > 0 && DropCounter(k) {
					now[k] = v
				}
			}
		}
		if len(total) == 0 && len(now) == 0 {
			if ifc.Stats == nil && (ifc.Ethtool == nil || ifc.Ethtool.Stats == nil) {
				unread = append(unread, ifc.Name)
				whys = append(whys, counterSources(f, ifc.Name))
			}
			continue
		}
		ev := map[string]string{"interface": ifc.Name, "since_boot": counters(total)}
		if ifc.Ethtool != nil && ifc.Ethtool.Driver != "" {
			ev["driver"] = ifc.Ethtool.Driver
		}
		if s == nil {
			ev["sampled"] = why
		} else {
			ev["sampled"] = fmt.Sprintf("%v window", s.Window)
			ev["during_window"] = counters(now)
			if e := s.Errors["ethtool:"+ifc.Name]; e != "" {
				ev["sampled"] += "; " + e
			}
		}
		fix := fmt.Sprintf("spread %s's queue interrupts (irq.placement), ring.rx 1024+ if the counter is a ring/buffer one, and check the switch port for discards", ifc.Name)
		if len(now) > 0 {
			var rate []string
			for k, v := range now {
				rate = append(rate, fmt.Sprintf("%s +%.0f/s", k, float64(v)/s.Window.Seconds()))
			}
			sort.Strings(rate)
			out = append(out, Finding{ID: "nic-drops", Severity: Warn,
				Summary:  fmt.Sprintf("%s is dropping packets now: %s during the %v sample (runbook 000 cut NIC drops from 1200 to 70 per 5 min)", ifc.Name, strings.Join(rate, ", "), s.Window),
				Evidence: ev, Fix: fix, Source: runbook000})
			continue
		}
		summary := fmt.Sprintf("%s's drop counters are non-zero since boot (%s)", ifc.Name, counters(total))
		if s != nil {
			summary += fmt.Sprintf("; none moved during the %v sample", s.Window)
		} else {
			summary += "; whether they still grow was " + why
		}
		out = append(out, Finding{ID: "nic-drops", Severity: Info, Summary: summary, Evidence: ev, Fix: fix, Source: runbook000})
	}
	if len(unread) > 0 {
		out = append(out, notCheckedRow("nic-drops", "the drop counters of "+strings.Join(unread, ", "), strings.Join(whys, "; ")))
	}
	if len(out) == 0 {
		if why := unsampled(o, "ethtool:"); why != "" {
			return notSampled("nic-drops", why)
		}
	}
	return out
}

// counterSources says why an interface has neither ethtool nor sysfs
// counters in the facts.
func counterSources(f *host.Facts, iface string) string {
	var parts []string
	if e := f.ErrorFor("ethtool:" + iface); e != "" {
		parts = append(parts, "ethtool:"+iface+": "+e)
	} else {
		parts = append(parts, "ethtool:"+iface+": no statistics")
	}
	if e := f.ErrorFor("/sys/class/net/*/statistics"); e != "" {
		parts = append(parts, "/sys/class/net/*/statistics: "+e)
	} else {
		parts = append(parts, "/sys/class/net/"+iface+"/statistics: none")
	}
	return strings.Join(parts, ", ")
}

func counters(m map[string]uint64) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

func checkLRO(f *host.Facts, _ Options) []Finding {
	var out []Finding
	for _, ifc := range f.Interfaces {
		if !ifc.Physical() || !ifc.Up || ifc.Ethtool == nil || !ifc.Ethtool.Features["rx-lro"] {
			continue
		}
		out = append(out, Finding{ID: "nic-lro-on", Severity: Warn,
			Summary:  fmt.Sprintf("%s has LRO on: the NIC holds packets back to merge them, which delays UDP and small TCP messages and breaks forwarding", ifc.Name),
			Evidence: map[string]string{"interface": ifc.Name, "rx-lro": "on", "driver": ifc.Ethtool.Driver},
			Fix:      fmt.Sprintf("ethtool/%s/feature/lro = off (profiles game-udp, realtime-tcp)", ifc.Name),
			Source:   runbook000})
	}
	return withEthtoolUnread(f, "nic-lro-on", out)
}

// Coalescing above these holds an interrupt back long enough to show in a
// game's tail latency (runbook 000 uses 5 us, 2-4 if still jittery).
const (
	rxUsecsHigh = 50
	txUsecsHigh = 100
)

func checkCoalesce(f *host.Facts, _ Options) []Finding {
	var out []Finding
	for _, ifc := range f.Interfaces {
		if !ifc.Physical() || !ifc.Up || ifc.Ethtool == nil || ifc.Ethtool.Coalesce == nil {
			continue
		}
		c := ifc.Ethtool.Coalesce
		ev := map[string]string{"interface": ifc.Name}
		for _, k := range []string{"rx-usecs", "tx-usecs", "rx-frames", "adaptive-rx", "adaptive-tx"} {
			if v, ok := c[k]; ok {
				ev[k] = strconv.Itoa(int(v))
			}
		}
		fix := fmt.Sprintf("ethtool/%s/coalesce/adaptive-rx = off, rx-usecs = 5, tx-usecs = 5 (profile game-udp)", ifc.Name)
		switch {
		case c["adaptive-rx"] == 0 && (c["rx-usecs"] >= rxUsecsHigh || c["tx-usecs"] >= txUsecsHigh):
			out = append(out, Finding{ID: "nic-coalesce-high", Severity: Warn,
				Summary:  fmt.Sprintf("%s holds interrupts up to %d us (rx) / %d us (tx): every small packet can wait that long before the CPU sees it, and latency turns sticky under load", ifc.Name, c["rx-usecs"], c["tx-usecs"]),
				Evidence: ev, Fix: fix, Source: runbook000})
		case c["adaptive-rx"] != 0:
			out = append(out, Finding{ID: "nic-coalesce-high", Severity: Info,
				Summary:  fmt.Sprintf("%s uses adaptive interrupt moderation (now rx-usecs %d): it raises the hold-off time as traffic grows, so latency rises exactly at peak", ifc.Name, c["rx-usecs"]),
				Evidence: ev, Fix: fix, Source: runbook000})
		}
	}
	return withEthtoolUnread(f, "nic-coalesce-high", out)
}

// planned runs the IRQ planner for one interface, as lowlat plan would.
func planned(f *host.Facts, iface string) *irqplan.NIC {
	p, err := irqplan.Make(f, irqplan.Options{Ifaces: []string{iface}})
	if err != nil || len(p.NICs) != 1 || p.NICs[0].Skip != "" || len(p.NICs[0].Pool) == 0 {
		return nil
	}
	return &p.NICs[0]
}

func checkQueues(f *host.Facts, _ Options) []Finding {
	var out []Finding
	for _, ifc := range f.Interfaces {
		if !ifc.Physical() || !ifc.Up || ifc.Ethtool == nil || ifc.Ethtool.Channels == nil {
			continue
		}
		ch := ifc.Ethtool.Channels
		queues := int(max(ch.Combined, ch.Rx))
		n := planned(f, ifc.Name)
		if n == nil || queues <= len(n.Pool) {
			continue
		}
		out = append(out, Finding{ID: "nic-queues-exceed-cpus", Severity: Warn,
			Summary: fmt.Sprintf("%s has %d queues for the %d cores of its NUMA node %d that should take interrupts (one thread per core): the extra queues share CPUs, land on SMT siblings or on another node, and jitter (runbook 002: queues ≈ IRQ CPUs)",
				ifc.Name, queues, len(n.Pool), n.Node),
			Evidence: map[string]string{"interface": ifc.Name, "queues": strconv.Itoa(queues), "irq_cpus": host.FormatCPUList(n.Pool), "max_combined": strconv.Itoa(int(ch.MaxCombined))},
			Fix:      fmt.Sprintf("ethtool/%s/channels/combined = %d with one queue interrupt per CPU (irq.placement = numa-local)", ifc.Name, len(n.Pool)),
			Source:   runbook002})
	}
	return withEthtoolUnread(f, "nic-queues-exceed-cpus", out)
}

// servingCPU is the CPU a queue interrupt fires on: its effective affinity,
// else a single-CPU affinity, else the CPU that counted most of it.
func servingCPU(q host.IRQ) int {
	if len(q.EffectiveAffinity) == 1 {
		return q.EffectiveAffinity[0]
	}
	if len(q.Affinity) == 1 {
		return q.Affinity[0]
	}
	best, bestN := -1, uint64(0)
	for c, n := range q.Counts {
		if n > bestN {
			best, bestN = c, n
		}
	}
	return best
}

// queueIRQs are the NIC queue interrupts (and NVMe's where the kernel lets
// anyone place them) with the CPU each fires on.
func queueIRQs(f *host.Facts) map[int][]string {
	byCPU := map[int][]string{}
	seen := map[int]bool{}
	add := func(q host.IRQ) {
		if seen[q.Num] || q.Total() == 0 {
			return
		}
		seen[q.Num] = true
		if c := servingCPU(q); c >= 0 {
			byCPU[c] = append(byCPU[c], fmt.Sprintf("%d %s", q.Num, q.Name))
		}
	}
	for _, ifc := range f.Interfaces {
		if !ifc.Physical() {
			continue
		}
		for _, q := range f.DeviceIRQs(ifc.Name) {
			if o, ok := host.ParseIRQName(q.Name); ok && o.IsQueue() {
				add(q)
			}
		}
	}
	if !irqplan.NVMeManaged(f.Kernel) {
		for _, q := range f.IRQs {
			if o, ok := host.ParseIRQName(q.Name); ok && o.Driver == "nvme" && o.IsQueue() {
				add(q)
			}
		}
	}
	return byCPU
}

func checkSMTSiblings(f *host.Facts, _ Options) []Finding {
	byCPU := queueIRQs(f)
	var pairs []string
	seen := map[string]bool{}
	for _, c := range f.CPUs {
		if len(c.Siblings) < 2 || len(byCPU[c.ID]) == 0 {
			continue
		}
		var busy []int
		for _, s := range c.Siblings {
			if len(byCPU[s]) > 0 {
				busy = append(busy, s)
			}
		}
		key := host.FormatCPUList(c.Siblings)
		if len(busy) < 2 || seen[key] {
			continue
		}
		seen[key] = true
		var what []string
		for _, s := range busy {
			what = append(what, fmt.Sprintf("cpu%d: %s", s, byCPU[s][0]))
		}
		pairs = append(pairs, strings.Join(what, " + "))
	}
	if len(pairs) == 0 {
		return nil
	}
	sort.Strings(pairs)
	ev := map[string]string{"cores": strconv.Itoa(len(pairs))}
	for i, p := range pairs {
		if i == 8 {
			ev["more"] = strconv.Itoa(len(pairs) - 8)
			break
		}
		ev[fmt.Sprintf("core_%d", i+1)] = p
	}
	return []Finding{{ID: "irq-smt-siblings", Severity: Warn,
		Summary:  fmt.Sprintf("on %d cores both SMT siblings take queue interrupts: the two hardware threads fight over one core's caches at peak (runbook 002)", len(pairs)),
		Evidence: ev,
		Fix:      "one queue interrupt per core, on one thread of it; the other thread for the application (irq.placement = numa-local)",
		Source:   runbook002}}
}

func checkNVMeConcentration(f *host.Facts, _ Options) []Finding {
	var out []Finding
	for _, b := range f.Block {
		ctrl := irqplan.NVMeController(b.Name)
		if ctrl == "" || len(b.MSIIRQs) == 0 {
			continue
		}
		perCPU := map[int]uint64{}
		var total uint64
		n := 0
		for _, q := range f.IRQs {
			if !slices.Contains(b.MSIIRQs, q.Num) {
				continue
			}
			if o, ok := host.ParseIRQName(q.Name); !ok || o.Role != "io" {
				continue
			}
			n++
			for c, v := range q.Counts {
				perCPU[c] += v
				total += v
			}
		}
		if total < 1000 || n < 2 {
			continue
		}
		top, topN := -1, uint64(0)
		for c, v := range perCPU {
			if v > topN || (v == topN && c < top) {
				top, topN = c, v
			}
		}
		share := float64(topN) / float64(total)
		if share < 0.6 {
			continue
		}
		out = append(out, Finding{ID: "nvme-irq-concentrated", Severity: Warn,
			Summary: fmt.Sprintf("%.0f%% of %s's completion interrupts landed on CPU %d: the I/O is submitted from there (or its interrupts were pinned there), and its completions compete with whatever else runs on that CPU",
				share*100, ctrl, top),
			Evidence: map[string]string{"controller": ctrl, "cpu": strconv.Itoa(top), "share": fmt.Sprintf("%.2f", share), "io_queues": strconv.Itoa(n), "total": strconv.FormatUint(total, 10)},
			Fix:      "nvme.rq_affinity = 2 and keep I/O-heavy threads off the NIC's interrupt CPUs (lowlat pin); on kernels before 4.8 place NVMe interrupts apart (irq.nvme = separate)",
			Source:   runbook002})
	}
	return out
}

func checkSoftirq(f *host.Facts, o Options) []Finding {
	var out []Finding
	rx := f.SoftIRQs["NET_RX"]
	var total, top uint64
	topCPU := -1
	for c, v := range rx {
		total += v
		if v > top {
			top, topCPU = v, c
		}
	}
	if len(rx) >= 4 && total >= 100000 && float64(top) > 0.5*float64(total) {
		out = append(out, Finding{ID: "softirq-imbalance", Severity: Warn,
			Summary: fmt.Sprintf("CPU %d ran %.0f%% of all NET_RX softirqs since boot: receive processing is serialized on it (runbook 002: ksoftirqd/0 at 90%%)",
				topCPU, 100*float64(top)/float64(total)),
			Evidence: map[string]string{"cpu": strconv.Itoa(topCPU), "net_rx": strconv.FormatUint(top, 10), "net_rx_all_cpus": strconv.FormatUint(total, 10)},
			Fix:      "spread the NIC's queue interrupts over its node's CPUs (irq.placement = numa-local); RPS where the NIC has one queue",
			Source:   runbook002})
	}
	s, _ := sample(o)
	if why := unsampled(o, SourceThreads); why != "" && len(out) == 0 {
		return notSampled("softirq-imbalance", why)
	}
	if s == nil {
		return out
	}
	var hot []string
	for c, share := range s.Ksoftirqd {
		if share >= 0.2 {
			hot = append(hot, fmt.Sprintf("ksoftirqd/%d %.0f%%", c, share*100))
		}
	}
	sort.Strings(hot)
	if len(hot) > 0 {
		out = append(out, Finding{ID: "softirq-imbalance", Severity: Warn,
			Summary:  fmt.Sprintf("softirq work overflows into ksoftirqd right now (%s during the %v sample): packets wait for the scheduler", strings.Join(hot, ", "), s.Window),
			Evidence: map[string]string{"ksoftirqd": strings.Join(hot, ", "), "window": s.Window.String()},
			Fix:      "more queues and interrupt CPUs for the NIC (irq.placement = numa-local), RPS for a single-queue NIC",
			Source:   runbook002})
	}
	return out
}

func checkNUMARemote(f *host.Facts, o Options) []Finding {
	if len(f.NUMA) < 2 {
		return nil
	}
	if e := f.ErrorFor("/proc/interrupts"); e != "" {
		return []Finding{notCheckedRow("nic-numa-remote", "where the NICs' interrupts fire", "/proc/interrupts: "+e)}
	}
	nodeOf := map[int]int{}
	for _, c := range f.CPUs {
		nodeOf[c.ID] = c.Node
	}
	var out []Finding
	var nicNodes []int
	for _, ifc := range f.Interfaces {
		if !ifc.Physical() || !ifc.Up || ifc.NUMANode < 0 {
			continue
		}
		nicNodes = append(nicNodes, ifc.NUMANode)
		var remote []string
		for _, q := range f.DeviceIRQs(ifc.Name) {
			if o, ok := host.ParseIRQName(q.Name); !ok || !o.IsQueue() || q.Total() == 0 {
				continue
			}
			if c := servingCPU(q); c >= 0 && nodeOf[c] != ifc.NUMANode {
				remote = append(remote, fmt.Sprintf("%d->cpu%d(node %d)", q.Num, c, nodeOf[c]))
			}
		}
		if len(remote) > 0 {
			out = append(out, Finding{ID: "nic-numa-remote", Severity: Warn,
				Summary:  fmt.Sprintf("%d of %s's queue interrupts fire on CPUs of another NUMA node than the NIC's (%d): every packet's descriptors and data cross the interconnect", len(remote), ifc.Name, ifc.NUMANode),
				Evidence: map[string]string{"interface": ifc.Name, "nic_node": strconv.Itoa(ifc.NUMANode), "remote": strings.Join(first(remote, 8), " ")},
				Fix:      "place them on the NIC's node (irq.placement = numa-local)",
				Source:   runbook002})
		}
	}
	s, _ := sample(o)
	if why := unsampled(o, SourceThreads); why != "" && len(out) == 0 && len(nicNodes) > 0 {
		return notSampled("nic-numa-remote", why)
	}
	if s == nil || len(nicNodes) == 0 {
		return out
	}
	nodeLoad := map[int]float64{}
	var busiest []string
	for i, t := range s.Threads {
		if t.Share < 0.05 || t.CPU < 0 {
			continue
		}
		nodeLoad[nodeOf[t.CPU]] += t.Share
		if i < 5 {
			busiest = append(busiest, fmt.Sprintf("%s[%d] %.0f%% on cpu%d (node %d)", t.Comm, t.TID, t.Share*100, t.CPU, nodeOf[t.CPU]))
		}
	}
	topNode, topLoad := -1, 0.0
	for n, l := range nodeLoad {
		if l > topLoad || (l == topLoad && n < topNode) {
			topNode, topLoad = n, l
		}
	}
	if topNode < 0 || topLoad < 0.2 || slices.Contains(nicNodes, topNode) {
		return out
	}
	out = append(out, Finding{ID: "nic-numa-remote", Severity: Warn,
		Summary: fmt.Sprintf("the busiest application threads run on NUMA node %d but the NIC is on node %v: their packets cross the interconnect both ways (runbook 002: P99 spikes with IRQs on NUMA0 and the application on NUMA1)",
			topNode, uniqueInts(nicNodes)),
		Evidence: map[string]string{"busiest": strings.Join(busiest, "; "), "window": s.Window.String()},
		Fix:      "run the application on the NIC's node: lowlat pin --service NAME (CPUAffinity=, NUMAPolicy=bind)",
		Source:   runbook002})
	return out
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("(+%d more)", len(s)-n))
	}
	return s
}

func uniqueInts(in []int) []int {
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}
