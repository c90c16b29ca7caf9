/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * policy_fam.h: policy.h's per-family half, written once for IPv4 and
 * IPv6: the maps keyed by addresses (pol4_eps, pol4_ipcache, pol4_flows,
 * pol4_frags, pol4_frontends and their pol6_ twins) and the two decisions,
 * POLF(egress) and POLF(ingress). Not a header of its own: policy.c
 * includes it once per family, after defining
 *
 *   POLF(name)          the family's name: pol4_##name or pol6_##name;
 *   POL_ADDR            the address type: __be32 or struct pol6_addr;
 *   POL_ADDR_BITS       32 or 128;
 *   POL_IS_HAIRPIN(a)   *a is the Service plane's hairpin source (a pod
 *                       that reached itself through a Service);
 *
 * and struct POLF(pkt) (saddr, daddr, frag_id, sport, dport, proto, kind)
 * with POLF(parse)(skb, p) returning POL_GO, POL_PASS or POL_BROKEN. The
 * macros are undefined again at the end.
 */

/* pol_eps4/6: a pod's address -> its endpoint. */
POL_SLOTS(POLF(eps), POLF(eps_inner), BPF_MAP_TYPE_HASH, POL_MAX_EPS, POL_ADDR, struct pol_ep);

/* pol_ipcache4/6: a prefix (pods' addresses, ipBlocks, excepts) -> its identity. */
struct POLF(lpm_key) {
	__u32 prefixlen;
	POL_ADDR addr;
};

POL_SLOTS(POLF(ipcache), POLF(ipcache_inner), BPF_MAP_TYPE_LPM_TRIE, POL_MAX_PREFIXES, struct POLF(lpm_key), __u32);

/* pol_flows4/6: a flow's tuple as the packet carries it -> its decision. */
struct POLF(flow_key) {
	POL_ADDR saddr, daddr;
	__be16 sport, dport;
	__u8 proto;
	__u8 pad[3];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, POL_MAX_FLOWS);
	__type(key, struct POLF(flow_key));
	__type(value, struct pol_flow);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} POLF(flows) SEC(".maps");

/* pol_frags4/6: datagrams whose first fragment was allowed here. */
struct POLF(frag_key) {
	POL_ADDR saddr, daddr;
	__be32 id;
	__u8 proto;
	__u8 pad[3];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, POL_MAX_FRAGS);
	__type(key, struct POLF(frag_key));
	__type(value, __u8);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} POLF(frags) SEC(".maps");

/* pol_frontends4/6: the Service plane's lb_services / lb6_services (their
 * layout; replaced at load). Not pinned: empty when no Service plane is given. */
struct POLF(svc_key) {
	POL_ADDR vip;
	__be16 port;
	__u8 proto;
	__u8 scope;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, POL_MAX_SERVICES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct POLF(svc_key));
	__type(value, struct pol_svc);
} POLF(frontends) SEC(".maps");

/* POLF(identity): the identity of address a (its most specific prefix). */
static __always_inline __u32 POLF(identity)(__u32 slot, const POL_ADDR *a)
{
	struct POLF(lpm_key) k = { .prefixlen = POL_ADDR_BITS, .addr = *a };
	void *ipc = bpf_map_lookup_elem(&POLF(ipcache), &slot);
	__u32 *id;

	if (!ipc)
		return POL_ID_WORLD;
	id = bpf_map_lookup_elem(ipc, &k);
	return id ? *id : POL_ID_WORLD;
}

static __always_inline int POLF(frontend)(const struct POLF(pkt) *p)
{
	struct POLF(svc_key) k = { .vip = p->daddr, .port = p->dport, .proto = p->proto, .scope = POL_SCOPE_ALL };

	return p->dport && bpf_map_lookup_elem(&POLF(frontends), &k) != NULL;
}

static __always_inline void POLF(flow_key_of)(const struct POLF(pkt) *p, struct POLF(flow_key) *k, int reply)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->proto = p->proto;
	if (reply) {
		k->saddr = p->daddr;
		k->daddr = p->saddr;
		k->sport = p->dport;
		k->dport = p->sport;
		return;
	}
	k->saddr = p->saddr;
	k->daddr = p->daddr;
	k->sport = p->sport;
	k->dport = p->dport;
}

/* POLF(frag_allowed): a first fragment passed here: its datagram's later
 * fragments (which carry no ports) follow it. */
static __always_inline void POLF(frag_allowed)(const struct POLF(pkt) *p)
{
	struct POLF(frag_key) k = { .saddr = p->saddr, .daddr = p->daddr, .id = p->frag_id, .proto = p->proto };
	__u8 one = 1;

	if (p->kind == POL_FRAG_FIRST)
		bpf_map_update_elem(&POLF(frags), &k, &one, BPF_ANY);
}

/* POLF(later_frag): a fragment without its L4 header passes when its
 * datagram's first fragment passed here; else only where nothing is
 * isolated (a first fragment arriving after it is judged as usual). */
static __always_inline int POLF(later_frag)(const struct POLF(pkt) *p, int isolated)
{
	struct POLF(frag_key) k = { .saddr = p->saddr, .daddr = p->daddr, .id = p->frag_id, .proto = p->proto };

	if (bpf_map_lookup_elem(&POLF(frags), &k)) {
		pol_count(POL_STAT_FRAG_PASS);
		return POL_ACCEPT;
	}
	if (!isolated) {
		pol_count(POL_STAT_UNISOLATED);
		return POL_ACCEPT;
	}
	pol_count(POL_STAT_FRAG_DROP);
	return POL_DROP;
}

/* POLF(remember): p's flow was allowed with flags in generation gen, at
 * now: its entry, its reply's, and its datagram's when it is a first
 * fragment. */
static __always_inline void POLF(remember)(const struct POLF(pkt) *p, __u8 flags, __u32 gen, __u64 now)
{
	struct POLF(flow_key) k;
	struct pol_flow f = { .seen = now, .gen = gen, .flags = flags };

	POLF(flow_key_of)(p, &k, 0);
	bpf_map_update_elem(&POLF(flows), &k, &f, BPF_ANY);
	POLF(flow_key_of)(p, &k, 1);
	f.flags = POL_FLOW_REPLY;
	bpf_map_update_elem(&POLF(flows), &k, &f, BPF_ANY);
	POLF(frag_allowed)(p);
}

/* POLF(deny): drop p, and the entries an earlier decision left for its
 * flow (so that no "reply" of it passes either): known, when its entry
 * was found, live or not. */
static __always_inline int POLF(deny)(const struct POLF(pkt) *p, int known)
{
	struct POLF(flow_key) k;

	if (known) {
		POLF(flow_key_of)(p, &k, 0);
		bpf_map_delete_elem(&POLF(flows), &k);
		POLF(flow_key_of)(p, &k, 1);
		bpf_map_delete_elem(&POLF(flows), &k);
	}
	pol_count(POL_STAT_DENIED);
	return POL_DROP;
}

/* POLF(begin): parse p and read the rules in force (*v); their endpoints
 * map, or NULL when the packet passes unjudged (not the policies'
 * business, or no rules loaded). *r: the parse's verdict. */
static __always_inline void *POLF(begin)(struct __sk_buff *skb, struct POLF(pkt) *p, struct pol_view *v, int *r)
{
	*r = POLF(parse)(skb, p);
	if (*r == POL_PASS || pol_view_of(v) < 0)
		return NULL;
	return bpf_map_lookup_elem(&POLF(eps), &v->slot);
}

/* POLF(egress): a packet the pod sends (its interface's egress), before any
 * Service translation. The sender is the pod of its source address. */
static __always_inline int POLF(egress)(struct __sk_buff *skb)
{
	struct POLF(flow_key) k;
	struct POLF(pkt) p;
	struct pol_view v;
	struct pol_flow *found, *f;
	struct pol_ep *ep;
	void *eps;
	__u8 flags = POL_FLOW_EG;
	__u64 now;
	int r;

	eps = POLF(begin)(skb, &p, &v, &r);
	if (!eps)
		return POL_ACCEPT;
	ep = bpf_map_lookup_elem(eps, &p.saddr);
	if (!ep || !(ep->flags & (POL_ISO_IN | POL_ISO_EG)) || (r == POL_BROKEN && !(ep->flags & POL_ISO_EG))) {
		pol_count(POL_STAT_UNISOLATED);
		return POL_ACCEPT;
	}
	if (r == POL_BROKEN) {
		pol_count(POL_STAT_UNPARSED);
		return POL_DROP;
	}
	if (POL_IS_HAIRPIN(&p.daddr)) {
		pol_count(POL_STAT_HAIRPIN);
		return POL_ACCEPT;
	}
	if (p.kind == POL_FRAG_LATER)
		return POLF(later_frag)(&p, ep->flags & POL_ISO_EG);
	POLF(flow_key_of)(&p, &k, 0);
	found = bpf_map_lookup_elem(&POLF(flows), &k);
	now = bpf_jiffies64();
	f = pol_flow_live(found, p.proto, now);
	if (f && ((f->flags & POL_FLOW_REPLY) || (f->gen == v.gen && (f->flags & POL_FLOW_EG)))) {
		POLF(frag_allowed)(&p);
		pol_count(POL_STAT_FLOW);
		return POL_ACCEPT;
	}
	if (!(ep->flags & POL_ISO_EG)) {
		pol_count(POL_STAT_ALLOWED);
	} else if (POLF(frontend)(&p)) {
		flags |= POL_FLOW_DEFER;
		pol_count(POL_STAT_DEFERRED);
	} else if (pol_allows(v.rules, ep->id, POLF(identity)(v.slot, &p.daddr), POL_DIR_EG, p.proto, p.dport)) {
		pol_count(POL_STAT_ALLOWED);
	} else {
		return POLF(deny)(&p, found != NULL);
	}
	POLF(remember)(&p, flags, v.gen, now);
	return POL_ACCEPT;
}

/* POLF(ingress): a packet the pod receives (its interface's ingress), after
 * every translation. Decides the receiver's ingress and, when the sender
 * is a pod isolated for egress that has not decided this tuple (a Service
 * translated it after the sender's interface), the sender's egress. */
static __always_inline int POLF(ingress)(struct __sk_buff *skb)
{
	struct POLF(flow_key) k;
	struct POLF(pkt) p;
	struct pol_view v;
	struct pol_flow *found, *f;
	struct pol_ep *ep, *src;
	void *eps;
	__u8 have = 0;
	__u32 src_id = 0; /* the sender's identity when it is a pod */
	__u64 now;
	int need_in, need_eg = 0, r;

	eps = POLF(begin)(skb, &p, &v, &r);
	if (!eps)
		return POL_ACCEPT;
	ep = bpf_map_lookup_elem(eps, &p.daddr);
	if (!ep)
		return POL_ACCEPT;
	if (POL_IS_HAIRPIN(&p.saddr)) {
		pol_count(POL_STAT_HAIRPIN);
		return POL_ACCEPT;
	}
	src = bpf_map_lookup_elem(eps, &p.saddr);
	if (src) {
		src_id = src->id;
		need_eg = src->flags & POL_ISO_EG;
	}
	need_in = ep->flags & POL_ISO_IN;
	if ((!(ep->flags & (POL_ISO_IN | POL_ISO_EG)) && !need_eg) || (r == POL_BROKEN && !need_in && !need_eg)) {
		pol_count(POL_STAT_UNISOLATED);
		return POL_ACCEPT;
	}
	if (r == POL_BROKEN) {
		pol_count(POL_STAT_UNPARSED);
		return POL_DROP;
	}
	if (p.kind == POL_FRAG_LATER)
		return POLF(later_frag)(&p, need_in || need_eg);
	POLF(flow_key_of)(&p, &k, 0);
	found = bpf_map_lookup_elem(&POLF(flows), &k);
	now = bpf_jiffies64();
	f = pol_flow_live(found, p.proto, now);
	if (f) {
		if (f->flags & POL_FLOW_REPLY)
			have = POL_FLOW_EG | POL_FLOW_IN;
		else if (f->gen == v.gen)
			have = f->flags;
	}
	if ((have & (POL_FLOW_EG | POL_FLOW_IN)) == (POL_FLOW_EG | POL_FLOW_IN)) {
		POLF(frag_allowed)(&p);
		pol_count(POL_STAT_FLOW);
		return POL_ACCEPT;
	}
	if (need_eg && !(have & POL_FLOW_EG) && !pol_allows(v.rules, src_id, ep->id, POL_DIR_EG, p.proto, p.dport))
		return POLF(deny)(&p, found != NULL);
	if (need_in && !(have & POL_FLOW_IN) &&
	    !pol_allows(v.rules, ep->id, src_id ? src_id : POLF(identity)(v.slot, &p.saddr), POL_DIR_IN, p.proto, p.dport))
		return POLF(deny)(&p, found != NULL);
	pol_count(POL_STAT_ALLOWED);
	POLF(remember)(&p, POL_FLOW_EG | POL_FLOW_IN, v.gen, now);
	return POL_ACCEPT;
}

#undef POLF
#undef POL_ADDR
#undef POL_ADDR_BITS
#undef POL_IS_HAIRPIN
