// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * sock.c: Service translation at the socket (Cilium's socket-level load
 * balancer): cgroup sock_addr hooks on a lab's own cgroup.
 *
 *   connect4      connect(clusterIP:port) becomes connect(backend): TCP and
 *                 connected UDP never carry the clusterIP on the wire, so
 *                 no packet is translated (no per-packet NAT, no conntrack).
 *   sendmsg4      sendto(clusterIP:port) on an unconnected UDP socket: the
 *                 datagram goes to a backend (the same for the whole socket).
 *   recvmsg4      recvfrom() on that socket: a datagram from the backend is
 *                 reported as coming from clusterIP:port.
 *   getpeername4  getpeername() of a translated socket says clusterIP:port.
 *   connect6, sendmsg6, recvmsg6, getpeername6: the same for IPv6 sockets.
 *                 An IPv6 socket's v4-mapped address (::ffff:10.96.0.10)
 *                 is looked up among the IPv4 Services and becomes a
 *                 v4-mapped backend, as the kernel sends such a socket's
 *                 traffic over IPv4.
 *
 * The Services are lb.h's and lb6.h's maps (lb_services, lb_backends,
 * lb6_services, lb6_backends), pinned in the lab's bpffs directory and
 * shared with the tc programs: one `svc add` serves both. The way back (getpeername, recvfrom) needs to know which
 * backend stands for which clusterIP, per socket, without a hash insert
 * per connection (an LRU insert, with its locks and evictions, was most
 * of a translated connect's cost):
 *   sock_conns  connected sockets (connect4): an array indexed by the
 *               socket's cookie, one plain store; an entry is good while
 *               its cookie is the socket's (see SOCK_CONNS).
 *   sock_dests  unconnected UDP sockets (sendmsg4): socket local storage,
 *               up to SOCK_DESTS pairs, created by the socket's first
 *               datagram to a Service and freed with the socket.
 *   sock_rev    an LRU keyed by socket cookie, for what sock_dests has no
 *               room for (or a storage the kernel could not allocate).
 *   sock6_conns, sock6_dests, sock6_rev: the same for IPv6 addresses (a
 *               v4-mapped socket's pairs are IPv4 ones, in the maps above).
 *
 * only_netns: when set (at load time), connect4 and sendmsg4 translate only
 * sockets of that network namespace (its cookie), or, with pods_via_tc,
 * also the pods' sockets (see there). A Kubernetes node with
 * the tc programs on its pods' veths attaches these to the node's whole
 * cgroup for its own processes and hostNetwork pods, and leaves the pods
 * (their own namespaces) to tc: no connection is translated twice.
 */
#include "lb6.h"

/* lb6.h's lb6_tail program array names lb6_reject, a tc program of
 * service.c's. This object needs a program of that name for its ELF to
 * load; none of the socket programs uses the array, and the Go side drops
 * both from its spec (sock.go's open), so this stub never replaces the
 * real one in the lab's pinned array. */
SEC("tc")
int lb6_reject(struct __sk_buff *skb)
{
	return TC_ACT_OK;
}

/* From the socket API (linux/bpf.h does not carry them). */
#ifndef SOCK_STREAM
#define SOCK_STREAM 1
#define SOCK_DGRAM  2
#endif

struct sock_rev_key {
	__u64 cookie;
	__be32 addr; /* backend */
	__be16 port;
	__u16 pad;
};

struct sock_rev_val {
	__be32 vip;
	__be16 port;
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1 << 16);
	__type(key, struct sock_rev_key);
	__type(value, struct sock_rev_val);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sock_rev SEC(".maps");

/* sock_conns: the peer of each connected socket, at index cookie %
 * SOCK_CONNS. Socket cookies come from one counter (handed out to CPUs
 * in batches of 4096), so an entry is overwritten only after about
 * SOCK_CONNS newer sockets were given a cookie: it lives like an LRU entry
 * of a map that size, but costs a store, not an insert and an eviction.
 * A socket whose entry was reused sees its backend in getpeername(). */
#define SOCK_CONNS (1 << 18)

struct sock_conn {
	__u64 cookie; /* 0: never used */
	__be32 backend;
	__be32 vip;
	__be16 bport;
	__be16 vport;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SOCK_CONNS);
	__type(key, __u32);
	__type(value, struct sock_conn);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sock_conns SEC(".maps");

/* sock_dests: an unconnected UDP socket's {backend -> clusterIP} pairs, one
 * per backend it sent to (one per Service: sendmsg4 picks the same backend
 * of a Service for the whole socket). backend 0 = free. */
#define SOCK_DESTS 4

struct sock_dest {
	__be32 backend;
	__be32 vip;
	__be16 bport;
	__be16 vport;
};

struct sock_dest_set {
	struct sock_dest d[SOCK_DESTS];
	__u32 spilled; /* pairs beyond SOCK_DESTS went to sock_rev */
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sock_dest_set);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sock_dests SEC(".maps");

/* sock_affinity: sessionAffinity ClientIP at the socket. connect() comes
 * before the source address is chosen, so a client is its network
 * namespace (Cilium's socket LB does the same): a pod, whose one address
 * kube-proxy would key on, or the node itself (its processes and
 * hostNetwork pods share the node's address). Values as lb_affinity's. */
struct sock_affinity_key {
	__u64 netns; /* bpf_get_netns_cookie */
	__u32 svc_id;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LB_MAX_AFFINITY);
	__type(key, struct sock_affinity_key);
	__type(value, struct lb_affinity);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sock_affinity SEC(".maps");

/* sock6_affinity: sock_affinity for IPv6 Services (key as sock_affinity's,
 * values as lb6_affinity's: an IPv6 backend). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LB_MAX_AFFINITY);
	__type(key, struct sock_affinity_key);
	__type(value, struct lb6_affinity);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sock6_affinity SEC(".maps");

enum {
	SOCK_STAT_CONNECT = 0,    /* connect() translated */
	SOCK_STAT_SENDMSG = 1,    /* unconnected UDP datagrams translated */
	SOCK_STAT_REV = 2,        /* recvfrom()/getpeername() addresses translated back */
	SOCK_STAT_NO_BACKEND = 3, /* refused: a Service without backends (ECONNREFUSED) */
	SOCK_STAT_MAX = 4,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SOCK_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sock_stats SEC(".maps");

static __always_inline void sock_count(__u32 what)
{
	__u64 *v = bpf_map_lookup_elem(&sock_stats, &what);
	if (v)
		*v += 1;
}

volatile const __u64 only_netns = 0;

/* pods_via_tc (with only_netns; `vnetlab kube-proxy --socket-lb`): the
 * sockets of the other namespaces below the cgroup, the pods, whose veths
 * carry the tc programs, are translated too (Cilium's socket LB: no
 * per-packet NAT, no conntrack), except where only the tc programs behave
 * as Kubernetes defines it:
 *   - a Service without endpoints: tc answers the SYN or datagram with an
 *     ICMP port unreachable, as kube-proxy's REJECT (a connected UDP
 *     socket learns it at its send(), not at connect());
 *   - sessionAffinity ClientIP: keyed by the pod's address (tc's
 *     lb_affinity), as kube-proxy's;
 *   - connected UDP: a socket connected to a backend keeps it, and nothing
 *     runs on its later send()s (sendmsg4 sees unconnected sockets only),
 *     so it could never move when the backend goes; kube-proxy's conntrack
 *     cleanup moves such a flow to a live backend, and so does the proxy's
 *     ForgetUDPFlows on tc's conntrack.
 * Those calls go on untranslated and tc translates their packets. */
volatile const __u32 pods_via_tc = 0;

enum { SOCK_NOT_MINE = 0, SOCK_MINE = 1, SOCK_MINE_TC_BEHIND = 2 };

/* sock_mine: whether this socket's connect/sendmsg is ours to translate,
 * and whether the tc programs are behind it. */
static __always_inline int sock_mine(struct bpf_sock_addr *ctx)
{
	if (only_netns == 0 || bpf_get_netns_cookie(ctx) == only_netns)
		return SOCK_MINE;
	return pods_via_tc ? SOCK_MINE_TC_BEHIND : SOCK_NOT_MINE;
}

enum { SOCK_MISS = 0, SOCK_XLATED = 1, SOCK_REJECT = 2 };

static __always_inline __u32 sock_mix(__u64 c)
{
	__u32 h = (__u32)c ^ (__u32)(c >> 32);
	h ^= h >> 16;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h *= 0xc2b2ae35;
	h ^= h >> 16;
	return h;
}

/* sock_rev_spill remembers a pair in sock_rev (see sock_dests). */
static __always_inline void sock_rev_spill(__u64 cookie, __be32 backend, __be16 bport, __be32 vip, __be16 vport)
{
	struct sock_rev_key rk = {};
	struct sock_rev_val rv = {};

	rk.cookie = cookie;
	rk.addr = backend;
	rk.port = bport;
	rv.vip = vip;
	rv.port = vport;
	bpf_map_update_elem(&sock_rev, &rk, &rv, BPF_ANY);
}

/* sock_remember_peer: connect() gives a socket one peer, replacing any
 * earlier one (a reconnected UDP socket hears only its new peer). */
static __always_inline void sock_remember_peer(struct bpf_sock_addr *ctx, __be32 backend, __be16 bport, __be32 vip, __be16 vport)
{
	__u64 cookie = bpf_get_socket_cookie(ctx);
	__u32 i = (__u32)cookie & (SOCK_CONNS - 1);
	struct sock_conn *c = bpf_map_lookup_elem(&sock_conns, &i);

	if (!c)
		return;
	c->cookie = cookie;
	c->backend = backend;
	c->bport = bport;
	c->vip = vip;
	c->vport = vport;
}

/* sock_remember_dest: sendto() adds a pair to an unconnected socket's
 * (or refreshes its clusterIP: last writer wins, as in sock_rev). After
 * the first datagram to a Service, the next ones find their pair. */
static __always_inline void sock_remember_dest(struct bpf_sock_addr *ctx, __u64 cookie, __be32 backend, __be16 bport, __be32 vip, __be16 vport)
{
	struct sock_dest_set *s = bpf_sk_storage_get(&sock_dests, ctx->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	int i;

	if (!s) {
		sock_rev_spill(cookie, backend, bport, vip, vport);
		return;
	}
#pragma unroll
	for (i = 0; i < SOCK_DESTS; i++) {
		struct sock_dest *d = &s->d[i];

		if (d->backend == backend && d->bport == bport) {
			d->vip = vip;
			d->vport = vport;
			return;
		}
		if (d->backend == 0) {
			d->backend = backend;
			d->bport = bport;
			d->vip = vip;
			d->vport = vport;
			return;
		}
	}
	s->spilled = 1;
	sock_rev_spill(cookie, backend, bport, vip, vport);
}

enum { SOCK_PEER = 0, SOCK_DEST = 1 };

/* sock_xlate: when *addr:*port (proto) is an IPv4 Service, picks the
 * backend in slot seed % count, writes it to *addr:*port and remembers it
 * for the way back (how: SOCK_PEER for connect, SOCK_DEST for an
 * unconnected sendto). The caller writes the result to its ctx: user_ip4,
 * or a v4-mapped user_ip6. */
static __always_inline int sock_xlate(struct bpf_sock_addr *ctx, __u8 proto, __u32 seed, __u64 cookie, int mine, int how, __be32 *addr, __be16 *port)
{
	struct lb_svc_key k = {};
	struct lb_backend_key bk = {};
	struct sock_affinity_key ak = {};
	struct lb_backend *b;
	struct lb_svc *svc;
	__u64 now = 0;
	int slot;

	k.vip = *addr;
	k.port = *port;
	k.proto = proto;
	svc = bpf_map_lookup_elem(&lb_services, &k);
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
		ak.svc_id = svc->id;
		now = bpf_ktime_get_ns();
		slot = lb_affinity_keep(svc, bpf_map_lookup_elem(&sock_affinity, &ak), now);
		if (slot >= 0)
			bk.slot = slot;
	}
	b = bpf_map_lookup_elem(&lb_backends, &bk);
	if (!b) {
		sock_count(SOCK_STAT_NO_BACKEND);
		return SOCK_REJECT;
	}
	if (svc->flags & LB_SVC_AFFINITY) {
		struct lb_affinity a = lb_affinity_of(b, bk.slot, now);

		bpf_map_update_elem(&sock_affinity, &ak, &a, BPF_ANY);
	}
	if (how == SOCK_PEER)
		sock_remember_peer(ctx, b->ip, b->port, k.vip, k.port);
	else
		sock_remember_dest(ctx, cookie, b->ip, b->port, k.vip, k.port);
	*addr = b->ip;
	*port = b->port;
	return SOCK_XLATED;
}

/* sock_rev_xlate: when *addr:*port is a backend this socket was sent to,
 * writes its clusterIP:port there and returns 1: the connected peer in
 * sock_conns, else the socket's sock_dests, else sock_rev for what did not
 * fit there. */
static __always_inline int sock_rev_xlate(struct bpf_sock_addr *ctx, __be32 *addr, __be16 *port)
{
	__u64 cookie = bpf_get_socket_cookie(ctx);
	__u32 i = (__u32)cookie & (SOCK_CONNS - 1);
	struct sock_conn *c = bpf_map_lookup_elem(&sock_conns, &i);
	struct sock_dest_set *s;
	struct sock_rev_key rk = {};
	struct sock_rev_val *rv;
	int j;

	if (c && c->cookie == cookie && c->backend == *addr && c->bport == *port) {
		*addr = c->vip;
		*port = c->vport;
		return 1;
	}
	s = bpf_sk_storage_get(&sock_dests, ctx->sk, 0, 0);
	if (s) {
#pragma unroll
		for (j = 0; j < SOCK_DESTS; j++) {
			struct sock_dest *d = &s->d[j];

			if (d->backend == 0)
				break;
			if (d->backend == *addr && d->bport == *port) {
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
	rv = bpf_map_lookup_elem(&sock_rev, &rk);
	if (!rv)
		return 0;
	*addr = rv->vip;
	*port = rv->port;
	return 1;
}

/*
 * IPv6: the same, over lb6_services/lb6_backends and 128-bit addresses.
 * Sockets are IPv6 sockets here; a v4-mapped destination takes the IPv4
 * functions above on its last word (sock_v4mapped).
 */
struct sock6_rev_key {
	__u64 cookie;
	struct lb6_addr addr; /* backend */
	__be16 port;
	__u16 pad[3];
};

struct sock6_rev_val {
	struct lb6_addr vip;
	__be16 port;
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1 << 16);
	__type(key, struct sock6_rev_key);
	__type(value, struct sock6_rev_val);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sock6_rev SEC(".maps");

/* As sock_conns, at the same index (cookie % SOCK_CONNS). */
struct sock6_conn {
	__u64 cookie; /* 0: never used */
	struct lb6_addr backend;
	struct lb6_addr vip;
	__be16 bport;
	__be16 vport;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SOCK_CONNS);
	__type(key, __u32);
	__type(value, struct sock6_conn);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sock6_conns SEC(".maps");

/* As sock_dests; bport 0 = free (a backend's port is never 0). */
struct sock6_dest {
	struct lb6_addr backend;
	struct lb6_addr vip;
	__be16 bport;
	__be16 vport;
};

struct sock6_dest_set {
	struct sock6_dest d[SOCK_DESTS];
	__u32 spilled;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sock6_dest_set);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sock6_dests SEC(".maps");

/* The IPv6 hooks' address, one 32-bit word at a time (the only ctx access
 * the verifier allows for user_ip6). */
static __always_inline void sock6_get(struct bpf_sock_addr *ctx, struct lb6_addr *a)
{
	a->w[0] = ctx->user_ip6[0];
	a->w[1] = ctx->user_ip6[1];
	a->w[2] = ctx->user_ip6[2];
	a->w[3] = ctx->user_ip6[3];
}

static __always_inline void sock6_set(struct bpf_sock_addr *ctx, const struct lb6_addr *a)
{
	ctx->user_ip6[0] = a->w[0];
	ctx->user_ip6[1] = a->w[1];
	ctx->user_ip6[2] = a->w[2];
	ctx->user_ip6[3] = a->w[3];
}

/* sock_v4mapped: ::ffff:a.b.c.d, an IPv6 socket's way to an IPv4 peer. */
static __always_inline int sock_v4mapped(const struct lb6_addr *a)
{
	return a->w[0] == 0 && a->w[1] == 0 && a->w[2] == bpf_htonl(0xffff);
}

static __always_inline void sock6_rev_spill(__u64 cookie, const struct lb6_addr *backend, __be16 bport, const struct lb6_addr *vip, __be16 vport)
{
	struct sock6_rev_key rk = {};
	struct sock6_rev_val rv = {};

	rk.cookie = cookie;
	rk.addr = *backend;
	rk.port = bport;
	rv.vip = *vip;
	rv.port = vport;
	bpf_map_update_elem(&sock6_rev, &rk, &rv, BPF_ANY);
}

static __always_inline void sock6_remember_peer(struct bpf_sock_addr *ctx, const struct lb6_addr *backend, __be16 bport, const struct lb6_addr *vip, __be16 vport)
{
	__u64 cookie = bpf_get_socket_cookie(ctx);
	__u32 i = (__u32)cookie & (SOCK_CONNS - 1);
	struct sock6_conn *c = bpf_map_lookup_elem(&sock6_conns, &i);

	if (!c)
		return;
	c->cookie = cookie;
	c->backend = *backend;
	c->bport = bport;
	c->vip = *vip;
	c->vport = vport;
}

static __always_inline void sock6_remember_dest(struct bpf_sock_addr *ctx, __u64 cookie, const struct lb6_addr *backend, __be16 bport, const struct lb6_addr *vip, __be16 vport)
{
	struct sock6_dest_set *s = bpf_sk_storage_get(&sock6_dests, ctx->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	int i;

	if (!s) {
		sock6_rev_spill(cookie, backend, bport, vip, vport);
		return;
	}
#pragma unroll
	for (i = 0; i < SOCK_DESTS; i++) {
		struct sock6_dest *d = &s->d[i];

		if (d->bport == 0 || (d->bport == bport && lb6_addr_eq(&d->backend, backend))) {
			d->backend = *backend;
			d->bport = bport;
			d->vip = *vip;
			d->vport = vport;
			return;
		}
	}
	s->spilled = 1;
	sock6_rev_spill(cookie, backend, bport, vip, vport);
}

/* sock6_xlate: sock_xlate for an IPv6 Service. */
static __always_inline int sock6_xlate(struct bpf_sock_addr *ctx, __u8 proto, __u32 seed, __u64 cookie, int mine, int how, struct lb6_addr *addr, __be16 *port)
{
	struct lb6_svc_key k = {};
	struct lb_backend_key bk = {};
	struct sock_affinity_key ak = {};
	struct lb6_backend *b;
	struct lb_svc *svc;
	__u64 now = 0;
	int slot;

	k.vip = *addr;
	k.port = *port;
	k.proto = proto;
	svc = bpf_map_lookup_elem(&lb6_services, &k);
	if (!svc)
		return SOCK_MISS;
	/* As sock_xlate. */
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
		ak.svc_id = svc->id;
		now = bpf_ktime_get_ns();
		slot = lb6_affinity_keep(svc, bpf_map_lookup_elem(&sock6_affinity, &ak), now);
		if (slot >= 0)
			bk.slot = slot;
	}
	b = bpf_map_lookup_elem(&lb6_backends, &bk);
	if (!b) {
		sock_count(SOCK_STAT_NO_BACKEND);
		return SOCK_REJECT;
	}
	if (svc->flags & LB_SVC_AFFINITY) {
		struct lb6_affinity a = { .last_ns = now, .ip = b->ip, .port = b->port, .slot = bk.slot };

		bpf_map_update_elem(&sock6_affinity, &ak, &a, BPF_ANY);
	}
	if (how == SOCK_PEER)
		sock6_remember_peer(ctx, &b->ip, b->port, &k.vip, k.port);
	else
		sock6_remember_dest(ctx, cookie, &b->ip, b->port, &k.vip, k.port);
	*addr = b->ip;
	*port = b->port;
	return SOCK_XLATED;
}

/* sock6_rev_xlate: sock_rev_xlate for an IPv6 peer. */
static __always_inline int sock6_rev_xlate(struct bpf_sock_addr *ctx, struct lb6_addr *addr, __be16 *port)
{
	__u64 cookie = bpf_get_socket_cookie(ctx);
	__u32 i = (__u32)cookie & (SOCK_CONNS - 1);
	struct sock6_conn *c = bpf_map_lookup_elem(&sock6_conns, &i);
	struct sock6_dest_set *s;
	struct sock6_rev_key rk = {};
	struct sock6_rev_val *rv;
	int j;

	if (c && c->cookie == cookie && c->bport == *port && lb6_addr_eq(&c->backend, addr)) {
		*addr = c->vip;
		*port = c->vport;
		return 1;
	}
	s = bpf_sk_storage_get(&sock6_dests, ctx->sk, 0, 0);
	if (s) {
#pragma unroll
		for (j = 0; j < SOCK_DESTS; j++) {
			struct sock6_dest *d = &s->d[j];

			if (d->bport == 0)
				break;
			if (d->bport == *port && lb6_addr_eq(&d->backend, addr)) {
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
	rv = bpf_map_lookup_elem(&sock6_rev, &rk);
	if (!rv)
		return 0;
	*addr = rv->vip;
	*port = rv->port;
	return 1;
}

static __always_inline __u8 sock_proto(struct bpf_sock_addr *ctx)
{
	if (ctx->type == SOCK_STREAM && ctx->protocol == IPPROTO_TCP)
		return IPPROTO_TCP;
	if (ctx->type == SOCK_DGRAM && ctx->protocol == IPPROTO_UDP)
		return IPPROTO_UDP;
	return 0;
}

/* Return codes of sock_addr programs: 1 lets the call go on, 0 fails it
 * (EPERM, unless the program set another error first). */

/* sock_refuse fails the call as kube-proxy's REJECT makes it fail: a
 * Service without endpoints is refused with ECONNREFUSED (bpf_set_retval,
 * Linux 5.18; without it the call would fail with EPERM). */
#define SOCK_ECONNREFUSED 111

static __always_inline int sock_refuse(void)
{
	bpf_set_retval(-SOCK_ECONNREFUSED);
	return 0;
}

/* sock_done: a hook's answer after sock_xlate or sock6_xlate. */
static __always_inline int sock_done(int r, __u32 stat)
{
	if (r == SOCK_REJECT)
		return sock_refuse();
	if (r == SOCK_XLATED)
		sock_count(stat);
	return 1;
}

SEC("cgroup/connect4")
int sock_connect4(struct bpf_sock_addr *ctx)
{
	__u8 proto = sock_proto(ctx);
	__be32 addr = ctx->user_ip4;
	__be16 port = (__be16)ctx->user_port;
	int mine, r;

	if (!proto)
		return 1;
	mine = sock_mine(ctx);
	if (mine == SOCK_NOT_MINE)
		return 1;
	/* A new connection: a fresh random backend, as kube-proxy does. */
	r = sock_xlate(ctx, proto, bpf_get_prandom_u32(), 0, mine, SOCK_PEER, &addr, &port);
	if (r == SOCK_XLATED) {
		ctx->user_ip4 = addr;
		ctx->user_port = (__u32)port;
	}
	return sock_done(r, SOCK_STAT_CONNECT);
}

SEC("cgroup/sendmsg4")
int sock_sendmsg4(struct bpf_sock_addr *ctx)
{
	__be32 addr = ctx->user_ip4;
	__be16 port = (__be16)ctx->user_port;
	__u64 cookie;
	int mine, r;

	if (sock_proto(ctx) != IPPROTO_UDP)
		return 1;
	mine = sock_mine(ctx);
	if (mine == SOCK_NOT_MINE)
		return 1;
	/* One backend per socket (hash of its cookie): a client's datagrams
	 * and the replies it waits for stay with one backend. */
	cookie = bpf_get_socket_cookie(ctx);
	r = sock_xlate(ctx, IPPROTO_UDP, sock_mix(cookie), cookie, mine, SOCK_DEST, &addr, &port);
	if (r == SOCK_XLATED) {
		ctx->user_ip4 = addr;
		ctx->user_port = (__u32)port;
	}
	return sock_done(r, SOCK_STAT_SENDMSG);
}

/* sock_rev4: recvmsg4 and getpeername4. */
static __always_inline int sock_rev4(struct bpf_sock_addr *ctx)
{
	__be32 addr = ctx->user_ip4;
	__be16 port = (__be16)ctx->user_port;

	if (sock_rev_xlate(ctx, &addr, &port)) {
		ctx->user_ip4 = addr;
		ctx->user_port = (__u32)port;
		sock_count(SOCK_STAT_REV);
	}
	return 1;
}

SEC("cgroup/recvmsg4")
int sock_recvmsg4(struct bpf_sock_addr *ctx)
{
	return sock_rev4(ctx);
}

SEC("cgroup/getpeername4")
int sock_getpeername4(struct bpf_sock_addr *ctx)
{
	return sock_rev4(ctx);
}

/* sock_to6: connect6's and sendmsg6's translation (how: SOCK_PEER or
 * SOCK_DEST), IPv4 Services for a v4-mapped destination. */
static __always_inline int sock_to6(struct bpf_sock_addr *ctx, __u8 proto, __u32 seed, __u64 cookie, int mine, int how)
{
	struct lb6_addr a;
	__be16 port = (__be16)ctx->user_port;
	int r;

	sock6_get(ctx, &a);
	if (sock_v4mapped(&a)) {
		r = sock_xlate(ctx, proto, seed, cookie, mine, how, &a.w[3], &port);
		if (r == SOCK_XLATED)
			ctx->user_ip6[3] = a.w[3];
	} else {
		r = sock6_xlate(ctx, proto, seed, cookie, mine, how, &a, &port);
		if (r == SOCK_XLATED)
			sock6_set(ctx, &a);
	}
	if (r == SOCK_XLATED)
		ctx->user_port = (__u32)port;
	return r;
}

SEC("cgroup/connect6")
int sock_connect6(struct bpf_sock_addr *ctx)
{
	__u8 proto = sock_proto(ctx);
	int mine;

	if (!proto)
		return 1;
	mine = sock_mine(ctx);
	if (mine == SOCK_NOT_MINE)
		return 1;
	return sock_done(sock_to6(ctx, proto, bpf_get_prandom_u32(), 0, mine, SOCK_PEER), SOCK_STAT_CONNECT);
}

/* sendmsg6: an unconnected IPv6 UDP socket's sendto(). The kernel hands a
 * v4-mapped destination to the IPv4 path (sendmsg4) before this hook; it
 * is translated here too should it come. */
SEC("cgroup/sendmsg6")
int sock_sendmsg6(struct bpf_sock_addr *ctx)
{
	__u64 cookie;
	int mine;

	if (sock_proto(ctx) != IPPROTO_UDP)
		return 1;
	mine = sock_mine(ctx);
	if (mine == SOCK_NOT_MINE)
		return 1;
	cookie = bpf_get_socket_cookie(ctx);
	return sock_done(sock_to6(ctx, IPPROTO_UDP, sock_mix(cookie), cookie, mine, SOCK_DEST), SOCK_STAT_SENDMSG);
}

/* sock_rev6: recvmsg6 and getpeername6 (a v4-mapped peer: the IPv4 pairs). */
static __always_inline int sock_rev6(struct bpf_sock_addr *ctx)
{
	struct lb6_addr a;
	__be16 port = (__be16)ctx->user_port;

	sock6_get(ctx, &a);
	if (sock_v4mapped(&a)) {
		if (!sock_rev_xlate(ctx, &a.w[3], &port))
			return 1;
		ctx->user_ip6[3] = a.w[3];
	} else {
		if (!sock6_rev_xlate(ctx, &a, &port))
			return 1;
		sock6_set(ctx, &a);
	}
	ctx->user_port = (__u32)port;
	sock_count(SOCK_STAT_REV);
	return 1;
}

SEC("cgroup/recvmsg6")
int sock_recvmsg6(struct bpf_sock_addr *ctx)
{
	return sock_rev6(ctx);
}

SEC("cgroup/getpeername6")
int sock_getpeername6(struct bpf_sock_addr *ctx)
{
	return sock_rev6(ctx);
}

/*
 * Connected UDP sockets whose backend left their Service. A socket
 * connect4 translated talks to its backend's own address, and nothing runs
 * on its later send()s (sendmsg4 sees unconnected sockets only), so it
 * would keep a deleted pod's address forever, where kube-proxy's conntrack
 * cleanup moves such a flow to a live backend. The nearest thing at the
 * socket is Cilium's: terminate it (bpf_sock_destroy, kernel 6.5): the
 * application sees ECONNABORTED and connects again, to a live backend.
 *
 * sock_terminate_udp walks the UDP sockets of the network namespace whose
 * iterator is read (the Go side reads one per namespace the programs
 * translate) and destroys each connected socket this plane translated
 * (its sock_conns entry names its peer) whose clusterIP is a frontend of
 * sock_keep and whose backend is not kept there. sock_keep: {vip, vport,
 * 0, 0} marks a frontend under check, {vip, vport, backend, bport} a
 * backend it keeps; sock6_keep the same for IPv6 sockets (sock6_conns).
 * Each destroyed socket writes one byte, its family's version (4 or 6), to
 * the iterator's output. TCP is left alone: kube-proxy keeps TCP flows too.
 * A v4-mapped socket (an IPv6 socket reaching an IPv4 clusterIP) is not
 * walked: its peer is in sock_conns, its family AF_INET6.
 */
struct sock_keep_key {
	__be32 vip;
	__be32 backend; /* 0: the frontend itself */
	__be16 vport;
	__be16 bport;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 16);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sock_keep_key);
	__type(value, __u8);
} sock_keep SEC(".maps"); /* not pinned: filled and read by one process at a time */

struct sock6_keep_key {
	struct lb6_addr vip;
	struct lb6_addr backend; /* all zero: the frontend itself */
	__be16 vport;
	__be16 bport;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 16);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sock6_keep_key);
	__type(value, __u8);
} sock6_keep SEC(".maps"); /* as sock_keep */

/* The kernel's types the iterator reads, as much as it reads (CO-RE:
 * offsets from the running kernel's BTF). */
/* The kernel's struct in6_addr, read whole (bpf_probe_read_kernel): only
 * its offset in sock_common is relocated, so its inner names do not matter. */
struct sock_in6 {
	__u8 b[16];
};

struct sock_common {
	unsigned short skc_family;
	volatile unsigned char skc_state;
	__be32 skc_daddr;
	__be16 skc_dport;
	struct sock_in6 skc_v6_daddr;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
} __attribute__((preserve_access_index));

struct udp_sock;
struct seq_file;

struct bpf_iter_meta {
	struct seq_file *seq;
} __attribute__((preserve_access_index));

struct bpf_iter__udp {
	struct bpf_iter_meta *meta;
	struct udp_sock *udp_sk;
} __attribute__((preserve_access_index));

extern int bpf_sock_destroy(struct sock_common *sk) __ksym;

#define SOCK_AF_INET     2
#define SOCK_AF_INET6    10
#define SOCK_ESTABLISHED 1 /* TCP_ESTABLISHED: a connected UDP socket */

/* sock_stale4: whether IPv4 socket sk (cookie) was translated here to a
 * frontend under check whose backend it no longer keeps. */
static __always_inline int sock_stale4(struct sock *sk, __u64 cookie)
{
	__u32 i = (__u32)cookie & (SOCK_CONNS - 1);
	struct sock_keep_key k = {};
	struct sock_conn *c;

	c = bpf_map_lookup_elem(&sock_conns, &i);
	if (!c || c->cookie != cookie || c->backend != sk->__sk_common.skc_daddr || c->bport != sk->__sk_common.skc_dport)
		return 0; /* not translated here (or its entry was reused) */
	k.vip = c->vip;
	k.vport = c->vport;
	if (!bpf_map_lookup_elem(&sock_keep, &k))
		return 0; /* a frontend not under check */
	k.backend = c->backend;
	k.bport = c->bport;
	return !bpf_map_lookup_elem(&sock_keep, &k); /* stale unless its backend stays */
}

/* sock_stale6: sock_stale4 for an IPv6 socket (sock6_conns, sock6_keep). */
static __always_inline int sock_stale6(struct sock *sk, __u64 cookie)
{
	__u32 i = (__u32)cookie & (SOCK_CONNS - 1);
	struct sock6_keep_key k = {};
	struct sock6_conn *c;
	struct lb6_addr peer;

	c = bpf_map_lookup_elem(&sock6_conns, &i);
	if (!c || c->cookie != cookie || c->bport != sk->__sk_common.skc_dport)
		return 0;
	if (bpf_probe_read_kernel(&peer, sizeof(peer), &sk->__sk_common.skc_v6_daddr) < 0 || !lb6_addr_eq(&peer, &c->backend))
		return 0;
	k.vip = c->vip;
	k.vport = c->vport;
	if (!bpf_map_lookup_elem(&sock6_keep, &k))
		return 0;
	k.backend = c->backend;
	k.bport = c->bport;
	return !bpf_map_lookup_elem(&sock6_keep, &k);
}

SEC("iter/udp")
int sock_terminate_udp(struct bpf_iter__udp *ctx)
{
	struct sock *sk = (struct sock *)ctx->udp_sk;
	__u8 version;
	__u64 cookie;
	int stale;

	if (!sk || sk->__sk_common.skc_state != SOCK_ESTABLISHED)
		return 0;
	cookie = bpf_get_socket_cookie(sk);
	switch (sk->__sk_common.skc_family) {
	case SOCK_AF_INET:
		version = 4;
		stale = sock_stale4(sk, cookie);
		break;
	case SOCK_AF_INET6:
		version = 6;
		stale = sock_stale6(sk, cookie);
		break;
	default:
		return 0;
	}
	if (stale && bpf_sock_destroy((struct sock_common *)sk) == 0)
		bpf_seq_write(ctx->meta->seq, &version, sizeof(version));
	return 0;
}

char __license[] SEC("license") = "Dual BSD/GPL";
