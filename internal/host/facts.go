// Package host is everything lowlat knows about a host, as plain data (Facts),
// and the readers that gather it: a rooted view of /proc, /sys and /etc (so a
// captured tree or a fixture can stand in for the live system), netlink for links,
// qdiscs and routes, and ethtool ioctls for NIC settings. Nothing here changes the
// host; the knob package writes, the plan package decides.
package host

import (
	"strings"
	"time"

	"github.com/lowlat/lowlat/internal/sockets"
)

// SchemaVersion is the version of the Facts JSON layout written by capture.
// Loading a snapshot from a newer schema is refused with a clear error.
const SchemaVersion = 1

// Facts is one snapshot of a host. It is the single input of plan and doctor, and
// the content of a capture file.
type Facts struct {
	Schema     int       `json:"schema"`
	Tool       string    `json:"tool"`
	CapturedAt time.Time `json:"captured_at"`
	Hostname   string    `json:"hostname"`
	// Source says where the facts came from: "live", "root:DIR" or "capture:FILE".
	Source string `json:"source"`

	Kernel  Kernel            `json:"kernel"`
	Sysctls map[string]string `json:"sysctls"`
	// ReadOnlySysctls are sysctls that exist but cannot be written here: in a
	// network namespace other than the first, the kernel shows some net.core
	// limits (rmem_max, wmem_max...) read-only, set for the whole host.
	ReadOnlySysctls []string `json:"read_only_sysctls,omitempty"`
	// SysctlConf is the sysctl configuration the boot applies (sysctl.d
	// and /etc/sysctl.conf): what a persisted sysctl competes with. Nil
	// when the facts hold none of its places: unknown, not empty.
	SysctlConf *SysctlConf `json:"sysctl_conf,omitempty"`
	// Netns says whether the facts were read in the host's initial network
	// namespace ("init"), another one ("other"), or it could not be told ("").
	// Only the initial namespace may select a congestion control outside
	// tcp_allowed_congestion_control.
	Netns      string      `json:"netns,omitempty"`
	Interfaces []Interface `json:"interfaces"`
	Routes     []Route     `json:"routes"`
	IRQs       []IRQ       `json:"irqs"`
	// SoftIRQs maps a softirq name (NET_RX, NET_TX, ...) to its per-CPU counts.
	SoftIRQs map[string][]uint64 `json:"softirqs,omitempty"`
	Softnet  []SoftnetCPU        `json:"softnet,omitempty"`
	// SNMP holds /proc/net/snmp and /proc/net/netstat as "Tcp" -> "RetransSegs" -> n,
	// every counter kept (procfs drops the ones it does not know).
	SNMP map[string]map[string]int64 `json:"snmp,omitempty"`
	CPUs []CPU                       `json:"cpus"`
	NUMA []NUMANode                  `json:"numa,omitempty"`
	// IsolatedCPUs is /sys/devices/system/cpu/isolated.
	IsolatedCPUs []int      `json:"isolated_cpus,omitempty"`
	Sysfs        Sysfs      `json:"sysfs"`
	IRQBalance   IRQBalance `json:"irqbalance"`
	Block        []BlockDev `json:"block,omitempty"`
	Systemd      bool       `json:"systemd"`
	// Sockets is the TCP socket audit (lowlat sockets) condensed per
	// process, plus the nginx/HAProxy configurations found, so doctor's
	// Nagle and proxy checks also run on a capture. Nil when not gathered
	// (a tree without proxy configurations, an older capture).
	Sockets *sockets.Summary `json:"sockets,omitempty"`
	// Autorate maps an interface to its lowlat autorate policy: the content
	// of AutorateDir/<iface>.policy (the knob autorate/<iface>), trimmed.
	// Nil when there is none, or the facts predate autorate.
	Autorate map[string]string `json:"autorate,omitempty"`
	// SockOps is what this kernel's sock_ops can set and what lowlat
	// enforces through it in this namespace. Nil when not gathered: only a
	// plan with [[sockets]] settings asks, on the live host.
	SockOps *SockOps `json:"sock_ops,omitempty"`
	// MSSClamp is whether nftables can clamp TCP's MSS here and lowlat's
	// clamps in force in this namespace. Nil when not gathered: only a plan
	// with an [mss.clamp] that is not off asks, on the live host.
	MSSClamp *MSSClamp `json:"mss_clamp,omitempty"`

	// Errors lists what could not be read, by source. A missing fact is never
	// silently a zero value: checks consult this before concluding anything.
	Errors []FactError `json:"errors,omitempty"`
}

// SockOps is sock_ops support and lowlat's entries, found by probing.
type SockOps struct {
	// Unsupported says why no sock_ops program can be attached here (no
	// BPF, cgroup v1 only, not root); "" when one can.
	Unsupported string `json:"unsupported,omitempty"`
	// NetnsCookie: entries can be kept to this network namespace (5.15).
	NetnsCookie bool `json:"netns_cookie"`
	// Refused maps each option bpf_setsockopt refuses in sock_ops to the
	// kernel's reason.
	Refused map[string]string `json:"refused,omitempty"`
	// Entries are lowlat's entries in force here: selector → option → value.
	Entries map[string]map[string]string `json:"entries,omitempty"`
	// Cgroups maps each cgroup or service selector asked about to the
	// cgroup it attaches at, or Unresolved to why there is none (a
	// service that is not running).
	Cgroups    map[string]string `json:"cgroups,omitempty"`
	Unresolved map[string]string `json:"unresolved,omitempty"`
	// Detached lists the selectors whose entry is pinned while their
	// program is not attached (a service restart re-created its cgroup).
	Detached []string `json:"detached,omitempty"`
	// MountBPFFS is where lowlat must mount bpffs before it can pin
	// anything, "" when bpffs is mounted.
	MountBPFFS string `json:"mount_bpffs,omitempty"`
}

// FactError records one source that could not be read, and why.
type FactError struct {
	Source string `json:"source"` // e.g. "/proc/interrupts", "netlink:routes"
	Err    string `json:"error"`
}

// Kernel describes the running kernel and what it can do.
type Kernel struct {
	Release string `json:"release"` // uname -r, e.g. "6.1.0-18-amd64"
	Version string `json:"version"` // /proc/version
	Major   int    `json:"major"`
	Minor   int    `json:"minor"`
	Patch   int    `json:"patch"`
	// CongestionAvailable is tcp_available_congestion_control (loaded now);
	// CongestionModules adds those that could be loaded (tcp_bbr.ko present).
	CongestionAvailable []string `json:"congestion_available"`
	CongestionModules   []string `json:"congestion_modules,omitempty"`
	// Qdiscs says, per qdisc kind, whether this kernel can create it.
	Qdiscs map[string]Support `json:"qdiscs"`
	// Config is the subset of the kernel config lowlat cares about (CONFIG_NET_SCH_*,
	// CONFIG_TCP_CONG_*, CONFIG_IFB, ...), from /proc/config.gz or /boot/config-*.
	Config map[string]string `json:"config,omitempty"`
	// ConfigSource names the file Config was read from, "" when none was found.
	ConfigSource string `json:"config_source,omitempty"`
	// ModulesDir is /lib/modules/<release> when it exists: then a module the
	// config promises but whose .ko is missing is not installed.
	ModulesDir string `json:"modules_dir,omitempty"`
	Pidfd      bool   `json:"pidfd"` // pidfd_open + pidfd_getfd (>= 5.6)
	BootID     string `json:"boot_id,omitempty"`
}

// AtLeast reports whether the kernel version is >= major.minor.
func (k Kernel) AtLeast(major, minor int) bool {
	return k.Major > major || (k.Major == major && k.Minor >= minor)
}

// Support is how sure we are that a kernel feature is usable.
type Support string

// Support levels, from evidence: built in (config =y or in use), loadable module
// present, absent (config says no / no module), or unknown (no evidence either way).
const (
	Builtin Support = "builtin"
	Module  Support = "module"
	Absent  Support = "absent"
	Unknown Support = "unknown"
)

// Usable reports whether the feature can be used (builtin or loadable).
func (s Support) Usable() bool { return s == Builtin || s == Module }

// Interface is one network interface.
type Interface struct {
	Name    string `json:"name"`
	Index   int    `json:"index"`
	Kind    string `json:"kind,omitempty"` // netlink link kind: veth, ifb, bridge, "" for hardware
	Driver  string `json:"driver,omitempty"`
	Bus     string `json:"bus,omitempty"` // pci, virtio, ...
	BusInfo string `json:"bus_info,omitempty"`
	// Device is the name of the device behind the interface: the PCI address for
	// a PCI NIC, "virtio2" for virtio-net (its IRQs are named after it).
	Device      string `json:"device,omitempty"`
	MAC         string `json:"mac,omitempty"`
	MTU         int    `json:"mtu"`
	TxQueueLen  int    `json:"txqueuelen"`
	OperState   string `json:"operstate"`
	Up          bool   `json:"up"`
	Loopback    bool   `json:"loopback,omitempty"`
	NumTxQueues int    `json:"num_tx_queues"`
	NumRxQueues int    `json:"num_rx_queues"`
	SpeedMbps   int    `json:"speed_mbps,omitempty"`
	NUMANode    int    `json:"numa_node"` // -1 when unknown or not NUMA
	LocalCPUs   []int  `json:"local_cpus,omitempty"`
	// MSIIRQs are the IRQ numbers in device/msi_irqs.
	MSIIRQs []int `json:"msi_irqs,omitempty"`
	// RPS and XPS hold the raw hex bitmaps per queue (rx-0 -> "00000000,00000003").
	RPS        map[string]string `json:"rps,omitempty"`
	XPS        map[string]string `json:"xps,omitempty"`
	RPSFlowCnt map[string]int    `json:"rps_flow_cnt,omitempty"`
	Root       *Qdisc            `json:"root_qdisc,omitempty"`
	Children   []Qdisc           `json:"children,omitempty"` // qdiscs below the root (mq children)
	Ingress    *Qdisc            `json:"ingress_qdisc,omitempty"`
	Ethtool    *Ethtool          `json:"ethtool,omitempty"`
	Stats      map[string]uint64 `json:"stats,omitempty"` // /sys/class/net/X/statistics
}

// Physical reports whether the interface is backed by a device (not lo, veth,
// ifb...): it has a driver, or at least a device in sysfs (a NIC whose
// driver link is missing is still hardware, with its driver unknown).
func (i Interface) Physical() bool {
	return !i.Loopback && i.Kind == "" && (i.Driver != "" || i.Device != "")
}

// Qdisc is one queueing discipline as the kernel reports it.
type Qdisc struct {
	Kind   string `json:"kind"`
	Handle string `json:"handle"` // "8001:" or "0:" for a kernel default
	Parent string `json:"parent"` // "root", "ffff:fff1" (ingress) or "8001:3" (an mq child)
	// Options are the kind's parameters in tc's vocabulary, canonical strings
	// (limit=10240 target=5ms ...). See the knob package for the spec grammar.
	Options map[string]string `json:"options,omitempty"`
	Stats   QdiscStats        `json:"stats"`
	// Spec is, on a root qdisc read live, the whole assembled configuration in
	// the qdisc package's canonical form (children, shaper class and leaf
	// included) exactly as the qdisc knob reads it, so plans computed from facts
	// compare with the same value apply will see.
	Spec string `json:"spec,omitempty"`
}

// QdiscStats are the counters of tc -s qdisc.
type QdiscStats struct {
	Bytes      uint64 `json:"bytes"`
	Packets    uint64 `json:"packets"`
	Drops      uint64 `json:"drops"`
	Overlimits uint64 `json:"overlimits"`
	Requeues   uint64 `json:"requeues"`
	Backlog    uint64 `json:"backlog"`
	Qlen       uint64 `json:"qlen"`
}

// Route is one routing table entry with the metrics lowlat tunes.
type Route struct {
	Family   string `json:"family"` // inet or inet6
	Dst      string `json:"dst"`    // "default" or a CIDR
	Table    int    `json:"table"`
	Type     string `json:"type"` // unicast, local, broadcast, ...
	Protocol string `json:"protocol,omitempty"`
	Scope    string `json:"scope,omitempty"`
	Dev      string `json:"dev,omitempty"`
	Gateway  string `json:"gateway,omitempty"`
	Src      string `json:"src,omitempty"`
	Priority int    `json:"priority,omitempty"`
	InitCwnd int    `json:"initcwnd,omitempty"`
	InitRwnd int    `json:"initrwnd,omitempty"`
	Congctl  string `json:"congctl,omitempty"`
	QuickACK int    `json:"quickack,omitempty"`
}

// IRQ is one line of /proc/interrupts plus its affinity.
type IRQ struct {
	Num  int    `json:"num"` // -1 for the named rows (NMI, LOC, ...)
	Name string `json:"name"`
	Chip string `json:"chip,omitempty"`
	// HWIRQ is the hardware irq column as printed ("1048576-edge", "27 Level"),
	// absent on 3.10 kernels, which glue the flow to the chip name.
	HWIRQ string `json:"hwirq,omitempty"`
	// Desc is the description of a named row ("Local timer interrupts").
	Desc string `json:"desc,omitempty"`
	// Counts is indexed by CPU id; CPUs missing from the header (offline) count
	// 0. Rows without per-CPU columns (ERR, MIS) have a single count.
	Counts []uint64 `json:"counts"`
	// Affinity is smp_affinity_list parsed; EffectiveAffinity the effective list.
	Affinity          []int `json:"affinity,omitempty"`
	EffectiveAffinity []int `json:"effective_affinity,omitempty"`
	Node              int   `json:"node"`
}

// Total is the IRQ's count summed over CPUs.
func (q IRQ) Total() uint64 {
	var t uint64
	for _, c := range q.Counts {
		t += c
	}
	return t
}

// SoftnetCPU is one row of /proc/net/softnet_stat.
type SoftnetCPU struct {
	CPU         int    `json:"cpu"`
	Processed   uint64 `json:"processed"`
	Dropped     uint64 `json:"dropped"`
	TimeSqueeze uint64 `json:"time_squeeze"`
	// ReceivedRPS counts packets steered to this CPU by RPS (IPIs received);
	// FlowLimitCount drops by the per-flow backlog limit (kernel >= 3.11).
	ReceivedRPS    uint64 `json:"received_rps,omitempty"`
	FlowLimitCount uint64 `json:"flow_limit_count,omitempty"`
}

// CPU is one logical CPU's place in the topology.
type CPU struct {
	ID       int    `json:"id"`
	Online   bool   `json:"online"`
	Core     int    `json:"core"`
	Package  int    `json:"package"`
	Node     int    `json:"node"`     // -1 when the kernel has no NUMA sysfs
	Siblings []int  `json:"siblings"` // thread_siblings_list, including itself
	Governor string `json:"governor,omitempty"`
}

// NUMANode is one memory node and its CPUs.
type NUMANode struct {
	ID   int   `json:"id"`
	CPUs []int `json:"cpus"`
}

// Sysfs holds the plain sysfs settings profiles touch, keyed by path below /sys
// ("kernel/mm/transparent_hugepage/enabled" -> "never"). Values are the selected
// word for bracketed lists ("always madvise [never]" -> "never").
type Sysfs map[string]string

// IRQBalance is whether irqbalance runs and how it is configured.
type IRQBalance struct {
	Running    bool   `json:"running"`
	PID        int    `json:"pid,omitempty"`
	ConfigPath string `json:"config_path,omitempty"`
	// BannedCPUs is IRQBALANCE_BANNED_CPUS / IRQBALANCE_BANNED_CPULIST as written.
	BannedCPUs string `json:"banned_cpus,omitempty"`
	// Banned is BannedCPUs parsed to CPU ids (IRQBALANCE_BANNED_CPULIST wins
	// over the older hex IRQBALANCE_BANNED_CPUS when both are set, as in
	// irqbalance >= 1.8).
	Banned []int `json:"banned,omitempty"`
	// Config holds every assignment in the config file (IRQBALANCE_ARGS,
	// IRQBALANCE_ONESHOT, ...), values unquoted.
	Config map[string]string `json:"config,omitempty"`
	// Args is the running irqbalance's command line after its program name
	// (/proc/PID/cmdline): what it loaded, which the config file may not
	// be yet when it was edited without a restart.
	Args []string `json:"args"`
	// UnitFile is irqbalance.service's unit file state as systemctl
	// is-enabled says it, read from the unit directories: "enabled",
	// "disabled", "masked", or "" when no unit is installed.
	UnitFile string `json:"unit_file,omitempty"`
}

// BlockDev is a block device's queue settings (NVMe tuning). A setting
// that could not be read is unknown: Scheduler "", RqAffinity and
// NrRequests -1.
type BlockDev struct {
	Name      string `json:"name"`
	Scheduler string `json:"scheduler"`
	// Schedulers are the choices queue/scheduler offers ("none", "mq-deadline", ...).
	Schedulers []string `json:"schedulers,omitempty"`
	RqAffinity int      `json:"rq_affinity"`
	NrRequests int      `json:"nr_requests"`
	NUMANode   int      `json:"numa_node"`
	MSIIRQs    []int    `json:"msi_irqs,omitempty"`
	Rotational bool     `json:"rotational"`
}

// Ethtool is what the ethtool ioctls report for an interface. Each part is nil
// when the driver does not support the query (virtio has no coalescing, etc.).
type Ethtool struct {
	Driver   string            `json:"driver,omitempty"`
	Version  string            `json:"version,omitempty"`
	Firmware string            `json:"firmware,omitempty"`
	BusInfo  string            `json:"bus_info,omitempty"`
	Channels *Channels         `json:"channels,omitempty"`
	Rings    *Rings            `json:"rings,omitempty"`
	Coalesce map[string]uint32 `json:"coalesce,omitempty"`
	Features map[string]bool   `json:"features,omitempty"`
	// Fixed lists the features the driver does not let change (ethtool -k
	// "[fixed]"), sorted; nil when unknown (older captures, fixtures).
	Fixed  []string          `json:"fixed_features,omitempty"`
	Stats  map[string]uint64 `json:"stats,omitempty"`
	Errors map[string]string `json:"errors,omitempty"` // query -> why it failed
}

// Channels is ethtool -l.
type Channels struct {
	MaxRx       uint32 `json:"max_rx"`
	MaxTx       uint32 `json:"max_tx"`
	MaxOther    uint32 `json:"max_other"`
	MaxCombined uint32 `json:"max_combined"`
	Rx          uint32 `json:"rx"`
	Tx          uint32 `json:"tx"`
	Other       uint32 `json:"other"`
	Combined    uint32 `json:"combined"`
}

// Rings is ethtool -g.
type Rings struct {
	RxMax uint32 `json:"rx_max"`
	TxMax uint32 `json:"tx_max"`
	Rx    uint32 `json:"rx"`
	Tx    uint32 `json:"tx"`
}

// Interface returns the named interface, or nil.
func (f *Facts) Interface(name string) *Interface {
	for i := range f.Interfaces {
		if f.Interfaces[i].Name == name {
			return &f.Interfaces[i]
		}
	}
	return nil
}

// ErrorFor returns the recorded read error for a source, or "".
func (f *Facts) ErrorFor(source string) string {
	for _, e := range f.Errors {
		if e.Source == source {
			return e.Err
		}
	}
	return ""
}

// ErrorAt returns the recorded read error on host path p or a directory
// above it (a walk's "DIR/**" counts as DIR), as "SOURCE: ERROR", or "".
func (f *Facts) ErrorAt(p string) string {
	for _, e := range f.Errors {
		src := e.Source
		if dir, ok := strings.CutSuffix(src, "/**"); ok {
			src = dir
		}
		if p == src || strings.HasPrefix(p, src+"/") {
			return e.Source + ": " + e.Err
		}
	}
	return ""
}
