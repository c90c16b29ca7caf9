// SPDX-License-Identifier: GPL-2.0
// vnetlab's packet-size counter (internal/measure/pktstat): how many packets, bytes
// and segments each device of the watched network namespaces transmits
// (net_dev_xmit: what the driver was handed, a GSO packet whole) and
// receives (netif_receive_skb: what the stack gets, after GRO). From them,
// the average packet at the sender and at the receiver's GRO: the proof
// that an MTU, GSO/GRO size or offload knob took effect. Every
// lab run attaches it, --profile or not, in each cell's proof sample only,
// never in a measured one: two tracepoints, one hash update per
// packet per device. tp_btf, as bpf/profile.c: no kprobes or fentry here.
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "netns.h"

enum dir { DIR_TX, DIR_RX };

struct pkt_key {
	__u32 netns; // inode number of the device's network namespace
	__u32 ifindex;
	__u32 dir; // enum dir
	__u32 pad;
};

struct pkt_count {
	__u64 packets;
	__u64 bytes;
	__u64 segs; // gso_segs, 1 for a packet that is not GSO/GRO
	__u64 max; // largest packet, bytes
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct pkt_key);
	__type(value, struct pkt_count);
} pkt_counts SEC(".maps");

// The network namespaces to count in (inode numbers); the runner puts its
// labs' there, so other traffic on the machine costs one lookup.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} watch_netns SEC(".maps");

// Only the fields read, relocated against the kernel's BTF (CO-RE); a
// device's network namespace: netns.h.
struct sk_buff {
	unsigned int len;
	struct net_device *dev;
	unsigned char *head;
	unsigned int end;
} __attribute__((preserve_access_index));

struct skb_shared_info {
	unsigned short gso_segs;
} __attribute__((preserve_access_index));

static __always_inline void count(struct sk_buff *skb, struct net_device *dev, __u32 len, __u32 dir)
{
	struct pkt_key k = {.dir = dir};
	struct pkt_count *v, init = {};
	__u16 segs = 0;
	__u64 shinfo;

	if (!dev)
		return;
	k.netns = dev_netns(dev);
	if (!bpf_map_lookup_elem(&watch_netns, &k.netns))
		return;
	k.ifindex = dev->ifindex;
	// skb_shinfo(skb) = head + end; head is a plain address to the verifier.
	shinfo = (__u64)skb->head + skb->end;
	bpf_probe_read_kernel(&segs, sizeof(segs), (void *)(shinfo + bpf_core_field_offset(struct skb_shared_info, gso_segs)));
	if (!segs)
		segs = 1;
	v = bpf_map_lookup_elem(&pkt_counts, &k);
	if (!v) {
		bpf_map_update_elem(&pkt_counts, &k, &init, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&pkt_counts, &k);
		if (!v)
			return; // map full: the Go side sees fewer packets, never wrong sizes
	}
	v->packets++;
	v->bytes += len;
	v->segs += segs;
	if (len > v->max)
		v->max = len;
}

// net_dev_xmit(skb, rc, dev, skb_len): a packet the driver took (rc 0).
SEC("tp_btf/net_dev_xmit")
int on_xmit(__u64 *ctx)
{
	if ((int)ctx[1] != 0)
		return 0;
	count((struct sk_buff *)ctx[0], (struct net_device *)ctx[2], (__u32)ctx[3], DIR_TX);
	return 0;
}

// netif_receive_skb(skb): what the stack receives, after GRO.
SEC("tp_btf/netif_receive_skb")
int on_receive(__u64 *ctx)
{
	struct sk_buff *skb = (struct sk_buff *)ctx[0];

	count(skb, skb->dev, skb->len, DIR_RX);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
