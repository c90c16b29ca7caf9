/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * nodeport_fam.h: nodeport.h's conntrack and programs, written once for
 * IPv4 and IPv6. Not a header of its own: nodeport.h includes it for IPv4
 * and nodeport6.h for IPv6, after defining
 *
 *   NPF(name)           the family's name: np_##name or np6_##name
 *                       (np_conntrack, struct np6_ct, np6_from_wire, ...);
 *   LBF(name)           lb.h's or lb6.h's: lb_##name or lb6_##name;
 *   NP_ADDR             the address type: __be32 or struct lb6_addr;
 *   NP_ICMP             the family's ICMP: left to the stack;
 *   NP_MAYBE_VIP(p)     the prefilter in front of the Service lookup;
 *   NP_PICK(svc, p, h)  the family's lb_pick_backend (h: lb_hash(p));
 *   NP_SCRATCH_DECL     declares where NP_SCRATCH points, in a program's
 *   NP_SCRATCH          frame: the flow, its keys and the rewrite (IPv4:
 *                       on the stack; IPv6: in NP_SCRATCH_MAP, a per-CPU
 *                       array, as the stack has no room for them);
 *   NP_FIB(f, p, dst)   fills bpf_fib_lookup f's family and addresses (from
 *                       p's source to *dst);
 * and the family's NPF(snat_addr). The macros are
 * undefined again at the end.
 */

/* np_ct: FWD {client:cport -> nodeIP:nodePort} -> backend (and the SNAT
 * source), REV {backend:bport -> client:cport or nodeIP:snatport} -> the
 * address and port the client reached, and the client. */
struct NPF(ct) {
	NP_ADDR addr;     /* FWD: backend; REV: the address the client reached (node IP or external IP) */
	NP_ADDR client;   /* REV: the client; FWD: the source a SNATed flow gets (the node IP) */
	__be16 port;      /* FWD: backend port; REV: the nodePort */
	__be16 cport;     /* REV: the client's port */
	__be16 snat_port; /* FWD: the source port given to a SNATed flow (0: none) */
	__u16 flags;      /* NP_CT_SNAT */
	__u32 svc_id;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LB_MAX_FLOWS);
	__type(key, struct LBF(ct_key));
	__type(value, struct NPF(ct));
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} NPF(conntrack) SEC(".maps");

/* np_scratch: a program's flow, its two keys and the rewrite. */
struct NPF(scratch) {
	struct LBF(ct_key) fk, rk;
	struct NPF(ct) flow, rev;
	struct LBF(tuple) to;
};

#ifdef NP_SCRATCH_MAP
LB_SCRATCH(NP_SCRATCH_MAP, struct NPF(scratch));
#endif

/* np_remote says whether the route to *dst leaves through the interface
 * the packet came in on (a pod on another node), from the node's own FIB.
 * A failed lookup (no route, forwarding off) reads as "not remote": the
 * packet goes to the stack, which decides. The lookup goes through the
 * routing rules, so the local table answers first: a backend at one of
 * the node's own addresses (a hostNetwork endpoint) is local (NOT_FWDED),
 * not a neighbour on the uplink's prefix. A direct lookup of the main
 * table finds that prefix's route: IPv4 hides it while the kernel keeps
 * local and main merged (no rules of one's own), IPv6 never merges them. */
static __always_inline int NPF(remote)(struct __sk_buff *skb, const struct LBF(pkt) *p, const NP_ADDR *dst)
{
	struct bpf_fib_lookup f = {};
	long r;

	NP_FIB(&f, p, dst);
	f.l4_protocol = p->proto;
	f.ifindex = skb->ifindex;
	r = bpf_fib_lookup(skb, &f, sizeof(f), BPF_FIB_LOOKUP_SKIP_NEIGH);
	if (r != BPF_FIB_LKUP_RET_SUCCESS && r != BPF_FIB_LKUP_RET_FRAG_NEEDED)
		return 0;
	return f.ifindex == skb->ifindex;
}

/* A RST ends a flow: both entries go (as lb_ct_close). */
static __always_inline void NPF(close)(const struct LBF(ct_key) *fk, const struct LBF(ct_key) *rk)
{
	bpf_map_delete_elem(&NPF(conntrack), rk);
	bpf_map_delete_elem(&NPF(conntrack), fk);
}

/* np_new_flow picks a backend for a new flow (the client's under
 * sessionAffinity, else the hash's) and writes its two entries (reverse
 * first: a reply never finds the flow half-made). s->fk is the flow's FWD
 * key; s->flow gets its entry. */
static __always_inline int NPF(new_flow)(struct __sk_buff *skb, const struct LBF(pkt) *p, const struct lb_svc *svc,
					 struct NPF(scratch) *s)
{
	struct LBF(backend) *b;
	__u32 h = LBF(hash)(p);
	int i;

	b = NP_PICK(svc, p, h);
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
	if (!NPF(remote)(skb, p, &s->flow.addr)) {
		LBF(ct_key_set)(&s->rk, &s->flow.addr, &p->saddr, s->flow.port, p->sport, p->proto, LB_CT_REV);
		bpf_map_update_elem(&NPF(conntrack), &s->rk, &s->rev, BPF_ANY);
	} else {
		/* A port whose reverse key is free: a few tries from the flow's
		 * hash, then give up (dropped, counted). */
		s->rev.flags = NP_CT_SNAT;
		s->flow.flags = NP_CT_SNAT;
		NPF(snat_addr)(&s->flow.client, p);
		for (i = 0; i < NP_SNAT_TRIES; i++) {
			__be16 port = bpf_htons(NP_SNAT_MIN + (h + i * 1031) % NP_SNAT_N);

			LBF(ct_key_set)(&s->rk, &s->flow.addr, &s->flow.client, s->flow.port, port, p->proto, LB_CT_REV);
			if (bpf_map_update_elem(&NPF(conntrack), &s->rk, &s->rev, BPF_NOEXIST) == 0) {
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
	bpf_map_update_elem(&NPF(conntrack), &s->fk, &s->flow, BPF_ANY);
	np_count(NP_STAT_NEW);
	return 0;
}

/* np_snat_reply: a reply to a SNATed flow (backend:bport -> nodeIP:snatport)
 * becomes nodeIP:nodePort -> client:cport and goes straight back out.
 * Returns -1 when p is no such reply. */
static __always_inline int NPF(snat_reply)(struct __sk_buff *skb, const struct LBF(pkt) *p, struct NPF(scratch) *s)
{
	struct NPF(ct) *ct;

	LBF(ct_key_set)(&s->rk, &p->saddr, &p->daddr, p->sport, p->dport, p->proto, LB_CT_REV);
	ct = bpf_map_lookup_elem(&NPF(conntrack), &s->rk);
	if (!ct || !(ct->flags & NP_CT_SNAT))
		return -1;
	s->to.saddr = ct->addr;
	s->to.sport = ct->port;
	s->to.daddr = ct->client;
	s->to.dport = ct->cport;
	if (LBF(rewrite)(skb, p, &s->to) < 0) {
		np_count(NP_STAT_ERROR);
		return TC_ACT_SHOT;
	}
	np_count(NP_STAT_RNAT);
	if (p->tcp_rst) {
		LBF(ct_key_set)(&s->fk, &s->to.daddr, &s->to.saddr, s->to.dport, s->to.sport, p->proto, LB_CT_FWD);
		NPF(close)(&s->fk, &s->rk);
	}
	return bpf_redirect_neigh(skb->ifindex, NULL, 0, 0);
}

/* np_from_wire: packets arriving at the node's uplink. */
static __always_inline int NPF(from_wire)(struct __sk_buff *skb)
{
	struct LBF(svc_key) sk = {};
	struct NPF(scratch) *s;
	struct lb_svc *svc;
	struct NPF(ct) *ct;
	struct LBF(pkt) p;
	NP_SCRATCH_DECL;
	int ret;

	/* ICMP, later fragments, anything not TCP/UDP: left to the stack. */
	if (LBF(parse)(skb, &p) != LB_GO || p.proto == NP_ICMP || !p.has_l4)
		return TC_ACT_OK;
	s = NP_SCRATCH;
	if (!s)
		return TC_ACT_OK;
	if (bpf_ntohs(p.dport) >= NP_SNAT_MIN) {
		ret = NPF(snat_reply)(skb, &p, s);
		if (ret >= 0)
			return ret;
	}
	if (!NP_MAYBE_VIP(&p))
		return TC_ACT_OK;
	sk.vip = p.daddr;
	sk.port = p.dport;
	sk.proto = p.proto;
	svc = bpf_map_lookup_elem(&LBF(services), &sk);
	if (!svc)
		return TC_ACT_OK;
	if (svc->flags & LB_SVC_EXTERNAL) {
		/* externalTrafficPolicy Local: outside clients reach this node's
		 * endpoints only (the entry is written before the flag is set). */
		struct lb_svc *ext;

		sk.scope = LB_SCOPE_EXTERNAL;
		ext = bpf_map_lookup_elem(&LBF(services), &sk);
		if (ext)
			svc = ext;
	}
	if (svc->count == 0) {
		/* kube-proxy drops too (policy Local without a local endpoint). */
		np_count(NP_STAT_NO_BACKEND);
		return TC_ACT_SHOT;
	}
	LBF(ct_key_set)(&s->fk, &p.saddr, &p.daddr, p.sport, p.dport, p.proto, LB_CT_FWD);
	/* Always looked up, SYNs too: a retransmitted SYN must keep its SNAT port. */
	ct = bpf_map_lookup_elem(&NPF(conntrack), &s->fk);
	if (ct && ct->svc_id == svc->id) {
		s->flow = *ct;
	} else if (NPF(new_flow)(skb, &p, svc, s) < 0) {
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
	if (LBF(rewrite)(skb, &p, &s->to) < 0) {
		np_count(NP_STAT_ERROR);
		return TC_ACT_SHOT;
	}
	np_count(NP_STAT_DNAT);
	if (p.tcp_rst) {
		LBF(ct_key_set)(&s->rk, &s->to.daddr, &s->to.saddr, s->to.dport, s->to.sport, p.proto, LB_CT_REV);
		NPF(close)(&s->fk, &s->rk);
	}
	if (s->flow.flags & NP_CT_SNAT)
		return bpf_redirect_neigh(skb->ifindex, NULL, 0, 0);
	return TC_ACT_OK;
}

/* np_to_wire: packets leaving the node's uplink; replies of local backends
 * to a NodePort's clients are translated back (SNATed flows' replies never
 * pass here: they arrive at the uplink and leave by redirect). */
static __always_inline int NPF(to_wire)(struct __sk_buff *skb)
{
	struct NPF(scratch) *s;
	struct NPF(ct) *ct;
	struct LBF(pkt) p;
	NP_SCRATCH_DECL;

	if (LBF(parse)(skb, &p) != LB_GO || p.proto == NP_ICMP || !p.has_l4)
		return TC_ACT_OK;
	if (!lb_maybe_backend_port(p.sport))
		return TC_ACT_OK;
	s = NP_SCRATCH;
	if (!s)
		return TC_ACT_OK;
	LBF(ct_key_set)(&s->rk, &p.saddr, &p.daddr, p.sport, p.dport, p.proto, LB_CT_REV);
	ct = bpf_map_lookup_elem(&NPF(conntrack), &s->rk);
	if (!ct || (ct->flags & NP_CT_SNAT))
		return TC_ACT_OK;
	s->to.saddr = ct->addr;
	s->to.sport = ct->port;
	s->to.daddr = p.daddr;
	s->to.dport = p.dport;
	if (LBF(rewrite)(skb, &p, &s->to) < 0) {
		np_count(NP_STAT_ERROR);
		return TC_ACT_SHOT;
	}
	np_count(NP_STAT_RNAT);
	if (p.tcp_rst) {
		LBF(ct_key_set)(&s->fk, &p.daddr, &s->to.saddr, p.dport, s->to.sport, p.proto, LB_CT_FWD);
		NPF(close)(&s->fk, &s->rk);
	}
	return TC_ACT_OK;
}

#undef NPF
#undef LBF
#undef NP_ADDR
#undef NP_ICMP
#undef NP_MAYBE_VIP
#undef NP_PICK
#undef NP_FIB
#undef NP_SCRATCH_DECL
#undef NP_SCRATCH
#undef NP_SCRATCH_MAP
