/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * lb.h: vnetlab's Service load balancer for tc (clsact, direct action).
 *
 * A header so that other vnetlab programs (the veth-ebpf mode) can fold the
 * same translation into their own tc programs and share the pinned maps
 * (pinned by name under /sys/fs/bpf/vnetlab/<lab>/).
 *
 * Two entry points:
 *   lb_from_pod(skb)  packets leaving a pod: DNAT clusterIP:port -> backend
 *                     (pod eth0 egress, or node-side veth ingress);
 *   lb_to_pod(skb)    packets arriving at a pod: reverse NAT backend -> clusterIP
 *                     (pod eth0 ingress, or node-side veth egress).
 *
 * Conntrack: one LRU hash holds two entries per flow. The forward entry
 * (client:cport -> vip:vport) pins the flow to its backend; the reverse entry
 * is keyed by the reply tuple exactly as it will arrive (backend:bport ->
 * client:cport), so a reply costs one lookup.
 *
 * Hairpin (a pod reaching its own Service and landing on itself): the
 * packet would arrive with source == destination == the pod's own address
 * and the pod's kernel drops it as a martian (accept_local=0). So its source
 * is rewritten to LB_HAIRPIN_IP (like kube-proxy's masquerade, like Cilium's
 * 169.254.42.1). The pod answers LB_HAIRPIN_IP through its default route,
 * i.e. out of its eth0, where lb_from_pod sees the reply (both placements),
 * recognises the hairpin address and rewrites it back to vip:vport ->
 * pod:cport. Translated, a hairpinned packet (either way) goes straight
 * back into the pod that sent it (lb_from_pod_pkt's LB_TO_SENDER): at the
 * node end of its veth, out of that veth (lb_back_to_sender); with host
 * routing, by bpf_redirect_peer. It never crosses the node's routing or
 * netfilter, as kube-proxy's masqueraded hairpin reaches a policy enforcer
 * there as the pod's own traffic: a pod reaching itself is never judged by
 * NetworkPolicy, and the node's conntrack never sees the reply translated
 * back (vip:vport -> pod:cport) as a new flow of its own. On the pod's own
 * eth0 (placement pod) the node routes it back.
 *
 * Headers are read straight from the packet when they are in its linear
 * part, with bpf_skb_load_bytes otherwise (lb_load); writes use
 * bpf_skb_store_bytes (and, off the common path, the checksum helpers),
 * which unclone only the bytes they write. lb_rewrite computes checksums
 * itself, following the skb's ip_summed (CHECKSUM_PARTIAL packets from local
 * sockets and GSO packets carry only the pseudo-header sum).
 */
#ifndef VNETLAB_LB_H
#define VNETLAB_LB_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>

/* 169.254.42.1: source address of hairpinned connections (network order
 * built from host order so the constant reads naturally). */
#define LB_HAIRPIN_IP bpf_htonl(0xa9fe2a01)

#define LB_MAX_SERVICES (1 << 18)
#define LB_MAX_BACKENDS (1 << 20)
#define LB_MAX_FLOWS    (1 << 17) /* conntrack entries: two per flow */
#define LB_MAX_FRAGS    4096
#define LB_MAX_AFFINITY (1 << 16)

/* Maps use network byte order for addresses and ports, as in the packet.
 * lb_svc_key.scope (lb_types_fam.h). Every lookup is LB_SCOPE_ALL (pods,
 * the node's own sockets, and clients outside the node), except
 * nodeport_in's second one:
 * a frontend whose entry carries LB_SVC_EXTERNAL (a NodePort or external
 * IP of a Service with externalTrafficPolicy Local) has a second entry,
 * LB_SCOPE_EXTERNAL, with only this node's endpoints, for clients outside
 * the node; pods and the node itself reach every endpoint, as kube-proxy's
 * short-circuit does. */
#define LB_SCOPE_ALL      0
#define LB_SCOPE_EXTERNAL 1

struct lb_svc {
	__u32 id;     /* from lb_meta, never reused */
	__u16 count;  /* backends for new flows, in slots 0..count-1 */
	__u16 flags;  /* LB_SVC_* */
	__u32 affinity_timeout; /* seconds a client keeps its backend (LB_SVC_AFFINITY) */
	__u16 kept;   /* backends that take no new flow but keep theirs (terminating,
		       * still serving, beside ready ones): slots count..count+kept-1 */
	__u16 pad;
	__u32 affinity_id; /* whose memory sessionAffinity keeps: one id for every
			    * frontend of a Service port (0: this entry's own id) */
};

/* lb_affinity_id: the key under which svc's clients' backends are remembered. */
static __always_inline __u32 lb_affinity_id(const struct lb_svc *svc)
{
	return svc->affinity_id ? svc->affinity_id : svc->id;
}

/* lb_svc.flags */
#define LB_SVC_AFFINITY 0x1 /* sessionAffinity ClientIP: lb_affinity first */
#define LB_SVC_EXTERNAL 0x2 /* clients outside the node: the LB_SCOPE_EXTERNAL entry */

struct lb_backend_key {
	__u32 svc_id;
	__u32 slot;
};

enum { LB_CT_FWD = 1, LB_CT_REV = 2 };
enum { LB_CT_HAIRPIN = 1 };

/* FWD: addr:port = backend, slot = the Service's slot it was picked from
 * (where lb_backend_slot looks first). REV: addr:port = vip:vport, client =
 * the pod that opened the flow (the destination to restore after a
 * hairpin). */
struct lb_ct {
	__be32 addr;
	__be16 port;
	__u8 flags;
	__u8 pad;
	__be32 client;
	__u32 svc_id;
	__u16 slot;
	__u16 pad2;
};

struct lb_frag {
	__be16 sport;
	__be16 dport;
};

/* linux/icmp.h drags in libc headers (via linux/if.h): the few ICMP bits needed. */
#define ICMP_DEST_UNREACH   3
#define ICMP_SOURCE_QUENCH  4
#define ICMP_TIME_EXCEEDED  11
#define ICMP_PARAMETERPROB  12
struct lb_icmphdr {
	__u8 type;
	__u8 code;
	__sum16 checksum;
	__be32 rest;
};

/* How much of a TCP or UDP header an ICMP port unreachable of the Service
 * plane quotes (lb_reject_pkt). */
#define LB_REJ_TCP_QUOTE 20
#define LB_REJ_UDP_QUOTE 8

/* Counters, one enum for both families (tcbpf's Stats and Stats6 read them
 * by index), summed over CPUs by `vnetlab svc stats`. IPv4's lb_stats holds
 * the first LB_STAT_IPV4_MAX; IPv6's lb6_stats all of them. */
enum {
	LB_STAT_DNAT = 0,      /* packets translated clusterIP -> backend */
	LB_STAT_RNAT = 1,      /* packets translated back backend -> clusterIP */
	LB_STAT_CT_NEW = 2,    /* conntrack misses: new flows given a backend */
	LB_STAT_NO_BACKEND = 3,/* dropped: service without backends */
	LB_STAT_ICMP = 4,      /* ICMP errors whose quoted packet was translated */
	LB_STAT_FRAG = 5,      /* non-first fragments translated */
	LB_STAT_HAIRPIN = 6,   /* new flows whose backend is the client itself */
	LB_STAT_ERROR = 7,     /* dropped: a rewrite helper failed */
	LB_STAT_REJECT = 8,    /* answered with ICMP port unreachable: service without backends */
	LB_STAT_IPV4_MAX = 9,
	LB_STAT_EXTHDR_PASS = 9, /* IPv6: more extension headers than LB6_MAX_EXTHDRS: to the stack */
	LB_STAT_TRUNC_PASS = 10, /* IPv6: a cut-off header: to the stack untouched */
	LB_STAT_MAX = 11,
};

/* LB_SCRATCH: a per-CPU array of one vtype, not pinned: where a function
 * keeps the variables its callers' stack has no room for. */
#define LB_SCRATCH(name, vtype)                              \
	struct {                                             \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);     \
		__uint(max_entries, 1);                      \
		__type(key, __u32);                          \
		__type(value, vtype);                        \
	} name SEC(".maps")

/* Prefilters: most packets a pod sends or receives concern no Service, and
 * each hash lookup that proves it costs a cache miss (the key changes with
 * every connection's port). Two arrays (lookups inlined by the verifier,
 * one cache line each) say when a lookup can be skipped:
 *   lb_vip16[first 16 bits of an address]: Services with a clusterIP there
 *     (lb_maps_fam.h, with lb6_vip16);
 *   lb_bports[port]: backends listening on that port, the source port of
 *     every reply to reverse-NAT.
 * The Go side counts up and down as it adds and deletes Services. */
#define LB_PREFILTER(name)                                   \
	struct {                                             \
		__uint(type, BPF_MAP_TYPE_ARRAY);            \
		__uint(max_entries, 1 << 16);                \
		__type(key, __u32);                          \
		__type(value, __u32);                        \
		__uint(pinning, LIBBPF_PIN_BY_NAME);         \
	} name SEC(".maps")

/* The structs of lb_types_fam.h, then lb_services, lb_backends, lb_slots,
 * lb_conntrack, lb_frags, lb_affinity, lb_stats, lb_vip16, lb_count and
 * lb_maybe_vip (lb_maps_fam.h): written once with lb6.h's. */
#define LBF(n)          lb_##n
#define LB_ADDR         __be32
#define LB_IPHDR        struct iphdr
#define LB_FRAG_ID      __be16
#include "lb_types_fam.h"
#define LBF(n)          lb_##n
#define LB_FAM_SERVICES LB_MAX_SERVICES
#define LB_FAM_BACKENDS LB_MAX_BACKENDS
#define LB_FAM_STATS    LB_STAT_IPV4_MAX
#define LB_FAM_ADDR     __be32
#define LB_FAM_VIP16(a) (bpf_ntohl(*(a)) >> 16)
#include "lb_maps_fam.h"

LB_PREFILTER(lb_bports);

static __always_inline int lb_maybe_backend_port(__be16 port)
{
	__u32 k = bpf_ntohs(port);
	__u32 *n = bpf_map_lookup_elem(&lb_bports, &k);

	return n && *n;
}

/* Slot 0: the next service id (written by vnetlab's Go side only; ids are
 * never reused so a UDP flow's conntrack entry of a deleted service cannot
 * match; an established TCP flow follows its entry whatever the id). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_meta SEC(".maps");


/* Offsets inside the IPv4 header and the L4 headers. */
#define IP_OFF       ETH_HLEN
#define IP_CSUM_OFF  (IP_OFF + 10)
#define IP_SADDR_OFF (IP_OFF + 12)
#define IP_DADDR_OFF (IP_OFF + 16)
#define TCP_CSUM     16
#define UDP_CSUM     6
#define ICMP_CSUM    2

#define IP_MF     0x2000
#define IP_OFFSET 0x1fff

/* A parsed IPv4 TCP/UDP packet (or an ICMP one: ports are then zero). */
struct lb_pkt {
	__be32 saddr, daddr;
	__be16 sport, dport;
	__be16 frag_id; /* the IP header's identification */
	__u16 ip_check; /* the header checksum, as in the packet */
	__u16 l4_check; /* the TCP/UDP checksum field, as in the packet */
	__u8 proto;
	__u8 has_l4;   /* the L4 header is in this packet (not a later fragment) */
	__u8 first_frag;
	__u8 tcp_syn;  /* SYN set (a SYN or a SYN-ACK) */
	__u8 tcp_ack;  /* ACK set */
	__u8 tcp_rst;  /* RST set: the flow ends here */
	__u32 l4off;   /* from the start of the frame */
};

enum { LB_PASS = 0, LB_GO = 1, LB_TRUNC = 2 /* passed: a header cut off */ };

/* lb_from_pod_pkt's verdict for a hairpinned packet, translated: no TC
 * action of its own; its callers deliver it back to its sender, or treat it
 * as TC_ACT_OK. */
#define LB_TO_SENDER 0x200

/* lb_back_to_sender: verdict ret of lb_from_pod_pkt, as a tc verdict. At a
 * tc ingress (the node end of a pod's veth, or a bridge port), a hairpinned
 * packet goes back out of the interface it came in by, into the pod that
 * sent it, its MACs swapped (the pod's own as destination): not through
 * the node. Elsewhere (the pod's own eth0, at egress) it is TC_ACT_OK. */
static __always_inline int lb_back_to_sender(struct __sk_buff *skb, int ret)
{
	__u8 mac[12], swapped[12];

	if (ret != LB_TO_SENDER)
		return ret;
	if (skb->ingress_ifindex != skb->ifindex)
		return TC_ACT_OK;
	if (bpf_skb_load_bytes(skb, 0, mac, sizeof(mac)) < 0)
		return TC_ACT_OK;
	__builtin_memcpy(swapped, mac + 6, 6);
	__builtin_memcpy(swapped + 6, mac, 6);
	if (bpf_skb_store_bytes(skb, 0, swapped, sizeof(swapped), 0) < 0)
		return TC_ACT_SHOT;
	return bpf_redirect(skb->ifindex, 0);
}

/* lb_load copies len bytes at off: straight from the linear data when they
 * are there (most packets: one helper call less per header, and lb_parse
 * runs on every packet of every endpoint), else with bpf_skb_load_bytes
 * (non-linear skbs). Reads only: a direct write would make the verifier
 * unclone every packet. */
#define lb_load(skb, off, dst, len) ({                                          \
	void *__d = (void *)(long)(skb)->data, *__e = (void *)(long)(skb)->data_end; \
	int __r = 0;                                                            \
	if (__d + (off) + (len) <= __e)                                         \
		__builtin_memcpy(dst, __d + (off), len);                        \
	else                                                                    \
		__r = bpf_skb_load_bytes(skb, off, dst, len);                   \
	__r;                                                                    \
})

/* lb_parse_l4 and lb_parse_later, written once with lb6.h's. */
#define LBF(n)                     lb_##n
#define LB_LOAD(skb, off, d, n)    lb_load(skb, off, d, n)
#include "lb_parse_fam.h"

/* lb_parse fills p for IPv4 TCP, UDP and ICMP. Anything else, and anything
 * truncated or malformed, is LB_PASS: left untouched. A later fragment is
 * LB_GO only when its first fragment was seen (ports from lb_frags). */
static __always_inline int lb_parse(struct __sk_buff *skb, struct lb_pkt *p)
{
	struct iphdr ip;
	__u16 frag;

	if (skb->protocol != bpf_htons(ETH_P_IP))
		return LB_PASS;
	if (lb_load(skb, IP_OFF, &ip, sizeof(ip)) < 0)
		return LB_PASS;
	if (ip.version != 4 || ip.ihl < 5)
		return LB_PASS;
	if (ip.protocol != IPPROTO_TCP && ip.protocol != IPPROTO_UDP && ip.protocol != IPPROTO_ICMP)
		return LB_PASS;
	p->saddr = ip.saddr;
	p->daddr = ip.daddr;
	p->proto = ip.protocol;
	p->frag_id = ip.id;
	p->ip_check = ip.check;
	p->l4off = IP_OFF + ip.ihl * 4;
	p->sport = p->dport = 0;
	p->tcp_syn = 0;
	p->tcp_ack = 0;
	p->tcp_rst = 0;
	p->l4_check = 0;
	p->has_l4 = 1;
	frag = bpf_ntohs(ip.frag_off);
	p->first_frag = (frag & IP_MF) && !(frag & IP_OFFSET);
	if (frag & IP_OFFSET)
		return lb_parse_later(p); /* no L4 header here */
	if (ip.protocol == IPPROTO_ICMP)
		return LB_GO; /* lb_icmp_quote reads (and bounds) the rest */
	return lb_parse_l4(skb, p) == LB_GO ? LB_GO : LB_PASS;
}

static __always_inline __u32 lb_l4_csum_off(const struct lb_pkt *p)
{
	return p->l4off + (p->proto == IPPROTO_TCP ? TCP_CSUM : UDP_CSUM);
}

static __always_inline __u64 lb_l4_flags(const struct lb_pkt *p)
{
	/* A UDP checksum of zero means "none": it must stay zero. */
	return p->proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0;
}

/* Rewrites the IPv4 source (addr_off = IP_SADDR_OFF) or destination address,
 * fixing the IP checksum and, when the L4 header is here, the TCP/UDP one
 * (the address is part of their pseudo-header). */
static __always_inline int lb_set_addr(struct __sk_buff *skb, const struct lb_pkt *p, __u32 addr_off, __be32 from, __be32 to)
{
	if (from == to)
		return 0;
	if (p->has_l4 && (p->proto == IPPROTO_TCP || p->proto == IPPROTO_UDP)) {
		if (bpf_l4_csum_replace(skb, lb_l4_csum_off(p), from, to, BPF_F_PSEUDO_HDR | lb_l4_flags(p) | sizeof(to)) < 0)
			return -1;
	}
	if (bpf_l3_csum_replace(skb, IP_CSUM_OFF, from, to, sizeof(to)) < 0)
		return -1;
	return bpf_skb_store_bytes(skb, addr_off, &to, sizeof(to), 0);
}

/* Rewrites the source (port_off 0) or destination (2) port. */
static __always_inline int lb_set_port(struct __sk_buff *skb, const struct lb_pkt *p, __u32 port_off, __be16 from, __be16 to)
{
	if (from == to || !p->has_l4)
		return 0;
	if (bpf_l4_csum_replace(skb, lb_l4_csum_off(p), from, to, lb_l4_flags(p) | sizeof(to)) < 0)
		return -1;
	return bpf_skb_store_bytes(skb, p->l4off + port_off, &to, sizeof(to), 0);
}

/* One's complement arithmetic (RFC 1071/1624) on 32-bit partial sums, as
 * the kernel's csum_add and csum_fold. */
static __always_inline __u32 lb_csum_add(__u32 a, __u32 b)
{
	a += b;
	return a + (a < b);
}

static __always_inline __u16 lb_csum_fold(__u32 s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)s;
}

/* The kernel's sk_buff, as much as lb_rewrite reads: how the TCP/UDP
 * checksum stands (CO-RE: the offset comes from the running kernel's BTF;
 * bpf_cast_to_kern_ctx costs nothing, the verifier turns it into a move). */
struct sk_buff___vnetlab {
	__u8 ip_summed:2;
} __attribute__((preserve_access_index));

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

enum { LB_CSUM_NONE = 0, LB_CSUM_UNNECESSARY = 1, LB_CSUM_COMPLETE = 2, LB_CSUM_PARTIAL = 3 };

static __always_inline int lb_ip_summed(struct __sk_buff *skb)
{
	struct sk_buff___vnetlab *k = bpf_cast_to_kern_ctx(skb);

	return BPF_CORE_READ_BITFIELD(k, ip_summed);
}

/* lb_ports_diff: what replacing ports sport, dport by to_sport, to_dport
 * adds to a one's complement sum. */
static __always_inline __u32 lb_ports_diff(__be16 sport, __be16 dport, __be16 to_sport, __be16 to_dport)
{
	return lb_csum_add(~((__u32)sport | (__u32)dport << 16), (__u32)to_sport | (__u32)to_dport << 16);
}

/* lb_l4_csum: a TCP/UDP checksum check after its packet's addresses and
 * ports changed by the sums addrs and ports, as the kernel's
 * inet_proto_csum_replace does it: CHECKSUM_PARTIAL (summed; the field
 * holds the pseudo-header sum, the device or the stack completes it) takes
 * the address change only, any other packet both. A UDP checksum of 0
 * ("none") stays 0 and a computed 0 is sent as 0xffff. Both families'. */
static __always_inline __u16 lb_l4_csum(__u16 check, __u8 proto, int summed, __u32 addrs, __u32 ports)
{
	if (proto == IPPROTO_UDP && check == 0)
		return 0;
	if (summed == LB_CSUM_PARTIAL)
		check = lb_csum_fold(lb_csum_add(check, addrs));
	else
		check = ~lb_csum_fold(lb_csum_add(lb_csum_add((__u16)~check, addrs), ports));
	if (proto == IPPROTO_UDP && check == 0)
		check = 0xffff;
	return check;
}

/* lb_rewrite gives packet p the addresses and ports of to.
 *
 * The common case (TCP/UDP, IPv4 header without options, not a later
 * fragment, the checksum not CHECKSUM_COMPLETE) takes one helper call: the
 * header checksum, the addresses, the ports and the TCP/UDP checksum lie
 * in 18 (UDP) or 28 (TCP) contiguous bytes from IP offset 10, written by
 * one store with both checksums computed here (RFC 1624; the TCP/UDP one
 * by lb_l4_csum). CHECKSUM_COMPLETE (skb->csum must follow) and every
 * other packet take the helpers, field by field. */
static __always_inline int lb_rewrite(struct __sk_buff *skb, const struct lb_pkt *p, const struct lb_tuple *to)
{
	struct {
		__u16 check;
		__be32 saddr, daddr;
		__be16 sport, dport;
		__u8 mid[12];   /* TCP: sequence, ack, offset, flags, window; UDP: length */
		__u16 l4_check; /* TCP: at mid + 12; UDP: at mid + 2 */
	} __attribute__((packed)) w;
	__u32 addrs, len;
	__u16 l4;
	int summed;

	summed = lb_ip_summed(skb);
	if (!p->has_l4 || p->l4off != IP_OFF + 20 || (p->proto != IPPROTO_TCP && p->proto != IPPROTO_UDP) ||
	    summed == LB_CSUM_COMPLETE) {
		if (lb_set_addr(skb, p, IP_SADDR_OFF, p->saddr, to->saddr) < 0 ||
		    lb_set_addr(skb, p, IP_DADDR_OFF, p->daddr, to->daddr) < 0 ||
		    lb_set_port(skb, p, 0, p->sport, to->sport) < 0 ||
		    lb_set_port(skb, p, 2, p->dport, to->dport) < 0)
			return -1;
		return 0;
	}
	addrs = lb_csum_add(lb_csum_add(~p->saddr, to->saddr), lb_csum_add(~p->daddr, to->daddr));
	l4 = lb_l4_csum(p->l4_check, p->proto, summed, addrs, lb_ports_diff(p->sport, p->dport, to->sport, to->dport));
	w.check = ~lb_csum_fold(lb_csum_add((__u16)~p->ip_check, addrs));
	w.saddr = to->saddr;
	w.daddr = to->daddr;
	w.sport = to->sport;
	w.dport = to->dport;
	if (p->proto == IPPROTO_TCP) {
		if (lb_load(skb, p->l4off + 4, w.mid, 12) < 0)
			return -1;
		w.l4_check = l4;
		len = sizeof(w);
	} else {
		if (lb_load(skb, p->l4off + 4, w.mid, 2) < 0)
			return -1;
		*(__u16 *)&w.mid[2] = l4;
		len = 18;
	}
	return bpf_skb_store_bytes(skb, IP_CSUM_OFF, &w, len, 0);
}

/* murmur3's finaliser: lb_hash's and lb6_hash's last step. */
static __always_inline __u32 lb_hash_mix(__u32 h)
{
	h ^= h >> 16;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h *= 0xc2b2ae35;
	h ^= h >> 16;
	return h;
}

static __always_inline __u32 lb_hash(const struct lb_pkt *p)
{
	/* murmur3's finaliser over the 5-tuple: the same flow always lands on
	 * the same backend, even if its conntrack entry was evicted. */
	__u32 h = p->saddr ^ (p->daddr * 0x9e3779b1) ^ (((__u32)p->sport << 16) | p->dport) ^ p->proto;
	return lb_hash_mix(h);
}

/* lb_ct_close, lb_ct_key_of, lb_forget_stale, lb_backend_slot,
 * lb_affinity_keep, lb_pick_backend, lb_svc_of and lb_ct_new, written once
 * with lb6.h's (lb_fam.h). */
#define LBF(n)           lb_##n
#define LB_ADDR          __be32
#define LB_ADDR_EQ(a, b) (*(a) == *(b))
#include "lb_fam.h"

/* ICMP errors quote the packet that caused them (IP header + 8 bytes):
 * lb_icmp_fam.h translates one about a translated flow. IPv4's part: which
 * types quote a packet (lb_icmp_quotes), the quoted header (lb_icmp_inner)
 * and the rewrite (lb_icmp_write), through the checksum helpers: the ICMP
 * checksum (no pseudo-header) and the quoted IP header's. The quoted
 * TCP/UDP checksum is left alone: the quote is usually truncated and no
 * kernel checks it. */
static __always_inline int lb_icmp_quotes(struct __sk_buff *skb, __u8 type)
{
	return type == ICMP_DEST_UNREACH || type == ICMP_TIME_EXCEEDED || type == ICMP_PARAMETERPROB ||
	       type == ICMP_SOURCE_QUENCH;
}

/* lb_icmp_inner reads the quoted IPv4 header at e->in_ip: a TCP or UDP
 * packet's is LB_GO (its addresses, protocol and L4 offset in e), anything
 * else, a cut-off one too, LB_PASS. */
static __always_inline int lb_icmp_inner(struct __sk_buff *skb, struct lb_icmp_err *e)
{
	struct iphdr in;

	if (bpf_skb_load_bytes(skb, e->in_ip, &in, sizeof(in)) < 0)
		return LB_PASS;
	if (in.version != 4 || in.ihl < 5 || (in.protocol != IPPROTO_TCP && in.protocol != IPPROTO_UDP))
		return LB_PASS;
	e->in_l4 = e->in_ip + in.ihl * 4;
	e->saddr = in.saddr;
	e->daddr = in.daddr;
	e->proto = in.protocol;
	return LB_GO;
}

/* Rewrites one quoted address (off: 12 source, 16 destination in the quoted header). */
static __always_inline int lb_icmp_set_addr(struct __sk_buff *skb, const struct lb_pkt *p, const struct lb_icmp_err *e,
					    __u32 off, __be32 from, __be32 to)
{
	__u16 old_csum, new_csum;

	if (from == to)
		return 0;
	if (bpf_skb_load_bytes(skb, e->in_ip + 10, &old_csum, 2) < 0 ||
	    bpf_l3_csum_replace(skb, e->in_ip + 10, from, to, sizeof(to)) < 0 ||
	    bpf_skb_load_bytes(skb, e->in_ip + 10, &new_csum, 2) < 0 ||
	    bpf_skb_store_bytes(skb, e->in_ip + off, &to, sizeof(to), 0) < 0)
		return -1;
	/* The ICMP checksum covers the quote: the address and its header checksum. */
	if (bpf_l4_csum_replace(skb, p->l4off + ICMP_CSUM, from, to, sizeof(to)) < 0 ||
	    bpf_l4_csum_replace(skb, p->l4off + ICMP_CSUM, old_csum, new_csum, 2) < 0)
		return -1;
	return 0;
}

static __always_inline int lb_icmp_set_port(struct __sk_buff *skb, const struct lb_pkt *p, const struct lb_icmp_err *e,
					    __u32 off, __be16 from, __be16 to)
{
	if (from == to)
		return 0;
	if (bpf_skb_store_bytes(skb, e->in_l4 + off, &to, sizeof(to), 0) < 0 ||
	    bpf_l4_csum_replace(skb, p->l4off + ICMP_CSUM, from, to, sizeof(to)) < 0)
		return -1;
	return 0;
}

/* The outer header of an ICMP packet: only the IP checksum covers it. */
static __always_inline int lb_icmp_set_outer(struct __sk_buff *skb, __u32 off, __be32 from, __be32 to)
{
	if (from == to)
		return 0;
	if (bpf_l3_csum_replace(skb, IP_CSUM_OFF, from, to, sizeof(to)) < 0)
		return -1;
	return bpf_skb_store_bytes(skb, off, &to, sizeof(to), 0);
}

/* lb_icmp_write gives ICMP error p (quoting e) the headers of to; was: as
 * they are. Each field that changes takes its helpers. */
static __always_inline int lb_icmp_write(struct __sk_buff *skb, const struct lb_pkt *p, const struct lb_icmp_err *e,
					 const struct lb_icmp_hdrs *was, const struct lb_icmp_hdrs *to)
{
	if (lb_icmp_set_addr(skb, p, e, 12, was->quote_s, to->quote_s) < 0 ||
	    lb_icmp_set_addr(skb, p, e, 16, was->quote_d, to->quote_d) < 0 ||
	    lb_icmp_set_port(skb, p, e, 0, was->quote_sport, to->quote_sport) < 0 ||
	    lb_icmp_set_port(skb, p, e, 2, was->quote_dport, to->quote_dport) < 0 ||
	    lb_icmp_set_outer(skb, IP_SADDR_OFF, was->outer_s, to->outer_s) < 0 ||
	    lb_icmp_set_outer(skb, IP_DADDR_OFF, was->outer_d, to->outer_d) < 0)
		return -1;
	return 0;
}

/* A Service without backends refuses at once (lb_icmp_fam.h's
 * lb_reject_pkt): the helpers below are both families'. */

/* The kernel's sk_buff fields that locate a pending checksum completion. */
struct sk_buff___vnetlab_csum {
	__u16 csum_start;  /* from skb->head */
	__u16 csum_offset; /* from csum_start */
	__u16 mac_header;  /* from skb->head: where the frame starts under tc */
} __attribute__((preserve_access_index));

/* lb_csum_pending: the frame offset where a CHECKSUM_PARTIAL packet's
 * checksum sum starts, and the field's offset from there. */
static __always_inline void lb_csum_pending(struct __sk_buff *skb, __u32 *start, __u32 *field)
{
	struct sk_buff___vnetlab_csum *k = bpf_cast_to_kern_ctx(skb);

	*start = (__u32)BPF_CORE_READ(k, csum_start) - (__u32)BPF_CORE_READ(k, mac_header);
	*field = BPF_CORE_READ(k, csum_offset);
}

static __always_inline __u32 lb_sum16(const void *buf, const int words)
{
	const __u16 *w = buf;
	__u32 s = 0;

#pragma unroll
	for (int i = 0; i < words; i++)
		s += w[i];
	return s;
}

/* lb_rej_quote_sum: the sum of a quote's q L4 bytes (q is one of two
 * constants: each branch has a length the verifier knows). */
static __always_inline __u32 lb_rej_quote_sum(const __u8 *ql4, __u32 q)
{
	return q == LB_REJ_TCP_QUOTE ? lb_sum16(ql4, LB_REJ_TCP_QUOTE / 2) : lb_sum16(ql4, LB_REJ_UDP_QUOTE / 2);
}

/* lb_rej_read: the checks and reads of lb_reject_pkt (lb_icmp_fam.h),
 * over either family's IP header. It answers only a TCP SYN or a UDP
 * datagram whose L4 header follows an IP header of iplen bytes (no IPv4
 * options, no IPv6 extension headers: the quote has a fixed length), not
 * CHECKSUM_COMPLETE (skb->csum would have to follow every byte: not from a
 * pod), and if CHECKSUM_PARTIAL with its completion on the L4 checksum.
 * It reads the MACs swapped into eth, the IP header into qip and the first
 * q L4 bytes into ql4, and gives a CHECKSUM_PARTIAL packet's quoted
 * checksum field the value a completion leaves unchanged. Returns q
 * (LB_REJ_TCP_QUOTE or LB_REJ_UDP_QUOTE), 0 when the packet cannot be
 * answered (nothing changed); *summed is lb_ip_summed's answer. */
static __always_inline __u32 lb_rej_read(struct __sk_buff *skb, __u8 proto, __u8 tcp_syn, __u8 tcp_ack, __u8 has_l4,
					 __u32 l4off, void *qip, const __u32 iplen, __u8 *eth, __u8 *ql4, int *summed)
{
	__u32 q, start, field;

	if (proto == IPPROTO_TCP) {
		if (!tcp_syn || tcp_ack)
			return 0;
		q = LB_REJ_TCP_QUOTE;
	} else if (proto == IPPROTO_UDP) {
		q = LB_REJ_UDP_QUOTE;
	} else {
		return 0;
	}
	if (!has_l4 || l4off != IP_OFF + iplen)
		return 0;
	*summed = lb_ip_summed(skb);
	if (*summed == LB_CSUM_COMPLETE)
		return 0;
	if (*summed == LB_CSUM_PARTIAL) {
		lb_csum_pending(skb, &start, &field);
		if (start != l4off || field != (proto == IPPROTO_TCP ? TCP_CSUM : UDP_CSUM))
			return 0;
	}
	if (bpf_skb_load_bytes(skb, 0, &eth[6], 6) < 0 || bpf_skb_load_bytes(skb, 6, &eth[0], 6) < 0 ||
	    bpf_skb_load_bytes(skb, IP_OFF, qip, iplen) < 0)
		return 0;
	if (q == LB_REJ_TCP_QUOTE) {
		if (bpf_skb_load_bytes(skb, l4off, ql4, LB_REJ_TCP_QUOTE) < 0)
			return 0;
	} else if (bpf_skb_load_bytes(skb, l4off, ql4, LB_REJ_UDP_QUOTE) < 0) {
		return 0;
	}
	if (*summed == LB_CSUM_PARTIAL) {
		__u16 *field16 = q == LB_REJ_TCP_QUOTE ? (__u16 *)&ql4[TCP_CSUM] : (__u16 *)&ql4[UDP_CSUM];
		__u32 rest, f;

		*field16 = 0;
		rest = lb_rej_quote_sum(ql4, q) % 0xffff;
		f = ((0xffff - rest) * 0x8000) % 0xffff;
		*field16 = f ? f : 0xffff;
	}
	return q;
}

/* lb_rej_send: the second half of either family's reject: grows the
 * packet by grow bytes after the MAC header (the new IP and ICMP headers:
 * the old IP header stays and becomes the quote), cuts it after the quoted
 * IP header (iplen bytes) and q quoted L4 bytes, writes the frame built in
 * buf (from its Ethernet header to the end of the quote) and sends it back
 * where it came from: at the node-side veth's ingress (the packet came in
 * there) out of it again; at the pod's eth0 egress (a local packet: no
 * ingress interface) into the pod's own stack. The MACs are swapped, so the
 * frame is addressed to the pod's eth0 either way. Returns the redirect's
 * verdict, LB_REJ_DROP when the packet was not changed, LB_REJ_FAIL when it
 * was changed and is lost. */
#define LB_REJ_DROP (-1)
#define LB_REJ_FAIL (-2)

static __always_inline int lb_rej_send(struct __sk_buff *skb, const void *buf, __u32 grow, __u32 iplen, __u32 q, int summed)
{
	__u32 start, field;

	if (bpf_skb_adjust_room(skb, grow, BPF_ADJ_ROOM_MAC, 0) < 0)
		return LB_REJ_DROP;
	if (bpf_skb_change_tail(skb, ETH_HLEN + grow + iplen + q, 0) < 0)
		return LB_REJ_FAIL;
	if (summed == LB_CSUM_PARTIAL) {
		/* The completion must now fall on the quoted field (checked, not assumed). */
		lb_csum_pending(skb, &start, &field);
		if (start != ETH_HLEN + grow + iplen)
			return LB_REJ_FAIL;
	}
	if (q == LB_REJ_TCP_QUOTE) {
		if (bpf_skb_store_bytes(skb, 0, buf, ETH_HLEN + grow + iplen + LB_REJ_TCP_QUOTE, 0) < 0)
			return LB_REJ_FAIL;
	} else if (bpf_skb_store_bytes(skb, 0, buf, ETH_HLEN + grow + iplen + LB_REJ_UDP_QUOTE, 0) < 0) {
		return LB_REJ_FAIL;
	}
	return bpf_redirect(skb->ifindex, skb->ingress_ifindex == skb->ifindex ? 0 : BPF_F_INGRESS);
}

/* lb_rej_ip: IPv4's headers of the port unreachable lb_reject_pkt makes of
 * p (q quoted L4 bytes): the EtherType, the IP header (TTL 64, TOS as the
 * kernel's own errors) and the ICMP type and code. Returns what the ICMP
 * checksum's pseudo-header adds: nothing, over IPv4. */
static __always_inline __u32 lb_rej_ip(__u8 *eth, struct iphdr *ip, struct lb_icmphdr *icmp, const struct lb_pkt *p, __u32 q)
{
	eth[12] = 0x08; /* ETH_P_IP */
	eth[13] = 0x00;
	ip->version = 4;
	ip->ihl = 5;
	ip->tos = 0xc0; /* internetwork control, as the kernel's ICMP errors */
	ip->tot_len = bpf_htons(sizeof(struct iphdr) + sizeof(struct lb_icmphdr) + sizeof(struct iphdr) + q);
	ip->ttl = 64;
	ip->protocol = IPPROTO_ICMP;
	ip->saddr = p->daddr;
	ip->daddr = p->saddr;
	ip->check = ~lb_csum_fold(lb_sum16(ip, sizeof(*ip) / 2));
	icmp->type = ICMP_DEST_UNREACH;
	icmp->code = 3; /* port unreachable */
	return 0;
}

/* lb_rnat_pkt, lb_rev_key, lb_from_pod_pkt, lb_to_pod_pkt, lb_from_pod and
 * lb_to_pod (lb_pod_fam.h), lb_icmp and lb_reject_pkt (lb_icmp_fam.h),
 * written once with lb6.h's. */
#define LBF(n)               lb_##n
#define LB_ADDR              __be32
#define LB_ADDR_EQ(a, b)     (*(a) == *(b))
#define LB_IS_HAIRPIN(a)     (*(a) == LB_HAIRPIN_IP)
#define LB_SET_HAIRPIN(a)    (*(a) = LB_HAIRPIN_IP)
#define LB_COUNT_HAIRPIN()   lb_count(LB_STAT_HAIRPIN)
#define LB_COUNT_TRUNC()     do {} while (0)
#define LB_PICK(svc, p, s)   lb_pick_backend(svc, p, lb_hash(p), s)
#define LB_REJECT(skb, p)    lb_reject_pkt(skb, p)
#define LB_ICMP_PROTO        IPPROTO_ICMP
#include "lb_pod_fam.h"

#endif /* VNETLAB_LB_H */
