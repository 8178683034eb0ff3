package host_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/host/hosttest"
	"github.com/lowlat/lowlat/test/hostgen"
)

// The tests in this file hold lowlat to what a tree says, on the corpus of
// real trees (hosttest.Corpus) and on generated hosts with a file taken away:
// what could not be read stays unknown, with the path that is missing.

func onlineCPUs(f *host.Facts) []int {
	var out []int
	for _, c := range f.CPUs {
		if c.Online {
			out = append(out, c.ID)
		}
	}
	return out
}

func errorsText(f *host.Facts) string {
	var b strings.Builder
	for _, e := range f.Errors {
		fmt.Fprintf(&b, "%s: %s\n", e.Source, e.Err)
	}
	return b.String()
}

// TestCPUOnlineRule: the online list; else the offline list; else a CPU
// without an online file is online (it cannot be unplugged).
func TestCPUOnlineRule(t *testing.T) {
	tests := []struct {
		name string
		f    func(t *testing.T) *host.Facts
		want []int
	}{
		// procfs's tree has no online list, an offline list "2", an
		// online file for cpu0 only, and an empty cpu2.
		{"corpus procfs", hosttest.CorpusOf("procfs"), []int{0, 1}},
		// node_exporter's has the online list "0-3" and no online files.
		{"corpus node_exporter", hosttest.CorpusOf("node_exporter"), []int{0, 1, 2, 3}},
		{"generated: offline list", func(t *testing.T) *host.Facts {
			return hostgen.CentOS7().Edited(t, func(s *hostgen.Spec) {
				s.Remove = []string{"/sys/devices/system/cpu/online"}
				s.Files = map[string]string{"/sys/devices/system/cpu/offline": "3,5\n"}
			})
		}, []int{0, 1, 2, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
		{"generated: online files only", func(t *testing.T) *host.Facts {
			return hostgen.CentOS7().Edited(t, func(s *hostgen.Spec) {
				s.Remove = []string{"/sys/devices/system/cpu/online", "/sys/devices/system/cpu/offline", "/sys/devices/system/cpu/cpu7/online"}
				s.Files = map[string]string{"/sys/devices/system/cpu/cpu5/online": "0\n"}
			})
		}, []int{0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.f(t)
			if got := onlineCPUs(f); !slices.Equal(got, tt.want) {
				t.Errorf("online CPUs (-want +got):\n- %v\n+ %v", tt.want, got)
			}
		})
	}
}

// TestMissingSysctlNamesItsPath: a sysctl that could not be read is blamed
// on the path that is missing (its own, or a directory above it), never on
// the first unrelated error; kernel.osrelease's own failure is its errno.
func TestMissingSysctlNamesItsPath(t *testing.T) {
	tests := []struct {
		name   string
		f      func(t *testing.T) *host.Facts
		sysctl string
		want   string // "SOURCE: ERROR" recorded, "" for none
		// osrelease is kernel.osrelease's recorded error.
		osrelease string
	}{
		// procfs's tree has no /proc/sys/net at all.
		{"corpus procfs", hosttest.CorpusOf("procfs"),
			"net.core.somaxconn", "/proc/sys/net: no such file or directory", "no such file or directory"},
		// node_exporter's has /proc/sys/net/netfilter and nothing else.
		{"corpus node_exporter", hosttest.CorpusOf("node_exporter"),
			"net.core.somaxconn", "/proc/sys/net/core: no such file or directory", "no such file or directory"},
		{"corpus node_exporter ipv4", hosttest.CorpusOf("node_exporter"),
			"net.ipv4.tcp_congestion_control", "/proc/sys/net/ipv4: no such file or directory", "no such file or directory"},
		{"generated: core lost", func(t *testing.T) *host.Facts {
			return hostgen.CentOS7().Edited(t, func(s *hostgen.Spec) { s.Remove = []string{"/proc/sys/net/core"} })
		}, "net.core.somaxconn", "/proc/sys/net/core: no such file or directory", ""},
		// No osrelease, the rest intact: a sysctl the kernel lacks is
		// nobody's read error.
		{"generated: osrelease lost", func(t *testing.T) *host.Facts {
			return hostgen.CentOS7().Edited(t, func(s *hostgen.Spec) {
				s.Remove = []string{"/proc/sys/kernel/osrelease", "/proc/sys/net/ipv4/tcp_fastopen"}
			})
		}, "net.ipv4.tcp_fastopen", "", "no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.f(t)
			if _, ok := f.Sysctls[tt.sysctl]; ok {
				t.Fatalf("%s was read", tt.sysctl)
			}
			if src, want, ok := strings.Cut(tt.want, ": "); ok && f.ErrorFor(src) != want {
				t.Errorf("%s: error %q, want %q; errors:\n%s", src, f.ErrorFor(src), want, errorsText(f))
			}
			if got := f.ErrorFor("/proc/sys/kernel/osrelease"); got != tt.osrelease {
				t.Errorf("kernel.osrelease error %q, want %q (the file's own)", got, tt.osrelease)
			}
		})
	}
}

// fromSysfs gathers a generated host after edit, without its netlink and
// ethtool stand-in, so its interfaces come from /sys/class/net as they do
// on a tree that has none.
func fromSysfs(t *testing.T, s *hostgen.Spec, edit func(*hostgen.Spec)) *host.Facts {
	t.Helper()
	edit(s)
	return s.Rewired(t, func(src *host.Source) { src.Netlink, src.Ethtool = nil, nil })
}

// pciDev is CentOS7's eth0 in sysfs.
const pciDev = "/sys/devices/pci0000:02/0000:02:00.0/0000:03:00.0"

// TestHardwareFacts: only directories in /sys/class/net are interfaces, and a
// PCI NIC without a driver link is hardware, not a virtual device.
func TestHardwareFacts(t *testing.T) {
	type nic struct {
		name, bus, busInfo, driver string
		physical                   bool
	}
	tests := []struct {
		name   string
		f      func(t *testing.T) *host.Facts
		ifaces []string
		nic    nic
	}{
		// node_exporter's tree: bonding_masters beside the interfaces, and
		// eth0 a PCI function with no driver or subsystem link.
		{"corpus node_exporter", hosttest.CorpusOf("node_exporter"),
			[]string{"bond0", "dmz", "eth0", "int"}, nic{"eth0", "pci", "0000:03:00.0", "", true}},
		{"generated: no driver link", func(t *testing.T) *host.Facts {
			return fromSysfs(t, hostgen.CentOS7(), func(s *hostgen.Spec) {
				s.Files = map[string]string{"/sys/class/net/bonding_masters": "bond0\n"}
				s.Remove = []string{pciDev + "/driver", pciDev + "/subsystem"}
			})
		}, []string{"lo", "eth0"}, nic{"eth0", "pci", "0000:03:00.0", "", true}},
		{"generated: no device link either", func(t *testing.T) *host.Facts {
			return fromSysfs(t, hostgen.CentOS7(), func(s *hostgen.Spec) {
				s.Remove = []string{pciDev + "/driver", pciDev + "/subsystem", pciDev + "/net/eth0/device"}
			})
		}, []string{"lo", "eth0"}, nic{"eth0", "pci", "0000:03:00.0", "", true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.f(t)
			var names []string
			for _, i := range f.Interfaces {
				names = append(names, i.Name)
			}
			if !slices.Equal(names, tt.ifaces) {
				t.Errorf("interfaces (-want +got):\n- %v\n+ %v", tt.ifaces, names)
			}
			ifc := f.Interface(tt.nic.name)
			if ifc == nil {
				t.Fatalf("no %s", tt.nic.name)
			}
			got := nic{ifc.Name, ifc.Bus, ifc.BusInfo, ifc.Driver, ifc.Physical()}
			if got != tt.nic {
				t.Errorf("%s (-want +got):\n- %+v\n+ %+v", tt.nic.name, tt.nic, got)
			}
		})
	}
}

// TestBlockQueueUnknown: a block queue file that is missing is unknown
// (-1, ""), not 0.
func TestBlockQueueUnknown(t *testing.T) {
	type queue struct {
		sched       string
		rq, nr      int
		schedulerOK bool
	}
	tests := []struct {
		name string
		f    func(t *testing.T) *host.Facts
		dev  string
		want queue
	}{
		// procfs's md0 has no queue directory; its sda has one.
		{"corpus procfs md0", hosttest.CorpusOf("procfs"), "md0", queue{"", -1, -1, false}},
		{"corpus procfs sda", hosttest.CorpusOf("procfs"), "sda", queue{"bfq", 1, 64, true}},
		{"generated", func(t *testing.T) *host.Facts {
			return hostgen.DualI40E().Edited(t, func(s *hostgen.Spec) {
				const q = "/sys/devices/pci0000:5d/0000:5d:00.0/0000:5e:00.0/nvme/nvme0/nvme0n1/queue/"
				s.Remove = []string{q + "nr_requests", q + "rq_affinity", q + "scheduler"}
			})
		}, "nvme0n1", queue{"", -1, -1, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.f(t)
			for _, b := range f.Block {
				if b.Name == tt.dev {
					got := queue{b.Scheduler, b.RqAffinity, b.NrRequests, len(b.Schedulers) > 0}
					if got != tt.want {
						t.Errorf("%s (-want +got):\n- %+v\n+ %+v", tt.dev, tt.want, got)
					}
					return
				}
			}
			t.Fatalf("no block device %s", tt.dev)
		})
	}
}
