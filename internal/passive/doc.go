// Package passive measures what this host adds to its users' own packets,
// in the kernel, with no probe traffic: the time a packet waits in a
// device's egress queue (qdisc and shaper included), the time a received
// packet takes from the kernel's receive timestamp to its socket's queue and
// to the application's read, the kernel's RTT samples of real TCP ACKs, the
// time a server takes to deliver the first N bytes of a connection, and TCP
// retransmits and connections per port.
//
// The programs are C (bpf/passive.c), compiled by clang through cilium/ebpf's
// bpf2go with CO-RE relocations, and the object is committed, so building
// lowlat needs no clang. At load, cilium/ebpf fits each field access to the
// running kernel's BTF; a kernel without BTF, fentry or a hook is refused
// with one line naming what is missing, and nothing stays attached.
//
// Each measurement lands in a fixed-size log-linear histogram (Hist) in a
// per-CPU array: no event per packet reaches user space, and the memory is
// fixed when the session opens, one histogram per key the configuration
// names (an interface's TX queue, a protocol and port). Ports come from the
// configuration and are never discovered from traffic, so labels stay
// bounded.
//
// Nothing is pinned: the programs live as long as the Session's file
// descriptors, so a process that ends in any way, kill -9 included, leaves
// nothing attached; the kernel detaches them when the descriptors close.
//
// Package passive decides nothing: lowlat watch shows its histograms, the
// gate judges them (apply --prove "passive ..."), the monitor exports them.
// internal/probe holds the active probes.
package passive
