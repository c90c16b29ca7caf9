/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * host.h: delivering a pod's packets without the node's IP stack.
 *
 * pod_routes maps a pod's IPv4 address to how it is reached:
 *
 *   - veth-ebpf (Cilium's "BPF host routing"): ifindex is the node end of
 *     the pod's veth. host_route() at the node end of the *sender's* veth
 *     (tc ingress) decrements the TTL, rewrites the MACs as the node's
 *     router would (destination: the pod's eth0; source: the node end of
 *     its veth) and calls bpf_redirect_peer(ifindex): the packet goes
 *     straight to the ingress of the destination pod's eth0, with no
 *     routing, netfilter or backlog queue in the node.
 *   - macvlan-ebpf, and the ebpf provider on bridge modes: ifindex is 0,
 *     the pod is a sibling on the same L2 segment (macvlan parent, bridge).
 *     pod_set_dmac() puts its MAC on a packet whose destination the Service
 *     translation changed, so the macvlan or bridge delivers it to the
 *     backend pod directly (instead of to the node's gateway), as it does
 *     a packet sent to the pod's own IP.
 *
 * Everything else (the node, the outside world, unknown addresses, TTL
 * about to expire, non-IPv4) goes to the node's stack as before.
 */
#ifndef VNETLAB_HOST_H
#define VNETLAB_HOST_H

#include "lb.h"

#define HOST_MAX_PODS (1 << 16)

struct pod_route {
	__u32 ifindex;    /* node end of the pod's veth (0: same L2 segment) */
	__u8 mac[6];      /* the pod's interface */
	__u8 node_mac[6]; /* the node end of its veth: source of delivered frames */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HOST_MAX_PODS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __be32); /* the pod's IPv4 address */
	__type(value, struct pod_route);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pod_routes SEC(".maps");

enum {
	HOST_STAT_REDIRECT = 0, /* delivered with bpf_redirect_peer */
	HOST_STAT_STACK = 1,    /* not a pod here: left to the node's stack */
	HOST_STAT_TTL = 2,      /* TTL would expire: left to the stack (ICMP time exceeded) */
	HOST_STAT_L2 = 3,       /* destination MAC set to a translated packet's backend */
	HOST_STAT_MAX = 4,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HOST_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} host_stats SEC(".maps");

static __always_inline void host_count(__u32 what)
{
	__u64 *v = bpf_map_lookup_elem(&host_stats, &what);
	if (v)
		*v += 1;
}

/* The frame's first bytes as host_route reads and rewrites them: the
 * Ethernet header and the IPv4 header up to its checksum (26 bytes, one
 * store), then the addresses (read only). */
#define HOST_HDR_STORE (ETH_HLEN + 12)
#define HOST_HDR_READ  (ETH_HLEN + 20)
#define HOST_TTL       (ETH_HLEN + 8)
#define HOST_CHECK     (ETH_HLEN + 10)
#define HOST_DADDR     (ETH_HLEN + 16)

/* host_pod_of: the route to the pod of this node at *daddr (routes:
 * pod_routes, or host6.h's pod_routes6) when a packet whose TTL or hop
 * limit is ttl may be forwarded there, else NULL: the stack's, counted.
 * Both families' host_route. */
static __always_inline struct pod_route *host_pod_of(void *routes, const void *daddr, __u8 ttl)
{
	struct pod_route *r = bpf_map_lookup_elem(routes, daddr);

	if (!r || !r->ifindex) {
		host_count(HOST_STAT_STACK);
		return NULL;
	}
	if (ttl <= 1) {
		host_count(HOST_STAT_TTL);
		return NULL;
	}
	return r;
}

/* host_store_l2 gives the frame's header copy h route r's MACs and writes
 * its first n bytes back in one store; < 0 (counted): the packet is lost. */
static __always_inline int host_store_l2(struct __sk_buff *skb, __u8 *h, __u32 n, const struct pod_route *r)
{
	__builtin_memcpy(h, r->mac, 6);
	__builtin_memcpy(h + 6, r->node_mac, 6);
	if (bpf_skb_store_bytes(skb, 0, h, n, 0) < 0) {
		lb_count(LB_STAT_ERROR);
		return -1;
	}
	return 0;
}

/* host_route's IPv4 part (host_fam.h). One helper call rewrites the
 * packet: the new MACs, TTL - 1 and the IP checksum are written by a single
 * 26-byte store from a copy of the header (read straight from the packet
 * when linear). Each helper call that writes also checks, and for a cloned
 * header copies, the skb: three of them (checksum, TTL, MACs) cost 2-3x
 * one. */

/* host_fwd_hdr copies the frame's first HOST_HDR_READ bytes to h: 0 for
 * an IPv4 packet, < 0 for anything else (the stack's). */
static __always_inline int host_fwd_hdr(struct __sk_buff *skb, __u8 *h)
{
	if (skb->protocol != bpf_htons(ETH_P_IP))
		return -1;
	if (lb_load(skb, 0, h, HOST_HDR_READ) < 0 || (h[IP_OFF] >> 4) != 4 || (h[IP_OFF] & 0xf) < 5)
		return -1;
	return 0;
}

/* host_fits: IPv4 asks no MTU here. */
static __always_inline int host_fits(struct __sk_buff *skb, const struct pod_route *r)
{
	return 1;
}

/* host_hop: TTL - 1 in the header copy h, as the node's forwarding does it
 * (ip_decrease_ttl): the TTL is the high byte of its 16-bit word, so the
 * checksum gains 0x0100 with the end-around carry. */
static __always_inline void host_hop(struct __sk_buff *skb, __u8 *h)
{
	__u32 check;

	h[HOST_TTL]--;
	check = (__u32)h[HOST_CHECK] << 8 | h[HOST_CHECK + 1];
	check += 0x0100;
	check += check >> 16;
	h[HOST_CHECK] = check >> 8;
	h[HOST_CHECK + 1] = check;
}

/* pod_set_dmac: after a translation changed the destination (p: the
 * packet as lb_parse saw it), address the frame to the new destination's
 * MAC when it is a pod on the same L2 segment (macvlan-ebpf, or ports of one
 * bridge): the segment delivers it without the node's routing. Not for a
 * hairpin (the backend is the sender): a bridge never sends a frame back
 * out of the port it came from, the node routes it back instead. */
static __always_inline void pod_set_dmac(struct __sk_buff *skb, const struct lb_pkt *p)
{
	struct pod_route *r;
	__be32 daddr;

	if (bpf_skb_load_bytes(skb, IP_DADDR_OFF, &daddr, sizeof(daddr)) < 0 || daddr == p->daddr || daddr == p->saddr)
		return;
	r = bpf_map_lookup_elem(&pod_routes, &daddr);
	if (!r || r->ifindex)
		return;
	if (bpf_skb_store_bytes(skb, 0, r->mac, 6, 0) == 0)
		host_count(HOST_STAT_L2);
}

/* Flows the node's stack forwarded from one pod of this node to another.
 * host_route leaves a packet for an address that is no pod here (a
 * clusterIP) to the stack; when the stack's NAT (kube-proxy's DNAT)
 * turned it into a packet for a pod of this node, the backend's replies
 * must cross the stack too, where conntrack turns their source back into
 * the clusterIP: redirected straight to the client they would arrive from
 * the pod IP and be reset. host_to_pod sees such a flow's first packet at
 * the backend's node end (tc egress: redirected packets never pass there,
 * so a packet from a local pod there came through the stack) and notes its
 * reply tuple; host_from_pod_route leaves the replies to the stack. With
 * vnetlab's own Service translation nothing is ever noted (translated
 * packets are redirected), and host_via_stack_on stays 0: the fast path
 * pays one array read. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32); /* 1 once a flow was noted */
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} host_via_stack_on SEC(".maps");

static __always_inline int host_via_stack_used(void)
{
	__u32 zero = 0, *on = bpf_map_lookup_elem(&host_via_stack_on, &zero);

	return on && *on;
}

/* host_route, host_flow, host_via_stack, host_note_via_stack,
 * host_reply_via_stack, host_dnat, host_kept and host_to_pod_route, written
 * once with host6.h's (host_fam.h). HOST_GO_ON: no TC action, their "go
 * on". */
#define HOST_GO_ON 0x100
#define HOSTF(n)  n
#define LBF(n)    lb_##n
#define HOST_ADDR __be32
#define HOST_LOAD_DADDR(skb, a) lb_load(skb, IP_DADDR_OFF, a, sizeof(*(a)))
#define HOST_READ   HOST_HDR_READ
#define HOST_STORE  HOST_HDR_STORE
#define HOST_TTL_AT HOST_TTL
#define HOST_DST_AT HOST_DADDR
#include "host_fam.h"

/* host_from_pod_route: the node end of a pod's veth, tc ingress (veth-ebpf).
 * Service translation first (a clusterIP costs one more hash lookup, no
 * extra hop), then the reverse translation of replies leaving a backend:
 * redirect_peer skips the client's veth, where to_pod would have done it.
 * Then delivery. */
static __always_inline int host_from_pod_route(struct __sk_buff *skb)
{
	struct lb_pkt p;
	__be32 daddr;
	int ret;

	if (lb_parse(skb, &p) == LB_GO) {
		ret = host_dnat(skb, &p, &daddr);
		if (ret != HOST_GO_ON)
			return ret;
		if (daddr == p.daddr) {
			ret = host_kept(skb, &p);
			if (ret != HOST_GO_ON)
				return ret;
		}
	}
	return host_route(skb);
}

#endif /* VNETLAB_HOST_H */
