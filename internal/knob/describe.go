package knob

import (
	"fmt"
	"strings"

	"github.com/lowlat/lowlat/internal/host"
)

// Describe says in human terms what moved: the knob with id was applied with
// value applied and now reads live ("irq 45 i40e-eth0-TxRx-3: applied cpu 4,
// now cpu 0"). It returns "" for kinds whose raw values already read well.
func Describe(id, applied, live string) string {
	kind, rest, _ := strings.Cut(id, "/")
	switch kind {
	case "irq":
		num, _, _ := strings.Cut(rest, "/")
		ac, an, err := SplitIRQValue(applied)
		if err != nil {
			return ""
		}
		name := an
		now := "gone"
		if live != Absent {
			lc, ln, err := SplitIRQValue(live)
			if err != nil {
				now = live
			} else {
				now = cpuWords(lc)
				if ln != "" && an != "" && ln != an {
					now += " and belongs to " + ln
				}
				if name == "" {
					name = ln
				}
			}
		}
		label := "irq " + num
		if name != "" {
			label += " " + name
		}
		return fmt.Sprintf("%s: applied %s, now %s", label, cpuWords(ac), now)
	case "ethtool":
		parts := strings.SplitN(rest, "/", 3)
		if len(parts) != 3 {
			return ""
		}
		what := parts[1] + " " + parts[2]
		if parts[1] == "feature" {
			what = parts[2]
		}
		return fmt.Sprintf("%s %s: applied %s, now %s", parts[0], what, applied, gone(live))
	case "queue":
		parts := strings.Split(rest, "/")
		if len(parts) != 3 {
			return ""
		}
		if parts[2] == "rps_flow_cnt" {
			return fmt.Sprintf("%s %s rps_flow_cnt: applied %s, now %s", parts[0], parts[1], applied, gone(live))
		}
		a, err := host.ParseCPUMask(applied)
		if err != nil {
			return ""
		}
		now := gone(live)
		if l, err := host.ParseCPUMask(live); err == nil && live != Absent {
			now = cpuWords(l)
		}
		return fmt.Sprintf("%s %s %s: applied %s, now %s", parts[0], parts[1], strings.TrimSuffix(parts[2], "_cpus"), cpuWords(a), now)
	case "service":
		return fmt.Sprintf("%s: applied %s, now %s", rest, serviceWords(applied), serviceWords(live))
	case "cpufreq":
		return fmt.Sprintf("cpu frequency governor: applied %s, now %s", applied, gone(live))
	case "block":
		dev, _, _ := strings.Cut(rest, "/")
		return fmt.Sprintf("%s queue: applied %s, now %s", dev, applied, gone(live))
	case "autorate":
		return fmt.Sprintf("autorate %s: applied %s, now %s", rest, autorateWords(applied), autorateWords(live))
	case "mss":
		return fmt.Sprintf("mss clamp %s: applied %s, now %s", rest, mssWords(applied), mssWords(live))
	case "sockopt":
		i := strings.LastIndexByte(rest, '/')
		if i < 0 || live != Detached {
			return ""
		}
		return fmt.Sprintf("%s %s: applied %s, but its sock_ops program is no longer attached (its cgroup was re-created, by a restart, or it was detached): new connections do not get it until 'lowlat reassert'", rest[:i], rest[i+1:], applied)
	}
	return ""
}

func gone(v string) string {
	if v == Absent {
		return "gone"
	}
	return v
}

func cpuWords(cpus []int) string {
	switch len(cpus) {
	case 0:
		return "no cpu"
	case 1:
		return fmt.Sprintf("cpu %d", cpus[0])
	}
	return "cpus " + host.FormatCPUList(cpus)
}

func serviceWords(v string) string {
	if v == Absent {
		return "not installed"
	}
	a, f, err := splitService(v)
	if err != nil {
		return v
	}
	run := "running"
	if a == "inactive" {
		run = "stopped"
	}
	return run + " and " + f
}
