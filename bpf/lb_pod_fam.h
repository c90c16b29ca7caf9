/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * lb_pod_fam.h: the reverse translation towards pods and the two entry
 * points, written once for IPv4 and IPv6. Not a header of its own: lb.h and
 * lb6.h include it last, after defining
 *
 *   LBF(name)           the family's name: lb_##name or lb6_##name;
 *   LB_ICMP_PROTO       the family's ICMP protocol number;
 *   LB_ICMP_IN(skb, p)  the translation of an ICMP error arriving at a pod.
 *
 * The macros are undefined again at the end.
 */

/* lb_to_pod_pkt: packets arriving at a pod (or replies leaving their
 * backend, for host routing), already parsed by lb_parse. */
static __always_inline int LBF(to_pod_pkt)(struct __sk_buff *skb, const struct LBF(pkt) *p)
{
	struct LBF(ct_key) rk = {};
	struct LBF(ct) *ct;

	if (p->proto == LB_ICMP_PROTO)
		return LB_ICMP_IN(skb, p);
	if (!lb_maybe_backend_port(p->sport))
		return TC_ACT_OK; /* not from a backend's port: not a reply to translate */
	LBF(ct_key_of)(&rk, p, LB_CT_REV);
	ct = bpf_map_lookup_elem(&LBF(conntrack), &rk);
	if (!ct)
		return TC_ACT_OK;
	LBF(frag_remember)(p);
	return LBF(rnat_pkt)(skb, p, ct);
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
#undef LB_ICMP_PROTO
#undef LB_ICMP_IN
