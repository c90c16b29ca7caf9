/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * lb_fam.h: lb.h's conntrack, fragment, backend pick and sessionAffinity helpers, written once for
 * IPv4 and IPv6. Not a header of its own: lb.h includes it for IPv4 and
 * lb6.h for IPv6, after defining
 *
 *   LBF(name)           the family's name: lb_##name or lb6_##name
 *                       (lb_conntrack, struct lb6_pkt, lb6_ct_close, ...);
 *   LB_ADDR             the address type: __be32 or struct lb6_addr;
 *   LB_ADDR_EQ(a, b)    whether the addresses at a and b are equal.
 *
 * lb_pod_fam.h has the programs' bodies. The macros are undefined again at
 * the end.
 */

/* A TCP RST ends its flow: both conntrack entries go at once, so the next
 * flows reuse them while they are still in cache instead of the LRU
 * evicting cold ones (a connection-rate test opens ~10k flows a second). A
 * FIN is left to the LRU: ACKs follow it. Keys are built before the first
 * delete (which may free what ct points to). */
static __always_inline void LBF(ct_close)(const struct LBF(ct_key) *fk, const struct LBF(ct_key) *rk)
{
	bpf_map_delete_elem(&LBF(conntrack), rk);
	bpf_map_delete_elem(&LBF(conntrack), fk);
}

/* lb_frag_remember: the first fragment of a translated datagram leaves its
 * ports for the fragments that follow (same source, destination, id and
 * protocol). */
static __always_inline void LBF(frag_remember)(const struct LBF(pkt) *p)
{
	struct LBF(frag_key) fk = { .saddr = p->saddr, .daddr = p->daddr, .id = p->frag_id, .proto = p->proto };
	struct lb_frag f = { .sport = p->sport, .dport = p->dport };

	if (p->first_frag)
		bpf_map_update_elem(&LBF(frags), &fk, &f, BPF_ANY);
}

/* lb_ct_key_set: the conntrack key k of tuple saddr:sport -> daddr:dport in
 * direction dir. */
static __always_inline void LBF(ct_key_set)(struct LBF(ct_key) *k, const LB_ADDR *saddr, const LB_ADDR *daddr, __be16 sport,
					__be16 dport, __u8 proto, __u8 dir)
{
	k->saddr = *saddr;
	k->daddr = *daddr;
	k->sport = sport;
	k->dport = dport;
	k->proto = proto;
	k->dir = dir;
	k->pad = 0;
}

/* lb_ct_key_of: the conntrack key of packet p's own tuple in direction dir. */
static __always_inline void LBF(ct_key_of)(struct LBF(ct_key) *k, const struct LBF(pkt) *p, __u8 dir)
{
	LBF(ct_key_set)(k, &p->saddr, &p->daddr, p->sport, p->dport, p->proto, dir);
}

/* lb_forget_stale: a pod opens a flow straight to a backend with the very
 * tuple a translated flow had after translation (it reused the source port
 * of an earlier connection to the Service). That earlier flow is over, but
 * its reverse entry would still turn this flow's replies into the
 * clusterIP's, and the pod would drop them: forget it. Only first packets
 * are checked (a TCP SYN; any UDP datagram, UDP has no first), and only
 * towards ports where some backend listens. */
static __always_inline void LBF(forget_stale)(const struct LBF(pkt) *p)
{
	struct LBF(ct_key) rk = {};

	if (p->proto == IPPROTO_TCP) {
		if (!p->tcp_syn || p->tcp_ack)
			return;
	} else if (p->proto != IPPROTO_UDP) {
		return;
	}
	if (!lb_maybe_backend_port(p->dport))
		return;
	LBF(ct_key_set)(&rk, &p->daddr, &p->saddr, p->dport, p->sport, p->proto, LB_CT_REV);
	if (bpf_map_lookup_elem(&LBF(conntrack), &rk))
		bpf_map_delete_elem(&LBF(conntrack), &rk);
}

/* lb_slot_find: lb_backend_slot's keys, in a per-CPU scratch (its
 * callers' stack has none to spare). */
struct LBF(slot_find) {
	struct lb_backend_key bk;
	struct LBF(slot_key) sk;
};

LB_SCRATCH(LBF(slot_find), struct LBF(slot_find));

/* lb_slot_holds: whether slot bk->slot holds backend sk->ip:port. */
static __always_inline int LBF(slot_holds)(const struct lb_backend_key *bk, const struct LBF(slot_key) *sk)
{
	struct LBF(backend) *b = bpf_map_lookup_elem(&LBF(backends), bk);

	return b && LB_ADDR_EQ(&b->ip, &sk->ip) && b->port == sk->port;
}

/* lb_backend_slot: the slot among svc's first n that holds backend
 * *ip:port, or -1 when none does (it left the Service, or is not among
 * those n). The slot it had, hint, is looked at first: one lookup while
 * nothing moved. UpdateService keeps remaining backends in their slots,
 * except one beyond a shrunk count, which moves into a freed slot, and one
 * that turns from taking new flows to only keeping its own (or back): such
 * a backend is found by its address in lb_slots, whatever the slot. Both a
 * remembered sessionAffinity (lb_affinity_keep: the backends for new
 * flows) and an established UDP flow (lb_pod_fam.h: those and the kept
 * ones) ask here whether their backend is still the Service's. A global
 * function: the verifier checks it once, not again on every path of every
 * caller, for a call's cost. */
__attribute__((noinline)) int LBF(backend_slot)(const struct lb_svc *svc, const LB_ADDR *ip, __be16 port, __u32 hint, __u32 n)
{
	/* hint and n in one register: with svc, ip and port they are what
	 * lives across the first call, and the callee-saved registers hold
	 * four (host_from_pod's stack leaves this frame 16 bytes). */
	__u64 hn = (__u64)n << 32 | hint;
	struct LBF(slot_find) *f;
	__u32 zero = 0, *at;

	if (!svc || !ip)
		return -1;
	asm volatile("" : "+r"(hn)); /* made now, not after the call */
	f = bpf_map_lookup_elem(&LBF(slot_find), &zero);
	if (!f)
		return -1;
	f->bk.svc_id = svc->id;
	f->sk.svc_id = svc->id;
	f->sk.ip = *ip;
	f->sk.port = port;
	f->sk.pad = 0;
	f->bk.slot = (__u32)hn;
	if ((__u32)hn < (__u32)(hn >> 32) && LBF(slot_holds)(&f->bk, &f->sk))
		return (__u32)hn;
	at = bpf_map_lookup_elem(&LBF(slots), &f->sk);
	if (!at || *at >= (__u32)(hn >> 32))
		return -1;
	f->bk.slot = *at;
	if (!LBF(slot_holds)(&f->bk, &f->sk))
		return -1;
	return f->bk.slot;
}

/* lb_affinity_keep: the slot whose backend a remembered affinity a (NULL:
 * none) keeps, or -1 (none, expired, or the backend no longer takes the
 * Service's new flows). */
static __always_inline int LBF(affinity_keep)(const struct lb_svc *svc, const struct LBF(affinity) *a, __u64 now)
{
	if (!a || now - a->last_ns > (__u64)svc->affinity_timeout * 1000000000ULL)
		return -1;
	return LBF(backend_slot)(svc, &a->ip, a->port, a->slot, svc->count);
}

/* lb_pick: where lb_pick_backend builds the affinity's key and value (a
 * per-CPU scratch: IPv6's from_pod has no stack to spare for them). */
struct LBF(pick) {
	struct LBF(affinity_key) key;
	struct LBF(affinity) val;
};

LB_SCRATCH(LBF(pick), struct LBF(pick));

/* lb_pick_backend: the backend of a new flow p to svc: under
 * sessionAffinity the one the client's last new flow to the Service port
 * got (through any of its frontends: lb_affinity_id), and the memory is
 * refreshed; else the slot the flow's hash names. Its slot in *slot_out
 * (unless NULL). NULL when that slot is empty (never while the Go side
 * keeps count <= the slots filled). Shared by from_pod and nodeport_in. */
static __always_inline struct LBF(backend) *LBF(pick_backend)(const struct lb_svc *svc, const struct LBF(pkt) *p, __u32 hash,
							       __u32 *slot_out)
{
	struct lb_backend_key bk = { .svc_id = svc->id, .slot = hash % svc->count };
	struct LBF(backend) *b;
	struct LBF(pick) *s;
	__u32 zero = 0;
	__u64 now;
	int slot;

	if (slot_out)
		*slot_out = bk.slot;
	if (!(svc->flags & LB_SVC_AFFINITY))
		return bpf_map_lookup_elem(&LBF(backends), &bk);
	s = bpf_map_lookup_elem(&LBF(pick), &zero);
	if (!s)
		return NULL;
	__builtin_memset(&s->key, 0, sizeof(s->key));
	s->key.client = p->saddr;
	s->key.svc_id = lb_affinity_id(svc);
	now = bpf_ktime_get_ns();
	slot = LBF(affinity_keep)(svc, bpf_map_lookup_elem(&LBF(affinity), &s->key), now);
	if (slot >= 0)
		bk.slot = slot;
	if (slot_out)
		*slot_out = bk.slot;
	b = bpf_map_lookup_elem(&LBF(backends), &bk);
	if (b) {
		__builtin_memset(&s->val, 0, sizeof(s->val));
		s->val.last_ns = now;
		s->val.ip = b->ip;
		s->val.port = b->port;
		s->val.slot = bk.slot;
		bpf_map_update_elem(&LBF(affinity), &s->key, &s->val, BPF_ANY);
	}
	return b;
}

/* lb_maybe_svc: whether p's destination may be a clusterIP (the prefilter). */
static __always_inline int LBF(maybe_svc)(const struct LBF(pkt) *p)
{
	return LBF(maybe_vip)(&p->daddr);
}

/* lb_svc_of: the Service packet p is sent to (prefilter, then
 * lb_services), or NULL: then p may be a direct flow with a translated
 * one's tuple (lb_forget_stale). */
static __always_inline struct lb_svc *LBF(svc_of)(const struct LBF(pkt) *p)
{
	struct LBF(svc_key) sk = {};
	struct lb_svc *svc = NULL;

	if (LBF(maybe_svc)(p)) {
		sk.vip = p->daddr;
		sk.port = p->dport;
		sk.proto = p->proto;
		svc = bpf_map_lookup_elem(&LBF(services), &sk);
	}
	if (!svc)
		LBF(forget_stale)(p);
	return svc;
}

/* lb_ct_new: a new flow p of svc given backend *ip:port (from slot) writes
 * its forward entry fk and its reverse entry rk, reverse first: a reply can
 * never find the flow half-made. */
static __always_inline void LBF(ct_new)(const struct LBF(pkt) *p, const struct lb_svc *svc, const struct LBF(ct_key) *fk,
					const struct LBF(ct_key) *rk, const LB_ADDR *ip, __be16 port, __u8 hairpin, __u32 slot)
{
	struct LBF(ct) fwd = {}, rev = {};

	fwd.addr = *ip;
	fwd.port = port;
	fwd.flags = hairpin ? LB_CT_HAIRPIN : 0;
	fwd.client = p->saddr;
	fwd.svc_id = svc->id;
	fwd.slot = slot;
	rev.addr = p->daddr;
	rev.port = p->dport;
	rev.flags = fwd.flags;
	rev.client = p->saddr;
	rev.svc_id = svc->id;
	bpf_map_update_elem(&LBF(conntrack), rk, &rev, BPF_ANY);
	bpf_map_update_elem(&LBF(conntrack), fk, &fwd, BPF_ANY);
}

#undef LBF
#undef LB_ADDR
#undef LB_ADDR_EQ
