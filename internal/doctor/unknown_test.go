package doctor

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/host/hosttest"
	"github.com/lowlat/lowlat/test/hostgen"
)

// The tests in this file hold doctor to what the facts say, on the corpus
// of real trees and on generated hosts with a file taken away: a check
// that could not read its data is "not checked", never passed, and names
// what it could not read.

// rows returns the report's rows of check id.
func rows(r *Report, id string) []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.ID == id {
			out = append(out, f)
		}
	}
	return out
}

func summaries(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "[not_checked=%v] %s; ", f.NotChecked, f.Summary)
	}
	return b.String()
}

// notChecked fails unless check id has exactly one row, not checked, whose
// summary says want.
func notChecked(t *testing.T, r *Report, id, want string) {
	t.Helper()
	fs := rows(r, id)
	if len(fs) != 1 || !fs[0].NotChecked || !strings.Contains(fs[0].Summary, want) {
		t.Errorf("%s: %d rows %s; want one not-checked row saying %q", id, len(fs), summaries(fs), want)
	}
}

// TestMissingSysctlBlamesItsPath: a check whose sysctl could not be read
// names the directory that is missing, not the first unrelated error.
func TestMissingSysctlBlamesItsPath(t *testing.T) {
	tests := []struct {
		name string
		f    func(t *testing.T) *host.Facts
		id   string
		want string
	}{
		{"corpus procfs", hosttest.CorpusOf("procfs"),
			"congestion-control", "cannot read net.ipv4.tcp_congestion_control (/proc/sys/net: no such file or directory)"},
		{"corpus node_exporter", hosttest.CorpusOf("node_exporter"),
			"default-qdisc-fifo", "cannot read net.core.default_qdisc (/proc/sys/net/core: no such file or directory)"},
		{"generated: ipv4 lost", func(t *testing.T) *host.Facts {
			return hostgen.DualI40E().Edited(t, func(s *hostgen.Spec) { s.Remove = []string{"/proc/sys/net/ipv4"} })
		}, "tcp-fastopen-server-off", "cannot read net.ipv4.tcp_fastopen (/proc/sys/net/ipv4: no such file or directory)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Run(tt.f(t), Options{})
			notChecked(t, r, tt.id, tt.want)
			for _, f := range r.Findings {
				if strings.Contains(f.Summary, "cannot read net.") && strings.Contains(f.Summary, "osrelease") {
					t.Errorf("%s blames kernel.osrelease: %s", f.ID, f.Summary)
				}
			}
		})
	}
}

// failingEthtool is an ethtool whose queries of eth0 fail.
type failingEthtool struct{ host.Ethtooler }

func (e failingEthtool) Ethtool(iface string) (*host.Ethtool, error) {
	if iface == "eth0" {
		return nil, errors.New("ethtool eth0: operation not permitted")
	}
	return e.Ethtooler.Ethtool(iface)
}

// TestCheckWithoutDataIsNotChecked: every check that could not read its
// data says so in a not-checked row, on real trees and on generated hosts
// with one file taken away, and is never counted as passed.
func TestCheckWithoutDataIsNotChecked(t *testing.T) {
	procfs := hosttest.CorpusOf("procfs")
	nodeExporter := hosttest.CorpusOf("node_exporter")
	without := func(s *hostgen.Spec, paths ...string) func(t *testing.T) *host.Facts {
		return func(t *testing.T) *host.Facts {
			return s.Edited(t, func(s *hostgen.Spec) { s.Remove = paths })
		}
	}
	ethtoolFails := func(t *testing.T) *host.Facts {
		return hostgen.DualI40E().Rewired(t, func(src *host.Source) { src.Ethtool = failingEthtool{src.Ethtool} })
	}
	tests := []struct {
		name string
		f    func(t *testing.T) *host.Facts
		id   string
		want string
	}{
		{"corpus procfs", procfs, "kernel-too-old-for-bbr", "cannot read /proc/sys/kernel/osrelease (no such file or directory)"},
		{"corpus procfs", procfs, "thp-always", "cannot read /sys/kernel/mm (no such file or directory)"},
		{"corpus procfs", procfs, "nic-lro-on", "the ethtool settings of eth0: ethtool:eth0: no ethtool reader"},
		{"corpus procfs", procfs, "nic-coalesce-high", "the ethtool settings of eth0"},
		{"corpus procfs", procfs, "nic-queues-exceed-cpus", "the ethtool settings of eth0"},
		{"corpus procfs", procfs, "nic-drops", "the drop counters of eth0"},
		{"corpus procfs", procfs, "nic-numa-remote", "cannot read /sys/devices/system/node/node*/cpulist"},
		{"corpus procfs", procfs, "nagle-risk", "no socket audit"},
		{"corpus procfs", procfs, "qdisc-fifo-bufferbloat", "cannot read netlink:qdiscs (no netlink reader)"},
		{"corpus node_exporter", nodeExporter, "kernel-too-old-for-bbr", "cannot read /proc/sys/kernel/osrelease"},
		{"corpus node_exporter", nodeExporter, "irq-smt-siblings", "cannot read /sys/devices/system/cpu/cpu*/topology/thread_siblings_list"},
		{"generated: no /proc/softirqs", without(hostgen.DualI40E(), "/proc/softirqs"), "softirq-imbalance", "cannot read /proc/softirqs (no such file or directory)"},
		{"generated: no osrelease", without(hostgen.CentOS7(), "/proc/sys/kernel/osrelease"), "kernel-too-old-for-bbr", "cannot read /proc/sys/kernel/osrelease"},
		{"generated: no sibling list", without(hostgen.DualI40E(), "/sys/devices/system/cpu/cpu3/topology/thread_siblings_list"), "irq-smt-siblings", "thread_siblings_list"},
		{"generated: no /sys/block", without(hostgen.DualI40E(), "/sys/block"), "nvme-irq-concentrated", "cannot read /sys/block"},
		{"generated: no /sys/kernel/mm", without(hostgen.DualI40E(), "/sys/kernel/mm"), "thp-always", "cannot read /sys/kernel/mm"},
		{"generated: no processes", without(hostgen.DualI40E(), "/proc/1", "/proc/2", "/proc/3", "/proc/812", "/proc/1107", "/proc/1290", "/proc/1432"), "irqbalance-running", "cannot read /proc (no process directories)"},
		{"generated: no kernel config or modules", without(hostgen.DualI40E(), "/boot", "/lib/modules"), "congestion-control", "whether this kernel has BBR"},
		{"generated: ethtool fails", ethtoolFails, "nic-lro-on", "ethtool:eth0: ethtool eth0: operation not permitted"},
		{"generated: ethtool fails", ethtoolFails, "nic-coalesce-high", "ethtool:eth0: ethtool eth0: operation not permitted"},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/"+tt.id, func(t *testing.T) {
			f := tt.f(t)
			r := Run(f, Options{})
			fs := rows(r, tt.id)
			found := false
			for _, x := range fs {
				found = found || (x.NotChecked && strings.Contains(x.Summary, tt.want))
			}
			if !found {
				t.Errorf("%s: rows %s; want a not-checked row saying %q", tt.id, summaries(fs), tt.want)
			}
		})
	}
}
