/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * lb6.h: the Service load balancer of lb.h for IPv6: its own maps (lb6_*,
 * beside the IPv4 ones; service ids from the one lb_meta counter, backend
 * ports in the shared lb_bports prefilter), the same conntrack scheme
 * (a forward and a reverse entry per flow), DNAT from pods and reverse NAT
 * towards them, ICMPv6 errors about a translated flow translated too.
 *
 * What differs from IPv4:
 *   - no IP header checksum; the TCP/UDP (and ICMPv6) checksum covers a
 *     pseudo-header with the 128-bit addresses. It is updated here (RFC
 *     1624, over the addresses' words) and written with the bytes it
 *     covers, so the packet's sum does not change and a CHECKSUM_COMPLETE
 *     skb->csum stays right with no helper;
 *   - extension headers before the L4 header: walked up to
 *     LB6_MAX_EXTHDRS; beyond, the packet goes to the stack untouched and
 *     LB_STAT_EXTHDR_PASS rises;
 *   - fragments carry a 32-bit id in a fragment header;
 *   - informational ICMPv6 (echo, NDP, MLD) is never touched: only errors
 *     (types 1-4) quote a packet.
 *   - hairpin (a pod reaching itself through a Service): the source
 *     becomes LB6_HAIRPIN_IP (100::a9fe:2a01, in the discard-only prefix
 *     100::/64 of RFC 6666, so no real host has it), as lb.h does with
 *     169.254.42.1; ICMPv6 errors of a hairpinned flow are translated too
 *     (lb6_icmp).
 *   - sessionAffinity ClientIP: lb6_affinity, as lb.h's lb_affinity
 *     (lb_fam.h's pick_backend builds its key and value in a per-CPU
 *     scratch: from_pod's stack has no 56 bytes to spare).
 * NodePort: nodeport6.h; host routing: host6.h.
 */
#ifndef VNETLAB_LB6_H
#define VNETLAB_LB6_H

#include "lb.h"

/* As many as IPv4: --extra-services generates the same count per family. */
#define LB6_MAX_SERVICES LB_MAX_SERVICES
#define LB6_MAX_BACKENDS LB_MAX_BACKENDS
#define LB6_MAX_EXTHDRS  4 /* extension headers walked before the L4 header */

/* Next-header values (linux/ipv6.h's NEXTHDR_*, which needs libc headers). */
#define LB6_HOP      0
#define LB6_ROUTING  43
#define LB6_FRAGMENT 44
#define LB6_DEST     60
#define LB6_ICMP     58

/* ICMPv6 errors that quote the packet that caused them. */
#define LB6_ICMP_ERR_MAX 4 /* 1 unreachable, 2 too big, 3 time exceeded, 4 parameter problem */

#define IP6_OFF       ETH_HLEN
#define IP6_HLEN      40
#define IP6_SADDR_OFF (IP6_OFF + 8)

struct lb6_addr {
	__be32 w[4];
};

struct lb6_hdr {
	__be32 vtc_flow; /* version, traffic class, flow label */
	__be16 payload_len;
	__u8 nexthdr;
	__u8 hop_limit;
	struct lb6_addr saddr, daddr;
};

/* As lb_ct: FWD addr:port = backend (and its slot), REV addr:port =
 * vip:vport. */
struct lb6_ct {
	struct lb6_addr addr;
	struct lb6_addr client;
	__be16 port;
	__u8 flags;
	__u8 pad;
	__u32 svc_id;
	__u16 slot;
	__u16 pad2;
};


/* lb6_fold16: the key of an IPv6 address in lb6_vip16 (lb.h's lb_vip16
 * for IPv6, in front of the lb6_services lookup, whose key, with a reply's
 * ephemeral port in it, lands in a cold bucket of a 4 MB table): the xor
 * of its four 32-bit words, as loaded, and of that word's two halves
 * (internal/datapath/tcbpf's fold16 is its twin). A /16 would not do:
 * every ULA clusterIP and pod address starts fdxx. */
static __always_inline __u32 lb6_fold16(const struct lb6_addr *a)
{
	__u32 x = a->w[0] ^ a->w[1] ^ a->w[2] ^ a->w[3];

	return (x >> 16) ^ (x & 0xffff);
}

/* The structs of lb_types_fam.h, then lb6_services, lb6_backends,
 * lb6_slots, lb6_conntrack, lb6_frags, lb6_stats and lb6_count
 * lb6_affinity, lb6_vip16, lb6_maybe_vip (lb_maps_fam.h): lb.h's, written
 * once. */
#define LBF(n)          lb6_##n
#define LB_ADDR         struct lb6_addr
#define LB_IPHDR        struct lb6_hdr
#define LB_FRAG_ID      __be32
#include "lb_types_fam.h"
#define LBF(n)          lb6_##n
#define LB_FAM_SERVICES LB6_MAX_SERVICES
#define LB_FAM_BACKENDS LB6_MAX_BACKENDS
#define LB_FAM_STATS    LB_STAT_MAX
#define LB_FAM_ADDR     struct lb6_addr
#define LB_FAM_VIP16(a) lb6_fold16(a)
#include "lb_maps_fam.h"

/* LB_TAIL_ARRAY: a program array holding prog alone, at 0, for a tail
 * call. Pinned, as the kernel empties a program array when its last user
 * reference goes (Plane.Close); every load puts its own program in
 * (cilium/ebpf fills .values). */
#define LB_TAIL_ARRAY(name, prog)                            \
	struct {                                             \
		__uint(type, BPF_MAP_TYPE_PROG_ARRAY);       \
		__uint(max_entries, 1);                      \
		__uint(key_size, sizeof(__u32));             \
		__uint(pinning, LIBBPF_PIN_BY_NAME);         \
		__array(values, int(struct __sk_buff *));    \
	} name SEC(".maps") = {                              \
		.values = { [0] = (void *)&prog },           \
	}

/* lb6_tail: the program lb6_from_pod_pkt tail-calls, with a stack of its
 * own (the callers' frames are at 456 of 512 bytes). */
#define LB6_TAIL_REJECT 0
int lb6_reject(struct __sk_buff *skb);
LB_TAIL_ARRAY(lb6_tail, lb6_reject);

/* LB6_HAIRPIN_IP: 100::a9fe:2a01, word by word in network order. */
#define LB6_HAIRPIN_W0 bpf_htonl(0x01000000)
#define LB6_HAIRPIN_W3 bpf_htonl(0xa9fe2a01)

static __always_inline int lb6_is_hairpin(const struct lb6_addr *a)
{
	return a->w[0] == LB6_HAIRPIN_W0 && a->w[1] == 0 && a->w[2] == 0 && a->w[3] == LB6_HAIRPIN_W3;
}

static __always_inline void lb6_set_hairpin(struct lb6_addr *a)
{
	a->w[0] = LB6_HAIRPIN_W0;
	a->w[1] = 0;
	a->w[2] = 0;
	a->w[3] = LB6_HAIRPIN_W3;
}

static __always_inline int lb6_addr_eq(const struct lb6_addr *a, const struct lb6_addr *b)
{
	return ((a->w[0] ^ b->w[0]) | (a->w[1] ^ b->w[1]) | (a->w[2] ^ b->w[2]) | (a->w[3] ^ b->w[3])) == 0;
}

/* lb6_addr_diff: what replacing from by to adds to a one's complement sum. */
static __always_inline __u32 lb6_addr_diff(const struct lb6_addr *from, const struct lb6_addr *to)
{
	__u32 s = 0;

#pragma unroll
	for (int i = 0; i < 4; i++)
		s = lb_csum_add(lb_csum_add(s, ~from->w[i]), to->w[i]);
	return s;
}

/* lb6_csum_apply: a checksum field after the bytes it covers changed by diff. */
static __always_inline __u16 lb6_csum_apply(__u16 check, __u32 diff)
{
	return ~lb_csum_fold(lb_csum_add((__u16)~check, diff));
}

/* A parsed IPv6 TCP/UDP packet (or an ICMPv6 one: ports are then zero). */
struct lb6_pkt {
	struct lb6_addr saddr, daddr;
	__be32 frag_id;
	__be16 sport, dport;
	__u16 l4_check;
	__u8 proto;
	__u8 has_l4;     /* the L4 header is in this packet (not a later fragment) */
	__u8 first_frag;
	__u8 tcp_syn, tcp_ack, tcp_rst;
	__u32 l4off;     /* from the start of the frame */
};

/* lb6_parse_l4 and lb6_parse_later: lb.h's, written once (lb_parse_fam.h). */
#define LBF(n)                     lb6_##n
#define LB_LOAD(skb, off, d, n)    bpf_skb_load_bytes(skb, off, d, n)
#include "lb_parse_fam.h"

/* lb6_parse fills p for IPv6 TCP, UDP and ICMPv6 after at most
 * LB6_MAX_EXTHDRS extension headers (hop-by-hop, routing, destination
 * options, fragment). Everything else is LB_PASS, left untouched: other
 * protocols, AH/ESP, no next header, cut-off headers (counted), longer
 * chains (counted). The payload length is never read: jumbograms (0, with
 * a hop-by-hop jumbo option) and BIG TCP's GSO packets (0, without) parse
 * like any packet. A later fragment is LB_GO only when its first fragment
 * was seen (ports from lb6_frags). */
static __always_inline int lb6_parse(struct __sk_buff *skb, struct lb6_pkt *p)
{
	struct lb6_hdr ip;
	__u32 off = IP6_OFF + IP6_HLEN;
	__u8 nh, later = 0;

	if (skb->protocol != bpf_htons(ETH_P_IPV6))
		return LB_PASS;
	/* A helper, not lb_load: headers copied from the linear data are
	 * spilled scalars the verifier of kernel 6.18 then tracks for
	 * precision back across its helper path and trips ("verifier bug:
	 * stack slot 6, total slots 0"). Same for the variable offsets below. */
	if (bpf_skb_load_bytes(skb, IP6_OFF, &ip, sizeof(ip)) < 0)
		goto trunc;
	if ((ip.vtc_flow & bpf_htonl(0xf0000000)) != bpf_htonl(0x60000000))
		return LB_PASS;
	__builtin_memset(p, 0, sizeof(*p));
	p->saddr = ip.saddr;
	p->daddr = ip.daddr;
	p->has_l4 = 1;
	nh = ip.nexthdr;

#pragma unroll
	for (int i = 0; i < LB6_MAX_EXTHDRS; i++) {
		__u8 h[8];

		if (nh == IPPROTO_TCP || nh == IPPROTO_UDP || nh == LB6_ICMP)
			break;
		if (nh != LB6_HOP && nh != LB6_ROUTING && nh != LB6_DEST && nh != LB6_FRAGMENT)
			return LB_PASS; /* AH, ESP, no next header, anything else */
		if (bpf_skb_load_bytes(skb, off, h, sizeof(h)) < 0)
			goto trunc;
		if (nh == LB6_FRAGMENT) {
			__u16 fo = bpf_ntohs(*(__be16 *)&h[2]);

			p->frag_id = *(__be32 *)&h[4];
			p->first_frag = !(fo & 0xfff8) && (fo & 1);
			later = (fo & 0xfff8) != 0;
			off += 8;
		} else {
			off += ((__u32)h[1] + 1) * 8;
		}
		nh = h[0];
		if (later)
			break; /* no L4 header in this packet */
	}
	if (!later && nh != IPPROTO_TCP && nh != IPPROTO_UDP && nh != LB6_ICMP) {
		if (nh == LB6_HOP || nh == LB6_ROUTING || nh == LB6_DEST || nh == LB6_FRAGMENT)
			lb6_count(LB_STAT_EXTHDR_PASS);
		return LB_PASS;
	}
	p->proto = nh;
	p->l4off = off;
	if (later)
		return lb6_parse_later(p);
	if (nh == LB6_ICMP)
		return LB_GO; /* lb_icmp_quote reads (and bounds) the rest */
	if (lb6_parse_l4(skb, p) == LB_GO)
		return LB_GO;
trunc:
	lb6_count(LB_STAT_TRUNC_PASS);
	return LB_PASS;
}

/* lb6_rewrite gives packet p the addresses and ports of to, the TCP/UDP
 * checksum by lb_l4_csum, as lb_rewrite's (a UDP checksum of 0, illegal
 * in IPv6, stays as it came); a later fragment has no L4 header (its
 * first fragment's checksum covered the addresses). */
static __always_inline int lb6_rewrite(struct __sk_buff *skb, const struct lb6_pkt *p, const struct lb6_tuple *to)
{
	struct {
		__be16 sport, dport;
	} ports_to = { to->sport, to->dport };
	__u32 addrs;
	__u16 l4;

	if (bpf_skb_store_bytes(skb, IP6_SADDR_OFF, &to->saddr, 2 * sizeof(struct lb6_addr), 0) < 0)
		return -1;
	if (!p->has_l4)
		return 0;
	addrs = lb_csum_add(lb6_addr_diff(&p->saddr, &to->saddr), lb6_addr_diff(&p->daddr, &to->daddr));
	l4 = lb_l4_csum(p->l4_check, p->proto, lb_ip_summed(skb), addrs, lb_ports_diff(p->sport, p->dport, to->sport, to->dport));
	if (bpf_skb_store_bytes(skb, p->l4off, &ports_to, sizeof(ports_to), 0) < 0)
		return -1;
	return bpf_skb_store_bytes(skb, p->l4off + (p->proto == IPPROTO_TCP ? TCP_CSUM : UDP_CSUM), &l4, sizeof(l4), 0);
}

static __always_inline __u32 lb6_hash(const struct lb6_pkt *p)
{
	__u32 h = p->proto ^ (((__u32)p->sport << 16) | p->dport);

#pragma unroll
	for (int i = 0; i < 4; i++)
		h ^= p->saddr.w[i] ^ (p->daddr.w[i] * 0x9e3779b1);
	return lb_hash_mix(h);
}

/* lb6_ct_close, lb6_ct_key_of, lb6_forget_stale, lb6_backend_slot,
 * lb6_affinity_keep, lb6_svc_of and lb6_ct_new: lb.h's, written once
 * (lb_fam.h). */
#define LBF(n)           lb6_##n
#define LB_ADDR          struct lb6_addr
#define LB_ADDR_EQ(a, b) lb6_addr_eq(a, b)
#include "lb_fam.h"

/* ICMPv6 errors quote the packet that caused them (its IPv6 header and as
 * much of the rest as fits): lb_icmp_fam.h translates one about a
 * translated flow. IPv6's part: which types quote a packet
 * (lb6_icmp_quotes: errors, types 1-4), the quoted header (lb6_icmp_inner)
 * and the rewrite (lb6_icmp_write): the addresses and port, and the
 * ICMPv6 checksum (which covers the outer addresses, through its
 * pseudo-header, and the quote) by exactly their change. A quote cut
 * before its ports (counted), or with extension headers, is left alone; so
 * is a CHECKSUM_PARTIAL ICMPv6 packet (errors are built whole). */
static __always_inline int lb6_icmp_quotes(struct __sk_buff *skb, __u8 type)
{
	if (type == 0 || type > LB6_ICMP_ERR_MAX)
		return 0; /* informational: echo, NDP, MLD */
	return lb_ip_summed(skb) != LB_CSUM_PARTIAL;
}

static __always_inline int lb6_icmp_inner(struct __sk_buff *skb, struct lb6_icmp_err *e)
{
	struct lb6_hdr in;

	if (bpf_skb_load_bytes(skb, e->in_ip, &in, sizeof(in)) < 0)
		return LB_TRUNC;
	if ((in.vtc_flow & bpf_htonl(0xf0000000)) != bpf_htonl(0x60000000) ||
	    (in.nexthdr != IPPROTO_TCP && in.nexthdr != IPPROTO_UDP))
		return LB_PASS;
	e->in_l4 = e->in_ip + IP6_HLEN;
	e->saddr = in.saddr;
	e->daddr = in.daddr;
	e->proto = in.nexthdr;
	return LB_GO;
}

/* lb6_icmp_diff: what going from a to b adds to the ICMPv6 checksum (the
 * outer addresses through its pseudo-header, the quote as its payload). */
static __always_inline __u32 lb6_icmp_diff(const struct lb6_icmp_hdrs *a, const struct lb6_icmp_hdrs *b)
{
	__u32 d = lb_csum_add(lb6_addr_diff(&a->outer_s, &b->outer_s), lb6_addr_diff(&a->outer_d, &b->outer_d));

	d = lb_csum_add(d, lb_csum_add(lb6_addr_diff(&a->quote_s, &b->quote_s), lb6_addr_diff(&a->quote_d, &b->quote_d)));
	return lb_csum_add(d, lb_ports_diff(a->quote_sport, a->quote_dport, b->quote_sport, b->quote_dport));
}

/* lb6_icmp_write gives ICMPv6 error p (quoting e) the headers of to (was:
 * as they are), the checksum by their difference: four stores. */
static __always_inline int lb6_icmp_write(struct __sk_buff *skb, const struct lb6_pkt *p, const struct lb6_icmp_err *e,
					  const struct lb6_icmp_hdrs *was, const struct lb6_icmp_hdrs *to)
{
	__u16 check = lb6_csum_apply(e->check, lb6_icmp_diff(was, to));

	if (bpf_skb_store_bytes(skb, IP6_SADDR_OFF, &to->outer_s, 2 * sizeof(struct lb6_addr), 0) < 0 ||
	    bpf_skb_store_bytes(skb, e->in_ip + 8, &to->quote_s, 2 * sizeof(struct lb6_addr), 0) < 0 ||
	    bpf_skb_store_bytes(skb, e->in_l4, &to->quote_sport, 2 * sizeof(__be16), 0) < 0 ||
	    bpf_skb_store_bytes(skb, p->l4off + ICMP_CSUM, &check, sizeof(check), 0) < 0)
		return -1;
	return 0;
}

/* lb6_rej_ip: IPv6's headers of the port unreachable lb6_reject_pkt makes
 * of p (q quoted L4 bytes; only a packet without extension headers is
 * answered, the quote then a fixed 40 bytes of header): the EtherType, the
 * IPv6 header (hop limit 64) and the ICMPv6 type (1) and code (4). Returns
 * the checksum's pseudo-header sum (addresses, length, next header). */
static __always_inline __u32 lb6_rej_ip(__u8 *eth, struct lb6_hdr *ip, struct lb_icmphdr *icmp, const struct lb6_pkt *p, __u32 q)
{
	__u32 len = sizeof(struct lb_icmphdr) + IP6_HLEN + q; /* the ICMPv6 message */

	eth[12] = 0x86; /* ETH_P_IPV6 */
	eth[13] = 0xdd;
	ip->vtc_flow = bpf_htonl(0x6 << 28);
	ip->payload_len = bpf_htons(len);
	ip->nexthdr = LB6_ICMP;
	ip->hop_limit = 64;
	ip->saddr = p->daddr;
	ip->daddr = p->saddr;
	icmp->type = 1; /* destination unreachable */
	icmp->code = 4; /* port unreachable */
	return lb_sum16(&ip->saddr, 2 * sizeof(struct lb6_addr) / 2) + bpf_htons(len) + bpf_htons(LB6_ICMP);
}

/* lb6_reject_tail: lb6_reject_pkt in a program of its own (lb6_tail), so
 * that its stack is not lb6_from_pod_pkt's; counted as a drop when the
 * tail call fails. */
static __always_inline int lb6_reject_tail(struct __sk_buff *skb)
{
	bpf_tail_call(skb, &lb6_tail, LB6_TAIL_REJECT); /* lb6_reject: does not return */
	lb6_count(LB_STAT_NO_BACKEND);
	return TC_ACT_SHOT;
}

/* lb6_rnat_pkt, lb6_rev_key, lb6_from_pod_pkt, lb6_to_pod_pkt, lb6_from_pod
 * and lb6_to_pod (lb_pod_fam.h), lb6_icmp and lb6_reject_pkt
 * (lb_icmp_fam.h): lb.h's, written once. */
#define LBF(n)               lb6_##n
#define LB_ADDR              struct lb6_addr
#define LB_ADDR_EQ(a, b)     lb6_addr_eq(a, b)
#define LB_IS_HAIRPIN(a)     lb6_is_hairpin(a)
#define LB_SET_HAIRPIN(a)    lb6_set_hairpin(a)
#define LB_COUNT_HAIRPIN()   do {} while (0)
#define LB_COUNT_TRUNC()     lb6_count(LB_STAT_TRUNC_PASS)
#define LB_PICK(svc, p, s)   lb6_pick_backend(svc, p, lb6_hash(p), s)
#define LB_REJECT(skb, p)    lb6_reject_tail(skb)
#define LB_ICMP_PROTO        LB6_ICMP
#include "lb_pod_fam.h"

#endif /* VNETLAB_LB6_H */
