/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * host6.h: host.h's delivery to pods for IPv6 (veth-ebpf; pod6_set_dmac for
 * macvlan-ebpf and bridge ports).
 *
 * pod_routes6 maps a pod's IPv6 address to the same struct pod_route as
 * pod_routes (the node end of its veth, its MAC, the node end's MAC).
 * host_route6() at the node end of the sender's veth (tc ingress) takes
 * what a router would forward without a second thought, a unicast TCP,
 * UDP or ICMPv6 echo packet between global addresses, to a pod of this
 * node: hop limit - 1, MACs rewritten, bpf_redirect_peer. Everything else
 * goes to the node's stack, which does it properly:
 *   - multicast and link-local destinations or sources (NDP, MLD, router
 *     solicitations: the node end answers them for the gateway fe80::1);
 *   - extension headers first (hop-by-hop options must be read by every
 *     router; fragments, routing headers) and ICMPv6 other than echo
 *     (errors quote a packet the stack may have to translate; NDP);
 *   - hop limit 1 or 0 (time exceeded), a packet too big for the
 *     destination's MTU (packet too big), a cut-off header;
 *   - addresses that are no pod here.
 * The headers are read with bpf_skb_load_bytes: kernel 6.18's verifier
 * fails on direct copies of IPv6 headers (lb6.h's lb6_parse says why).
 */
#ifndef VNETLAB_HOST6_H
#define VNETLAB_HOST6_H

#include "host.h"
#include "lb6.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HOST_MAX_PODS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lb6_addr); /* the pod's IPv6 address */
	__type(value, struct pod_route);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pod_routes6 SEC(".maps");

/* The frame's first bytes as host_route6 reads them (Ethernet, IPv6, the
 * first two bytes after it: an ICMPv6 type and code) and writes them back
 * (Ethernet and the IPv6 header up to its hop limit, one store). */
#define HOST6_READ  (ETH_HLEN + IP6_HLEN + 2)
#define HOST6_STORE (ETH_HLEN + 8)
#define HOST6_NEXT  (ETH_HLEN + 6)
#define HOST6_HOP   (ETH_HLEN + 7)
#define HOST6_SADDR (ETH_HLEN + 8)
#define HOST6_DADDR (ETH_HLEN + 24)
#define HOST6_ICMP  (ETH_HLEN + IP6_HLEN)

#define ICMP6_ECHO_REQUEST 128
#define ICMP6_ECHO_REPLY   129

/* host6_local_scope: a multicast (ff00::/8) or link-local (fe80::/10)
 * address, a's first two bytes: never forwarded by a router. */
static __always_inline int host6_local_scope(const __u8 *a)
{
	return a[0] == 0xff || (a[0] == 0xfe && (a[1] & 0xc0) == 0x80);
}

/* host6_plain: what host_route6 may forward from the header h. */
static __always_inline int host6_plain(const __u8 *h)
{
	__u8 nh = h[HOST6_NEXT];

	if (host6_local_scope(&h[HOST6_SADDR]) || host6_local_scope(&h[HOST6_DADDR]))
		return 0;
	if (nh == IPPROTO_TCP || nh == IPPROTO_UDP)
		return 1;
	return nh == LB6_ICMP && (h[HOST6_ICMP] == ICMP6_ECHO_REQUEST || h[HOST6_ICMP] == ICMP6_ECHO_REPLY);
}

/* host_route6's IPv6 part (host_fam.h). host_fwd_hdr6 copies the frame's
 * first HOST6_READ bytes to h: 0 for what host6_plain lets through, < 0
 * for anything else (the stack's). */
static __always_inline int host_fwd_hdr6(struct __sk_buff *skb, __u8 *h)
{
	if (skb->protocol != bpf_htons(ETH_P_IPV6))
		return -1;
	if (bpf_skb_load_bytes(skb, 0, h, HOST6_READ) < 0 || (h[IP6_OFF] >> 4) != 6 || !host6_plain(h))
		return -1;
	return 0;
}

/* host_fits6: a packet too big for the destination (a GSO packet: its
 * segments) is the stack's, which answers with packet too big (counted).
 * An error (no such device: the route is stale, or a test) decides
 * nothing here. */
static __always_inline int host_fits6(struct __sk_buff *skb, const struct pod_route *r)
{
	__u32 mtu = 0;

	if (bpf_check_mtu(skb, r->ifindex, &mtu, 0, 0) > 0) {
		host_count(HOST_STAT_STACK);
		return 0;
	}
	return 1;
}

/* host_hop6: hop limit - 1 in the header copy h. A CHECKSUM_COMPLETE sum
 * covers the hop limit (no IPv6 header checksum makes up for it): the
 * 16-bit word it ends lost bpf_htons(1). Any other skb has no such sum:
 * the helper refuses. */
static __always_inline void host_hop6(struct __sk_buff *skb, __u8 *h)
{
	h[HOST6_HOP]--;
	bpf_csum_update(skb, ~(__u32)bpf_htons(1));
}

/* host.h's flows forwarded by the node's stack (a netfilter proxy's DNAT),
 * for IPv6 (host_fam.h): the reply tuples host_to_pod_route6 notes in
 * host_via_stack6 (struct host_flow6), which host_from_pod_route6 then
 * leaves to the stack (host_reply_via_stack6). host_via_stack_on is shared
 * with IPv4. */
#define HOSTF(n)  n##6
#define LBF(n)    lb6_##n
#define HOST_ADDR struct lb6_addr
#define HOST_LOAD_DADDR(skb, a) bpf_skb_load_bytes(skb, HOST6_DADDR, a, sizeof(*(a)))
#define HOST_READ   HOST6_READ
#define HOST_STORE  HOST6_STORE
#define HOST_TTL_AT HOST6_HOP
#define HOST_DST_AT HOST6_DADDR
#include "host_fam.h"

/* pod6_set_dmac: pod_set_dmac for IPv6, after a translation of p (as
 * lb6_parse saw it) left daddr as the packet's destination: a backend that
 * is a pod on the same L2 segment gets the frame by its MAC. Not for a
 * hairpin (its new destination is the sender itself). */
static __always_inline void pod6_set_dmac(struct __sk_buff *skb, const struct lb6_pkt *p, const struct lb6_addr *daddr)
{
	struct pod_route *r;

	if (lb6_addr_eq(daddr, &p->daddr) || lb6_addr_eq(daddr, &p->saddr))
		return;
	r = bpf_map_lookup_elem(&pod_routes6, daddr);
	if (!r || r->ifindex)
		return;
	if (bpf_skb_store_bytes(skb, 0, r->mac, 6, 0) == 0)
		host_count(HOST_STAT_L2);
}

/* from_pod_l2_6: from_pod_l2 for IPv6: the translation, then pod6_set_dmac. */
static __always_inline int from_pod_l2_6(struct __sk_buff *skb)
{
	struct lb6_addr daddr;
	struct lb6_pkt p;
	int ret;

	if (lb6_parse(skb, &p) != LB_GO)
		return TC_ACT_OK;
	ret = lb6_from_pod_pkt(skb, &p);
	if (ret == TC_ACT_OK && bpf_skb_load_bytes(skb, HOST6_DADDR, &daddr, sizeof(daddr)) == 0)
		pod6_set_dmac(skb, &p, &daddr);
	return ret;
}

/* host_from_pod_route6 works in two programs, each with a stack of its own
 * (the Service translation fills most of the 512 bytes): host_from_pod
 * translates a clusterIP and notes in skb->cb[HOST6_CB] what it saw, then
 * tail-calls host6_route (service.c; the host6_tail array, pinned and
 * filled as lb6_tail is), which reverse-translates a backend's replies
 * (bpf_redirect_peer skips the client's node end, where to_pod would do
 * it) and delivers. */
#define HOST6_TAIL_ROUTE 0
#define HOST6_CB         0
#define HOST6_CB_OTHER   0 /* not parsed (lb6_parse passed it) */
#define HOST6_CB_KEPT    1 /* parsed, destination unchanged */
#define HOST6_CB_DNAT    2 /* translated to a backend */
int host6_route(struct __sk_buff *skb);
LB_TAIL_ARRAY(host6_tail, host6_route);

/* host_from_pod_route6: host_from_pod's first half for IPv6. */
static __always_inline int host_from_pod_route6(struct __sk_buff *skb)
{
	struct lb6_addr daddr;
	struct lb6_pkt p;
	int ret;

	skb->cb[HOST6_CB] = HOST6_CB_OTHER;
	if (lb6_parse(skb, &p) == LB_GO) {
		ret = host_dnat6(skb, &p, &daddr);
		if (ret != HOST_GO_ON)
			return ret;
		skb->cb[HOST6_CB] = lb6_addr_eq(&daddr, &p.daddr) ? HOST6_CB_KEPT : HOST6_CB_DNAT;
	}
	bpf_tail_call(skb, &host6_tail, HOST6_TAIL_ROUTE); /* host6_route: does not return */
	return TC_ACT_OK;
}

/* host_from_pod_route6_rest: host_from_pod's second half (host6_route). */
static __always_inline int host_from_pod_route6_rest(struct __sk_buff *skb)
{
	struct lb6_pkt p;
	int ret;

	if (skb->cb[HOST6_CB] == HOST6_CB_KEPT && lb6_parse(skb, &p) == LB_GO) {
		ret = host_kept6(skb, &p);
		if (ret != HOST_GO_ON)
			return ret;
	}
	return host_route6(skb);
}

#endif /* VNETLAB_HOST6_H */
