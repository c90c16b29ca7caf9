/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * lb_icmp_fam.h: the ICMP of the Service plane, written once for IPv4 and
 * IPv6: errors about a translated flow translated too (lb_icmp), and a
 * Service without backends refusing (lb_reject_pkt). Not a header of its
 * own: lb_pod_fam.h includes it first, with its macros, and each family
 * defines before it how its headers are read and written:
 *
 *   lb_icmp_quotes(skb, type)  whether an error of this type quotes a
 *                              packet the family translates;
 *   lb_icmp_inner(skb, e)      the quoted IP header at e->in_ip: LB_GO,
 *                              LB_PASS, or LB_TRUNC (cut off: counted);
 *   lb_icmp_write(skb, p, e, was, to)  the rewrite of the headers;
 *   lb_rej_ip(eth, ip, icmp, p, q)     the refusal's own headers;
 *
 * (lb6_* for IPv6), and LB_COUNT_TRUNC() counts a cut-off quote.
 */

/* lb_icmp_scratch: lb_icmp's variables, the quote, its conntrack key and
 * the headers as they were and as they become (from_pod_l2's stack has no
 * room for them). */
struct LBF(icmp_scratch) {
	struct LBF(icmp_err) e;
	struct LBF(ct_key) k;
	struct LBF(icmp_hdrs) was, to;
};

LB_SCRATCH(LBF(icmp_scratch), struct LBF(icmp_scratch));

/* lb_icmp_quote: whether ICMP packet p is an error quoting a TCP or UDP
 * packet whole up to its ports (LB_GO, the quote in e); echo and the
 * other informational messages are LB_PASS. */
static __always_inline int LBF(icmp_quote)(struct __sk_buff *skb, const struct LBF(pkt) *p, struct LBF(icmp_err) *e)
{
	struct lb_icmphdr ih;
	__be16 ports[2];
	int ret;

	if (!p->has_l4 || bpf_skb_load_bytes(skb, p->l4off, &ih, sizeof(ih)) < 0)
		return LB_PASS;
	if (!LBF(icmp_quotes)(skb, ih.type))
		return LB_PASS;
	e->in_ip = p->l4off + sizeof(ih);
	ret = LBF(icmp_inner)(skb, e);
	if (ret == LB_TRUNC)
		goto trunc;
	if (ret != LB_GO)
		return LB_PASS;
	if (bpf_skb_load_bytes(skb, e->in_l4, ports, sizeof(ports)) < 0)
		goto trunc;
	e->sport = ports[0];
	e->dport = ports[1];
	e->check = ih.checksum;
	return LB_GO;
trunc:
	LB_COUNT_TRUNC();
	return LB_PASS;
}

/* lb_icmp translates an ICMP error p about a translated flow.
 * dir LB_CT_REV: an error travelling towards the client about client ->
 * backend (e.g. port unreachable from the backend): the quote becomes
 * client -> vip:vport again, an outer source equal to the backend too.
 * dir LB_CT_FWD: an error sent by the client about a reply it got from
 * vip:vport (e.g. port unreachable for a UDP reply): the quote becomes
 * backend:bport -> client, an outer destination equal to the vip the
 * backend. Either way the quote's reply direction is the conntrack key.
 * For a hairpinned flow (the client is the backend, seen by itself as the
 * hairpin address) that address is translated too: REV (the pod's error
 * about the request it got, leaving it towards the hairpin address)
 * becomes vip -> pod about pod -> vip; FWD (the pod's error about the
 * reply it got) comes from the hairpin address, quoting backend -> hairpin
 * address, as the backend side saw the flow. */
static __always_inline int LBF(icmp)(struct __sk_buff *skb, const struct LBF(pkt) *p, __u8 dir)
{
	struct LBF(icmp_scratch) *s;
	struct LBF(ct) *ct;
	__u32 zero = 0;

	s = bpf_map_lookup_elem(&LBF(icmp_scratch), &zero);
	if (!s || LBF(icmp_quote)(skb, p, &s->e) != LB_GO)
		return TC_ACT_OK;
	LBF(ct_key_set)(&s->k, &s->e.daddr, &s->e.saddr, s->e.dport, s->e.sport, s->e.proto, dir);
	ct = bpf_map_lookup_elem(&LBF(conntrack), &s->k);
	if (!ct)
		return TC_ACT_OK;
	s->was.outer_s = p->saddr;
	s->was.outer_d = p->daddr;
	s->was.quote_s = s->e.saddr;
	s->was.quote_d = s->e.daddr;
	s->was.quote_sport = s->e.sport;
	s->was.quote_dport = s->e.dport;
	s->to = s->was;
	if (dir == LB_CT_REV) {
		s->to.quote_d = ct->addr;
		s->to.quote_dport = ct->port;
		if (LB_ADDR_EQ(&p->saddr, &s->e.daddr))
			s->to.outer_s = ct->addr;
		if (ct->flags & LB_CT_HAIRPIN) {
			s->to.quote_s = ct->client;
			if (LB_IS_HAIRPIN(&p->daddr))
				s->to.outer_d = ct->client;
		}
	} else {
		s->to.quote_s = ct->addr;
		s->to.quote_sport = ct->port;
		if (LB_ADDR_EQ(&p->daddr, &s->e.saddr))
			s->to.outer_d = ct->addr;
		if (ct->flags & LB_CT_HAIRPIN) {
			LB_SET_HAIRPIN(&s->to.quote_d);
			LB_SET_HAIRPIN(&s->to.outer_s);
		}
	}
	if (LBF(icmp_write)(skb, p, &s->e, &s->was, &s->to) < 0) {
		LB_COUNT(ERROR);
		return TC_ACT_SHOT;
	}
	LB_COUNT(ICMP);
	return TC_ACT_OK;
}

/* lb_reject_pkt: a Service without backends refuses at once, as
 * kube-proxy's REJECT does: a TCP SYN or a UDP datagram p becomes, in
 * place, an ICMP port unreachable from the clusterIP to the client,
 * quoting the packet's IP header and its first L4 bytes, and goes back
 * where it came from (lb_rej_send). The client's kernel turns it into
 * ECONNREFUSED for a connecting TCP socket and a connected UDP one. What
 * cannot be answered (lb_rej_read: a flow's later segments, later
 * fragments, IP options or extension headers, CHECKSUM_COMPLETE) is
 * dropped and counted as before. Returns TC_ACT_REDIRECT (the packet is
 * now the ICMP error) or TC_ACT_SHOT (counted).
 *
 * The packet grows by the new IP and ICMP headers (bpf_skb_adjust_room
 * after the MAC header: the old IP header stays where it is and becomes
 * the quote) and is cut after LB_REJ_TCP_QUOTE or LB_REJ_UDP_QUOTE quoted
 * L4 bytes. A packet from a local socket is CHECKSUM_PARTIAL: its
 * csum_start still points at the L4 header, now the quote, and a device
 * without checksum offload would "complete" the quoted checksum field,
 * changing the ICMP message after its checksum was computed. So that field
 * gets the value such a completion leaves unchanged (F = ~fold(sum + F),
 * i.e. F = -sum/2 in one's complement arithmetic, 2 being invertible mod
 * 0xffff; lb_rej_read): the bytes sent are final either way. Nobody checks
 * a quoted checksum. */
static __always_inline int LBF(reject_pkt)(struct __sk_buff *skb, const struct LBF(pkt) *p)
{
	struct LBF(rej) r = {};
	__u32 q, sum;
	int summed, ret;

	q = lb_rej_read(skb, p->proto, p->tcp_syn, p->tcp_ack, p->has_l4, p->l4off, &r.qip, sizeof(r.qip), r.eth, r.ql4, &summed);
	if (!q)
		goto drop;
	sum = LBF(rej_ip)(r.eth, &r.ip, &r.icmp, p, q);
	sum += lb_sum16(&r.icmp, (sizeof(r.icmp) + sizeof(r.qip)) / 2);
	sum += lb_rej_quote_sum(r.ql4, q);
	r.icmp.checksum = ~lb_csum_fold(sum);

	/* From here on the packet is changed: a failure drops it. */
	ret = lb_rej_send(skb, r.eth, sizeof(r.ip) + sizeof(r.icmp), sizeof(r.qip), q, summed);
	if (ret == LB_REJ_DROP)
		goto drop;
	if (ret == LB_REJ_FAIL)
		goto fail;
	LB_COUNT(REJECT);
	return ret;
drop:
	LB_COUNT(NO_BACKEND);
	return TC_ACT_SHOT;
fail:
	LB_COUNT(ERROR);
	return TC_ACT_SHOT;
}
