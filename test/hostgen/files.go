package hostgen

import (
	"bufio"
	"bytes"
	"compress/gzip"
	_ "embed"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/lowlat/lowlat/internal/host"
)

//go:embed sysctl_base.txt
var sysctlBase string

//go:embed snmp_headers_6.txt
var snmpHeaders6 string

// snmpHeaders310 are /proc/net/snmp and /proc/net/netstat headers of a Red Hat
// 3.10 kernel: fewer TcpExt counters, no OutTransmits, no MPTcpExt.
const snmpHeaders310 = `Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers OutRequests OutDiscards OutNoRoutes ReasmTimeout ReasmReqds ReasmOKs ReasmFails FragOKs FragFails FragCreates
Icmp: InMsgs InErrors InCsumErrors InDestUnreachs InTimeExcds InParmProbs InSrcQuenchs InRedirects InEchos InEchoReps InTimestamps InTimestampReps InAddrMasks InAddrMaskReps OutMsgs OutErrors OutDestUnreachs OutTimeExcds OutParmProbs OutSrcQuenchs OutRedirects OutEchos OutEchoReps OutTimestamps OutTimestampReps OutAddrMasks OutAddrMaskReps
IcmpMsg: InType3 OutType3
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors
TcpExt: SyncookiesSent SyncookiesRecv SyncookiesFailed EmbryonicRsts PruneCalled RcvPruned OfoPruned OutOfWindowIcmps LockDroppedIcmps ArpFilter TW TWRecycled TWKilled PAWSPassive PAWSActive PAWSEstab DelayedACKs DelayedACKLocked DelayedACKLost ListenOverflows ListenDrops TCPPrequeued TCPDirectCopyFromBacklog TCPDirectCopyFromPrequeue TCPPrequeueDropped TCPHPHits TCPHPHitsToUser TCPPureAcks TCPHPAcks TCPRenoRecovery TCPSackRecovery TCPSACKReneging TCPFACKReorder TCPSACKReorder TCPRenoReorder TCPTSReorder TCPFullUndo TCPPartialUndo TCPDSACKUndo TCPLossUndo TCPLostRetransmit TCPRenoFailures TCPSackFailures TCPLossFailures TCPFastRetrans TCPForwardRetrans TCPSlowStartRetrans TCPTimeouts TCPLossProbes TCPLossProbeRecovery TCPRenoRecoveryFail TCPSackRecoveryFail TCPSchedulerFailed TCPRcvCollapsed TCPDSACKOldSent TCPDSACKOfoSent TCPDSACKRecv TCPDSACKOfoRecv TCPAbortOnData TCPAbortOnClose TCPAbortOnMemory TCPAbortOnTimeout TCPAbortOnLinger TCPAbortFailed TCPMemoryPressures TCPSACKDiscard TCPDSACKIgnoredOld TCPDSACKIgnoredNoUndo TCPSpuriousRTOs TCPMD5NotFound TCPMD5Unexpected TCPSackShifted TCPSackMerged TCPSackShiftFallback TCPBacklogDrop TCPMinTTLDrop TCPDeferAcceptDrop IPReversePathFilter TCPTimeWaitOverflow TCPReqQFullDoCookies TCPReqQFullDrop TCPRetransFail TCPRcvCoalesce TCPOFOQueue TCPOFODrop TCPOFOMerge TCPChallengeACK TCPSYNChallenge TCPFastOpenActive TCPFastOpenActiveFail TCPFastOpenPassive TCPFastOpenPassiveFail TCPFastOpenListenOverflow TCPFastOpenCookieReqd TCPSpuriousRtxHostQueues BusyPollRxPackets TCPAutoCorking TCPFromZeroWindowAdv TCPToZeroWindowAdv TCPWantZeroWindowAdv TCPSynRetrans TCPOrigDataSent
IpExt: InNoRoutes InTruncatedPkts InMcastPkts OutMcastPkts InBcastPkts OutBcastPkts InOctets OutOctets InMcastOctets OutMcastOctets InBcastOctets OutBcastOctets InCsumErrors InNoECTPkts InECT1Pkts InECT0Pkts InCEPkts
`

// snmp renders /proc/net/snmp (Ip..UdpLite) and /proc/net/netstat (TcpExt,
// IpExt, MPTcpExt) from the header set of this kernel generation.
func (g *gen) snmp() {
	headers := snmpHeaders6
	if !g.atLeast(4, 0) {
		headers = snmpHeaders310
	}
	l := g.s.Load
	inSegs := max(l.InSegs, 1000)
	vals := map[string]uint64{
		"Ip:Forwarding": 2, "Ip:DefaultTTL": 64, "Ip:InReceives": inSegs * 11 / 10, "Ip:InDelivers": inSegs * 11 / 10,
		"Ip:OutRequests": inSegs, "Ip:OutTransmits": inSegs,
		"Icmp:InMsgs": 412, "Icmp:InDestUnreachs": 388, "Icmp:OutMsgs": 401, "Icmp:OutDestUnreachs": 401,
		"IcmpMsg:InType3": 388, "IcmpMsg:OutType3": 401,
		"Tcp:RtoAlgorithm": 1, "Tcp:RtoMin": 200, "Tcp:RtoMax": 120000,
		"Tcp:ActiveOpens": inSegs / 900, "Tcp:PassiveOpens": inSegs / 300, "Tcp:AttemptFails": inSegs / 90000,
		"Tcp:EstabResets": inSegs / 40000, "Tcp:CurrEstab": 1830, "Tcp:InSegs": inSegs, "Tcp:OutSegs": inSegs * 23 / 20,
		"Tcp:RetransSegs": l.RetransSegs, "Tcp:OutRsts": inSegs / 20000,
		"Udp:InDatagrams": inSegs / 7, "Udp:OutDatagrams": inSegs / 7, "Udp:NoPorts": 1204, "Udp:RcvbufErrors": 0,
		"TcpExt:TW": inSegs / 800, "TcpExt:DelayedACKs": inSegs / 60, "TcpExt:DelayedACKLost": inSegs / 5000,
		"TcpExt:ListenOverflows": l.ListenOverflows, "TcpExt:ListenDrops": l.ListenOverflows,
		"TcpExt:TCPHPHits": inSegs / 3, "TcpExt:TCPPureAcks": inSegs / 4, "TcpExt:TCPHPAcks": inSegs / 5,
		"TcpExt:TCPTimeouts": l.RetransSegs / 6, "TcpExt:TCPLossProbes": l.RetransSegs / 3,
		"TcpExt:TCPBacklogDrop": l.TCPBacklogDrop, "TcpExt:TCPRcvCoalesce": inSegs / 12,
		"TcpExt:TCPOFOQueue": inSegs / 9000, "TcpExt:TCPOrigDataSent": inSegs * 21 / 20,
		"TcpExt:TCPSynRetrans": l.RetransSegs / 40, "TcpExt:TCPAutoCorking": inSegs / 700,
		"IpExt:InOctets": inSegs * 520, "IpExt:OutOctets": inSegs * 610, "IpExt:InNoECTPkts": inSegs * 11 / 10,
		"IpExt:InMcastPkts": 311, "IpExt:InBcastPkts": 1520,
	}
	var snmp, netstat bytes.Buffer
	sc := bufio.NewScanner(strings.NewReader(headers))
	for sc.Scan() {
		sec, names, _ := strings.Cut(sc.Text(), ": ")
		out := &snmp
		if sec == "TcpExt" || sec == "IpExt" || sec == "MPTcpExt" || sec == "TlsExt" {
			out = &netstat
		}
		fmt.Fprintf(out, "%s: %s\n%s:", sec, names, sec)
		for _, n := range strings.Fields(names) {
			if sec == "Tcp" && n == "MaxConn" {
				out.WriteString(" -1")
				continue
			}
			fmt.Fprintf(out, " %d", vals[sec+":"+n])
		}
		out.WriteByte('\n')
	}
	g.t.raw("/proc/net/snmp", snmp.Bytes())
	g.t.raw("/proc/net/netstat", netstat.Bytes())
}

// sysctlSince is the first kernel with a sysctl, for the ones newer than 3.10
// (keys ending in ":" match a leaf name under conf/neigh for every interface).
// It is approximate for distribution kernels, which backport; the sysctls
// lowlat reasons about are exact.
var sysctlSince = map[string][2]int{
	"net.core.mem_pcpu_rsv": {6, 9}, "net.core.rps_default_mask": {6, 2}, "net.core.skb_defer_max": {5, 19},
	"net.core.txrehash": {5, 19}, "net.core.high_order_alloc_disable": {5, 2}, "net.core.gro_normal_batch": {5, 4},
	"net.core.devconf_inherit_init_net": {5, 0}, "net.core.fb_tunnels_only_for_init_net": {4, 19},
	"net.core.netdev_unregister_timeout_secs": {5, 12}, "net.core.bpf_jit_limit": {4, 20},
	"net.core.bpf_jit_kallsyms": {4, 11}, "net.core.bpf_jit_harden": {4, 7}, "net.core.max_skb_frags": {4, 6},
	"net.core.dev_weight_rx_bias": {4, 12}, "net.core.dev_weight_tx_bias": {4, 12}, "net.core.netdev_budget_usecs": {4, 12},
	"net.core.tstamp_allow_data": {4, 0}, "net.core.default_qdisc": {3, 12}, "net.core.busy_poll": {3, 11},
	"net.core.busy_read": {3, 11}, "net.core.flow_limit_cpu_bitmap": {3, 11}, "net.core.flow_limit_table_len": {3, 11},

	"net.ipv4.tcp_rto_max_ms": {6, 15}, "net.ipv4.tcp_rto_min_us": {6, 11}, "net.ipv4.tcp_tw_reuse_delay": {6, 14},
	"net.ipv4.tcp_ecn_option": {6, 17}, "net.ipv4.tcp_ecn_option_beacon": {6, 17}, "net.ipv4.tcp_backlog_ack_defer": {6, 7},
	"net.ipv4.tcp_syn_linear_timeouts": {6, 5}, "net.ipv4.tcp_shrink_window": {6, 5},
	"net.ipv4.tcp_plb_cong_thresh": {6, 2}, "net.ipv4.tcp_plb_enabled": {6, 2}, "net.ipv4.tcp_plb_idle_rehash_rounds": {6, 2},
	"net.ipv4.tcp_plb_rehash_rounds": {6, 2}, "net.ipv4.tcp_plb_suspend_rto_sec": {6, 2},
	"net.ipv4.tcp_child_ehash_entries": {6, 1}, "net.ipv4.tcp_ehash_entries": {6, 1}, "net.ipv4.udp_child_hash_entries": {6, 2},
	"net.ipv4.udp_hash_entries": {6, 2}, "net.ipv4.tcp_tso_rtt_log": {5, 18}, "net.ipv4.tcp_pingpong_thresh": {6, 6},
	"net.ipv4.tcp_migrate_req": {5, 14}, "net.ipv4.tcp_reflect_tos": {5, 10}, "net.ipv4.tcp_no_ssthresh_metrics_save": {5, 8},
	"net.ipv4.fib_multipath_hash_fields": {5, 12}, "net.ipv4.fib_multipath_hash_seed": {6, 11},
	"net.ipv4.fib_notify_on_flag_change": {5, 10}, "net.ipv4.icmp_echo_enable_probe": {5, 13},
	"net.ipv4.ip_autobind_reuse": {5, 6}, "net.ipv4.tcp_mtu_probe_floor": {5, 3}, "net.ipv4.tcp_min_snd_mss": {5, 2},
	"net.ipv4.tcp_comp_sack_slack_ns": {5, 8}, "net.ipv4.tcp_comp_sack_delay_ns": {4, 19}, "net.ipv4.tcp_comp_sack_nr": {4, 19},
	"net.ipv4.fib_sync_mem": {5, 2}, "net.ipv4.nexthop_compat_mode": {5, 8}, "net.ipv4.raw_l3mdev_accept": {4, 19},
	"net.ipv4.tcp_fastopen_blackhole_timeout_sec": {4, 11}, "net.ipv4.tcp_invalid_ratelimit": {4, 0},
	"net.ipv4.tcp_min_rtt_wlen": {4, 6}, "net.ipv4.tcp_recovery": {4, 4}, "net.ipv4.tcp_pacing_ca_ratio": {4, 2},
	"net.ipv4.tcp_pacing_ss_ratio": {4, 2}, "net.ipv4.tcp_l3mdev_accept": {4, 14}, "net.ipv4.udp_l3mdev_accept": {4, 14},
	"net.ipv4.tcp_autocorking": {3, 14}, "net.ipv4.tcp_notsent_lowat": {3, 12}, "net.ipv4.tcp_min_tso_segs": {3, 12},
	"net.ipv4.tcp_probe_interval": {4, 1}, "net.ipv4.tcp_probe_threshold": {4, 1}, "net.ipv4.tcp_ecn_fallback": {4, 1},
	"net.ipv4.ip_unprivileged_port_start": {4, 11}, "net.ipv4.fwmark_reflect": {3, 17}, "net.ipv4.tcp_fwmark_accept": {3, 17},
	"net.ipv4.ip_forward_use_pmtu": {3, 14}, "net.ipv4.igmp_qrv": {3, 17}, "net.ipv4.icmp_msgs_per_sec": {3, 18},
	"net.ipv4.icmp_msgs_burst": {3, 18}, "net.ipv4.ip_forward_update_priority": {4, 19}, "net.ipv4.tcp_max_reordering": {4, 2},
	"net.ipv4.tcp_early_demux": {4, 13}, "net.ipv4.udp_early_demux": {4, 13}, "net.ipv4.igmp_link_local_mcast_reports": {4, 2},
	"net.ipv4.fib_multipath_use_neigh": {4, 4}, "net.ipv4.fib_multipath_hash_policy": {4, 12}, "net.ipv4.tcp_available_ulp": {4, 13},

	"net.ipv6.ioam6_id": {5, 15}, "net.ipv6.ioam6_id_wide": {5, 15}, "net.ipv6.icmp.error_anycast_as_unicast": {6, 6},
	"net.ipv6.icmp.echo_ignore_multicast": {5, 0}, "net.ipv6.icmp.echo_ignore_anycast": {5, 0},
	"net.ipv6.icmp.echo_ignore_all": {4, 18}, "net.ipv6.icmp.ratemask": {5, 3}, "net.ipv6.fib_multipath_hash_fields": {5, 12},
	"net.ipv6.fib_notify_on_flag_change": {5, 10}, "net.ipv6.max_dst_opts_length": {4, 16}, "net.ipv6.max_dst_opts_number": {4, 16},
	"net.ipv6.max_hbh_length": {4, 16}, "net.ipv6.max_hbh_opts_number": {4, 16}, "net.ipv6.seg6_flowlabel": {4, 19},
	"net.ipv6.flowlabel_reflect": {4, 11}, "net.ipv6.fib_multipath_hash_policy": {4, 16}, "net.ipv6.auto_flowlabels": {3, 17},
	"net.ipv6.flowlabel_state_ranges": {3, 17}, "net.ipv6.flowlabel_consistency": {3, 17}, "net.ipv6.fwmark_reflect": {3, 17},
	"net.ipv6.idgen_delay": {4, 1}, "net.ipv6.idgen_retries": {4, 1}, "net.ipv6.calipso_cache_bucket_size": {4, 8},
	"net.ipv6.calipso_cache_enable": {4, 8}, "net.ipv6.ip_nonlocal_bind": {4, 3}, "net.ipv6.anycast_src_echo_reply": {3, 14},
	"net.ipv6.mld_qrv": {3, 17}, "net.ipv6.route.skip_notify_on_dev_down": {5, 2},

	"arp_evict_nocarrier:": {5, 16}, "ndisc_evict_nocarrier:": {5, 16}, "bc_forwarding:": {5, 0},
	"drop_gratuitous_arp:": {4, 11}, "drop_unicast_in_l2_multicast:": {4, 11}, "ignore_routes_with_linkdown:": {4, 1},
	"src_valid_mark:": {3, 14}, "accept_ra_min_lft:": {6, 5}, "ra_honor_pio_life:": {6, 8}, "ra_honor_pio_pflag:": {6, 12},
	"force_forwarding:": {6, 17}, "accept_untracked_na:": {5, 19}, "ra_defrtr_metric:": {5, 11}, "rpl_seg_enabled:": {5, 8},
	"ioam6_enabled:": {5, 15}, "ioam6_id:": {5, 15}, "ioam6_id_wide:": {5, 15}, "ndisc_tclass:": {4, 19},
	"addr_gen_mode:": {4, 4}, "enhanced_dad:": {4, 4}, "drop_unsolicited_na:": {4, 11}, "keep_addr_on_down:": {4, 7},
	"seg6_enabled:": {4, 10}, "seg6_require_hmac:": {4, 10}, "accept_ra_rt_info_min_plen:": {4, 13},
	"accept_ra_rt_info_max_plen:": {4, 3}, "use_oif_addrs_only:": {3, 15}, "accept_ra_from_local:": {3, 17},
	"accept_ra_min_hop_limit:": {4, 2}, "accept_ra_mtu:": {3, 14}, "suppress_frag_ndisc:": {3, 19},
	"use_optimistic:": {3, 17}, "router_solicitation_max_interval:": {4, 9}, "interval_probe_time_ms:": {5, 19},
	"regen_min_advance:": {6, 9},

	"net.netfilter.nf_hooks_lwtunnel": {5, 15}, "net.netfilter.nf_conntrack_tcp_ignore_invalid_rst": {5, 14},
	"net.netfilter.nf_log_all_netns": {4, 10},
}

// sysctlDefaults are kernel defaults that changed over the versions covered.
func (g *gen) sysctlDefaults() map[string]string {
	d := map[string]string{
		"net.core.rmem_max": "212992", "net.core.wmem_max": "212992",
		"net.core.default_qdisc":                  "pfifo_fast",
		"net.ipv4.tcp_congestion_control":         "cubic",
		"net.ipv4.tcp_allowed_congestion_control": "reno cubic",
		"net.ipv4.tcp_wmem":                       "4096 16384 4194304",
		"net.ipv4.tcp_rmem":                       "4096 131072 6291456",
		"net.ipv4.tcp_fastopen":                   "1", "net.ipv4.tcp_tw_reuse": "2",
		"net.ipv4.tcp_limit_output_bytes": "1048576",
		"net.core.somaxconn":              "4096",
		"net.ipv4.tcp_available_ulp":      "",
		"net.ipv4.tcp_max_syn_backlog":    "2048",
	}
	if !g.atLeast(5, 7) {
		d["net.ipv4.tcp_rmem"] = "4096 87380 6291456"
	}
	if !g.atLeast(5, 4) {
		d["net.core.somaxconn"] = "128"
	}
	if !g.atLeast(4, 19) {
		d["net.ipv4.tcp_tw_reuse"] = "0"
	}
	if !g.atLeast(4, 12) {
		d["net.ipv4.tcp_tw_recycle"] = "0" // removed in 4.12
		d["net.ipv4.tcp_limit_output_bytes"] = "262144"
	}
	if !g.atLeast(4, 0) {
		d["net.ipv4.ip_local_port_range"] = "32768 61000"
		d["net.ipv4.tcp_limit_output_bytes"] = "131072"
		d["net.ipv4.tcp_max_syn_backlog"] = "512"
	}
	if g.atLeast(6, 0) {
		d["net.ipv4.tcp_limit_output_bytes"] = "4194304"
	}
	d["net.ipv4.tcp_available_congestion_control"] = g.s.Kernel.Congestion
	return d
}

// sysctl writes /proc/sys/net from the base list, adjusted to the kernel
// version and the spec, plus the few non-net ones lowlat reads.
func (g *gen) sysctl() {
	sys := map[string]string{}
	ifaces := g.ifaceNames[1:] // lo has its own entries in the base list
	for line := range strings.Lines(sysctlBase) {
		line = strings.TrimRight(line, "\n")
		if line == "" || line[0] == '#' {
			continue
		}
		name, val, _ := strings.Cut(line, "\t")
		if strings.Contains(name, "@IF@") {
			for _, ifn := range ifaces {
				sys[strings.ReplaceAll(name, "@IF@", ifn)] = val
			}
			continue
		}
		sys[name] = val
	}
	for name := range sys {
		if !g.has(name) {
			delete(sys, name)
		}
	}
	if !g.atLeast(5, 6) {
		for name := range sys {
			if strings.HasPrefix(name, "net.mptcp.") {
				delete(sys, name)
			}
		}
	}
	for _, n := range g.s.NICs {
		sys["net.ipv6.conf."+n.Name+".mtu"] = fmt.Sprint(n.MTU)
	}
	for k, v := range g.sysctlDefaults() {
		sys[k] = v
	}
	for k, v := range g.s.Sysctls {
		sys[k] = v
	}
	g.sysctls = sys
	for name, val := range sys {
		g.t.file(host.SysctlPath(name), "%s\n", procValue(val))
	}
}

// has reports whether sysctl name exists in this kernel version.
func (g *gen) has(name string) bool {
	if v, ok := sysctlSince[name]; ok {
		return g.atLeast(v[0], v[1])
	}
	if strings.Contains(name, ".conf.") || strings.Contains(name, ".neigh.") {
		leaf := name[strings.LastIndexByte(name, '.')+1:]
		if v, ok := sysctlSince[leaf+":"]; ok {
			return g.atLeast(v[0], v[1])
		}
	}
	return true
}

// procValue renders a sysctl as procfs does: integer vectors tab-separated.
func procValue(v string) string {
	f := strings.Fields(v)
	if len(f) < 2 {
		return v
	}
	for _, x := range f {
		for _, c := range x {
			if (c < '0' || c > '9') && c != '-' {
				return v
			}
		}
	}
	return strings.Join(f, "\t")
}

// kernel writes /proc/version, osrelease, the kernel config, the module tree
// and /proc/modules.
func (g *gen) kernel() {
	k := g.s.Kernel
	g.t.file("/proc/version", "Linux version %s %s\n", k.Release, k.Build)
	g.t.file("/proc/sys/kernel/osrelease", "%s\n", k.Release)
	g.t.file("/proc/sys/kernel/hostname", "%s\n", g.s.Hostname)
	g.t.file("/proc/sys/kernel/random/boot_id", "%s\n", g.s.BootID)
	if len(g.nodes) > 1 || k.Config["CONFIG_NUMA_BALANCING"] == "y" {
		g.t.file("/proc/sys/kernel/numa_balancing", "%d\n", min(1, len(g.nodes)-1))
	}
	g.t.file("/proc/sys/kernel/timer_migration", "1\n")
	g.t.file("/proc/sys/vm/swappiness", "%s\n", valueOr(g.s.Sysctls["vm.swappiness"], "60"))
	g.t.file("/proc/sys/vm/zone_reclaim_mode", "0\n")
	g.t.file("/proc/sys/fs/file-max", "%s\n", valueOr(g.s.Sysctls["fs.file-max"], "9223372036854775807"))
	g.t.file("/proc/sys/fs/nr_open", "1048576\n")

	var cfg bytes.Buffer
	fmt.Fprintf(&cfg, "#\n# Automatically generated file; DO NOT EDIT.\n# Linux/x86_64 %s Kernel Configuration\n#\n", k.Release)
	keys := make([]string, 0, len(k.Config))
	for name := range k.Config {
		keys = append(keys, name)
	}
	sort.Strings(keys)
	for _, name := range keys {
		v := k.Config[name]
		switch {
		case v == "n":
			fmt.Fprintf(&cfg, "# %s is not set\n", name)
		case v == "y" || v == "m" || isNumber(v):
			fmt.Fprintf(&cfg, "%s=%s\n", name, v)
		default:
			fmt.Fprintf(&cfg, "%s=%q\n", name, v)
		}
	}
	if k.ConfigGz {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		zw.Write(cfg.Bytes())
		zw.Close()
		g.t.raw("/proc/config.gz", z.Bytes())
	} else {
		g.t.raw("/boot/config-"+k.Release, cfg.Bytes())
	}
	mod := "/lib/modules/" + k.Release
	if len(k.Modules) > 0 || len(k.Builtin) > 0 {
		for _, m := range k.Modules {
			dir := "kernel/net/sched/"
			if strings.HasPrefix(m, "tcp_") {
				dir = "kernel/net/ipv4/"
			}
			g.t.raw(mod+"/"+dir+m+k.ModExt, nil)
		}
		var b strings.Builder
		for _, m := range k.Builtin {
			b.WriteString(m + "\n")
		}
		g.t.file(mod+"/modules.builtin", "%s", b.String())
	}
	var pm strings.Builder
	for i, m := range k.Loaded {
		fmt.Fprintf(&pm, "%s %d %d - Live 0x0000000000000000\n", m, 16384+4096*(i%7), i%3)
	}
	g.t.file("/proc/modules", "%s", pm.String())
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func valueOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// misc writes THP, irqbalance, processes, systemd and os-release.
func (g *gen) misc() {
	s := g.s
	thp := []string{"always", "madvise", "never"}
	g.t.file("/sys/kernel/mm/transparent_hugepage/enabled", "%s\n", bracket(thp, s.THP))
	defrag := []string{"always", "defer", "defer+madvise", "madvise", "never"}
	if !g.atLeast(4, 6) {
		defrag = thp
	}
	g.t.file("/sys/kernel/mm/transparent_hugepage/defrag", "%s\n", bracket(defrag, s.THPDefrag))
	procs := map[int]string{1: "systemd", 2: "kthreadd", 3: "rcu_gp", 812: "systemd-journal", 1107: "sshd", 1290: "crond"}
	if !s.Systemd {
		procs[1] = "init"
		delete(procs, 812)
	}
	if ib := s.IRQBalance; ib != nil {
		if ib.Running {
			procs[ib.PID] = "irqbalance"
			// As the distributions' units start it, with an empty IRQBALANCE_ARGS.
			g.t.file(fmt.Sprintf("/proc/%d/cmdline", ib.PID), "/usr/sbin/irqbalance\x00--foreground\x00")
		}
		if ib.ConfigPath != "" {
			g.t.file(ib.ConfigPath, "%s", ib.Config)
		}
		const unit = "/lib/systemd/system/irqbalance.service"
		switch ib.UnitFile {
		case "enabled":
			g.t.file(unit, "%s", irqbalanceUnit)
			g.t.link("/etc/systemd/system/multi-user.target.wants/irqbalance.service", unit)
		case "disabled":
			g.t.file(unit, "%s", irqbalanceUnit)
		case "masked":
			g.t.file(unit, "%s", irqbalanceUnit)
			g.t.link("/etc/systemd/system/irqbalance.service", "/dev/null")
		}
	}
	for pid, comm := range procs {
		g.t.file(fmt.Sprintf("/proc/%d/comm", pid), "%s\n", comm)
	}
	if s.Systemd {
		// A file keeps the directory in git (it does not store empty ones);
		// systemd detection only asks whether the directory exists.
		g.t.file("/run/systemd/system/"+host.TreeKeepFile, "%s", host.TreeKeepText)
	}
	if s.OSRelease != "" {
		g.t.file("/etc/os-release", "%s", s.OSRelease)
	}
}

func bracket(choices []string, sel string) string {
	out := slices.Clone(choices)
	for i, c := range out {
		if c == sel {
			out[i] = "[" + c + "]"
		}
	}
	return strings.Join(out, " ")
}

// irqbalanceUnit is Debian's irqbalance.service.
const irqbalanceUnit = `[Unit]
Description=irqbalance daemon
Documentation=man:irqbalance(1)
ConditionVirtualization=!container
ConditionCPUs=>1

[Service]
EnvironmentFile=-/usr/lib/irqbalance/defaults.env
EnvironmentFile=-/etc/default/irqbalance
ExecStart=/usr/sbin/irqbalance --foreground $IRQBALANCE_ARGS
CapabilityBoundingSet=
NoNewPrivileges=yes

[Install]
WantedBy=multi-user.target
`
