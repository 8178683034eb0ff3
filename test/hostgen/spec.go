// Package hostgen is test scaffolding (it lives under test/, beside vmtest, and
// no production package imports it): it builds synthetic but realistic Linux
// hosts for tests and benchmarks, a /proc, /sys, /etc, /boot and /lib/modules
// tree in the formats of the kernel version being imitated, plus the
// lowlat-netlink.json that stands in for netlink and ethtool. Every view of the
// topology comes from one model, so NUMA nodes, SMT siblings, local_cpulist,
// msi_irqs, IRQ names and affinities agree with each other the way they do on a
// real machine.
//
// The committed fixture trees in internal/host/testdata/hosts are written by
// this package (go test ./test/hostgen -write-fixtures); the large synthetic
// host is generated on demand with Synthetic256().Facts() or WriteTree.
package hostgen

import "github.com/lowlat/lowlat/internal/host"

// Spec describes one host to generate.
type Spec struct {
	Name     string
	Hostname string
	BootID   string
	Kernel   Kernel
	CPU      CPUs
	NICs     []NIC
	NVMe     []NVMe
	SATA     []SATA
	// IRQBalance is nil when irqbalance is neither running nor configured.
	IRQBalance *IRQBalance
	// THP and THPDefrag are the selected words in transparent_hugepage.
	THP, THPDefrag string
	Systemd        bool
	// Sysctls override the kernel's defaults (values with single spaces).
	Sysctls map[string]string
	Routes  []host.Route
	// OSRelease is /etc/os-release, for a human reading the tree.
	OSRelease string
	Load      Load
	// Remove leaves these host paths (a file, a link, or a directory with
	// everything below it) out of the tree, and Files adds or replaces
	// files (host path -> content) after it is built: a host whose kernel
	// lacks a file, or a tree that lost one.
	Remove []string
	Files  map[string]string
}

// Kernel is the kernel being imitated and what its module tree holds.
type Kernel struct {
	Release string
	// Build is the rest of /proc/version after "Linux version <release> ".
	Build string
	// ConfigGz puts the config in /proc/config.gz (Debian, Arch) rather than
	// /boot/config-<release> (Red Hat, Ubuntu).
	ConfigGz bool
	// Config holds the CONFIG_ options lowlat reads; "n" is written as
	// "# CONFIG_X is not set".
	Config map[string]string
	// ModExt is the module file suffix (".ko", ".ko.xz", ".ko.zst").
	ModExt string
	// Modules are the installed loadable modules below kernel/net/sched and
	// kernel/net/ipv4 (by name: "sch_fq_codel", "tcp_bbr").
	Modules []string
	// Builtin are modules.builtin entries (paths below the module tree).
	Builtin []string
	// Loaded is /proc/modules (names).
	Loaded []string
	// Congestion is tcp_available_congestion_control.
	Congestion string
	// SoftnetColumns overrides the softnet_stat column count the version
	// implies (Red Hat 3.10 kernels carry the 3.11 flow-limit column).
	SoftnetColumns int
}

// CPUs is the processor topology. Linux on x86 numbers the first hardware
// thread of every core (socket by socket) before the second threads, so CPU
// n and n+Sockets*CoresPerSocket are SMT siblings.
type CPUs struct {
	Sockets, CoresPerSocket, ThreadsPerCore int
	// NodesPerSocket splits each socket's cores evenly into NUMA nodes (AMD
	// NPS2/NPS4, Intel SNC).
	NodesPerSocket int
	// CoreIDs are the core_id values of a socket's cores, in order; Xeons and
	// EPYCs with disabled cores have gaps. Default 0..CoresPerSocket-1.
	CoreIDs []int
	// Governor is scaling_governor; "" means no cpufreq driver.
	Governor string
	// Isolated is /sys/devices/system/cpu/isolated ("" when none).
	Isolated string
	// NoIsolatedFile leaves that file out (kernels before 4.2).
	NoIsolatedFile bool
	// Model names the processor in /proc/cpuinfo-less trees' os-release notes.
	Model string
}

// NIC is one network port.
type NIC struct {
	Name   string
	Driver string // i40e, ixgbe, mlx5_core
	// Naming is the IRQ naming scheme: "i40e", "ixgbe", "mlx5" (5.12+:
	// mlx5_async0/mlx5_compN), "mlx5-old" (mlx5_async/mlx5_compN).
	Naming    string
	PCI       string // 0000:3b:00.0
	Node      int
	SpeedMbps int
	// Queues is the number of combined channels in use; MaxQueues what the
	// device allocated (netlink num_tx_queues, ethtool max combined).
	Queues, MaxQueues int
	Up                bool
	MAC               string
	MTU, TxQueueLen   int
	// IRQCPU gives the affinity of queue q's interrupt; nil spreads queues
	// over the node-local CPUs the way drivers set their affinity hints.
	IRQCPU func(q int) []int
	// RootQdisc is the root qdisc kind; with "mq", ChildQdisc is each queue's.
	RootQdisc, ChildQdisc string
	// RxPacketsPerQueue scales interrupt and packet counters.
	RxPacketsPerQueue uint64
	Ethtool           *host.Ethtool
	Index             int
	VendorDevice      string // "0x8086 0x1572" for the uevent-less trees' readers
}

// NVMe is one NVMe controller with one namespace.
type NVMe struct {
	Ctrl     string // nvme0
	PCI      string
	Node     int
	IOQueues int
	// Scheduler is the block queue scheduler line, e.g. "[none] mq-deadline".
	Scheduler  string
	NrRequests int
}

// SATA is one AHCI disk.
type SATA struct {
	Name       string // sda
	PCI        string // the AHCI controller
	Node       int
	Scheduler  string
	NrRequests int
	Rotational bool
}

// IRQBalance is irqbalance's state.
type IRQBalance struct {
	Running    bool
	PID        int
	ConfigPath string
	Config     string
	// UnitFile is irqbalance.service's unit file state: "enabled",
	// "disabled", "masked", or "" for no unit installed.
	UnitFile string
}

// Load shapes the counters so doctor has something to find.
type Load struct {
	ListenOverflows, TCPBacklogDrop uint64
	// HotCPU gets TimeSqueeze and Dropped in softnet_stat.
	HotCPU                  int
	TimeSqueeze, RxDropped  uint64
	RetransSegs, InSegs     uint64
	UptimeTicks             uint64 // scales timer and scheduler counters
	NVMeCompletionsPerQueue uint64
}
