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

/* sock_conns: the peer of each connected socket, at index cookie %
 * SOCK_CONNS. Socket cookies come from one counter (handed out to CPUs
 * in batches of 4096), so an entry is overwritten only after about
 * SOCK_CONNS newer sockets were given a cookie: it lives like an LRU entry
 * of a map that size, but costs a store, not an insert and an eviction.
 * A socket whose entry was reused sees its backend in getpeername(). */
#define SOCK_CONNS (1 << 18)

/* sock_dests: an unconnected UDP socket's pairs (sock_fam.h), up to
 * SOCK_DESTS, then sock_rev. A pair is free when its backend is 0 (IPv4)
 * or its bport is 0 (IPv6: a backend's port is never 0). */
#define SOCK_DESTS 4

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

/* sock_mine: whether this socket's connect/sendmsg is ours to translate
 * (never when proto_ok, whether its protocol is one the hook translates,
 * is 0), and whether the tc programs are behind it. */
static __always_inline int sock_mine(struct bpf_sock_addr *ctx, int proto_ok)
{
	if (!proto_ok)
		return SOCK_NOT_MINE;
	if (only_netns == 0 || bpf_get_netns_cookie(ctx) == only_netns)
		return SOCK_MINE;
	return pods_via_tc ? SOCK_MINE_TC_BEHIND : SOCK_NOT_MINE;
}

enum { SOCK_MISS = 0, SOCK_XLATED = 1, SOCK_REJECT = 2 };

/* sock_mix: a socket cookie folded to 32 bits through lb_hash's finaliser. */
static __always_inline __u32 sock_mix(__u64 c)
{
	return lb_hash_mix((__u32)c ^ (__u32)(c >> 32));
}

enum { SOCK_PEER = 0, SOCK_DEST = 1 };

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

/* The per-family maps and functions (sock_fam.h), IPv4: sock_rev,
 * sock_conns, sock_dests, sock_affinity, sock_keep; sock_xlate,
 * sock_rev_xlate, sock_stale. */
#define SOCKF(n)             sock_##n
#define LBF(n)               lb_##n
#define SOCK_ADDR            __be32
#define SOCK_ADDR_EQ(a, b)   (*(a) == *(b))
#define SOCK_DEST_FREE(d)    ((d)->backend == 0)
#define SOCK_REV_PAD
#define SOCK_SK_PEER(sk, a)  (*(a) = (sk)->__sk_common.skc_daddr, 0)
#include "sock_fam.h"

/* IPv6, over lb6_services/lb6_backends and 128-bit addresses: sock6_rev,
 * sock6_conns, ...; sock6_xlate, sock6_rev_xlate, sock6_stale. Sockets are
 * IPv6 sockets here; a v4-mapped destination takes the IPv4 functions on
 * its last word (sock_v4mapped). The peer of a kernel socket is read whole
 * (bpf_probe_read_kernel of an in6_addr). */
#define SOCKF(n)             sock6_##n
#define LBF(n)               lb6_##n
#define SOCK_ADDR            struct lb6_addr
#define SOCK_ADDR_EQ(a, b)   lb6_addr_eq(a, b)
#define SOCK_DEST_FREE(d)    ((d)->bport == 0)
#define SOCK_REV_PAD         [3]
#define SOCK_SK_PEER(sk, a)  bpf_probe_read_kernel(a, sizeof(*(a)), &(sk)->__sk_common.skc_v6_daddr)
#include "sock_fam.h"

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

	mine = sock_mine(ctx, proto != 0);
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

	mine = sock_mine(ctx, sock_proto(ctx) == IPPROTO_UDP);
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

/* SOCK_REV_PROGS(v): the programs recvmsg<v> and getpeername<v>, both
 * sock_rev<v> (v: 4 or 6). */
#define SOCK_REV_PROGS(v)                                   \
	SEC("cgroup/recvmsg" #v)                            \
	int sock_recvmsg##v(struct bpf_sock_addr *ctx)      \
	{                                                   \
		return sock_rev##v(ctx);                    \
	}                                                   \
	SEC("cgroup/getpeername" #v)                        \
	int sock_getpeername##v(struct bpf_sock_addr *ctx)  \
	{                                                   \
		return sock_rev##v(ctx);                    \
	}

SOCK_REV_PROGS(4)

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

	mine = sock_mine(ctx, proto != 0);
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

	mine = sock_mine(ctx, sock_proto(ctx) == IPPROTO_UDP);
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

SOCK_REV_PROGS(6)

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
 * walked: its peer is in sock_conns, its family AF_INET6. The maps and the
 * test of one socket (sock_stale, sock6_stale) are sock_fam.h's.
 */
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
		stale = sock_stale(sk, cookie);
		break;
	case SOCK_AF_INET6:
		version = 6;
		stale = sock6_stale(sk, cookie);
		break;
	default:
		return 0;
	}
	if (stale && bpf_sock_destroy((struct sock_common *)sk) == 0)
		bpf_seq_write(ctx->meta->seq, &version, sizeof(version));
	return 0;
}

char __license[] SEC("license") = "Dual BSD/GPL";
