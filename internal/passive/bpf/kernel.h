/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The few kernel types passive.c reads, declared by hand instead of a
 * generated vmlinux.h (megabytes, one kernel's). Every struct carries
 * preserve_access_index: clang records each field access as a CO-RE
 * relocation, and the loader (cilium/ebpf) finds the field's real offset in
 * the running kernel's BTF. Member order and the offsets below mean nothing;
 * only the names and types do.
 */
#ifndef LOWLAT_KERNEL_H
#define LOWLAT_KERNEL_H

typedef unsigned char __u8;
typedef signed char __s8;
typedef unsigned short __u16;
typedef short __s16;
typedef unsigned int __u32;
typedef int __s32;
typedef unsigned long long __u64;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
#define true 1
#define false 0
typedef __s64 ktime_t;

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
};

enum {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
};

struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net {
	struct ns_common ns;
} __attribute__((preserve_access_index));

typedef struct {
	struct net *net;
} possible_net_t;

struct net_device {
	int ifindex;
	possible_net_t nd_net;
} __attribute__((preserve_access_index));

struct sock_common {
	__be16 skc_dport;
	__u16 skc_num;
	unsigned short skc_family;
	possible_net_t skc_net;
} __attribute__((preserve_access_index));

struct kernfs_node {
	__u64 id;
} __attribute__((preserve_access_index));

struct cgroup {
	struct kernfs_node *kn;
} __attribute__((preserve_access_index));

/* Linux 5.15 and later: the socket's cgroup, a pointer. */
struct sock_cgroup_data {
	struct cgroup *cgroup;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
	__u16 sk_protocol;
	struct sock_cgroup_data sk_cgrp_data;
} __attribute__((preserve_access_index));

struct tcp_rack {
	__u64 mstamp;
	__u32 rtt_us;
} __attribute__((preserve_access_index));

struct tcp_sock {
	__u64 bytes_acked;
	__u32 snd_una;
	__u32 srtt_us;
	struct tcp_rack rack;
} __attribute__((preserve_access_index));


struct sk_buff {
	union {
		ktime_t tstamp;
		__u64 skb_mstamp_ns;
	};
	struct net_device *dev;
	struct sock *sk;
	unsigned char *head;
	unsigned char *data;
	__u16 network_header;
	__u16 transport_header;
	unsigned int len;
	__u16 queue_mapping;
	__be16 protocol;
	__u8 tstamp_type : 2; /* Linux 6.11 and later */
} __attribute__((preserve_access_index));

/* Before 6.11 the same bit was called mono_delivery_time (5.18-6.10). */
struct sk_buff___old {
	__u8 mono_delivery_time : 1;
} __attribute__((preserve_access_index));

#endif
