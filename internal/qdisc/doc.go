// Package qdisc describes Linux queueing disciplines as values (Spec), reads them
// from and writes them to the kernel over rtnetlink, and builds the few shapes
// lowlat uses: an AQM root or per-queue children under mq, an htb or tbf shaper
// with an AQM leaf, and ingress shaping through an IFB device.
//
// A Spec has a canonical text form in tc's vocabulary, e.g.
//
//	fq_codel limit 1000 target 5ms interval 100ms flows 2048 quantum 1514 ecn
//	htb rate 1900kbit leaf { fq_codel target 8ms }
//	mq children 4*{ pfifo_fast @default }
//
// which is what profiles are written in, what plans show, and what the journal
// records, so a value read back from the kernel compares equal to the same value
// written by hand. "@default" marks a qdisc the kernel attached by itself (handle
// 0:): restoring one means deleting what replaced it, not creating it again.
//
// For lowlat autorate, ReadShaper and SetShaperRate read a cake or tbf root
// shaper's rate and counters cheaply and change its rate in place, keeping
// everything else about it.
//
// Encoding is done here rather than with vishvananda/netlink's qdisc types because
// that library has no cake, sends no rate table for tbf (3.10 kernels need one)
// and drops options it does not know on the way back; rtnetlink framing still
// comes from its nl package.
package qdisc
