/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * nodeport6.h: NodePort Services and external IPs over IPv6, on the node's
 * uplink: nodeport.h's design on lb6.h's maps. An IPv6 node port is an
 * lb6_services entry keyed by the node's IPv6 address (an external IP's by
 * that address); with externalTrafficPolicy Local it carries
 * LB_SVC_EXTERNAL and outside clients use its LB_SCOPE_EXTERNAL entry.
 *
 *   np6_from_wire (uplink ingress): DNAT [nodeIP]:nodePort -> backend; a
 *     backend whose route leaves through the uplink again (a pod on another
 *     node) also gets the source [np6_node]:NP_SNAT_MIN.. and the packet is
 *     sent straight out (bpf_redirect_neigh); that flow's replies arrive
 *     here too, are translated back and sent out the same way.
 *   np6_to_wire (uplink egress): replies of local backends to a NodePort's
 *     clients, translated back.
 *
 * ICMPv6 (NDP included) and anything lb6_parse does not take go to the
 * stack untouched, as nodeport.h leaves ICMP. Counters are np_stats'.
 */
#ifndef VNETLAB_NODEPORT6_H
#define VNETLAB_NODEPORT6_H

#include "lb6.h"
#include "nodeport.h"

/* np_ct over IPv6: FWD {client:cport -> nodeIP:nodePort} -> backend (and
 * the SNAT source), REV {backend:bport -> client:cport or nodeIP:snatport}
 * -> the address and port the client reached, and the client. */
struct np6_ct {
	struct lb6_addr addr;   /* FWD: backend; REV: the address the client reached */
	struct lb6_addr client; /* REV: the client; FWD: a SNATed flow's source */
	__be16 port;            /* FWD: backend port; REV: the nodePort */
	__be16 cport;           /* REV: the client's port */
	__be16 snat_port;       /* FWD: a SNATed flow's source port (0: none) */
	__u16 flags;            /* NP_CT_SNAT */
	__u32 svc_id;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LB_MAX_FLOWS);
	__type(key, struct lb6_ct_key);
	__type(value, struct np6_ct);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} np6_conntrack SEC(".maps");

/* The node's own IPv6 address (slot 0, written by the Go side): the source
 * of SNATed flows. All zero: the address the client reached. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lb6_addr);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} np6_node SEC(".maps");

/* Room for np6_from_wire's flow and keys: the stack cannot hold them. */
struct np6_scratch {
	struct lb6_ct_key fk, rk;
	struct np6_ct flow, rev;
	struct lb6_tuple to;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct np6_scratch);
} np6_scratch SEC(".maps");

static __always_inline void np6_snat_addr(struct lb6_addr *out, const struct lb6_pkt *p)
{
	__u32 zero = 0;
	struct lb6_addr *ip = bpf_map_lookup_elem(&np6_node, &zero);

	if (ip && (ip->w[0] | ip->w[1] | ip->w[2] | ip->w[3]))
		*out = *ip;
	else
		*out = p->daddr;
}

/* np6_remote: np_remote over IPv6 (the route to dst leaves through the
 * interface the packet came in on; the node's own addresses are local). */
static __always_inline int np6_remote(struct __sk_buff *skb, const struct lb6_pkt *p, const struct lb6_addr *dst)
{
	struct bpf_fib_lookup f = {};
	long r;

	f.family = 10; /* AF_INET6 */
	f.l4_protocol = p->proto;
	__builtin_memcpy(f.ipv6_src, &p->saddr, sizeof(f.ipv6_src));
	__builtin_memcpy(f.ipv6_dst, dst, sizeof(f.ipv6_dst));
	f.ifindex = skb->ifindex;
	r = bpf_fib_lookup(skb, &f, sizeof(f), BPF_FIB_LOOKUP_SKIP_NEIGH);
	if (r != BPF_FIB_LKUP_RET_SUCCESS && r != BPF_FIB_LKUP_RET_FRAG_NEEDED)
		return 0;
	return f.ifindex == skb->ifindex;
}

static __always_inline void np6_close(const struct lb6_ct_key *fk, const struct lb6_ct_key *rk)
{
	bpf_map_delete_elem(&np6_conntrack, rk);
	bpf_map_delete_elem(&np6_conntrack, fk);
}

static __always_inline void np6_key(struct lb6_ct_key *k, const struct lb6_addr *saddr, const struct lb6_addr *daddr,
				    __be16 sport, __be16 dport, __u8 proto, __u8 dir)
{
	k->saddr = *saddr;
	k->daddr = *daddr;
	k->sport = sport;
	k->dport = dport;
	k->proto = proto;
	k->dir = dir;
	k->pad = 0;
}

/* np6_new_flow: np_new_flow over IPv6; s->fk is the flow's FWD key, and
 * s->flow gets its entry. */
static __always_inline int np6_new_flow(struct __sk_buff *skb, const struct lb6_pkt *p, const struct lb_svc *svc,
					struct np6_scratch *s)
{
	struct lb6_backend *b;
	__u32 h = lb6_hash(p);
	int i;

	b = lb6_pick_backend(svc, p);
	if (!b)
		return -1;
	__builtin_memset(&s->flow, 0, sizeof(s->flow));
	__builtin_memset(&s->rev, 0, sizeof(s->rev));
	s->flow.addr = b->ip;
	s->flow.port = b->port;
	s->flow.svc_id = svc->id;
	s->rev.addr = p->daddr;
	s->rev.port = p->dport;
	s->rev.client = p->saddr;
	s->rev.cport = p->sport;
	s->rev.svc_id = svc->id;
	if (!np6_remote(skb, p, &s->flow.addr)) {
		np6_key(&s->rk, &s->flow.addr, &p->saddr, s->flow.port, p->sport, p->proto, LB_CT_REV);
		bpf_map_update_elem(&np6_conntrack, &s->rk, &s->rev, BPF_ANY);
	} else {
		s->rev.flags = NP_CT_SNAT;
		s->flow.flags = NP_CT_SNAT;
		np6_snat_addr(&s->flow.client, p);
		for (i = 0; i < NP_SNAT_TRIES; i++) {
			__be16 port = bpf_htons(NP_SNAT_MIN + (h + i * 1031) % NP_SNAT_N);

			np6_key(&s->rk, &s->flow.addr, &s->flow.client, s->flow.port, port, p->proto, LB_CT_REV);
			if (bpf_map_update_elem(&np6_conntrack, &s->rk, &s->rev, BPF_NOEXIST) == 0) {
				s->flow.snat_port = port;
				break;
			}
		}
		if (!s->flow.snat_port) {
			np_count(NP_STAT_NO_PORT);
			return -1;
		}
		np_count(NP_STAT_SNAT);
	}
	bpf_map_update_elem(&np6_conntrack, &s->fk, &s->flow, BPF_ANY);
	np_count(NP_STAT_NEW);
	return 0;
}

/* np6_snat_reply: a reply to a SNATed flow (backend:bport ->
 * nodeIP:snatport) becomes nodeIP:nodePort -> client:cport and goes
 * straight back out. -1: p is no such reply. */
static __always_inline int np6_snat_reply(struct __sk_buff *skb, const struct lb6_pkt *p, struct np6_scratch *s)
{
	struct np6_ct *ct;

	np6_key(&s->rk, &p->saddr, &p->daddr, p->sport, p->dport, p->proto, LB_CT_REV);
	ct = bpf_map_lookup_elem(&np6_conntrack, &s->rk);
	if (!ct || !(ct->flags & NP_CT_SNAT))
		return -1;
	s->to.saddr = ct->addr;
	s->to.sport = ct->port;
	s->to.daddr = ct->client;
	s->to.dport = ct->cport;
	if (lb6_rewrite(skb, p, &s->to) < 0) {
		np_count(NP_STAT_ERROR);
		return TC_ACT_SHOT;
	}
	np_count(NP_STAT_RNAT);
	if (p->tcp_rst) {
		np6_key(&s->fk, &s->to.daddr, &s->to.saddr, s->to.dport, s->to.sport, p->proto, LB_CT_FWD);
		np6_close(&s->fk, &s->rk);
	}
	return bpf_redirect_neigh(skb->ifindex, NULL, 0, 0);
}

/* np6_from_wire: IPv6 packets arriving at the node's uplink. */
static __always_inline int np6_from_wire(struct __sk_buff *skb)
{
	struct lb6_svc_key sk = {};
	struct np6_scratch *s;
	struct lb_svc *svc;
	struct np6_ct *ct;
	struct lb6_pkt p;
	__u32 zero = 0;
	int ret;

	if (lb6_parse(skb, &p) != LB_GO || p.proto == LB6_ICMP || !p.has_l4)
		return TC_ACT_OK;
	s = bpf_map_lookup_elem(&np6_scratch, &zero);
	if (!s)
		return TC_ACT_OK;
	if (bpf_ntohs(p.dport) >= NP_SNAT_MIN) {
		ret = np6_snat_reply(skb, &p, s);
		if (ret >= 0)
			return ret;
	}
	sk.vip = p.daddr;
	sk.port = p.dport;
	sk.proto = p.proto;
	svc = bpf_map_lookup_elem(&lb6_services, &sk);
	if (!svc)
		return TC_ACT_OK;
	if (svc->flags & LB_SVC_EXTERNAL) {
		struct lb_svc *ext;

		sk.scope = LB_SCOPE_EXTERNAL;
		ext = bpf_map_lookup_elem(&lb6_services, &sk);
		if (ext)
			svc = ext;
	}
	if (svc->count == 0) {
		np_count(NP_STAT_NO_BACKEND);
		return TC_ACT_SHOT;
	}
	np6_key(&s->fk, &p.saddr, &p.daddr, p.sport, p.dport, p.proto, LB_CT_FWD);
	/* SYNs too: a retransmitted SYN keeps its SNAT port. */
	ct = bpf_map_lookup_elem(&np6_conntrack, &s->fk);
	if (ct && ct->svc_id == svc->id) {
		s->flow = *ct;
	} else if (np6_new_flow(skb, &p, svc, s) < 0) {
		np_count(NP_STAT_NO_BACKEND);
		return TC_ACT_SHOT;
	}
	s->to.saddr = p.saddr;
	s->to.sport = p.sport;
	s->to.daddr = s->flow.addr;
	s->to.dport = s->flow.port;
	if (s->flow.flags & NP_CT_SNAT) {
		s->to.saddr = s->flow.client;
		s->to.sport = s->flow.snat_port;
	}
	if (lb6_rewrite(skb, &p, &s->to) < 0) {
		np_count(NP_STAT_ERROR);
		return TC_ACT_SHOT;
	}
	np_count(NP_STAT_DNAT);
	if (p.tcp_rst) {
		np6_key(&s->rk, &s->to.daddr, &s->to.saddr, s->to.dport, s->to.sport, p.proto, LB_CT_REV);
		np6_close(&s->fk, &s->rk);
	}
	if (s->flow.flags & NP_CT_SNAT)
		return bpf_redirect_neigh(skb->ifindex, NULL, 0, 0);
	return TC_ACT_OK;
}

/* np6_to_wire: IPv6 packets leaving the node's uplink; replies of local
 * backends to a NodePort's clients are translated back. */
static __always_inline int np6_to_wire(struct __sk_buff *skb)
{
	struct np6_scratch *s;
	struct np6_ct *ct;
	struct lb6_pkt p;
	__u32 zero = 0;

	if (lb6_parse(skb, &p) != LB_GO || p.proto == LB6_ICMP || !p.has_l4)
		return TC_ACT_OK;
	if (!lb_maybe_backend_port(p.sport))
		return TC_ACT_OK;
	s = bpf_map_lookup_elem(&np6_scratch, &zero);
	if (!s)
		return TC_ACT_OK;
	np6_key(&s->rk, &p.saddr, &p.daddr, p.sport, p.dport, p.proto, LB_CT_REV);
	ct = bpf_map_lookup_elem(&np6_conntrack, &s->rk);
	if (!ct || (ct->flags & NP_CT_SNAT))
		return TC_ACT_OK;
	s->to.saddr = ct->addr;
	s->to.sport = ct->port;
	s->to.daddr = p.daddr;
	s->to.dport = p.dport;
	if (lb6_rewrite(skb, &p, &s->to) < 0) {
		np_count(NP_STAT_ERROR);
		return TC_ACT_SHOT;
	}
	np_count(NP_STAT_RNAT);
	if (p.tcp_rst) {
		np6_key(&s->fk, &p.daddr, &s->to.saddr, p.dport, s->to.sport, p.proto, LB_CT_FWD);
		np6_close(&s->fk, &s->rk);
	}
	return TC_ACT_OK;
}

#endif /* VNETLAB_NODEPORT6_H */
