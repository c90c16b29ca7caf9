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
 * serves both. sock_rev remembers, per socket (cookie), which backend
 * stands for which clusterIP.
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

enum {
	SOCK_STAT_CONNECT = 0,    /* connect() translated */
	SOCK_STAT_SENDMSG = 1,    /* unconnected UDP datagrams translated */
	SOCK_STAT_REV = 2,        /* recvfrom()/getpeername() addresses translated back */
	SOCK_STAT_NO_BACKEND = 3, /* refused: a Service without backends (EPERM) */
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
 * as Kubernetes defines it: a Service without endpoints (tc answers with
 * ICMP port unreachable, i.e. ECONNREFUSED; a socket program can only fail
 * the call with EPERM) and sessionAffinity ClientIP (tc's lb_affinity).
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

/* sock_xlate rewrites the destination of ctx when it is a Service, picking
 * the backend in slot seed % count, and remembers it for the way back. */
static __always_inline int sock_xlate(struct bpf_sock_addr *ctx, __u8 proto, __u32 seed, __u64 cookie, int mine)
{
	struct lb_svc_key k = {};
	struct lb_backend_key bk = {};
	struct sock_rev_key rk = {};
	struct sock_rev_val rv = {};
	struct lb_backend *b;
	struct lb_svc *svc;
	__u32 port = ctx->user_port;

	k.vip = ctx->user_ip4;
	k.port = (__be16)port;
	k.proto = proto;
	svc = bpf_map_lookup_elem(&lb_services, &k);
	if (!svc)
		return SOCK_MISS;
	if (mine == SOCK_MINE_TC_BEHIND && (svc->count == 0 || (svc->flags & LB_SVC_AFFINITY)))
		return SOCK_MISS; /* tc's (pods_via_tc) */
	if (svc->count == 0) {
		sock_count(SOCK_STAT_NO_BACKEND);
		return SOCK_REJECT;
	}
	bk.svc_id = svc->id;
	bk.slot = seed % svc->count;
	b = bpf_map_lookup_elem(&lb_backends, &bk);
	if (!b) {
		sock_count(SOCK_STAT_NO_BACKEND);
		return SOCK_REJECT;
	}
	rk.cookie = cookie;
	rk.addr = b->ip;
	rk.port = b->port;
	rv.vip = k.vip;
	rv.port = k.port;
	bpf_map_update_elem(&sock_rev, &rk, &rv, BPF_ANY);
	ctx->user_ip4 = b->ip;
	ctx->user_port = (__u32)b->port;
	return SOCK_XLATED;
}

/* sock_rev_xlate reports a backend's address as its clusterIP. */
static __always_inline void sock_rev_xlate(struct bpf_sock_addr *ctx)
{
	struct sock_rev_key rk = {};
	struct sock_rev_val *rv;
	__u32 port = ctx->user_port;

	rk.cookie = bpf_get_socket_cookie(ctx);
	rk.addr = ctx->user_ip4;
	rk.port = (__be16)port;
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

/* Return codes of sock_addr programs: 1 lets the call go on, 0 fails it (EPERM). */
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
	r = sock_xlate(ctx, proto, bpf_get_prandom_u32(), bpf_get_socket_cookie(ctx), mine);
	if (r == SOCK_REJECT)
		return 0;
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
	r = sock_xlate(ctx, IPPROTO_UDP, sock_mix(cookie), cookie, mine);
	if (r == SOCK_REJECT)
		return 0;
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

char __license[] SEC("license") = "Dual BSD/GPL";
