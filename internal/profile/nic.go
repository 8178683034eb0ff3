package profile

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// NIC, interrupt, storage and CPU settings (runbooks 000 and 002). Unlike
// sysctls they are not knob names: the plan maps each to the knobs of the
// target interfaces, their interrupts, the NVMe devices or every CPU.
//
//	[ethtool]  channels.combined|rx|tx = N     ethtool -L (irq.placement sets combined itself)
//	           ring.rx|tx = N | "max"          ethtool -G
//	           feature.<lro|gro|gso|tso|...> = "on"|"off"   ethtool -K
//	           coalesce.<rx-usecs|tx-usecs|...> = N, coalesce.adaptive-rx|tx = "on"|"off"   ethtool -C
//	[irq]      placement = "numa-local"        IRQ affinity by NUMA/SMT rules (internal/irqplan)
//	           irqbalance = "stop"|"ban"|"keep" stop+disable it, or ban the planned CPUs and IRQs
//	           rps = "auto"|"off"              RPS/XPS where queues are fewer than CPUs
//	           rfs = N                         rps_sock_flow_entries with RPS (0: no RFS)
//	           queues = "auto"|N               at most N queue CPUs per NIC
//	           nvme = "separate"|"leave"       NVMe interrupts on CPUs of their own
//	[nvme]     scheduler, rq_affinity, nr_requests   every NVMe namespace's queue
//	[cpu]      governor = "performance"        cpufreq scaling governor of every CPU
var nicNames = map[string][]string{
	"irq":  {"placement", "irqbalance", "rps", "rfs", "queues", "nvme"},
	"nvme": {"scheduler", "rq_affinity", "nr_requests"},
	"cpu":  {"governor"},
}

var ethtoolNames = map[string][]string{
	"channels": {"combined", "rx", "tx", "other"},
	"ring":     {"rx", "tx"},
	"coalesce": {"rx-usecs", "rx-frames", "rx-usecs-irq", "rx-frames-irq", "tx-usecs", "tx-frames", "tx-usecs-irq", "tx-frames-irq",
		"stats-block-usecs", "adaptive-rx", "adaptive-tx", "pkt-rate-low", "rx-usecs-low", "rx-frames-low", "tx-usecs-low",
		"tx-frames-low", "pkt-rate-high", "rx-usecs-high", "rx-frames-high", "tx-usecs-high", "tx-frames-high", "sample-interval"},
}

var featureNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

func checkNICName(section, name string) error {
	if section == "ethtool" {
		group, item, ok := strings.Cut(name, ".")
		if group == "feature" && ok && featureNameRE.MatchString(item) {
			return nil
		}
		items, known := ethtoolNames[group]
		if !known && group != "feature" {
			return fmt.Errorf("unknown ethtool setting %q (known: channels.*, ring.*, feature.*, coalesce.*)", name)
		}
		if !ok || (group != "feature" && !slices.Contains(items, item)) {
			if group == "feature" {
				return fmt.Errorf("bad ethtool feature %q (want feature.lro, feature.gro, ... or a kernel feature name)", name)
			}
			return fmt.Errorf("unknown ethtool setting %q (known %s: %s)", name, group, strings.Join(items, ", "))
		}
		return nil
	}
	if !slices.Contains(nicNames[section], name) {
		return fmt.Errorf("unknown %s setting %q (known: %s)", section, name, strings.Join(nicNames[section], ", "))
	}
	return nil
}

func oneOf(v string, allowed ...string) error {
	if slices.Contains(allowed, v) {
		return nil
	}
	return fmt.Errorf("%q (want %s)", v, strings.Join(allowed, ", "))
}

func uintIn(v string, lo, hi uint64) error {
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil || n < lo || n > hi {
		return fmt.Errorf("%q (want %d..%d)", v, lo, hi)
	}
	return nil
}

var wordRE = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

func checkNICValue(section, name, v string) error {
	switch section + "." + name {
	case "irq.placement":
		return oneOf(v, "numa-local", "off")
	case "irq.irqbalance":
		return oneOf(v, "stop", "ban", "keep")
	case "irq.rps":
		return oneOf(v, "auto", "off")
	case "irq.rfs":
		return uintIn(v, 0, 1<<24)
	case "irq.queues":
		if v == "auto" {
			return nil
		}
		return uintIn(v, 1, 4096)
	case "irq.nvme":
		return oneOf(v, "separate", "leave")
	case "nvme.rq_affinity":
		return oneOf(v, "0", "1", "2")
	case "nvme.nr_requests":
		return uintIn(v, 4, 1<<16)
	case "nvme.scheduler", "cpu.governor":
		if !wordRE.MatchString(v) {
			return fmt.Errorf("bad %s %q", name, v)
		}
		return nil
	}
	group, item, _ := strings.Cut(name, ".")
	switch {
	case group == "feature", group == "coalesce" && strings.HasPrefix(item, "adaptive-"):
		return oneOf(v, "on", "off")
	case group == "ring" && v == "max":
		return nil
	case group == "channels", group == "ring":
		return uintIn(v, 1, 1<<16)
	case group == "coalesce":
		return uintIn(v, 0, 1<<20)
	}
	return nil
}
