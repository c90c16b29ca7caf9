// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* policy.c: vnetlab's NetworkPolicy tc programs (policy.h has the design,
 * policy_fam.h the decisions, written once for both families). */
#include <linux/ip.h>
#include "policy.h"

/* IPv4 */

struct pol4_pkt {
	__be32 saddr, daddr;
	__be32 frag_id;
	__be16 sport, dport;
	__u8 proto;
	__u8 kind; /* POL_PLAIN, POL_FRAG_FIRST, POL_FRAG_LATER */
};

/* pol4_parse: addresses, protocol and ports of an IPv4 packet (IP options
 * skipped by ihl). A later fragment has no ports; a cut-off header is
 * POL_BROKEN (its addresses filled when they were read). */
static __always_inline int pol4_parse(struct __sk_buff *skb, struct pol4_pkt *p)
{
	struct iphdr ip;
	__be16 ports[2];
	__u16 fo;

	__builtin_memset(p, 0, sizeof(*p));
	if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip, sizeof(ip)) < 0)
		return POL_BROKEN;
	if (ip.version != 4)
		return POL_PASS;
	p->saddr = ip.saddr;
	p->daddr = ip.daddr;
	if (ip.ihl < 5)
		return POL_BROKEN;
	p->proto = ip.protocol;
	p->frag_id = ip.id;
	fo = bpf_ntohs(ip.frag_off);
	if (fo & 0x1fff) {
		p->kind = POL_FRAG_LATER;
		return POL_GO;
	}
	if (fo & 0x2000)
		p->kind = POL_FRAG_FIRST;
	if (p->proto != IPPROTO_TCP && p->proto != IPPROTO_UDP && p->proto != POL_SCTP)
		return POL_GO;
	if (bpf_skb_load_bytes(skb, ETH_HLEN + ip.ihl * 4, ports, sizeof(ports)) < 0)
		return POL_BROKEN;
	p->sport = ports[0];
	p->dport = ports[1];
	return POL_GO;
}

#define POLF(n)           pol4_##n
#define POL_ADDR          __be32
#define POL_ADDR_BITS     32
#define POL_IS_HAIRPIN(a) (*(a) == bpf_htonl(0xa9fe2a01)) /* 169.254.42.1: lb.h's LB_HAIRPIN_IP */
#include "policy_fam.h"

/* IPv6 */

struct pol6_addr {
	__be32 w[4];
};

struct pol6_pkt {
	struct pol6_addr saddr, daddr;
	__be32 frag_id;
	__be16 sport, dport;
	__u8 proto;
	__u8 kind;
};

struct pol6_hdr {
	__be32 vtc_flow;
	__be16 payload_len;
	__u8 nexthdr;
	__u8 hop_limit;
	struct pol6_addr saddr, daddr;
};

/* pol6_parse: pol4_parse for IPv6, after at most POL_MAX_EXTHDRS extension
 * headers (hop-by-hop, routing, destination options, fragment, AH); a
 * longer chain is POL_BROKEN. The protocol is the first header that is
 * none of those (ESP and "no next header" are protocols without ports).
 * Neighbour discovery is POL_PASS: no connection of a pod's, and an
 * isolated pod must still resolve its peers. */
static __always_inline int pol6_parse(struct __sk_buff *skb, struct pol6_pkt *p)
{
	struct pol6_hdr ip;
	__u32 off = ETH_HLEN + sizeof(ip);
	__u8 nh, done = 0;

	__builtin_memset(p, 0, sizeof(*p));
	if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip, sizeof(ip)) < 0)
		return POL_BROKEN;
	if ((ip.vtc_flow & bpf_htonl(0xf0000000)) != bpf_htonl(0x60000000))
		return POL_PASS;
	p->saddr = ip.saddr;
	p->daddr = ip.daddr;
	nh = ip.nexthdr;

#pragma unroll
	for (int i = 0; i < POL_MAX_EXTHDRS; i++) {
		__u8 h[8];

		if (nh != POL_HOP && nh != POL_ROUTING && nh != POL_DEST && nh != POL_FRAGMENT && nh != POL_AH) {
			done = 1;
			break;
		}
		if (bpf_skb_load_bytes(skb, off, h, sizeof(h)) < 0)
			return POL_BROKEN;
		if (nh == POL_FRAGMENT) {
			__u16 fo = bpf_ntohs(*(__be16 *)&h[2]);

			p->frag_id = *(__be32 *)&h[4];
			if (fo & 0xfff8) {
				p->proto = h[0];
				p->kind = POL_FRAG_LATER;
				return POL_GO;
			}
			if (fo & 1)
				p->kind = POL_FRAG_FIRST;
			off += 8;
		} else if (nh == POL_AH) {
			off += ((__u32)h[1] + 2) * 4;
		} else {
			off += ((__u32)h[1] + 1) * 8;
		}
		nh = h[0];
	}
	if (!done && (nh == POL_HOP || nh == POL_ROUTING || nh == POL_DEST || nh == POL_FRAGMENT || nh == POL_AH))
		return POL_BROKEN;
	p->proto = nh;
	if (nh == POL_ICMP6) {
		__u8 type;

		if (bpf_skb_load_bytes(skb, off, &type, 1) < 0)
			return POL_BROKEN;
		if (type >= 133 && type <= 137) {
			pol_count(POL_STAT_NDP);
			return POL_PASS;
		}
		return POL_GO;
	}
	if (nh != IPPROTO_TCP && nh != IPPROTO_UDP && nh != POL_SCTP)
		return POL_GO;
	{
		__be16 ports[2];

		if (bpf_skb_load_bytes(skb, off, ports, sizeof(ports)) < 0)
			return POL_BROKEN;
		p->sport = ports[0];
		p->dport = ports[1];
	}
	return POL_GO;
}

/* 100::a9fe:2a01: lb6.h's LB6_HAIRPIN_IP. */
static __always_inline int pol6_is_hairpin(const struct pol6_addr *a)
{
	return a->w[0] == bpf_htonl(0x01000000) && a->w[1] == 0 && a->w[2] == 0 && a->w[3] == bpf_htonl(0xa9fe2a01);
}

#define POLF(n)           pol6_##n
#define POL_ADDR          struct pol6_addr
#define POL_ADDR_BITS     128
#define POL_IS_HAIRPIN(a) pol6_is_hairpin(a)
#include "policy_fam.h"

/* The programs: a pod's interface, in its own namespace. */

SEC("tc")
int pol_egress(struct __sk_buff *skb)
{
	if (skb->protocol == bpf_htons(ETH_P_IP))
		return pol4_egress(skb);
	if (skb->protocol == bpf_htons(ETH_P_IPV6))
		return pol6_egress(skb);
	return POL_ACCEPT;
}

SEC("tc")
int pol_ingress(struct __sk_buff *skb)
{
	if (skb->protocol == bpf_htons(ETH_P_IP))
		return pol4_ingress(skb);
	if (skb->protocol == bpf_htons(ETH_P_IPV6))
		return pol6_ingress(skb);
	return POL_ACCEPT;
}

char __license[] SEC("license") = "Dual BSD/GPL";
