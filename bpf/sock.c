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
 *
 * The Services are lb.h's maps (lb_services, lb_backends), pinned in the
 * lab's bpffs directory and shared with the tc programs: one `svc add`
 * serves both. The way back (getpeername, recvfrom) needs to know which
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
 *
 * only_netns: when set (at load time), connect4 and sendmsg4 translate only
 * sockets of that network namespace (its cookie), or, with pods_via_tc,
 * also the pods' sockets (see there). A Kubernetes node with
 * the tc programs on its pods' veths attaches these to the node's whole
 * cgroup for its own processes and hostNetwork pods, and leaves the pods
 * (their own namespaces) to tc: no connection is translated twice.
 */
#include "lb.h"

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

/* sock_xlate rewrites the destination of ctx when it is a Service, picking
 * the backend in slot seed % count, and remembers it for the way back
 * (how: SOCK_PEER for connect, SOCK_DEST for an unconnected sendto). */
static __always_inline int sock_xlate(struct bpf_sock_addr *ctx, __u8 proto, __u32 seed, __u64 cookie, int mine, int how)
{
	struct lb_svc_key k = {};
	struct lb_backend_key bk = {};
	struct sock_affinity_key ak = {};
	struct lb_backend *b;
	struct lb_svc *svc;
	__u32 port = ctx->user_port;
	__u64 now = 0;
	int slot;

	k.vip = ctx->user_ip4;
	k.port = (__be16)port;
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
	ctx->user_ip4 = b->ip;
	ctx->user_port = (__u32)b->port;
	return SOCK_XLATED;
}

/* sock_rev_xlate reports a backend's address as its clusterIP: the
 * connected peer in sock_conns, else the socket's sock_dests, else
 * sock_rev for what did not fit there. */
static __always_inline void sock_rev_xlate(struct bpf_sock_addr *ctx)
{
	__u64 cookie = bpf_get_socket_cookie(ctx);
	__u32 i = (__u32)cookie & (SOCK_CONNS - 1);
	struct sock_conn *c = bpf_map_lookup_elem(&sock_conns, &i);
	struct sock_dest_set *s;
	struct sock_rev_key rk = {};
	struct sock_rev_val *rv;
	__be32 addr = ctx->user_ip4;
	__be16 port = (__be16)ctx->user_port;
	int j;

	if (c && c->cookie == cookie && c->backend == addr && c->bport == port) {
		ctx->user_ip4 = c->vip;
		ctx->user_port = (__u32)c->vport;
		sock_count(SOCK_STAT_REV);
		return;
	}
	s = bpf_sk_storage_get(&sock_dests, ctx->sk, 0, 0);
	if (s) {
#pragma unroll
		for (j = 0; j < SOCK_DESTS; j++) {
			struct sock_dest *d = &s->d[j];

			if (d->backend == 0)
				break;
			if (d->backend == addr && d->bport == port) {
				ctx->user_ip4 = d->vip;
				ctx->user_port = (__u32)d->vport;
				sock_count(SOCK_STAT_REV);
				return;
			}
		}
		if (!s->spilled)
			return;
	}
	rk.cookie = cookie;
	rk.addr = addr;
	rk.port = port;
	rv = bpf_map_lookup_elem(&sock_rev, &rk);
	if (!rv)
		return;
	ctx->user_ip4 = rv->vip;
	ctx->user_port = (__u32)rv->port;
	sock_count(SOCK_STAT_REV);
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

SEC("cgroup/connect4")
int sock_connect4(struct bpf_sock_addr *ctx)
{
	__u8 proto = sock_proto(ctx);
	int mine, r;

	if (!proto)
		return 1;
	mine = sock_mine(ctx);
	if (mine == SOCK_NOT_MINE)
		return 1;
	/* A new connection: a fresh random backend, as kube-proxy does. */
	r = sock_xlate(ctx, proto, bpf_get_prandom_u32(), 0, mine, SOCK_PEER);
	if (r == SOCK_REJECT)
		return sock_refuse();
	if (r == SOCK_XLATED)
		sock_count(SOCK_STAT_CONNECT);
	return 1;
}

SEC("cgroup/sendmsg4")
int sock_sendmsg4(struct bpf_sock_addr *ctx)
{
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
	r = sock_xlate(ctx, IPPROTO_UDP, sock_mix(cookie), cookie, mine, SOCK_DEST);
	if (r == SOCK_REJECT)
		return sock_refuse();
	if (r == SOCK_XLATED)
		sock_count(SOCK_STAT_SENDMSG);
	return 1;
}

SEC("cgroup/recvmsg4")
int sock_recvmsg4(struct bpf_sock_addr *ctx)
{
	sock_rev_xlate(ctx);
	return 1;
}

SEC("cgroup/getpeername4")
int sock_getpeername4(struct bpf_sock_addr *ctx)
{
	sock_rev_xlate(ctx);
	return 1;
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
 * backend it keeps. Each destroyed socket writes its sock_ended to the
 * iterator's output. TCP is left alone: kube-proxy keeps TCP flows too.
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

struct sock_ended {
	__be32 vip;
	__be32 backend;
	__be16 vport;
	__be16 bport;
};

/* The kernel's types the iterator reads, as much as it reads (CO-RE:
 * offsets from the running kernel's BTF). */
struct sock_common {
	unsigned short skc_family;
	volatile unsigned char skc_state;
	__be32 skc_daddr;
	__be16 skc_dport;
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
#define SOCK_ESTABLISHED 1 /* TCP_ESTABLISHED: a connected UDP socket */

SEC("iter/udp")
int sock_terminate_udp(struct bpf_iter__udp *ctx)
{
	struct sock *sk = (struct sock *)ctx->udp_sk;
	struct sock_keep_key k = {};
	struct sock_ended e = {};
	struct sock_conn *c;
	__u64 cookie;
	__u32 i;

	if (!sk || sk->__sk_common.skc_family != SOCK_AF_INET || sk->__sk_common.skc_state != SOCK_ESTABLISHED)
		return 0;
	cookie = bpf_get_socket_cookie(sk);
	i = (__u32)cookie & (SOCK_CONNS - 1);
	c = bpf_map_lookup_elem(&sock_conns, &i);
	if (!c || c->cookie != cookie || c->backend != sk->__sk_common.skc_daddr || c->bport != sk->__sk_common.skc_dport)
		return 0; /* not translated here (or its entry was reused) */
	k.vip = c->vip;
	k.vport = c->vport;
	if (!bpf_map_lookup_elem(&sock_keep, &k))
		return 0; /* a frontend not under check */
	k.backend = c->backend;
	k.bport = c->bport;
	if (bpf_map_lookup_elem(&sock_keep, &k))
		return 0; /* its backend stays */
	e.vip = c->vip;
	e.vport = c->vport;
	e.backend = c->backend;
	e.bport = c->bport;
	if (bpf_sock_destroy((struct sock_common *)sk) == 0)
		bpf_seq_write(ctx->meta->seq, &e, sizeof(e));
	return 0;
}

char __license[] SEC("license") = "Dual BSD/GPL";
