// SPDX-License-Identifier: GPL-2.0
/*
 * lowlat's passive measurements: what this host adds to real packets,
 * recorded in the kernel into fixed-size log-linear histograms (no event per
 * packet reaches user space). User space (session_linux.go) decides which
 * programs to attach and fills the slots map before it attaches any: a key
 * that has no slot is ignored, so memory is fixed at attach and labels stay
 * bounded.
 *
 * Every hook but one is a BTF-typed raw tracepoint (tp_btf, Linux 5.5):
 * tracepoints are a stable interface, and they work where fentry and kprobes
 * do not (kernels built without kprobes, or that refuse BPF trampolines).
 *   egress   net_dev_queue -> net_dev_start_xmit: from the skb entering
 *            __dev_queue_xmit (its TX queue picked) to its handover to the
 *            driver: the qdisc's queue, a shaper's and fq's pacing included.
 *            Paired by skb address in a lock-free table (queued).
 *   rx       skb->tstamp, the kernel's receive timestamp (set while some
 *            socket asks for SOF_TIMESTAMPING_RX_SOFTWARE; user space keeps
 *            one open), to netif_receive_skb ("stack": the packet enters the
 *            protocol stack, after the backlog and softirq wait of the CPU
 *            that took it), tcp_probe ("socket": TCP processes it on its
 *            socket, the socket backlog included) and the application's read
 *            ("read": skb_copy_datagram_iovec for TCP; for UDP fentry on
 *            skb_consume_udp, the one hook that is not a tracepoint, and is
 *            optional), netstacklat's method.
 *   tcp      tcp_probe, on every segment a TCP socket receives: the RTT
 *            sample RACK took from the newest acknowledged segment (taken
 *            once), and the first-bytes clock; tcp_retransmit_skb counts
 *            retransmits; inet_sock_set_state counts connections and starts
 *            a passive connection's first-bytes clock.
 */
#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "GPL";

/* Log-linear buckets of nanoseconds: 0..31 exactly, then 16 buckets per
 * power of two up to 2^36 ns (69 s); relative width 1/16 at most. */
#define NBUCKETS 528
/* After the buckets: the sum of the values (ns), retransmits, connections. */
#define X_SUM 0
#define X_RETRANS 1
#define X_CONNS 2
#define X_CLOCK 3 /* receive delays dropped: below zero by more than the offset's slack */
#define HIST_LEN (NBUCKETS + 4)

#define MAX_FIRST 4
#define NO_SLOT 0xffffffff

enum kind {
	K_RX_STACK = 2,
	K_RX_READ = 3,
	K_TCP = 4,  /* rtt, retransmits, connections of a port */
	K_RX_SOCKET = 5,
};

/* How an event finds its histogram (egress: egress_devs). For K_RX_*:
 * protocol and local port. For K_TCP: the port, id 0 when it is the
 * connection's local port and 1 when it is the remote one. */
struct slot_key {
	__u8 kind;
	__u8 proto;
	__u16 port;
	__u32 id;
};

struct slot {
	__u32 index;
	/* The slot of first_n[0] (then first_n[1] ...), or NO_SLOT. */
	__u32 first;
};

struct hist {
	__u64 v[HIST_LEN];
};

/* An skb in a device's queue: its enqueue time and its histogram. */
struct queued {
	__u64 skb;
	__u64 ts;
	__u32 slot;
	__u32 dev; /* the device's address (low half) */
};

/* A TCP connection on a measured port. */
struct conn {
	__u64 rack_mstamp; /* the send time of the segment of the last RTT sample taken */
	__u64 start_us;    /* first bytes: the SYN-ACK's send time, or 0 */
	__u64 acked_seen;  /* first bytes: bytes acknowledged at the last segment seen */
	__u32 first;       /* first bytes: the slot of first_n[0] */
	__u32 next;        /* first bytes: the index of the next N to reach */
};

/* Set at load by user space. */
volatile const __u32 netns_inum = 0; /* 0: every network namespace */
volatile const __u64 first_n[MAX_FIRST] = {};
volatile const __u32 first_count = 0;
/* The cgroup v2 id (its directory's inode) whose sockets' TCP is measured
 * apart, whatever their ports; 0: none. */
volatile const __u64 cgroup_id = 0;
/* Egress split by DSCP: each queue's histograms are dscp_classes in a row,
 * the class of DSCP value d at dscp_class[d] (0: the other values). One
 * class: no split, and no header read. */
volatile const __u32 dscp_classes = 1;
volatile const __u8 dscp_class[64] = {};
/* Whether any port's receive path is measured: tcp_probe skips its
 * socket-stage lookup when not. */
volatile const bool rx_on = false;
/* CLOCK_REALTIME - CLOCK_MONOTONIC in ns, refreshed by user space each
 * second: skb->tstamp is realtime, BPF's clock monotonic. */
volatile __s64 realtime_offset = 0;
/* How far below zero a receive delay may read and still be a packet of a
 * short delay (counted as 0): the offset's error bound, with room. Past
 * it the clock is at fault (a realtime step not yet followed, a time
 * namespace): the packet is counted in X_CLOCK, never as a delay of 0. */
volatile __s64 realtime_offset_slack = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1); /* sized by user space */
	__type(key, struct slot_key);
	__type(value, struct slot);
} slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1); /* sized by user space */
	__type(key, __u32);
	__type(value, struct hist);
} hists SEC(".maps");

/* A direct-mapped copy of slots in front of it, an array the verifier
 * inlines: a hash map lookup cost 60-95 ns a packet on the test machine,
 * most of a receive hook's time. User space puts each key at its
 * slot_cache_index; a second key at a taken index sets CACHE_OVERFLOW
 * there, and only then does a lookup go on to the hash map. A key absent
 * from both (a port nobody asked for) costs one array read. */
#define CACHE_BITS 10
#define CACHE_PRESENT 1
#define CACHE_OVERFLOW 2
struct slot_cache {
	struct slot_key key;
	struct slot val;
	__u32 flags;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << CACHE_BITS);
	__type(key, __u32);
	__type(value, struct slot_cache);
} slot_cache_map SEC(".maps");

/* Knuth's multiplicative hash of the key; slotCacheIndex in
 * session_linux.go is the same function. */
static __always_inline __u32 slot_cache_index(const struct slot_key *k)
{
	__u32 h = ((__u32)k->port * 8 + k->kind) ^ ((__u32)k->proto << 19) ^ (k->id << 24);
	return (h * 2654435761u) >> (32 - CACHE_BITS);
}

static __always_inline struct slot *find_slot(const struct slot_key *k)
{
	__u32 i = slot_cache_index(k);
	struct slot_cache *c = bpf_map_lookup_elem(&slot_cache_map, &i);

	if (!c)
		return NULL;
	if ((c->flags & CACHE_PRESENT) && c->key.port == k->port && c->key.kind == k->kind &&
	    c->key.proto == k->proto && c->key.id == k->id)
		return &c->val;
	if (c->flags & CACHE_OVERFLOW)
		return bpf_map_lookup_elem(&slots, k);
	return NULL;
}

/* Egress slots by ifindex, an array the verifier turns into a bounds check
 * and an add: the egress hooks run for every packet the host sends. */
#define MAX_IFINDEX 4096
struct egress_dev {
	__u32 base;   /* the slot of TX queue 0, plus one (0: not measured) */
	__u32 queues; /* queues with a slot of their own; the rest share base+queues */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_IFINDEX);
	__type(key, __u32);
	__type(value, struct egress_dev);
} egress_devs SEC(".maps");

/* The skbs in the devices' queues, in a table indexed by a hash of the skb's
 * address rather than a hash map: no lock and no allocation on the path of
 * every packet sent. Two skbs queued at once with the same index: the later
 * overwrites the earlier, whose sample is lost (never misattributed: the
 * entry names its skb). A dropped skb's entry is overwritten in time. */
#define QUEUED_BITS 15
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << QUEUED_BITS);
	__type(key, __u32);
	__type(value, struct queued);
} queued SEC(".maps");

/* The skb's address as a number (its low half): the verifier allows no
 * arithmetic but addition on a pointer. */
static __always_inline __u32 lo32(__u64 p)
{
	__u32 lo;

	/* A 32-bit move of a pointer: the verifier lets a privileged program
	 * (CAP_PERFMON) have the low half as a number, with no helper call.
	 * The low 32 bits name an skb among the few queued at once. */
	asm volatile("%[lo] = %[p]" : [lo] "=w"(lo) : [p] "w"(p));
	return lo;
}

static __always_inline __u64 skb_addr(unsigned long long *ctx)
{
	return lo32(ctx[0]);
}

static __always_inline __u32 queued_index(__u64 skb)
{
	/* Fibonacci hashing: skbs are slab objects a few hundred bytes apart. */
	return (__u32)(((skb >> 6) * 0x9E3779B97F4A7C15ULL) >> (64 - QUEUED_BITS));
}

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct conn);
} conns SEC(".maps");

#define READ_ONCE(x) (*(volatile typeof(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile typeof(x) *)&(x) = (v))

static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0, s;

	s = (v > 0xffffffffULL) << 5; v >>= s; r |= s;
	s = (v > 0xffff) << 4; v >>= s; r |= s;
	s = (v > 0xff) << 3; v >>= s; r |= s;
	s = (v > 0xf) << 2; v >>= s; r |= s;
	s = (v > 0x3) << 1; v >>= s; r |= s;
	return r | (__u32)(v >> 1);
}

/* The bucket of v ns; Bucket in hist.go is the same function. */
static __always_inline __u32 bucket(__u64 v)
{
	if (v < 32)
		return v;
	__u32 msb = log2_u64(v);
	if (msb > 35)
		return NBUCKETS - 1;
	return 32 + (msb - 5) * 16 + ((v >> (msb - 4)) & 15);
}

static __always_inline void record(__u32 slot, __u64 ns)
{
	struct hist *h = bpf_map_lookup_elem(&hists, &slot);
	if (!h)
		return;
	__u64 b = bucket(ns);
	/* Older verifiers (6.1) lose the bound bucket() keeps: check it where
	 * the compiler cannot fold the check away. */
	barrier_var(b);
	if (b >= NBUCKETS)
		return;
	h->v[b]++;
	h->v[NBUCKETS + X_SUM] += ns;
}

static __always_inline void count(__u32 slot, __u32 which)
{
	struct hist *h = bpf_map_lookup_elem(&hists, &slot);
	if (h && which < 4)
		h->v[NBUCKETS + which]++;
}

static __always_inline bool netns_ok(const struct sock *sk)
{
	return !netns_inum || sk->__sk_common.skc_net.net->ns.inum == netns_inum;
}

static __always_inline bool dev_netns_ok(const struct net_device *dev)
{
	return !netns_inum || (dev && dev->nd_net.net->ns.inum == netns_inum);
}

/* ---- egress ---- */

/* The egress class of skb: its DSCP's, from the IPv4 or IPv6 header (a
 * packet of another protocol: 0, the other values). */
static __always_inline __u32 egress_class(struct sk_buff *skb)
{
	__u8 b[2];
	__u8 d;

	if (bpf_probe_read_kernel(b, sizeof(b), skb->head + skb->network_header))
		return 0;
	if (skb->protocol == bpf_htons(0x0800) && (b[0] >> 4) == 4)
		d = b[1] >> 2;
	else if (skb->protocol == bpf_htons(0x86DD) && (b[0] >> 4) == 6)
		d = ((b[0] & 0xf) << 2) | (b[1] >> 6);
	else
		return 0;
	/* Older verifiers (6.1) lose d's bound: check it where the compiler
	 * cannot fold the check away, as record() does. */
	__u32 i = d;
	barrier_var(i);
	if (i >= 64)
		return 0;
	return dscp_class[i];
}

SEC("tp_btf/net_dev_queue")
int BPF_PROG(egress_enqueue, struct sk_buff *skb)
{
	struct net_device *dev = skb->dev;

	if (!dev)
		return 0;
	__u32 ifindex = dev->ifindex;
	struct egress_dev *e = bpf_map_lookup_elem(&egress_devs, &ifindex);
	if (!e || !e->base || !dev_netns_ok(dev))
		return 0;
	__u32 q = skb->queue_mapping;
	if (q > e->queues)
		q = e->queues;
	__u32 slot = e->base - 1 + q * dscp_classes;
	if (dscp_classes > 1)
		slot += egress_class(skb);
	__u64 addr = skb_addr(ctx);
	__u32 i = queued_index(addr);
	struct queued *v = bpf_map_lookup_elem(&queued, &i);
	if (!v)
		return 0;
	/* skb is cleared first and set last (volatile stores stay in order,
	 * and x86 keeps them so for other CPUs): a reader checks skb before
	 * and after reading the rest, and so never takes another skb's time. */
	WRITE_ONCE(v->skb, 0);
	WRITE_ONCE(v->ts, bpf_ktime_get_ns());
	WRITE_ONCE(v->slot, slot);
	WRITE_ONCE(v->dev, lo32((__u64)dev));
	WRITE_ONCE(v->skb, addr);
	return 0;
}

SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(egress_xmit, struct sk_buff *skb)
{
	__u64 addr = skb_addr(ctx);
	__u32 i = queued_index(addr);
	struct queued *v = bpf_map_lookup_elem(&queued, &i);

	if (!v || !addr || READ_ONCE(v->skb) != addr)
		return 0;
	__u64 ts = READ_ONCE(v->ts);
	__u32 slot = READ_ONCE(v->slot);
	__u32 dev = READ_ONCE(v->dev);
	if (READ_ONCE(v->skb) != addr)
		return 0;
	/* An entry a dropped skb left (a full qdisc drops at its door, after
	 * net_dev_queue) matches the next skb its memory is reused for; on
	 * this device that skb was queued and overwrote it, but on another
	 * device (whose enqueue is not measured, so writes no entry) it would
	 * be taken for this one's: the device must be the same. */
	if (dev != lo32((__u64)skb->dev))
		return 0;
	WRITE_ONCE(v->skb, 0);
	__u64 now = bpf_ktime_get_ns();
	if (now > ts)
		record(slot, now - ts);
	return 0;
}

/* ---- receive path ---- */

/* The skb's receive timestamp in CLOCK_REALTIME ns, or 0: timestamping was
 * off when it arrived, or tstamp holds a sender's (monotonic) delivery time
 * kept across a forward inside the host. */
static __always_inline __s64 rx_tstamp(struct sk_buff *skb)
{
	__s64 ts = skb->tstamp;

	if (ts <= 0)
		return 0;
	/* Direct (BTF) reads, not probed ones: no helper call per packet. */
	if (bpf_core_field_exists(skb->tstamp_type)) {
		if (BPF_CORE_READ_BITFIELD(skb, tstamp_type))
			return 0;
	} else {
		struct sk_buff___old *old = (void *)skb;
		if (bpf_core_field_exists(old->mono_delivery_time) &&
		    BPF_CORE_READ_BITFIELD(old, mono_delivery_time))
			return 0;
	}
	return ts;
}

/* The protocol and destination port of the IPv4 or IPv6 packet in skb, from
 * its headers (a non-first fragment or an IPv6 extension header: 0). */
static __always_inline __u16 rx_port(struct sk_buff *skb, __u8 *proto)
{
	unsigned char *ip = skb->head + skb->network_header;
	/* One read covers the ports after an IPv4 header without options and
	 * after IPv6's fixed header: a helper call per packet, not two. */
	__u8 b[44];
	__u16 off, port;

	if (bpf_probe_read_kernel(b, sizeof(b), ip))
		return 0;
	switch (b[0] >> 4) {
	case 4:
		if ((b[6] & 0x1f) || b[7]) /* fragment offset */
			return 0;
		*proto = b[9];
		off = (b[0] & 0xf) * 4;
		break;
	case 6:
		*proto = b[6];
		off = 40;
		break;
	default:
		return 0;
	}
	if (*proto != 6 && *proto != 17)
		return 0;
	if (off == 20)
		return ((__u16)b[22] << 8) | b[23];
	if (off == 40)
		return ((__u16)b[42] << 8) | b[43];
	if (bpf_probe_read_kernel(&port, sizeof(port), ip + off + 2))
		return 0;
	return bpf_ntohs(port);
}

static __always_inline void rx_record(struct sk_buff *skb, __u8 kind, __u8 proto, __u16 port)
{
	struct slot_key k = { .kind = kind, .proto = proto, .port = port };
	struct slot *s = find_slot(&k);
	if (!s)
		return;
	__s64 ts = rx_tstamp(skb);
	if (!ts)
		return;
	__s64 d = (__s64)bpf_ktime_get_ns() + realtime_offset - ts;
	/* A delay shorter than the offset's error (user space's clock.go
	 * bounds it) reads below zero: it is a packet all the same, counted
	 * as 0 rather than dropped, or a series would lose its shortest
	 * delays (a stage's whole population, where they are a microsecond).
	 * Further below zero the clock is wrong, not the delay short. */
	if (d < 0) {
		if (-d > realtime_offset_slack) {
			count(s->index, X_CLOCK);
			return;
		}
		d = 0;
	}
	record(s->index, d);
}

SEC("tp_btf/netif_receive_skb")
int BPF_PROG(rx_stack, struct sk_buff *skb)
{
	__u8 proto = 0;

	if (!dev_netns_ok(skb->dev))
		return 0;
	__u16 port = rx_port(skb, &proto);
	if (port)
		rx_record(skb, K_RX_STACK, proto, port);
	return 0;
}

/* TCP's reads copy each skb out with skb_copy_datagram_iter, which has
 * this tracepoint; a TCP skb in a receive queue keeps its socket. Other
 * protocols' reads pass here too and are left out. */
SEC("tp_btf/skb_copy_datagram_iovec")
int BPF_PROG(rx_read_tcp, struct sk_buff *skb)
{
	struct sock *sk = skb->sk;

	if (!sk || sk->sk_protocol != 6 || !netns_ok(sk))
		return 0;
	rx_record(skb, K_RX_READ, 6, sk->__sk_common.skc_num);
	return 0;
}

/* UDP copies a linear skb out without that tracepoint, and on recent
 * kernels defers freeing it to the CPU that allocated it, so no tracepoint
 * sees a UDP read in the reader's context. skb_consume_udp does, for every
 * datagram delivered; fentry needs BPF trampolines, which some kernels
 * refuse: user space then reports UDP's read stage as unavailable. */
SEC("fentry/skb_consume_udp")
int BPF_PROG(rx_read_udp, struct sock *sk, struct sk_buff *skb, int len)
{
	if (len < 0 || !netns_ok(sk))
		return 0;
	rx_record(skb, K_RX_READ, 17, sk->__sk_common.skc_num);
	return 0;
}

/* ---- TCP: rtt, first bytes, retransmits, connections ---- */

/* Whether sk belongs to the measured cgroup (the cgroup v2 its creator
 * was in: a service's sockets). */
static __always_inline bool in_cgroup(const struct sock *sk)
{
	if (!cgroup_id || !bpf_core_field_exists(sk->sk_cgrp_data.cgroup))
		return false;
	struct cgroup *cg = sk->sk_cgrp_data.cgroup;
	return cg && cg->kn->id == cgroup_id;
}

/* The port's slot, matched on the local port first, then the remote one,
 * then the socket's cgroup. */
static __always_inline struct slot *tcp_slot(const struct sock *sk)
{
	struct slot_key k = {
		.kind = K_TCP,
		.proto = 6,
		.port = sk->__sk_common.skc_num,
	};
	struct slot *s = find_slot(&k);
	if (s)
		return s;
	k.port = bpf_ntohs(sk->__sk_common.skc_dport);
	k.id = 1;
	s = find_slot(&k);
	if (s || !in_cgroup(sk))
		return s;
	k.port = 0;
	k.id = 2;
	return find_slot(&k);
}

/* Records the first-bytes thresholds acked has reached, at now. With
 * from > 0 only those above from, within the last FINAL_ACK bytes: after
 * the server has closed its side, TCP processes ACKs without tcp_probe,
 * and the ACK that ends the connection is the one seen (a threshold an
 * earlier ACK reached then is left out, not stamped late). */
#define FINAL_ACK 4500
static __always_inline void first_reached(struct conn *c, __u64 acked, __u64 from)
{
	__u64 now_us = bpf_ktime_get_ns() / 1000;
	__u32 n = first_count;

	for (__u32 i = 0; i < MAX_FIRST; i++) {
		if (i < c->next)
			continue;
		if (i >= n || acked < first_n[i])
			break;
		if (from && first_n[i] + FINAL_ACK < acked) {
			c->next = i + 1; /* reached when no hook saw it */
			continue;
		}
		if (now_us > c->start_us)
			record(c->first + i, (now_us - c->start_us) * 1000);
		c->next = i + 1;
	}
}

/* Every segment an established socket receives, before TCP processes it. */
SEC("tp_btf/tcp_probe")
int BPF_PROG(tcp_segment, struct sock *sk, struct sk_buff *skb)
{
	if (!netns_ok(sk))
		return 0;
	if (rx_on)
		rx_record(skb, K_RX_SOCKET, 6, sk->__sk_common.skc_num);

	struct slot *s = tcp_slot(sk);
	if (!s)
		return 0;
	/* A typed cast (no copy): the fields below are read directly. */
	struct tcp_sock *tp = bpf_skc_to_tcp_sock((void *)sk);
	if (!tp)
		return 0;
	__u64 key = (__u64)sk;
	struct conn *c = bpf_map_lookup_elem(&conns, &key);
	if (!c) {
		struct conn fresh = { .first = NO_SLOT };
		bpf_map_update_elem(&conns, &key, &fresh, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&conns, &key);
		if (!c)
			return 0;
	}
	/* RACK's RTT of the newest (s)acked segment, set while TCP processed an
	 * earlier ACK: a new sample when the segment it timed is new. */
	__u64 mstamp = tp->rack.mstamp;
	if (mstamp && mstamp != c->rack_mstamp) {
		c->rack_mstamp = mstamp;
		record(s->index, (__u64)tp->rack.rtt_us * 1000);
	}

	/* First bytes: what this segment's ACK will have acknowledged. */
	if (c->first == NO_SLOT || c->next >= first_count)
		return 0;
	__u8 th[14];
	if (bpf_probe_read_kernel(th, sizeof(th), skb->data) || !(th[13] & 0x10))
		return 0;
	__u32 ack = ((__u32)th[8] << 24) | ((__u32)th[9] << 16) | ((__u32)th[10] << 8) | th[11];
	__s32 ahead = (__s32)(ack - tp->snd_una);
	__u64 acked = tp->bytes_acked + (ahead > 0 ? ahead : 0);
	first_reached(c, acked, 0);
	c->acked_seen = acked;
	return 0;
}

SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(tcp_retrans, const struct sock *sk)
{
	if (!netns_ok(sk))
		return 0;
	struct slot *s = tcp_slot(sk);
	if (s)
		count(s->index, X_RETRANS);
	return 0;
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(tcp_state, const struct sock *sk, int oldstate, int newstate)
{
	if (sk->sk_protocol != 6 || !netns_ok(sk))
		return 0;
	__u64 key = (__u64)sk;
	if (newstate == 5 /* FIN_WAIT2 */ || newstate == 7 /* CLOSE */ || newstate == 6 /* TIME_WAIT */) {
		/* The server closed its side: the ACK of the last bytes moved it
		 * here. */
		struct conn *c = bpf_map_lookup_elem(&conns, &key);
		struct tcp_sock *tp = bpf_skc_to_tcp_sock((void *)sk);
		if (c && tp && c->first != NO_SLOT && c->next < first_count)
			first_reached(c, tp->bytes_acked, c->acked_seen + 1);
		if (newstate == 7)
			bpf_map_delete_elem(&conns, &key);
		return 0;
	}
	if (newstate != 1 /* TCP_ESTABLISHED */)
		return 0;
	struct slot *s = tcp_slot(sk);
	if (!s)
		return 0;
	count(s->index, X_CONNS);
	if (oldstate != 3 /* TCP_SYN_RECV: a passive open */ || s->first == NO_SLOT)
		return 0;
	/* The handshake's RTT sample (the SYN-ACK's) is srtt's first value:
	 * the SYN-ACK left that long ago, when the SYN arrived, half a round
	 * trip after the client's connect(). */
	struct tcp_sock *tp = bpf_skc_to_tcp_sock((void *)sk);
	if (!tp)
		return 0;
	__u64 now_us = bpf_ktime_get_ns() / 1000;
	__u64 srtt = tp->srtt_us >> 3;
	struct conn c = {
		.start_us = now_us > srtt ? now_us - srtt : now_us,
		.first = s->first,
	};
	bpf_map_update_elem(&conns, &key, &c, BPF_ANY);
	return 0;
}
