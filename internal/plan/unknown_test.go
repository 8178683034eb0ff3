package plan

import (
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

func corpus(t *testing.T, name string) *host.Facts { return hosttest.Corpus(t, name) }

func generated(t *testing.T, s *hostgen.Spec, edit func(*hostgen.Spec)) *host.Facts {
	t.Helper()
	if edit != nil {
		edit(s)
	}
	f, err := s.Facts()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

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
		{"corpus procfs", func(t *testing.T) *host.Facts { return corpus(t, "procfs") },
			"sysctl/net.core.somaxconn", "?", "could not be read (/proc/sys/net: no such file or directory)", "osrelease"},
		{"corpus node_exporter", func(t *testing.T) *host.Facts { return corpus(t, "node_exporter") },
			"sysctl/net.ipv4.tcp_fastopen", "?", "could not be read (/proc/sys/net/ipv4: no such file or directory)", "osrelease"},
		{"generated: core lost", func(t *testing.T) *host.Facts {
			return generated(t, hostgen.Epyc25G(), func(s *hostgen.Spec) { s.Remove = []string{"/proc/sys/net/core"} })
		}, "sysctl/net.core.somaxconn", "?", "could not be read (/proc/sys/net/core: no such file or directory)", "osrelease"},
		{"generated: osrelease lost, tcp_fastopen absent", func(t *testing.T) *host.Facts {
			return generated(t, hostgen.Epyc25G(), func(s *hostgen.Spec) {
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
		{"corpus node_exporter", func(t *testing.T) *host.Facts { return corpus(t, "node_exporter") },
			"eth0", "eth0 has no queue interrupts in /proc/interrupts", "virtual"},
		{"generated: no /proc/interrupts", func(t *testing.T) *host.Facts {
			return generated(t, hostgen.DualI40E(), func(s *hostgen.Spec) { s.Remove = []string{"/proc/interrupts"} })
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
