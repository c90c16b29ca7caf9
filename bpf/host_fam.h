/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * host_fam.h: host.h's flows forwarded by the node's stack, written once
 * for IPv4 and IPv6. Not a header of its own: host.h includes it for IPv4
 * and host6.h for IPv6, after defining
 *
 *   HOSTF(name)  the family's name of a map, type or function: name
 *                (IPv4) or name##6 (host_flow6, host_via_stack6,
 *                pod_routes6, host_note_via_stack6, ...);
 *   LBF(name)    lb.h's or lb6.h's: lb_##name or lb6_##name (struct
 *                lb_pkt, lb6_parse, lb6_to_pod_pkt, ...);
 *   HOST_ADDR    the address type: __be32 or struct lb6_addr;
 *   HOST_LOAD_DADDR(skb, a)  reads the packet's destination address to *a
 *                (< 0: could not);
 *   HOST_READ, HOST_STORE  how many of the frame's first bytes host_route
 *                reads (up to the destination address) and writes back
 *                (the MACs and the IP header up to its TTL or hop limit);
 *   HOST_TTL_AT, HOST_DST_AT  the TTL's or hop limit's offset in the
 *                frame, and the destination address's;
 * and the family's host_fwd_hdr (the header copy: what may be forwarded),
 * host_fits (the size) and host_hop (TTL - 1).
 *
 * The macros are undefined again at the end. host_via_stack_on is one for
 * both families (host.h).
 */

/* host_route: deliver a packet to a pod of this node with
 * bpf_redirect_peer, or leave it to the stack (TC_ACT_OK): what is no pod
 * here, or would reach it with TTL 0, or does not fit. The new MACs and
 * TTL - 1 take one store from a copy of the header. */
static __always_inline int HOSTF(host_route)(struct __sk_buff *skb)
{
	struct pod_route *r;
	HOST_ADDR daddr;
	__u8 h[HOST_READ];

	if (HOSTF(host_fwd_hdr)(skb, h) < 0)
		return TC_ACT_OK;
	__builtin_memcpy(&daddr, &h[HOST_DST_AT], sizeof(daddr));
	r = host_pod_of(&HOSTF(pod_routes), &daddr, h[HOST_TTL_AT]);
	if (!r || !HOSTF(host_fits)(skb, r))
		return TC_ACT_OK;
	HOSTF(host_hop)(skb, h);
	if (host_store_l2(skb, h, HOST_STORE, r) < 0)
		return TC_ACT_SHOT;
	host_count(HOST_STAT_REDIRECT);
	return bpf_redirect_peer(r->ifindex, 0);
}

struct HOSTF(host_flow) {
	HOST_ADDR saddr;
	HOST_ADDR daddr;
	__be16 sport;
	__be16 dport;
	__u32 proto;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, HOST_MAX_PODS);
	__type(key, struct HOSTF(host_flow)); /* the reply's tuple */
	__type(value, __u8);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} HOSTF(host_via_stack) SEC(".maps");

/* host_note_via_stack: p reaches a pod at its node end's egress. A flow's
 * first packet (TCP SYN; any UDP datagram) from a pod of this node came
 * through the stack: note its reply. */
static __always_inline void HOSTF(host_note_via_stack)(const struct LBF(pkt) *p)
{
	struct HOSTF(host_flow) f = { .saddr = p->daddr, .daddr = p->saddr, .sport = p->dport, .dport = p->sport, .proto = p->proto };
	HOST_ADDR src = p->saddr;
	struct pod_route *r;
	__u32 zero = 0, one = 1;
	__u8 v = 1;

	if (!p->has_l4 || (p->proto == IPPROTO_TCP && !(p->tcp_syn && !p->tcp_ack)) || (p->proto != IPPROTO_TCP && p->proto != IPPROTO_UDP))
		return;
	r = bpf_map_lookup_elem(&HOSTF(pod_routes), &src);
	if (!r || !r->ifindex)
		return;
	if (p->proto == IPPROTO_UDP && bpf_map_lookup_elem(&HOSTF(host_via_stack), &f))
		return;
	bpf_map_update_elem(&HOSTF(host_via_stack), &f, &v, BPF_ANY);
	if (!host_via_stack_used())
		bpf_map_update_elem(&host_via_stack_on, &zero, &one, BPF_ANY);
}

/* host_reply_via_stack: p (as sent, not translated) is the reply of a
 * flow the stack forwarded. */
static __always_inline int HOSTF(host_reply_via_stack)(const struct LBF(pkt) *p)
{
	struct HOSTF(host_flow) f = { .saddr = p->saddr, .daddr = p->daddr, .sport = p->sport, .dport = p->dport, .proto = p->proto };

	if (!host_via_stack_used() || (p->proto != IPPROTO_TCP && p->proto != IPPROTO_UDP))
		return 0;
	return bpf_map_lookup_elem(&HOSTF(host_via_stack), &f) != NULL;
}

/* host_dnat: host_from_pod's Service translation of packet p (as parsed):
 * its verdict when that ends the packet's way here, else HOST_GO_ON with
 * the destination it has now in *daddr. */
static __always_inline int HOSTF(host_dnat)(struct __sk_buff *skb, const struct LBF(pkt) *p, HOST_ADDR *daddr)
{
	int ret = LBF(from_pod_pkt)(skb, p);

	if (ret == LB_TO_SENDER)
		ret = TC_ACT_OK; /* a hairpin: host_route delivers it back to its pod */
	if (ret != TC_ACT_OK)
		return ret;
	if (HOST_LOAD_DADDR(skb, daddr) < 0)
		return TC_ACT_OK;
	return HOST_GO_ON;
}

/* host_kept: a packet leaving a pod whose destination the Service
 * translation kept: a backend's reply gets to_pod's reverse translation
 * here (bpf_redirect_peer skips the client's node end, where to_pod would
 * do it), and a reply of a flow the stack forwarded goes to the stack.
 * HOST_GO_ON: deliver it (host_route); else the verdict. */
static __always_inline int HOSTF(host_kept)(struct __sk_buff *skb, const struct LBF(pkt) *p)
{
	int ret = LBF(to_pod_pkt)(skb, p);

	if (ret != TC_ACT_OK)
		return ret;
	if (HOSTF(host_reply_via_stack)(p)) {
		host_count(HOST_STAT_STACK);
		return TC_ACT_OK;
	}
	return HOST_GO_ON;
}

/* host_to_pod_route: the node end of a pod's veth, tc egress (veth-ebpf):
 * notes flows the stack forwarded between two pods of this node, then
 * to_pod's reverse translation. */
static __always_inline int HOSTF(host_to_pod_route)(struct __sk_buff *skb)
{
	struct LBF(pkt) p;

	if (LBF(parse)(skb, &p) != LB_GO)
		return TC_ACT_OK;
	HOSTF(host_note_via_stack)(&p);
	return LBF(to_pod_pkt)(skb, &p);
}

#undef HOSTF
#undef LBF
#undef HOST_ADDR
#undef HOST_LOAD_DADDR
#undef HOST_READ
#undef HOST_STORE
#undef HOST_TTL_AT
#undef HOST_DST_AT
