package hostgen

import (
	"maps"

	"github.com/lowlat/lowlat/internal/host"
)

// Fixtures are the hosts committed under internal/host/testdata/hosts.
func Fixtures() []*Spec {
	return []*Spec{DualI40E(), Epyc25G(), CentOS7()}
}

// baseConfig is what every distribution kernel here has on; presets override.
func baseConfig() map[string]string {
	return map[string]string{
		"CONFIG_NET_SCHED": "y", "CONFIG_NET_SCH_FIFO": "y", "CONFIG_NET_CLS": "y", "CONFIG_NET_CLS_ACT": "y",
		"CONFIG_NET_CLS_U32": "m", "CONFIG_NET_CLS_BPF": "m", "CONFIG_NET_CLS_MATCHALL": "m", "CONFIG_NET_ACT_MIRRED": "m",
		"CONFIG_NET_SCH_HTB": "m", "CONFIG_NET_SCH_HFSC": "m", "CONFIG_NET_SCH_PRIO": "m", "CONFIG_NET_SCH_SFQ": "m",
		"CONFIG_NET_SCH_TBF": "m", "CONFIG_NET_SCH_NETEM": "m", "CONFIG_NET_SCH_INGRESS": "m", "CONFIG_NET_SCH_MQPRIO": "m",
		"CONFIG_NET_SCH_CODEL": "m", "CONFIG_NET_SCH_FQ_CODEL": "m", "CONFIG_NET_SCH_FQ": "m", "CONFIG_NET_SCH_CAKE": "m",
		"CONFIG_NET_SCH_DEFAULT": "n", "CONFIG_IFB": "m", "CONFIG_VETH": "m", "CONFIG_NUMA": "y", "CONFIG_RPS": "y",
		"CONFIG_XPS": "y", "CONFIG_RFS_ACCEL": "y", "CONFIG_HZ": "1000", "CONFIG_MODULES": "y", "CONFIG_BPF_SYSCALL": "y",
		"CONFIG_NET_RX_BUSY_POLL": "y", "CONFIG_IKCONFIG_PROC": "n", "CONFIG_TCP_CONG_ADVANCED": "y",
		"CONFIG_TCP_CONG_CUBIC": "y", "CONFIG_TCP_CONG_BBR": "m", "CONFIG_TCP_CONG_HTCP": "m", "CONFIG_TCP_CONG_DCTCP": "m",
		"CONFIG_DEFAULT_TCP_CONG": "cubic", "CONFIG_TRANSPARENT_HUGEPAGE": "y", "CONFIG_TRANSPARENT_HUGEPAGE_ALWAYS": "y",
		"CONFIG_NO_HZ_FULL": "y", "CONFIG_PREEMPT_VOLUNTARY": "y", "CONFIG_CPU_FREQ": "y", "CONFIG_CPU_ISOLATION": "y",
		"CONFIG_NUMA_BALANCING": "y", "CONFIG_NETDEVSIM": "m",
	}
}

func with(m map[string]string, kv ...string) map[string]string {
	m = maps.Clone(m)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

var i40eFeatures = map[string]bool{
	"rx-checksum": true, "tx-checksum-ip-generic": true, "tx-scatter-gather": true, "tx-tcp-segmentation": true,
	"tx-tcp6-segmentation": true, "tx-generic-segmentation": true, "rx-gro": true, "rx-lro": false, "rx-hashing": true,
	"rx-ntuple-filter": true, "rx-vlan-hw-parse": true, "tx-vlan-hw-insert": true, "rx-gro-hw": false,
}

// DualI40E is runbook 002's box: two 10-core Xeon Silver 4114 sockets with
// SMT (40 CPUs, 2 nodes, sparse core ids), a dual-port X710 on node 0 whose
// 40 queue interrupts all sit on CPU 0, two NVMe drives (one per node), RHEL 9
// with irqbalance running, THP always, default pfifo_fast under mq.
func DualI40E() *Spec {
	cpu0 := func(int) []int { return []int{0} }
	et := &host.Ethtool{
		Driver: "i40e", Version: "5.14.0-362.el9.x86_64", Firmware: "8.50 0x8000b6c9 1.3179.0",
		Channels: &host.Channels{MaxOther: 1, MaxCombined: 64, Other: 1, Combined: 40},
		Rings:    &host.Rings{RxMax: 4096, TxMax: 4096, Rx: 512, Tx: 512},
		Coalesce: map[string]uint32{"adaptive-rx": 1, "adaptive-tx": 1, "rx-usecs": 50, "tx-usecs": 50, "rx-usecs-high": 0},
		Features: i40eFeatures,
		Stats: map[string]uint64{"rx_packets": 1523094 * 40, "tx_packets": 1370784 * 40, "rx_dropped": 0,
			"port.rx_dropped": 48213, "port.rx_missed": 0, "port.rx_crc_errors": 0, "tx_timeout": 0,
			"rx_alloc_fail": 0, "rx_pg_alloc_fail": 0, "port.tx_dropped_link_down": 0},
	}
	et2 := *et
	et2.Channels = &host.Channels{MaxOther: 1, MaxCombined: 64, Other: 1, Combined: 40}
	et2.Stats = map[string]uint64{"rx_packets": 0, "tx_packets": 0, "port.rx_dropped": 0}
	return &Spec{
		Name: "dual-i40e-nvme", Hostname: "gw-esports-01", BootID: "7d3f52a6-4f0e-4a55-9c1e-2b8f3f9e1a01",
		Kernel: Kernel{
			Release: "5.14.0-362.el9.x86_64",
			Build:   "(mockbuild@x86-vm-07.build.eng.bos.redhat.com) (gcc (GCC) 11.4.1 20230605 (Red Hat 11.4.1-2), GNU ld version 2.35.2-42.el9) #1 SMP PREEMPT_DYNAMIC Mon Sep 25 18:20:57 EDT 2023",
			// RHEL ships cake and netem in kernel-modules-extra, not installed.
			Config:     with(baseConfig(), "CONFIG_NET_SCH_FQ_CODEL", "y"),
			ModExt:     ".ko.xz",
			Modules:    []string{"sch_htb", "sch_hfsc", "sch_prio", "sch_sfq", "sch_tbf", "sch_ingress", "sch_mqprio", "sch_codel", "sch_fq", "tcp_bbr", "tcp_htcp", "tcp_dctcp", "tcp_diag"},
			Builtin:    []string{"kernel/net/ipv4/tcp_cubic.ko", "kernel/net/sched/sch_fq_codel.ko", "kernel/drivers/nvme/host/nvme-core.ko"},
			Loaded:     []string{"i40e", "nvme", "nvme_core", "ahci", "libahci", "xfs", "intel_rapl_msr", "ipmi_si"},
			Congestion: "reno cubic",
		},
		CPU: CPUs{Sockets: 2, CoresPerSocket: 10, ThreadsPerCore: 2, NodesPerSocket: 1,
			CoreIDs: []int{0, 1, 2, 3, 4, 8, 9, 10, 11, 12}, Governor: "powersave", Model: "Intel(R) Xeon(R) Silver 4114 CPU @ 2.20GHz"},
		NICs: []NIC{
			{Name: "eth0", Driver: "i40e", Naming: "i40e", PCI: "0000:3b:00.0", Node: 0, SpeedMbps: 10000,
				Queues: 40, MaxQueues: 64, Up: true, MAC: "3c:fd:fe:a1:22:30", MTU: 1500, TxQueueLen: 1000,
				IRQCPU: cpu0, RootQdisc: "mq", ChildQdisc: "pfifo_fast", RxPacketsPerQueue: 1523094, Ethtool: et},
			{Name: "eth1", Driver: "i40e", Naming: "i40e", PCI: "0000:3b:00.1", Node: 0, Queues: 40, MaxQueues: 64,
				Up: false, MAC: "3c:fd:fe:a1:22:31", MTU: 1500, TxQueueLen: 1000, IRQCPU: cpu0, Ethtool: &et2},
		},
		NVMe: []NVMe{
			{Ctrl: "nvme0", PCI: "0000:5e:00.0", Node: 0, IOQueues: 40, Scheduler: "[none] mq-deadline kyber bfq", NrRequests: 1023},
			{Ctrl: "nvme1", PCI: "0000:d8:00.0", Node: 1, IOQueues: 40, Scheduler: "[none] mq-deadline kyber bfq", NrRequests: 1023},
		},
		SATA:       []SATA{{Name: "sda", PCI: "0000:00:17.0", Node: 0, Scheduler: "[mq-deadline] kyber bfq none", NrRequests: 64}},
		IRQBalance: &IRQBalance{Running: true, PID: 1432, UnitFile: "enabled", ConfigPath: "/etc/sysconfig/irqbalance", Config: sysconfigIRQBalance("")},
		THP:        "always", THPDefrag: "madvise", Systemd: true,
		Sysctls: map[string]string{
			"net.ipv4.tcp_fastopen": "1", "net.ipv4.tcp_slow_start_after_idle": "1",
			"net.ipv4.tcp_mem": "1147398 1529866 2294796", "net.ipv4.udp_mem": "2294799 3059734 4589598",
			"net.netfilter.nf_conntrack_max": "262144", "net.nf_conntrack_max": "262144", "vm.swappiness": "30",
		},
		Routes: []host.Route{
			{Family: "inet", Dst: "default", Table: 254, Type: "unicast", Protocol: "static", Dev: "eth0", Gateway: "10.20.0.1", Priority: 100},
			{Family: "inet", Dst: "10.20.0.0/24", Table: 254, Type: "unicast", Protocol: "kernel", Scope: "link", Dev: "eth0", Src: "10.20.0.15", Priority: 100},
			{Family: "inet", Dst: "10.30.0.0/16", Table: 254, Type: "unicast", Protocol: "static", Dev: "eth0", Gateway: "10.20.0.254", Priority: 100, InitCwnd: 10, QuickACK: 1},
			{Family: "inet", Dst: "10.20.0.15", Table: 255, Type: "local", Protocol: "kernel", Scope: "host", Dev: "eth0", Src: "10.20.0.15"},
			{Family: "inet", Dst: "10.20.0.255", Table: 255, Type: "broadcast", Protocol: "kernel", Scope: "link", Dev: "eth0", Src: "10.20.0.15"},
			{Family: "inet", Dst: "127.0.0.0/8", Table: 255, Type: "local", Protocol: "kernel", Scope: "host", Dev: "lo", Src: "127.0.0.1"},
			{Family: "inet", Dst: "127.0.0.1", Table: 255, Type: "local", Protocol: "kernel", Scope: "host", Dev: "lo", Src: "127.0.0.1"},
			{Family: "inet6", Dst: "fe80::/64", Table: 254, Type: "unicast", Protocol: "kernel", Dev: "eth0", Priority: 1024},
			{Family: "inet6", Dst: "::1", Table: 255, Type: "local", Protocol: "kernel", Dev: "lo"},
		},
		OSRelease: "NAME=\"Red Hat Enterprise Linux\"\nVERSION=\"9.3 (Plow)\"\nID=\"rhel\"\nVERSION_ID=\"9.3\"\n",
		Load: Load{ListenOverflows: 1873, TCPBacklogDrop: 42, HotCPU: 0, TimeSqueeze: 96134, RxDropped: 2211,
			RetransSegs: 918273, InSegs: 612938471, UptimeTicks: 86400 * 250, NVMeCompletionsPerQueue: 400000},
	}
}

// sysconfigIRQBalance is Red Hat's /etc/sysconfig/irqbalance with banned
// set in the hex form (or left commented when "").
func sysconfigIRQBalance(banned string) string {
	b := "#IRQBALANCE_BANNED_CPUS="
	if banned != "" {
		b = "IRQBALANCE_BANNED_CPUS=" + banned
	}
	return `# irqbalance is a daemon process that distributes interrupts across
# CPUS on SMP systems. The default is to rebalance once every 10
# seconds. This is the environment file that is specified to systemd via the
# EnvironmentFile key in the service unit file (or via whatever method the init
# system you're using has.
#
# ONESHOT=yes
# after starting, wait for a minute, then look at the interrupt
# load and balance it once; after balancing exit and do not change
# it again.
#IRQBALANCE_ONESHOT=

#
# IRQBALANCE_BANNED_CPUS
# 64 bit bitmask which allows you to indicate which cpu's should
# be skipped when reblancing irqs. Cpu numbers which have their
# corresponding bits set to one in this mask will not have any
# irq's assigned to them on rebalance
#
` + b + `

#
# IRQBALANCE_ARGS
# append any args here to the irqbalance daemon as documented in the man page
#
IRQBALANCE_ARGS=
`
}

// Epyc25G is runbook 000's game server: a single EPYC 7543P (32 cores with
// SMT, core ids with CCD gaps, NPS1), a ConnectX-4 Lx 25G port (mlx5, 5.4
// naming) spreading 63 completion vectors over the node, CentOS 7 userland on
// an ELRepo 5.4 kernel, irqbalance with a Debian-style config, fq_codel as a
// module, tcp_low_latency=1 left over from an old tuning guide.
func Epyc25G() *Spec {
	var coreIDs []int
	for ccd := range 8 {
		for c := range 4 {
			coreIDs = append(coreIDs, ccd*8+c)
		}
	}
	et := &host.Ethtool{
		Driver: "mlx5_core", Version: "5.4.278-1.el7.elrepo.x86_64", Firmware: "14.32.1010 (MT_2420110034)",
		Channels: &host.Channels{MaxCombined: 63, Combined: 63},
		Rings:    &host.Rings{RxMax: 8192, TxMax: 8192, Rx: 1024, Tx: 1024},
		Coalesce: map[string]uint32{"adaptive-rx": 1, "adaptive-tx": 1, "rx-usecs": 8, "rx-frames": 128, "tx-usecs": 16, "tx-frames": 32},
		Features: map[string]bool{"rx-checksum": true, "tx-checksum-ip-generic": true, "tx-scatter-gather": true,
			"tx-tcp-segmentation": true, "tx-generic-segmentation": true, "rx-gro": true, "rx-lro": false, "rx-hashing": true,
			"rx-ntuple-filter": false, "rx-vlan-hw-parse": true, "rx-gro-hw": false},
		Stats: map[string]uint64{"rx_packets": 612938471, "tx_packets": 703826451, "rx_out_of_buffer": 11832,
			"rx_discards_phy": 6310, "tx_queue_stopped": 0, "tx_timeout": 0, "rx_wqe_err": 0},
	}
	port2 := *et
	port2.Stats = map[string]uint64{"rx_packets": 0, "tx_packets": 0, "rx_out_of_buffer": 0}
	return &Spec{
		Name: "epyc-25g", Hostname: "game-fra-03", BootID: "0b7f1c2e-9a77-4bb5-8b39-51c7f7c3d1e2",
		Kernel: Kernel{
			Release:    "5.4.278-1.el7.elrepo.x86_64",
			Build:      "(mockbuild@Build64R7) (gcc version 9.3.1 20200408 (Red Hat 9.3.1-2) (GCC)) #1 SMP Wed Jun 12 11:02:48 EDT 2024",
			Config:     with(baseConfig(), "CONFIG_IKCONFIG_PROC", "n"),
			ModExt:     ".ko",
			Modules:    []string{"sch_htb", "sch_hfsc", "sch_prio", "sch_sfq", "sch_tbf", "sch_netem", "sch_ingress", "sch_mqprio", "sch_codel", "sch_fq_codel", "sch_fq", "sch_cake", "tcp_bbr", "tcp_htcp", "tcp_dctcp", "tcp_diag"},
			Builtin:    []string{"kernel/net/ipv4/tcp_cubic.ko"},
			Loaded:     []string{"mlx5_core", "mlxfw", "nvme", "nvme_core", "sch_fq_codel", "xfs", "k10temp", "ccp"},
			Congestion: "reno cubic",
		},
		CPU: CPUs{Sockets: 1, CoresPerSocket: 32, ThreadsPerCore: 2, NodesPerSocket: 1, CoreIDs: coreIDs,
			Governor: "ondemand", Model: "AMD EPYC 7543P 32-Core Processor"},
		NICs: []NIC{
			{Name: "ens1f0np0", Driver: "mlx5_core", Naming: "mlx5-old", PCI: "0000:41:00.0", Node: 0, SpeedMbps: 25000,
				Queues: 63, MaxQueues: 63, Up: true, MAC: "b8:ce:f6:4e:1a:20", MTU: 1500, TxQueueLen: 1000,
				RootQdisc: "mq", ChildQdisc: "pfifo_fast", RxPacketsPerQueue: 9729182, Ethtool: et},
			{Name: "ens1f1np1", Driver: "mlx5_core", Naming: "mlx5-old", PCI: "0000:41:00.1", Node: 0,
				Queues: 63, MaxQueues: 63, Up: false, MAC: "b8:ce:f6:4e:1a:21", MTU: 1500, TxQueueLen: 1000, Ethtool: &port2},
		},
		NVMe: []NVMe{{Ctrl: "nvme0", PCI: "0000:01:00.0", Node: 0, IOQueues: 64, Scheduler: "[none] mq-deadline kyber", NrRequests: 1023}},
		IRQBalance: &IRQBalance{Running: true, PID: 987, UnitFile: "enabled", ConfigPath: "/etc/default/irqbalance",
			Config: "#Configuration for the irqbalance daemon\n\n#Should irqbalance be enabled?\nENABLED=\"1\"\n#Balance the IRQs only once?\nONESHOT=\"0\"\n"},
		THP: "always", THPDefrag: "madvise", Systemd: true,
		Sysctls: map[string]string{
			"net.ipv4.tcp_low_latency": "1", "net.core.somaxconn": "1024", "net.ipv4.tcp_fastopen": "1",
			"net.core.netdev_max_backlog": "4096", "net.ipv4.tcp_mem": "763125 1017502 1526250",
			"net.ipv4.udp_mem": "1526253 2035006 3052506", "vm.swappiness": "10",
		},
		Routes: []host.Route{
			{Family: "inet", Dst: "default", Table: 254, Type: "unicast", Protocol: "static", Dev: "ens1f0np0", Gateway: "185.12.64.1", InitCwnd: 10, InitRwnd: 10},
			{Family: "inet", Dst: "185.12.64.0/26", Table: 254, Type: "unicast", Protocol: "kernel", Scope: "link", Dev: "ens1f0np0", Src: "185.12.64.23"},
			{Family: "inet", Dst: "169.254.0.0/16", Table: 254, Type: "unicast", Protocol: "boot", Scope: "link", Dev: "ens1f0np0", Priority: 1002},
			{Family: "inet", Dst: "185.12.64.23", Table: 255, Type: "local", Protocol: "kernel", Scope: "host", Dev: "ens1f0np0", Src: "185.12.64.23"},
			{Family: "inet", Dst: "127.0.0.0/8", Table: 255, Type: "local", Protocol: "kernel", Scope: "host", Dev: "lo", Src: "127.0.0.1"},
		},
		OSRelease: "NAME=\"CentOS Linux\"\nVERSION=\"7 (Core)\"\nID=\"centos\"\nVERSION_ID=\"7\"\n",
		Load: Load{ListenOverflows: 0, HotCPU: 3, TimeSqueeze: 1204, RetransSegs: 2281734, InSegs: 1838112930,
			UptimeTicks: 3 * 86400 * 1000, NVMeCompletionsPerQueue: 90000},
	}
}

// CentOS7 is an old-kernel host: CentOS 7.9's 3.10.0-1160 with 16 CPUs, an
// ixgbe port, no BBR anywhere, tcp_tw_recycle=1, softnet_stat with 11 columns
// and irqbalance banning CPU 0 in the hex form.
func CentOS7() *Spec {
	return &Spec{
		Name: "centos7-3.10", Hostname: "legacy-live-02", BootID: "e2a1d6f4-3b1c-4c8e-9f55-0c6a9d2b7e33",
		Kernel: Kernel{
			Release: "3.10.0-1160.el7.x86_64",
			Build:   "(mockbuild@kbuilder.bsys.centos.org) (gcc version 4.8.5 20150623 (Red Hat 4.8.5-44) (GCC) ) #1 SMP Mon Oct 19 16:18:59 UTC 2020",
			Config: func() map[string]string {
				c := baseConfig()
				for _, k := range []string{"CONFIG_NET_SCH_CAKE", "CONFIG_TCP_CONG_BBR", "CONFIG_NET_CLS_MATCHALL", "CONFIG_NETDEVSIM", "CONFIG_NET_SCH_DEFAULT"} {
					delete(c, k)
				}
				return with(c, "CONFIG_NO_HZ_FULL", "y", "CONFIG_HZ", "1000")
			}(),
			ModExt:         ".ko.xz",
			Modules:        []string{"sch_htb", "sch_hfsc", "sch_prio", "sch_sfq", "sch_tbf", "sch_netem", "sch_ingress", "sch_mqprio", "sch_codel", "sch_fq_codel", "sch_fq", "tcp_htcp", "tcp_dctcp", "tcp_diag"},
			Builtin:        []string{"kernel/net/ipv4/tcp_cubic.ko"},
			Loaded:         []string{"ixgbe", "mdio", "dca", "ahci", "libahci", "xfs", "sch_fq_codel"},
			Congestion:     "cubic reno",
			SoftnetColumns: 11,
		},
		CPU: CPUs{Sockets: 1, CoresPerSocket: 8, ThreadsPerCore: 2, NodesPerSocket: 1, Governor: "powersave",
			NoIsolatedFile: true, Model: "Intel(R) Xeon(R) CPU E5-2630 v4 @ 2.20GHz"},
		NICs: []NIC{{Name: "eth0", Driver: "ixgbe", Naming: "ixgbe", PCI: "0000:03:00.0", Node: 0, SpeedMbps: 10000,
			Queues: 16, MaxQueues: 64, Up: true, MAC: "a0:36:9f:12:7c:40", MTU: 1500, TxQueueLen: 1000,
			RootQdisc: "mq", ChildQdisc: "pfifo_fast", RxPacketsPerQueue: 3817724,
			Ethtool: &host.Ethtool{Driver: "ixgbe", Version: "5.1.0-k-rh7.9", Firmware: "0x800007f5",
				Channels: &host.Channels{MaxCombined: 63, MaxOther: 1, Combined: 16, Other: 1},
				Rings:    &host.Rings{RxMax: 4096, TxMax: 4096, Rx: 512, Tx: 512},
				Coalesce: map[string]uint32{"rx-usecs": 1, "tx-usecs": 0, "adaptive-rx": 0, "adaptive-tx": 0},
				Features: map[string]bool{"rx-checksum": true, "tx-scatter-gather": true, "tx-tcp-segmentation": true,
					"tx-generic-segmentation": true, "rx-gro": true, "rx-lro": true, "rx-hashing": true},
				Stats: map[string]uint64{"rx_packets": 61083584, "tx_packets": 57029471, "rx_missed_errors": 30219,
					"rx_no_buffer_count": 1822, "tx_timeout_count": 0, "rx_no_dma_resources": 0}}}},
		SATA:       []SATA{{Name: "sda", PCI: "0000:00:1f.2", Node: 0, Scheduler: "noop [deadline] cfq", NrRequests: 128, Rotational: true}},
		IRQBalance: &IRQBalance{Running: true, PID: 704, UnitFile: "enabled", ConfigPath: "/etc/sysconfig/irqbalance", Config: sysconfigIRQBalance("00000001")},
		THP:        "always", THPDefrag: "always", Systemd: true,
		Sysctls: map[string]string{
			"net.ipv4.tcp_tw_recycle": "1", "net.ipv4.tcp_fastopen": "0", "net.ipv4.tcp_low_latency": "1",
			"net.ipv4.tcp_notsent_lowat": "8388608", "net.ipv4.tcp_mem": "381894 509195 763788",
			"net.ipv4.udp_mem": "763788 1018385 1527576",
		},
		Routes: []host.Route{
			{Family: "inet", Dst: "default", Table: 254, Type: "unicast", Protocol: "boot", Dev: "eth0", Gateway: "192.168.10.1"},
			{Family: "inet", Dst: "169.254.0.0/16", Table: 254, Type: "unicast", Protocol: "boot", Scope: "link", Dev: "eth0", Priority: 1002},
			{Family: "inet", Dst: "192.168.10.0/24", Table: 254, Type: "unicast", Protocol: "kernel", Scope: "link", Dev: "eth0", Src: "192.168.10.40"},
			{Family: "inet", Dst: "192.168.10.40", Table: 255, Type: "local", Protocol: "kernel", Scope: "host", Dev: "eth0", Src: "192.168.10.40"},
		},
		OSRelease: "NAME=\"CentOS Linux\"\nVERSION=\"7 (Core)\"\nID=\"centos\"\nVERSION_ID=\"7\"\n",
		Load: Load{ListenOverflows: 311, TCPBacklogDrop: 0, HotCPU: 0, TimeSqueeze: 77, RetransSegs: 420117,
			InSegs: 61083584, UptimeTicks: 40 * 86400 * 1000},
	}
}

// Synthetic256 is the large host plan is benchmarked on: 2 sockets × 64
// cores × 2 threads (256 CPUs) in NPS2 (4 nodes), a 64-channel ConnectX-6 Dx
// (mlx5) on node 2 with completion vectors spread over that node's 64 CPUs,
// four NVMe drives one per node with 128 managed I/O queues each, Debian 12's
// 6.1 kernel, irqbalance stopped but configured with a banned CPU list.
func Synthetic256() *Spec {
	return &Spec{
		Name: "synthetic-256", Hostname: "edge-256", BootID: "4c1de0e8-2d0d-4b53-a6f4-8c22d1c0f256",
		Kernel: Kernel{
			Release:    "6.1.0-18-amd64",
			Build:      "(debian-kernel@lists.debian.org) (gcc-12 (Debian 12.2.0-14) 12.2.0, GNU ld (GNU Binutils for Debian) 2.40) #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)",
			ConfigGz:   false,
			Config:     baseConfig(),
			ModExt:     ".ko",
			Modules:    []string{"sch_htb", "sch_hfsc", "sch_prio", "sch_sfq", "sch_tbf", "sch_netem", "sch_ingress", "sch_mqprio", "sch_codel", "sch_fq_codel", "sch_fq", "sch_cake", "tcp_bbr", "tcp_htcp", "tcp_dctcp", "tcp_diag"},
			Builtin:    []string{"kernel/net/ipv4/tcp_cubic.ko"},
			Loaded:     []string{"mlx5_core", "mlxfw", "nvme", "nvme_core", "sch_fq_codel", "ext4"},
			Congestion: "reno cubic",
		},
		CPU: CPUs{Sockets: 2, CoresPerSocket: 64, ThreadsPerCore: 2, NodesPerSocket: 2, Governor: "schedutil",
			Model: "AMD EPYC 7763 64-Core Processor"},
		NICs: []NIC{{Name: "ens3f0np0", Driver: "mlx5_core", Naming: "mlx5", PCI: "0000:c1:00.0", Node: 2, SpeedMbps: 100000,
			Queues: 64, MaxQueues: 64, Up: true, MAC: "0c:42:a1:58:3e:10", MTU: 9000, TxQueueLen: 1000,
			RootQdisc: "mq", ChildQdisc: "fq_codel", RxPacketsPerQueue: 41230551,
			Ethtool: &host.Ethtool{Driver: "mlx5_core", Version: "6.1.0-18-amd64", Firmware: "22.36.1010 (MT_0000000359)",
				Channels: &host.Channels{MaxCombined: 64, Combined: 64},
				Rings:    &host.Rings{RxMax: 8192, TxMax: 8192, Rx: 1024, Tx: 1024},
				Coalesce: map[string]uint32{"adaptive-rx": 1, "adaptive-tx": 1, "rx-usecs": 8, "rx-frames": 128, "tx-usecs": 16, "tx-frames": 32},
				Features: map[string]bool{"rx-gro": true, "rx-lro": false, "tx-tcp-segmentation": true, "tx-generic-segmentation": true, "rx-hashing": true},
				Stats:    map[string]uint64{"rx_out_of_buffer": 0, "rx_discards_phy": 0}}}},
		NVMe: []NVMe{
			{Ctrl: "nvme0", PCI: "0000:01:00.0", Node: 0, IOQueues: 128, Scheduler: "[none] mq-deadline", NrRequests: 1023},
			{Ctrl: "nvme1", PCI: "0000:42:00.0", Node: 1, IOQueues: 128, Scheduler: "[none] mq-deadline", NrRequests: 1023},
			{Ctrl: "nvme2", PCI: "0000:82:00.0", Node: 2, IOQueues: 128, Scheduler: "[none] mq-deadline", NrRequests: 1023},
			{Ctrl: "nvme3", PCI: "0000:c2:00.0", Node: 3, IOQueues: 128, Scheduler: "[none] mq-deadline", NrRequests: 1023},
		},
		IRQBalance: &IRQBalance{Running: false, UnitFile: "enabled", ConfigPath: "/etc/default/irqbalance",
			Config: "# irqbalance is a daemon process that distributes interrupts across\n# CPUs on SMP systems.\n#\n#IRQBALANCE_ONESHOT=\n\n# IRQBALANCE_BANNED_CPULIST\n#    List of CPUs which irqbalance must not place interrupts on.\nIRQBALANCE_BANNED_CPULIST=0-1,128-129\n"},
		THP: "madvise", THPDefrag: "madvise", Systemd: true,
		Sysctls: map[string]string{"net.core.default_qdisc": "fq_codel", "net.ipv4.tcp_mem": "6186270 8248362 12372540"},
		Routes: []host.Route{
			{Family: "inet", Dst: "default", Table: 254, Type: "unicast", Protocol: "dhcp", Dev: "ens3f0np0", Gateway: "10.64.0.1", Src: "10.64.3.7", Priority: 100},
			{Family: "inet", Dst: "10.64.0.0/18", Table: 254, Type: "unicast", Protocol: "kernel", Scope: "link", Dev: "ens3f0np0", Src: "10.64.3.7", Priority: 100},
		},
		OSRelease: "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\nVERSION_ID=\"12\"\n",
		Load: Load{HotCPU: 64, TimeSqueeze: 310, RetransSegs: 11839201, InSegs: 9182736450, UptimeTicks: 12 * 86400 * 250,
			NVMeCompletionsPerQueue: 1200000},
	}
}
