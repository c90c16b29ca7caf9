/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * sock_fam.h: sock.c's per-family half, written once for IPv4 and IPv6.
 * Not a header of its own: sock.c includes it twice, once per family,
 * after defining
 *
 *   SOCKF(name)          the family's name of a sock.c map, type or
 *                        function: sock_##name or sock6_##name;
 *   LBF(name)            the same for lb.h's and lb6.h's: lb_##name or
 *                        lb6_##name (lb_services, struct lb6_backend, ...);
 *   SOCK_ADDR            the address type: __be32 or struct lb6_addr;
 *   SOCK_ADDR_EQ(a, b)   whether the addresses at a and b are equal;
 *   SOCK_DEST_FREE(d)    whether sock_dests' pair d is free;
 *   SOCK_REV_PAD         sock_rev_key's pad: a scalar, or an array suffix;
 *   SOCK_SK_PEER(sk, a)  reads a kernel socket's peer address to *a
 *                        (< 0: could not).
 *
 * So a map, a struct or a function here is the one the IPv4 code calls
 * sock_conns, struct sock_dest, sock_xlate, ... and the IPv6 code
 * sock6_conns, struct sock6_dest, sock6_xlate, ...: the names, map
 * layouts and pins are those the Go side reads. The macros above are
 * undefined again at the end.
 */

struct SOCKF(rev_key) {
	__u64 cookie;
	SOCK_ADDR addr; /* backend */
	__be16 port;
	__u16 pad SOCK_REV_PAD;
};

struct SOCKF(rev_val) {
	SOCK_ADDR vip;
	__be16 port;
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1 << 16);
	__type(key, struct SOCKF(rev_key));
	__type(value, struct SOCKF(rev_val));
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SOCKF(rev) SEC(".maps");

/* sock_conns: the peer of each connected socket, at index cookie %
 * SOCK_CONNS (see there). */
struct SOCKF(conn) {
	__u64 cookie; /* 0: never used */
	SOCK_ADDR backend;
	SOCK_ADDR vip;
	__be16 bport;
	__be16 vport;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SOCK_CONNS);
	__type(key, __u32);
	__type(value, struct SOCKF(conn));
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SOCKF(conns) SEC(".maps");

/* sock_dests: an unconnected UDP socket's {backend -> clusterIP} pairs, one
 * per backend it sent to (one per Service: sendmsg picks the same backend
 * of a Service for the whole socket). Free: SOCK_DEST_FREE. */
struct SOCKF(dest) {
	SOCK_ADDR backend;
	SOCK_ADDR vip;
	__be16 bport;
	__be16 vport;
};

struct SOCKF(dest_set) {
	struct SOCKF(dest) d[SOCK_DESTS];
	__u32 spilled; /* pairs beyond SOCK_DESTS went to sock_rev */
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct SOCKF(dest_set));
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SOCKF(dests) SEC(".maps");

/* sock_affinity: sessionAffinity at the socket (sock_affinity_key), values
 * as lb_affinity's (lb6_affinity's: an IPv6 backend). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LB_MAX_AFFINITY);
	__type(key, struct sock_affinity_key);
	__type(value, struct LBF(affinity));
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SOCKF(affinity) SEC(".maps");

/* sock_keep: what sock_terminate_udp keeps (see sock.c). */
struct SOCKF(keep_key) {
	SOCK_ADDR vip;
	SOCK_ADDR backend; /* all zero: the frontend itself */
	__be16 vport;
	__be16 bport;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 16);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct SOCKF(keep_key));
	__type(value, __u8);
} SOCKF(keep) SEC(".maps"); /* not pinned: filled and read by one process at a time */

/* sock_rev_spill remembers a pair in sock_rev (see sock_dests). */
static __always_inline void SOCKF(rev_spill)(__u64 cookie, const SOCK_ADDR *backend, __be16 bport, const SOCK_ADDR *vip, __be16 vport)
{
	struct SOCKF(rev_key) rk = {};
	struct SOCKF(rev_val) rv = {};

	rk.cookie = cookie;
	rk.addr = *backend;
	rk.port = bport;
	rv.vip = *vip;
	rv.port = vport;
	bpf_map_update_elem(&SOCKF(rev), &rk, &rv, BPF_ANY);
}

/* sock_remember_peer: connect() gives a socket one peer, replacing any
 * earlier one (a reconnected UDP socket hears only its new peer). */
static __always_inline void SOCKF(remember_peer)(struct bpf_sock_addr *ctx, const SOCK_ADDR *backend, __be16 bport, const SOCK_ADDR *vip, __be16 vport)
{
	__u64 cookie = bpf_get_socket_cookie(ctx);
	__u32 i = (__u32)cookie & (SOCK_CONNS - 1);
	struct SOCKF(conn) *c = bpf_map_lookup_elem(&SOCKF(conns), &i);

	if (!c)
		return;
	c->cookie = cookie;
	c->backend = *backend;
	c->bport = bport;
	c->vip = *vip;
	c->vport = vport;
}

/* sock_remember_dest: sendto() adds a pair to an unconnected socket's
 * (or refreshes its clusterIP: last writer wins, as in sock_rev). After
 * the first datagram to a Service, the next ones find their pair. */
static __always_inline void SOCKF(remember_dest)(struct bpf_sock_addr *ctx, __u64 cookie, const SOCK_ADDR *backend, __be16 bport, const SOCK_ADDR *vip, __be16 vport)
{
	struct SOCKF(dest_set) *s = bpf_sk_storage_get(&SOCKF(dests), ctx->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	int i;

	if (!s) {
		SOCKF(rev_spill)(cookie, backend, bport, vip, vport);
		return;
	}
#pragma unroll
	for (i = 0; i < SOCK_DESTS; i++) {
		struct SOCKF(dest) *d = &s->d[i];

		if (SOCK_DEST_FREE(d) || (d->bport == bport && SOCK_ADDR_EQ(&d->backend, backend))) {
			d->backend = *backend;
			d->bport = bport;
			d->vip = *vip;
			d->vport = vport;
			return;
		}
	}
	s->spilled = 1;
	SOCKF(rev_spill)(cookie, backend, bport, vip, vport);
}

/* sock_xlate: when *addr:*port (proto) is a Service of the family, picks
 * the backend in slot seed % count, writes it to *addr:*port and remembers
 * it for the way back (how: SOCK_PEER for connect, SOCK_DEST for an
 * unconnected sendto). The caller writes the result to its ctx: user_ip4,
 * user_ip6, or a v4-mapped user_ip6's last word. */
static __always_inline int SOCKF(xlate)(struct bpf_sock_addr *ctx, __u8 proto, __u32 seed, __u64 cookie, int mine, int how, SOCK_ADDR *addr, __be16 *port)
{
	struct LBF(svc_key) k = {};
	struct lb_backend_key bk = {};
	struct sock_affinity_key ak = {};
	struct LBF(backend) *b;
	struct lb_svc *svc;
	__u64 now = 0;
	int slot;

	k.vip = *addr;
	k.port = *port;
	k.proto = proto;
	svc = bpf_map_lookup_elem(&LBF(services), &k);
	if (!svc)
		return SOCK_MISS;
	/* tc's (pods_via_tc): what only per-packet translation does as
	 * Kubernetes defines it (see pods_via_tc). */
	if (mine == SOCK_MINE_TC_BEHIND &&
	    (svc->count == 0 || (svc->flags & LB_SVC_AFFINITY) || (how == SOCK_PEER && proto == IPPROTO_UDP)))
		return SOCK_MISS;
	if (svc->count == 0) {
		sock_count(SOCK_STAT_NO_BACKEND);
		return SOCK_REJECT;
	}
	bk.svc_id = svc->id;
	bk.slot = seed % svc->count;
	if (svc->flags & LB_SVC_AFFINITY) {
		ak.netns = bpf_get_netns_cookie(ctx);
		ak.svc_id = lb_affinity_id(svc);
		now = bpf_ktime_get_ns();
		slot = LBF(affinity_keep)(svc, bpf_map_lookup_elem(&SOCKF(affinity), &ak), now);
		if (slot >= 0)
			bk.slot = slot;
	}
	b = bpf_map_lookup_elem(&LBF(backends), &bk);
	if (!b) {
		sock_count(SOCK_STAT_NO_BACKEND);
		return SOCK_REJECT;
	}
	if (svc->flags & LB_SVC_AFFINITY) {
		struct LBF(affinity) a;

		__builtin_memset(&a, 0, sizeof(a)); /* IPv4's has tail padding */
		a.last_ns = now;
		a.ip = b->ip;
		a.port = b->port;
		a.slot = bk.slot;
		bpf_map_update_elem(&SOCKF(affinity), &ak, &a, BPF_ANY);
	}
	if (how == SOCK_PEER)
		SOCKF(remember_peer)(ctx, &b->ip, b->port, &k.vip, k.port);
	else
		SOCKF(remember_dest)(ctx, cookie, &b->ip, b->port, &k.vip, k.port);
	*addr = b->ip;
	*port = b->port;
	return SOCK_XLATED;
}

/* sock_rev_xlate: when *addr:*port is a backend this socket was sent to,
 * writes its clusterIP:port there and returns 1: the connected peer in
 * sock_conns, else the socket's sock_dests, else sock_rev for what did not
 * fit there. */
static __always_inline int SOCKF(rev_xlate)(struct bpf_sock_addr *ctx, SOCK_ADDR *addr, __be16 *port)
{
	__u64 cookie = bpf_get_socket_cookie(ctx);
	__u32 i = (__u32)cookie & (SOCK_CONNS - 1);
	struct SOCKF(conn) *c = bpf_map_lookup_elem(&SOCKF(conns), &i);
	struct SOCKF(dest_set) *s;
	struct SOCKF(rev_key) rk = {};
	struct SOCKF(rev_val) *rv;
	int j;

	if (c && c->cookie == cookie && c->bport == *port && SOCK_ADDR_EQ(&c->backend, addr)) {
		*addr = c->vip;
		*port = c->vport;
		return 1;
	}
	s = bpf_sk_storage_get(&SOCKF(dests), ctx->sk, 0, 0);
	if (s) {
#pragma unroll
		for (j = 0; j < SOCK_DESTS; j++) {
			struct SOCKF(dest) *d = &s->d[j];

			if (SOCK_DEST_FREE(d))
				break;
			if (d->bport == *port && SOCK_ADDR_EQ(&d->backend, addr)) {
				*addr = d->vip;
				*port = d->vport;
				return 1;
			}
		}
		if (!s->spilled)
			return 0;
	}
	rk.cookie = cookie;
	rk.addr = *addr;
	rk.port = *port;
	rv = bpf_map_lookup_elem(&SOCKF(rev), &rk);
	if (!rv)
		return 0;
	*addr = rv->vip;
	*port = rv->port;
	return 1;
}

/* sock_stale: whether socket sk (cookie) of the family was translated here
 * to a frontend under check whose backend it no longer keeps. */
static __always_inline int SOCKF(stale)(struct sock *sk, __u64 cookie)
{
	__u32 i = (__u32)cookie & (SOCK_CONNS - 1);
	struct SOCKF(keep_key) k = {};
	struct SOCKF(conn) *c;
	SOCK_ADDR peer;

	c = bpf_map_lookup_elem(&SOCKF(conns), &i);
	if (!c || c->cookie != cookie || c->bport != sk->__sk_common.skc_dport)
		return 0; /* not translated here (or its entry was reused) */
	if (SOCK_SK_PEER(sk, &peer) < 0 || !SOCK_ADDR_EQ(&peer, &c->backend))
		return 0;
	k.vip = c->vip;
	k.vport = c->vport;
	if (!bpf_map_lookup_elem(&SOCKF(keep), &k))
		return 0; /* a frontend not under check */
	k.backend = c->backend;
	k.bport = c->bport;
	return !bpf_map_lookup_elem(&SOCKF(keep), &k); /* stale unless its backend stays */
}

#undef SOCKF
#undef LBF
#undef SOCK_ADDR
#undef SOCK_ADDR_EQ
#undef SOCK_DEST_FREE
#undef SOCK_REV_PAD
#undef SOCK_SK_PEER
