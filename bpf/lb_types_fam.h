/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * lb_types_fam.h: the structs of lb.h and lb6.h whose layout is the same
 * for IPv4 and IPv6 but for the address, written once. Not a header of its
 * own: lb.h includes it for IPv4 and lb6.h for IPv6, after defining
 *
 *   LBF(name)  the family's name: lb_##name or lb6_##name (struct
 *              lb_icmp_err, struct lb6_rej, ...);
 *   LB_ADDR    the address type: __be32 or struct lb6_addr;
 *   LB_IPHDR   the IP header's type: struct iphdr or struct lb6_hdr.
 *
 * The macros are undefined again at the end.
 */

/* lb_icmp_err: an ICMP error's quote, read by lb_icmp_quote. */
struct LBF(icmp_err) {
	__u32 in_ip; /* offset of the quoted IP header */
	__u32 in_l4; /* offset of the quoted L4 header */
	LB_ADDR saddr, daddr;
	__be16 sport, dport;
	__u8 proto;
	__u16 check; /* the ICMP checksum */
};

/* lb_icmp_hdrs: the addresses of an ICMP error (outer) and of the packet
 * it quotes, with the quote's ports: what lb_icmp rewrites. */
struct LBF(icmp_hdrs) {
	LB_ADDR outer_s, outer_d; /* contiguous, as in the IP header */
	LB_ADDR quote_s, quote_d; /* the same */
	__be16 quote_sport, quote_dport;
};

/* lb_rej: the frame lb_reject_pkt writes, from its Ethernet header to the
 * end of the quote. */
struct LBF(rej) {
	__u8 pad[2]; /* so that the IP headers are 4-byte aligned on the stack */
	__u8 eth[ETH_HLEN];
	LB_IPHDR ip;
	struct lb_icmphdr icmp;
	LB_IPHDR qip;
	__u8 ql4[LB_REJ_TCP_QUOTE];
};

#undef LBF
#undef LB_ADDR
#undef LB_IPHDR
