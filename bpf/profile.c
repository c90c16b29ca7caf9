// SPDX-License-Identifier: GPL-2.0
// vnetlab's CPU profiler (internal/measure/profile): a perf_event program run on
// every CPU's cpu-clock tick that counts (process, kernel stack, user stack)
// triples, and BTF-typed raw tracepoint (tp_btf) programs that count
// data-path events. tp_btf attaches by name, so tracefs need not be mounted
// (this kernel has no kprobes and refuses fentry), and reads the kernel's
// structures directly, not through bpf_probe_read: a few loads per packet,
// the cheapest way to count. NET_RX/NET_TX softirqs are not counted here:
// /proc/softirqs has them for free.
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "netns.h"

#define MAX_STACK_DEPTH 127
#define COMM_LEN 16
#define EEXIST 17

// Event counters, indexed like profile.go's eventNames.
enum event {
	EV_NETIF_RX,
	EV_NET_DEV_XMIT,
	EV_NAPI_POLL,
	EV_FIB_LOOKUP,
	EV_FIB6_LOOKUP,
	EV_DROP,
	EV_SAMPLE_LOST,
	EV_MAX,
};

struct sample_key {
	__u32 pid; // thread group id; 0 = the idle task
	__s32 kstack; // < 0: no kernel stack (the CPU was in user space)
	__s32 ustack; // < 0: no user stack
	__u32 lab; // 1: the task is in a lab's network namespace (lab_ns)
	char comm[COMM_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 32768);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, MAX_STACK_DEPTH * sizeof(__u64));
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct sample_key);
	__type(value, __u64);
} samples SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, EV_MAX);
	__type(key, __u32);
	__type(value, __u64);
} events SEC(".maps");

// kfree_skb drops by enum skb_drop_reason.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

// The network namespaces of the labs being measured (inode numbers), and
// settings[0] = 1 when that set is in use: then only packets on their
// devices and only their processes count (other labs on the machine do not).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} lab_netns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} settings SEC(".maps");

// Without that set: the inode number of the root network namespace (the profiler's own):
// packets on its devices are not counted, vnetlab's labs never use it (and
// other programs' loopback traffic would blur the counts). 0: count all.
volatile const __u32 root_netns_ino = 0;

// Only the fields read, relocated against the kernel's BTF (CO-RE); a
// device's network namespace: netns.h.
struct sk_buff {
	struct net_device *dev;
} __attribute__((preserve_access_index));

struct nsproxy {
	struct net *net_ns;
} __attribute__((preserve_access_index));

struct task_struct {
	struct nsproxy *nsproxy;
} __attribute__((preserve_access_index));

static __always_inline void count(__u32 ev, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&events, &ev);
	if (v)
		*v += n;
}

// lab_ns: is the network namespace with this inode one being measured?
static __always_inline int lab_ns(__u32 ino)
{
	__u32 zero = 0, *use_set = bpf_map_lookup_elem(&settings, &zero);

	if (use_set && *use_set)
		return bpf_map_lookup_elem(&lab_netns, &ino) != NULL;
	if (!root_netns_ino)
		return 1;
	return ino && ino != root_netns_ino;
}

// in_lab: skb is a typed kernel pointer (tp_btf), read directly.
static __always_inline int in_lab(struct sk_buff *skb)
{
	struct net_device *dev = skb->dev;

	if (!dev)
		return 1; // no device (a socket-level drop): cannot tell, count it
	return lab_ns(dev_netns(dev));
}

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct sample_key k = {};
	__u64 one = 1, *v;
	__u32 ino;

	k.pid = bpf_get_current_pid_tgid() >> 32;
	ino = BPF_CORE_READ(task, nsproxy, net_ns, ns.inum);
	k.lab = ino && lab_ns(ino);
	k.kstack = bpf_get_stackid(ctx, &stacks, 0);
	k.ustack = k.pid ? bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK) : -1;
	if (k.kstack == -EEXIST || k.ustack == -EEXIST)
		count(EV_SAMPLE_LOST, 1); // stack map full or a hash collision
	bpf_get_current_comm(k.comm, sizeof(k.comm));
	v = bpf_map_lookup_elem(&samples, &k);
	if (v)
		__sync_fetch_and_add(v, 1);
	else if (bpf_map_update_elem(&samples, &k, &one, BPF_NOEXIST))
		count(EV_SAMPLE_LOST, 1);
	return 0;
}

// Each program gets the tracepoint's arguments in ctx, as typed in the
// kernel's BTF.
#define SKB_EVENT(tp, ev)                                    \
	SEC("tp_btf/" #tp)                                   \
	int tp_##tp(__u64 *ctx)                              \
	{                                                    \
		if (in_lab((struct sk_buff *)ctx[0]))        \
			count(ev, 1);                        \
		return 0;                                    \
	}

// Two per-packet events only: each costs every packet a call (netif_receive_skb
// and net_dev_queue came in the same counts as these two in every mode).
SKB_EVENT(netif_rx, EV_NETIF_RX)
SKB_EVENT(net_dev_xmit, EV_NET_DEV_XMIT)

SEC("tp_btf/napi_poll")
int tp_napi_poll(__u64 *ctx)
{
	count(EV_NAPI_POLL, 1);
	return 0;
}

SEC("tp_btf/fib_table_lookup")
int tp_fib_table_lookup(__u64 *ctx)
{
	count(EV_FIB_LOOKUP, 1);
	return 0;
}

// IPv6 route lookups have their own tracepoint (fib_table_lookup is IPv4's).
SEC("tp_btf/fib6_table_lookup")
int tp_fib6_table_lookup(__u64 *ctx)
{
	count(EV_FIB6_LOOKUP, 1);
	return 0;
}

// kfree_skb(skb, location, reason, rx_sk)
SEC("tp_btf/kfree_skb")
int tp_kfree_skb(__u64 *ctx)
{
	__u32 reason = ctx[2];
	__u64 one = 1, *v;

	if (!in_lab((struct sk_buff *)ctx[0]))
		return 0;
	count(EV_DROP, 1);
	v = bpf_map_lookup_elem(&drops, &reason);
	if (v)
		*v += 1;
	else
		bpf_map_update_elem(&drops, &reason, &one, BPF_NOEXIST);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
