/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * lb_fam.h: lb.h's conntrack, fragment and sessionAffinity helpers, written once for
 * IPv4 and IPv6. Not a header of its own: lb.h includes it for IPv4 and
 * lb6.h for IPv6, after defining
 *
 *   LBF(name)           the family's name: lb_##name or lb6_##name
 *                       (lb_conntrack, struct lb6_pkt, lb6_ct_close, ...);
 *   LB_ADDR             the address type: __be32 or struct lb6_addr;
 *   LB_ADDR_EQ(a, b)    whether the addresses at a and b are equal;
 *   LB_MAYBE_VIP(p)     the clusterIP prefilter on p's destination.
 *
 * lb_pod_fam.h has the programs' bodies. The macros are undefined again at
 * the end.
 */

/* A TCP RST ends its flow: both conntrack entries go at once, so the next
 * flows reuse them while they are still in cache instead of the LRU
 * evicting cold ones (a connection-rate test opens ~10k flows a second). A
 * FIN is left to the LRU: ACKs follow it. Keys are built before the first
 * delete (which may free what ct points to). */
static __always_inline void LBF(ct_close)(const struct LBF(ct_key) *fk, const struct LBF(ct_key) *rk)
{
	bpf_map_delete_elem(&LBF(conntrack), rk);
	bpf_map_delete_elem(&LBF(conntrack), fk);
}

/* lb_frag_remember: the first fragment of a translated datagram leaves its
 * ports for the fragments that follow (same source, destination, id and
 * protocol). */
static __always_inline void LBF(frag_remember)(const struct LBF(pkt) *p)
{
	struct LBF(frag_key) fk = { .saddr = p->saddr, .daddr = p->daddr, .id = p->frag_id, .proto = p->proto };
	struct lb_frag f = { .sport = p->sport, .dport = p->dport };

	if (p->first_frag)
		bpf_map_update_elem(&LBF(frags), &fk, &f, BPF_ANY);
}

/* lb_ct_key_of: the conntrack key of packet p's own tuple in direction dir
 * (pad as it was: a key starts zeroed). */
static __always_inline void LBF(ct_key_of)(struct LBF(ct_key) *k, const struct LBF(pkt) *p, __u8 dir)
{
	k->saddr = p->saddr;
	k->daddr = p->daddr;
	k->sport = p->sport;
	k->dport = p->dport;
	k->proto = p->proto;
	k->dir = dir;
}

/* lb_forget_stale: a pod opens a flow straight to a backend with the very
 * tuple a translated flow had after translation (it reused the source port
 * of an earlier connection to the Service). That earlier flow is over, but
 * its reverse entry would still turn this flow's replies into the
 * clusterIP's, and the pod would drop them: forget it. Only first packets
 * are checked (a TCP SYN; any UDP datagram, UDP has no first), and only
 * towards ports where some backend listens. */
static __always_inline void LBF(forget_stale)(const struct LBF(pkt) *p)
{
	struct LBF(ct_key) rk = {};

	if (p->proto == IPPROTO_TCP) {
		if (!p->tcp_syn || p->tcp_ack)
			return;
	} else if (p->proto != IPPROTO_UDP) {
		return;
	}
	if (!lb_maybe_backend_port(p->dport))
		return;
	rk.saddr = p->daddr;
	rk.daddr = p->saddr;
	rk.sport = p->dport;
	rk.dport = p->sport;
	rk.proto = p->proto;
	rk.dir = LB_CT_REV;
	if (bpf_map_lookup_elem(&LBF(conntrack), &rk))
		bpf_map_delete_elem(&LBF(conntrack), &rk);
}

/* lb_backend_slot: the slot of svc that holds backend *ip:port, or -1 when
 * none does (it left the Service). The slot it had, hint, is looked at
 * first: one lookup while nothing moved. UpdateService keeps remaining
 * backends in their slots, except one beyond a shrunk count, which moves
 * into a freed slot: it is looked for in the first LB_AFFINITY_SCAN slots
 * (one further is taken for gone). Both a remembered sessionAffinity
 * (lb_affinity_keep) and an established UDP flow (lb_pod_fam.h) ask here
 * whether their backend is still the Service's. A global function: the
 * verifier checks it once, not again on every path of every caller
 * (from_pod's verified instructions: 216k before it existed, 497k with it
 * inlined, 76k so; host_from_pod's 237k, 682k, 118k), for a call's cost. */
__attribute__((noinline)) int LBF(backend_slot)(const struct lb_svc *svc, const LB_ADDR *ip, __be16 port, __u32 hint)
{
	struct lb_backend_key bk = {};
	struct LBF(backend) *b;

	if (!svc || !ip)
		return -1;
	bk.svc_id = svc->id;
	if (hint < svc->count) {
		bk.slot = hint;
		b = bpf_map_lookup_elem(&LBF(backends), &bk);
		if (b && LB_ADDR_EQ(&b->ip, ip) && b->port == port)
			return hint;
	}
	for (__u32 i = 0; i < LB_AFFINITY_SCAN; i++) {
		if (i >= svc->count)
			break;
		bk.slot = i;
		b = bpf_map_lookup_elem(&LBF(backends), &bk);
		if (b && LB_ADDR_EQ(&b->ip, ip) && b->port == port)
			return i;
	}
	return -1;
}

/* lb_affinity_keep: the slot whose backend a remembered affinity a (NULL:
 * none) keeps, or -1 (none, expired, or the backend left the Service). */
static __always_inline int LBF(affinity_keep)(const struct lb_svc *svc, const struct LBF(affinity) *a, __u64 now)
{
	if (!a || now - a->last_ns > (__u64)svc->affinity_timeout * 1000000000ULL)
		return -1;
	return LBF(backend_slot)(svc, &a->ip, a->port, a->slot);
}

/* lb_maybe_svc: whether p's destination may be a clusterIP (the prefilter). */
static __always_inline int LBF(maybe_svc)(const struct LBF(pkt) *p)
{
	return LB_MAYBE_VIP(p);
}

/* lb_svc_of: the Service packet p is sent to (prefilter, then
 * lb_services), or NULL: then p may be a direct flow with a translated
 * one's tuple (lb_forget_stale). */
static __always_inline struct lb_svc *LBF(svc_of)(const struct LBF(pkt) *p)
{
	struct LBF(svc_key) sk = {};
	struct lb_svc *svc = NULL;

	if (LBF(maybe_svc)(p)) {
		sk.vip = p->daddr;
		sk.port = p->dport;
		sk.proto = p->proto;
		svc = bpf_map_lookup_elem(&LBF(services), &sk);
	}
	if (!svc)
		LBF(forget_stale)(p);
	return svc;
}

/* lb_ct_new: a new flow p of svc given backend *ip:port (from slot) writes
 * its forward entry fk and its reverse entry rk, reverse first: a reply can
 * never find the flow half-made. */
static __always_inline void LBF(ct_new)(const struct LBF(pkt) *p, const struct lb_svc *svc, const struct LBF(ct_key) *fk,
					const struct LBF(ct_key) *rk, const LB_ADDR *ip, __be16 port, __u8 hairpin, __u32 slot)
{
	struct LBF(ct) fwd = {}, rev = {};

	fwd.addr = *ip;
	fwd.port = port;
	fwd.flags = hairpin ? LB_CT_HAIRPIN : 0;
	fwd.client = p->saddr;
	fwd.svc_id = svc->id;
	fwd.slot = slot;
	rev.addr = p->daddr;
	rev.port = p->dport;
	rev.flags = fwd.flags;
	rev.client = p->saddr;
	rev.svc_id = svc->id;
	bpf_map_update_elem(&LBF(conntrack), rk, &rev, BPF_ANY);
	bpf_map_update_elem(&LBF(conntrack), fk, &fwd, BPF_ANY);
}

#undef LBF
#undef LB_ADDR
#undef LB_ADDR_EQ
#undef LB_MAYBE_VIP
