package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/host/hosttest"
	"github.com/lowlat/lowlat/test/hostgen"
)

// The tests in this file hold plan to what the facts say, on the corpus of
// real trees and on generated hosts with a file taken away: a value that
// could not be read is shown as unknown, with the source that failed, and a
// change is planned from it only where the knob does not need it.

// rowOf returns the plan's row for knob, failing the test without one.
func rowOf(t *testing.T, p *Plan, knob string) Change {
	t.Helper()
	for _, c := range p.Changes {
		if c.Knob == knob {
			return c
		}
	}
	var have []string
	for _, c := range p.Changes {
		have = append(have, c.Knob)
	}
	t.Fatalf("no row %s in %v", knob, have)
	return Change{}
}

func mustPlan(t *testing.T, f *host.Facts, profile string, opts Options) *Plan {
	t.Helper()
	sets := map[string]string{}
	if profile == "capped-uplink" {
		sets["rate"], sets["down"] = "2mbit", "20mbit"
	}
	p, err := Make(f, resolve(t, profile, sets), opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMissingSysctlRow: a sysctl that could not be read is unknown ("?")
// and blamed on the path that is missing; one the kernel lacks is absent
// ("-"), and its reason names no unrelated file.
func TestMissingSysctlRow(t *testing.T) {
	tests := []struct {
		name      string
		f         func(t *testing.T) *host.Facts
		knob      string
		current   string
		want, not string
	}{
		{"corpus procfs", hosttest.CorpusOf("procfs"),
			"sysctl/net.core.somaxconn", "?", "could not be read (/proc/sys/net: no such file or directory)", "osrelease"},
		{"corpus node_exporter", hosttest.CorpusOf("node_exporter"),
			"sysctl/net.ipv4.tcp_fastopen", "?", "could not be read (/proc/sys/net/ipv4: no such file or directory)", "osrelease"},
		{"generated: core lost", func(t *testing.T) *host.Facts {
			return hostgen.Epyc25G().Edited(t, func(s *hostgen.Spec) { s.Remove = []string{"/proc/sys/net/core"} })
		}, "sysctl/net.core.somaxconn", "?", "could not be read (/proc/sys/net/core: no such file or directory)", "osrelease"},
		{"generated: osrelease lost, tcp_fastopen absent", func(t *testing.T) *host.Facts {
			return hostgen.Epyc25G().Edited(t, func(s *hostgen.Spec) {
				s.Remove = []string{"/proc/sys/kernel/osrelease", "/proc/sys/net/ipv4/tcp_fastopen"}
			})
		}, "sysctl/net.ipv4.tcp_fastopen", "-", "net.ipv4.tcp_fastopen does not exist on kernel unknown", "osrelease"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := rowOf(t, mustPlan(t, tt.f(t), "game-udp", Options{Ifaces: []string{}}), tt.knob)
			if c.Current != tt.current || c.Action != Skip || !strings.Contains(c.Reason, tt.want) || strings.Contains(c.Reason, tt.not) {
				t.Errorf("%s: current %q, %s, %q; want current %q, skip, %q without %q", tt.knob, c.Current, c.Action, c.Reason, tt.current, tt.want, tt.not)
			}
		})
	}
}

// TestHardwareRows: a PCI NIC without a driver link is not called virtual,
// and "no queue interrupts" is not claimed where /proc/interrupts could not
// be read.
func TestHardwareRows(t *testing.T) {
	tests := []struct {
		name      string
		f         func(t *testing.T) *host.Facts
		iface     string
		want, not string
	}{
		{"corpus node_exporter", hosttest.CorpusOf("node_exporter"),
			"eth0", "eth0 has no queue interrupts in /proc/interrupts", "virtual"},
		{"generated: no /proc/interrupts", func(t *testing.T) *host.Facts {
			return hostgen.DualI40E().Edited(t, func(s *hostgen.Spec) { s.Remove = []string{"/proc/interrupts"} })
		}, "eth0", "eth0's queue interrupts are unknown: /proc/interrupts could not be read (no such file or directory)", "has no queue interrupts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPlan(t, tt.f(t), "game-udp", Options{Ifaces: []string{tt.iface}})
			c := rowOf(t, p, "irq/*/affinity")
			if c.Action != Skip || !strings.Contains(c.Reason, tt.want) || strings.Contains(c.Reason, tt.not) {
				t.Errorf("irq/*/affinity: %s %q; want skip saying %q, not %q", c.Action, c.Reason, tt.want, tt.not)
			}
		})
	}
}

// failingNetlink is a netlink whose qdisc dump fails, as it does for a
// reader without the rights or on a kernel that refuses the request.
type failingNetlink struct{ host.Netlink }

func (failingNetlink) Qdiscs() ([]host.LinkQdisc, error) {
	return nil, errors.New("dump qdiscs: operation not permitted")
}

// TestUnknownCurrentValues: where the facts could not read a value, plan
// shows it as unknown ("?"), says which source failed, and plans a change
// from it only where the knob does not need it.
func TestUnknownCurrentValues(t *testing.T) {
	qdiscsFail := func(t *testing.T) *host.Facts {
		return hostgen.DualI40E().Rewired(t, func(src *host.Source) { src.Netlink = failingNetlink{src.Netlink} })
	}
	nvmeQueue := func(t *testing.T) *host.Facts {
		return hostgen.DualI40E().Edited(t, func(s *hostgen.Spec) {
			s.Remove = []string{"/sys/devices/pci0000:5d/0000:5d:00.0/0000:5e:00.0/nvme/nvme0/nvme0n1/queue/nr_requests",
				"/sys/devices/pci0000:5d/0000:5d:00.0/0000:5e:00.0/nvme/nvme0/nvme0n1/queue/rq_affinity"}
		})
	}
	noProcesses := func(t *testing.T) *host.Facts {
		s := hostgen.DualI40E()
		src, err := s.Source()
		if err != nil {
			t.Fatal(err)
		}
		names, err := src.Root.ReadDirNames("/proc")
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if n[0] >= '0' && n[0] <= '9' {
				s.Remove = append(s.Remove, "/proc/"+n)
			}
		}
		return s.Edited(t, nil)
	}
	noIRQDirs := func(t *testing.T) *host.Facts {
		return hostgen.DualI40E().Edited(t, func(s *hostgen.Spec) { s.Remove = []string{"/proc/irq"} })
	}
	tests := []struct {
		name    string
		f       func(t *testing.T) *host.Facts
		profile string
		iface   string
		knob    string
		current string // "" for any
		action  string
		want    string // in the reason or the note
	}{
		// The root qdisc: the knob needs it (another tool's tree is left
		// alone), so no change is planned from an unknown one.
		{"corpus procfs: root qdisc", hosttest.CorpusOf("procfs"), "game-udp", "eth0",
			"qdisc/eth0/root", "?", Skip, "the qdiscs of eth0 could not be read (netlink:qdiscs: no netlink reader)"},
		{"corpus node_exporter: root qdisc", hosttest.CorpusOf("node_exporter"), "capped-uplink", "eth0",
			"qdisc/eth0/root", "?", Skip, "the qdiscs of eth0 could not be read (netlink:qdiscs: no netlink reader)"},
		{"generated: root qdisc", qdiscsFail, "game-udp", "eth0",
			"qdisc/eth0/root", "?", Skip, "(netlink:qdiscs: dump qdiscs: operation not permitted)"},
		{"generated: ingress qdisc", qdiscsFail, "capped-uplink", "eth0",
			"qdisc/eth0/ingress", "?", Skip, "(netlink:qdiscs: dump qdiscs: operation not permitted)"},
		{"corpus procfs: routes", hosttest.CorpusOf("procfs"), "live-edge", "eth0",
			"route/*/initcwnd", "?", Skip, "the routes could not be read (netlink:routes: no netlink reader)"},
		{"corpus procfs: THP", hosttest.CorpusOf("procfs"), "game-udp", "eth0",
			"sysfs/kernel/mm/transparent_hugepage/enabled", "?", Skip, "could not be read (/sys/kernel/mm: no such file or directory)"},
		{"corpus node_exporter: ethtool", hosttest.CorpusOf("node_exporter"), "game-udp", "eth0",
			"ethtool/eth0/feature/lro", "?", Skip, "the ethtool settings of eth0 could not be read (no ethtool reader)"},
		// A block queue file that is missing is unknown, not 0:
		// nr_requests needs the current depth (its limit), rq_affinity
		// does not.
		// Stopping irqbalance needs no knowledge of whether it runs.
		{"generated: processes unknown", noProcesses, "game-udp", "eth0",
			"service/irqbalance.service", "?,enabled", Set, "whether irqbalance runs is unknown (/proc: no process directories)"},
		// Neither does writing an interrupt's affinity.
		{"generated: affinity unknown", noIRQDirs, "game-udp", "eth0",
			"irq/27/affinity", "? (i40e-eth0-TxRx-0)", Set, "current affinity unknown"},
		{"generated: block queue", nvmeQueue, "game-udp", "eth0",
			"block/nvme0n1/queue", "scheduler=none nr_requests=? rq_affinity=?", Set, "nr_requests left as is"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPlan(t, tt.f(t), tt.profile, Options{Ifaces: []string{tt.iface}})
			c := rowOf(t, p, tt.knob)
			if (tt.current != "" && c.Current != tt.current) || c.Action != tt.action || !strings.Contains(c.Reason+" ["+c.Note+"]", tt.want) {
				t.Errorf("%s: current %q, %s, %q [%s]; want current %q, %s, saying %q", tt.knob, c.Current, c.Action, c.Reason, c.Note, tt.current, tt.action, tt.want)
			}
		})
	}
}
