/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * lb_types_fam.h: the structs of lb.h and lb6.h whose layout is the same
 * for IPv4 and IPv6 but for the address, written once. Not a header of its
 * own: lb.h includes it for IPv4 and lb6.h for IPv6, after defining
 *
 *   LBF(name)  the family's name: lb_##name or lb6_##name (struct
 *              lb_icmp_err, struct lb6_rej, ...);
 *   LB_ADDR    the address type: __be32 or struct lb6_addr;
 *   LB_IPHDR   the IP header's type: struct iphdr or struct lb6_hdr;
 *   LB_FRAG_ID a fragment's id: __be16 or __be32.
 *
 * The macros are undefined again at the end. lb_ct is each family's own
 * (lb6_ct keeps its two addresses together), as is lb_pkt (IPv4's carries
 * its header checksum).
 */

/* Maps use network byte order for addresses and ports, as in the packet. */
struct LBF(svc_key) {
	LB_ADDR vip;
	__be16 port;
	__u8 proto; /* IPPROTO_TCP or IPPROTO_UDP */
	__u8 scope; /* LB_SCOPE_*: which clients the entry serves */
};

struct LBF(backend) {
	LB_ADDR ip;
	__be16 port;
	__u16 pad;
};

struct LBF(ct_key) {
	LB_ADDR saddr;
	LB_ADDR daddr;
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 dir; /* LB_CT_FWD or LB_CT_REV */
	__u16 pad;
};

struct LBF(frag_key) {
	LB_ADDR saddr;
	LB_ADDR daddr;
	LB_FRAG_ID id;
	__u8 proto;
	__u8 pad[sizeof(LB_FRAG_ID) - 1];
};

/* sessionAffinity ClientIP (lb_pick_backend): {client, affinity id} ->
 * the backend its last new flow got. */
struct LBF(affinity_key) {
	LB_ADDR client;
	__u32 svc_id;
};

struct LBF(affinity) {
	__u64 last_ns; /* bpf_ktime_get_ns of the client's last new flow */
	LB_ADDR ip;    /* the backend, and the slot it had */
	__be16 port;
	__u16 pad;
	__u32 slot;
};

/* What a translation makes of a packet's addresses (contiguous, as in the
 * header) and ports. */
struct LBF(tuple) {
	LB_ADDR saddr, daddr;
	__be16 sport, dport;
};

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
#undef LB_FRAG_ID
