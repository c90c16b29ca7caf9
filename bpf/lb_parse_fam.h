/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * lb_parse_fam.h: what lb_parse and lb6_parse do alike once the IP header
 * (and IPv6's extension headers) are behind them, written once. Not a
 * header of its own: lb.h and lb6.h include it before their parser, after
 * defining
 *
 *   LBF(name)                 the family's name: lb_##name or lb6_##name;
 *   LB_LOAD(skb, off, d, n)   how the family copies n bytes at off to d
 *                             (< 0: cut off): lb_load, or for IPv6
 *                             bpf_skb_load_bytes (lb6_parse says why).
 *
 * The macros are undefined again at the end.
 */

/* lb_parse_l4 takes p's ports, TCP flags and TCP/UDP checksum from its L4
 * header at p->l4off: LB_GO, or LB_TRUNC when it is cut off. */
static __always_inline int LBF(parse_l4)(struct __sk_buff *skb, struct LBF(pkt) *p)
{
	if (p->proto == IPPROTO_TCP) {
		__u8 hdr[20];

		/* The whole fixed header must be there: the checksum is at 16. */
		if (LB_LOAD(skb, p->l4off, hdr, sizeof(hdr)) < 0)
			return LB_TRUNC;
		p->sport = *(__be16 *)&hdr[0];
		p->dport = *(__be16 *)&hdr[2];
		p->tcp_syn = (hdr[13] & 0x02) != 0;
		p->tcp_ack = (hdr[13] & 0x10) != 0;
		p->tcp_rst = (hdr[13] & 0x04) != 0;
		p->l4_check = *(__u16 *)&hdr[16];
	} else {
		__be16 h[4];

		if (LB_LOAD(skb, p->l4off, h, sizeof(h)) < 0)
			return LB_TRUNC;
		p->sport = h[0];
		p->dport = h[1];
		p->l4_check = h[3];
	}
	return LB_GO;
}

/* lb_parse_later: p is a later fragment (no L4 header): LB_GO with the
 * ports its first fragment left in lb_frags, LB_PASS when none was seen
 * (or p is ICMP). */
static __always_inline int LBF(parse_later)(struct LBF(pkt) *p)
{
	struct LBF(frag_key) fk = { .saddr = p->saddr, .daddr = p->daddr, .id = p->frag_id, .proto = p->proto };
	struct lb_frag *f;

	if (p->proto != IPPROTO_TCP && p->proto != IPPROTO_UDP)
		return LB_PASS;
	f = bpf_map_lookup_elem(&LBF(frags), &fk);
	if (!f)
		return LB_PASS;
	p->sport = f->sport;
	p->dport = f->dport;
	p->has_l4 = 0;
	return LB_GO;
}

#undef LBF
#undef LB_LOAD
