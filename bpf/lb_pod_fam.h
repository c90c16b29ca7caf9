/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * lb_pod_fam.h: the translation of a pod's packets to a Service, their
 * reverse towards pods and the two entry points, written once for IPv4 and
 * IPv6. Not a header of its own: lb.h and lb6.h include it last, after
 * defining
 *
 *   LBF(name)             the family's name: lb_##name or lb6_##name;
 *   LB_ADDR               the address type: __be32 or struct lb6_addr;
 *   LB_ADDR_EQ(a, b)      whether the addresses at a and b are equal;
 *   LB_IS_HAIRPIN(a)      whether the address at a is the family's hairpin
 *                         source (LB_HAIRPIN_IP, LB6_HAIRPIN_IP);
 *   LB_SET_HAIRPIN(a)     makes the address at a that source;
 *   LB_COUNT_HAIRPIN()    counts a hairpinned new flow (IPv4 only: IPv6's
 *                         from_pod is the verifier's costliest path);
 *   LB_COUNT_TRUNC()      counts a cut-off header (IPv6 only has a counter
 *                         for it);
 *   LB_PICK(svc, p, s)    the backend of new flow p to svc (lb_pick_backend),
 *                         its slot in *s;
 *   LB_REJECT(skb, p)     the answer of a Service without backends (IPv6: a
 *                         tail call, whose stack is its own);
 *   LB_ICMP_PROTO         the family's ICMP protocol number.
 *
 * The macros are undefined again at the end, and LB_COUNT(STAT), which
 * counts LB_STAT_STAT in the family's lb_stats, defined here.
 */
#define LB_COUNT(stat) LBF(count)(LB_STAT_##stat)

#include "lb_icmp_fam.h"

/* lb_rev_key: the reply tuple of flow p translated to backend ip:port, as
 * replies arrive (to the hairpin source for a hairpin). */
static __always_inline void LBF(rev_key)(struct LBF(ct_key) *rk, const struct LBF(pkt) *p, const LB_ADDR *ip, __be16 port,
					 __u8 hairpin)
{
	LBF(ct_key_set)(rk, ip, &p->saddr, port, p->sport, p->proto, LB_CT_REV);
	if (hairpin)
		LB_SET_HAIRPIN(&rk->daddr);
}

/* lb_rnat_pkt: reverse NAT of reply p, found under its own tuple rk
 * (struct lb_ct_key, LB_CT_REV) with entry ct: backend:bport ->
 * vip:vport, and for a hairpin the hairpin source -> the pod; then, for a
 * RST, the end of the flow. fk and to are the caller's: from_pod's
 * frame has no room for a second set (IPv6's stack would pass 512 bytes). */
static __always_inline int LBF(rnat_pkt)(struct __sk_buff *skb, const struct LBF(pkt) *p, const struct LBF(ct) *ct,
					 const struct LBF(ct_key) *rk, struct LBF(ct_key) *fk, struct LBF(tuple) *to)
{
	LBF(frag_remember)(p);
	to->saddr = ct->addr;
	to->daddr = p->daddr;
	to->sport = ct->port;
	to->dport = p->dport;
	if (ct->flags & LB_CT_HAIRPIN)
		to->daddr = ct->client;
	if (LBF(rewrite)(skb, p, to) < 0) {
		LB_COUNT(ERROR);
		return TC_ACT_SHOT;
	}
	LB_COUNT(RNAT);
	if (!p->has_l4)
		LB_COUNT(FRAG);
	if (p->tcp_rst) {
		LBF(ct_key_set)(fk, &ct->client, &ct->addr, p->dport, ct->port, p->proto, LB_CT_FWD);
		LBF(ct_close)(fk, rk);
	}
	return TC_ACT_OK;
}

/* lb_from_pod_pkt: packets leaving a pod, already parsed by lb_parse (so a
 * program that also routes, like host_fam.h's, parses once). p describes
 * the packet as it was: the caller compares p->daddr with the header
 * afterwards to learn whether the destination was translated. A hairpinned
 * packet, either way, is LB_TO_SENDER once translated: its destination is
 * the pod that sent it (lb_back_to_sender, or host routing, delivers it). */
static __always_inline int LBF(from_pod_pkt)(struct __sk_buff *skb, const struct LBF(pkt) *pp)
{
	struct LBF(pkt) p = *pp;
	struct LBF(ct_key) fk = {}, rk = {};
	struct LBF(tuple) to;
	struct lb_svc *svc;
	struct LBF(ct) *ct;
	LB_ADDR be_ip;
	__be16 be_port;
	__u8 hairpin, established;
	int ret;

	if (p.proto == LB_ICMP_PROTO) /* a hairpinned pod's error about its own flow goes the reply way */
		return LBF(icmp)(skb, &p, LB_IS_HAIRPIN(&p.daddr) ? LB_CT_REV : LB_CT_FWD);
	if (LB_IS_HAIRPIN(&p.daddr)) {
		/* A pod answering a hairpinned connection: translate it back here,
		 * before the node routes it (the address means nothing outside). */
		LBF(ct_key_of)(&rk, &p, LB_CT_REV);
		ct = bpf_map_lookup_elem(&LBF(conntrack), &rk);
		if (!ct)
			return TC_ACT_OK;
		ret = LBF(rnat_pkt)(skb, &p, ct, &rk, &fk, &to);
		return ret == TC_ACT_OK ? LB_TO_SENDER : ret;
	}

	svc = LBF(svc_of)(&p);
	/* A TCP segment after the SYN belongs to an established connection: it
	 * keeps the backend its conntrack entry holds, whatever became of its
	 * Service since (deleted, created again, its endpoints gone or changed),
	 * as kube-proxy's conntrack NAT keeps it, until the connection ends or
	 * its entry is evicted. The Go side keeps the prefilters of a TCP
	 * Service that left marked, never 0 (svcfilters.go), so such a segment to a
	 * clusterIP no Service has any more is still looked up here. */
	established = p.proto == IPPROTO_TCP && !p.tcp_syn;
	if (!svc && !(established && LBF(maybe_svc)(&p)))
		return TC_ACT_OK;
	LBF(ct_key_of)(&fk, &p, LB_CT_FWD);
	/* A SYN starts a flow: the hash picks its backend, the one a known flow
	 * (a retransmitted SYN) already has unless the Service changed since,
	 * so its entry need not be looked up (a cold miss per connection). */
	ct = p.tcp_syn ? NULL : bpf_map_lookup_elem(&LBF(conntrack), &fk);
	/* Any other flow (UDP) keeps its entry's backend only within the
	 * Service that made it, while that backend is one of the Service's,
	 * for new flows or kept (terminating, still serving: kube-proxy's
	 * conntrack cleanup keeps the flows of every serving endpoint)
	 * (lb_backend_slot: one lookup, the slot it was picked from): a
	 * backend's removal takes effect with the write of the Service's
	 * backends, without a walk of the conntrack. Otherwise it is a new
	 * flow: a backend is picked again and its entries rewritten; the old
	 * reverse entry goes first, so that a late reply from the backend that
	 * left is no longer made the Service's (kube-proxy deletes a UDP
	 * flow's conntrack entry). A backend found in another slot (it moved
	 * into a freed one) is remembered there. */
	if (ct && !established) {
		int at = -1;

		if (svc && ct->svc_id == svc->id && svc->count != 0)
			at = LBF(backend_slot)(svc, &ct->addr, ct->port, ct->slot, (__u32)svc->count + svc->kept);
		if (at < 0) {
			LBF(rev_key)(&rk, &p, &ct->addr, ct->port, ct->flags & LB_CT_HAIRPIN);
			bpf_map_delete_elem(&LBF(conntrack), &rk);
			ct = NULL;
		} else if ((__u32)at != ct->slot) {
			ct->slot = at;
		}
	}
	if (ct) {
		be_ip = ct->addr;
		be_port = ct->port;
		hairpin = ct->flags & LB_CT_HAIRPIN;
	} else {
		struct LBF(backend) *b;
		__u32 slot = 0;

		if (!svc)
			return TC_ACT_OK; /* an established segment of no flow known: as it is */
		if (svc->count == 0)
			return LB_REJECT(skb, &p); /* kube-proxy's REJECT for a Service without endpoints */
		b = LB_PICK(svc, &p, &slot);

		if (!b) {
			LB_COUNT(NO_BACKEND);
			return TC_ACT_SHOT;
		}
		be_ip = b->ip;
		be_port = b->port;
		LB_COUNT(CT_NEW);
		hairpin = LB_ADDR_EQ(&be_ip, &p.saddr);
		if (hairpin)
			LB_COUNT_HAIRPIN();
		LBF(rev_key)(&rk, &p, &be_ip, be_port, hairpin);
		LBF(ct_new)(&p, svc, &fk, &rk, &be_ip, be_port, hairpin, slot);
	}

	LBF(frag_remember)(&p);
	to.saddr = p.saddr;
	if (hairpin)
		LB_SET_HAIRPIN(&to.saddr);
	to.daddr = be_ip;
	to.sport = p.sport;
	to.dport = be_port;
	if (LBF(rewrite)(skb, &p, &to) < 0)
		goto fail;
	LB_COUNT(DNAT);
	if (!p.has_l4)
		LB_COUNT(FRAG);
	if (p.tcp_rst) {
		LBF(rev_key)(&rk, &p, &be_ip, be_port, hairpin);
		LBF(ct_close)(&fk, &rk);
	}
	return hairpin ? LB_TO_SENDER : TC_ACT_OK;
fail:
	LB_COUNT(ERROR);
	return TC_ACT_SHOT;
}

/* lb_to_pod_pkt: packets arriving at a pod (or replies leaving their
 * backend, for host routing), already parsed by lb_parse. */
static __always_inline int LBF(to_pod_pkt)(struct __sk_buff *skb, const struct LBF(pkt) *p)
{
	struct LBF(ct_key) rk = {}, fk = {};
	struct LBF(tuple) to;
	struct LBF(ct) *ct;

	if (p->proto == LB_ICMP_PROTO)
		return LBF(icmp)(skb, p, LB_CT_REV);
	if (!lb_maybe_backend_port(p->sport))
		return TC_ACT_OK; /* not from a backend's port: not a reply to translate */
	LBF(ct_key_of)(&rk, p, LB_CT_REV);
	ct = bpf_map_lookup_elem(&LBF(conntrack), &rk);
	if (!ct)
		return TC_ACT_OK;
	return LBF(rnat_pkt)(skb, p, ct, &rk, &fk, &to);
}

/* lb_from_pod: packets leaving a pod. */
static __always_inline int LBF(from_pod)(struct __sk_buff *skb)
{
	struct LBF(pkt) p;

	if (LBF(parse)(skb, &p) != LB_GO)
		return TC_ACT_OK;
	return LBF(from_pod_pkt)(skb, &p);
}

/* lb_to_pod: packets arriving at a pod. */
static __always_inline int LBF(to_pod)(struct __sk_buff *skb)
{
	struct LBF(pkt) p;

	if (LBF(parse)(skb, &p) != LB_GO)
		return TC_ACT_OK;
	return LBF(to_pod_pkt)(skb, &p);
}

#undef LBF
#undef LB_ADDR
#undef LB_ADDR_EQ
#undef LB_IS_HAIRPIN
#undef LB_SET_HAIRPIN
#undef LB_COUNT
#undef LB_PICK
#undef LB_REJECT
#undef LB_COUNT_HAIRPIN
#undef LB_COUNT_TRUNC
#undef LB_ICMP_PROTO
