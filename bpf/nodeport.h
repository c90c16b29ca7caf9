/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * nodeport.h: NodePort Services and external IPs on a node's uplink (its
 * eth0), as kube-proxy's KUBE-NODEPORTS and KUBE-EXT chains do them, over
 * lb.h's Service maps.
 *
 * A NodePort is an lb_services entry whose address is the node's own IP
 * (key {node IP, nodePort, proto}), an external IP (spec.externalIPs) one
 * whose address is that IP; the Go side (internal/kube/proxy) puts there
 * every endpoint. Pods and the node's own sockets reaching them are
 * translated like any clusterIP (lb.h's from_pod, sock.c); traffic from
 * outside arrives at the uplink and meets these two programs. For a
 * Service with externalTrafficPolicy Local the entry carries
 * LB_SVC_EXTERNAL and outside clients use its LB_SCOPE_EXTERNAL entry,
 * which holds this node's endpoints only (none: dropped, as kube-proxy).
 * sessionAffinity ClientIP holds for outside clients too (lb_affinity,
 * keyed by the client's address).
 *
 *   np_from_wire (uplink ingress): DNAT nodeIP:nodePort -> backend. When
 *     the backend's route leaves through the uplink again (a pod on another
 *     node: only with policy Cluster) the source is SNATed to the node IP
 *     (np_node: an external IP is not the node's) and a port of
 *     NP_SNAT_MIN.., so the reply comes back here, and the
 *     packet is sent straight out (bpf_redirect_neigh): handed to the stack
 *     it would die as a martian (a local source address arriving from
 *     outside). Replies to SNATed flows arrive here too and are translated
 *     back to nodeIP:nodePort -> client and sent out the same way.
 *   np_to_wire (uplink egress): replies of local backends leaving towards
 *     the client: backend:bport -> nodeIP:nodePort (the client's address
 *     was never touched: policy Local keeps it, as kube-proxy does).
 *
 * Conntrack of its own (np_conntrack; an entry also needs the client's
 * port), keyed like lb_conntrack's: FWD {client:cport -> nodeIP:nodePort},
 * REV as the reply arrives: {backend:bport -> client:cport}, or for a
 * SNATed flow {backend:bport -> nodeIP:snatport}.
 */
#ifndef VNETLAB_NODEPORT_H
#define VNETLAB_NODEPORT_H

#include "lb.h"

/* SNAT source ports: above the nodePort range (30000-32767) and the
 * kernel's default ephemeral range (32768-60999), so they meet neither a
 * nodePort nor (usually) the node's own connections. A REV key includes
 * the backend's address and port: 4536 concurrent flows per backend. */
#define NP_SNAT_MIN   61000
#define NP_SNAT_N     4536
#define NP_SNAT_TRIES 8

enum { NP_CT_SNAT = 1 };

struct np_ct {
	__be32 addr;      /* FWD: backend; REV: the address the client reached (node IP or external IP) */
	__be32 client;    /* REV: the client; FWD: the source a SNATed flow gets (the node IP) */
	__be16 port;      /* FWD: backend port; REV: the nodePort */
	__be16 cport;     /* REV: the client's port */
	__be16 snat_port; /* FWD: the source port given to a SNATed flow (0: none) */
	__u16 flags;      /* NP_CT_SNAT */
	__u32 svc_id;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LB_MAX_FLOWS);
	__type(key, struct lb_ct_key);
	__type(value, struct np_ct);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} np_conntrack SEC(".maps");

enum {
	NP_STAT_DNAT = 0,       /* packets translated nodeIP:nodePort -> backend */
	NP_STAT_RNAT = 1,       /* replies translated back */
	NP_STAT_NEW = 2,        /* new flows given a backend */
	NP_STAT_SNAT = 3,       /* of those, SNATed to the node IP (backend elsewhere) */
	NP_STAT_NO_BACKEND = 4, /* dropped: no endpoint (policy Local: none on this node) */
	NP_STAT_NO_PORT = 5,    /* dropped: no free SNAT port after NP_SNAT_TRIES */
	NP_STAT_ERROR = 6,      /* dropped: a rewrite helper failed */
	NP_STAT_MAX = 7,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NP_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} np_stats SEC(".maps");

/* The node's own IP (slot 0; written by the Go side with the NodePort
 * programs): the source of SNATed flows. 0: the address the client
 * reached, which is the node's for a NodePort. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __be32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} np_node SEC(".maps");

static __always_inline __be32 np_snat_addr(const struct lb_pkt *p)
{
	__u32 zero = 0;
	__be32 *ip = bpf_map_lookup_elem(&np_node, &zero);

	return ip && *ip ? *ip : p->daddr;
}

static __always_inline void np_count(__u32 what)
{
	__u64 *v = bpf_map_lookup_elem(&np_stats, &what);
	if (v)
		*v += 1;
}

/* np_remote says whether the route to dst leaves through the interface the
 * packet came in on (a pod on another node), from the node's own FIB. A
 * failed lookup (no route, forwarding off) reads as "not remote": the
 * packet goes to the stack, which decides. The lookup goes through the
 * routing rules, so the local table answers first: a backend at one of the
 * node's own addresses (a hostNetwork endpoint) is local (NOT_FWDED), not
 * a neighbour on the uplink's prefix. A direct lookup of the main table
 * finds that prefix's route: IPv4 hides it while the kernel keeps local
 * and main merged (no rules of one's own), IPv6 never merges them. */
static __always_inline int np_remote(struct __sk_buff *skb, const struct lb_pkt *p, __be32 dst)
{
	struct bpf_fib_lookup f = {};
	long r;

	f.family = 2; /* AF_INET */
	f.l4_protocol = p->proto;
	f.ipv4_src = p->saddr;
	f.ipv4_dst = dst;
	f.ifindex = skb->ifindex;
	r = bpf_fib_lookup(skb, &f, sizeof(f), BPF_FIB_LOOKUP_SKIP_NEIGH);
	if (r != BPF_FIB_LKUP_RET_SUCCESS && r != BPF_FIB_LKUP_RET_FRAG_NEEDED)
		return 0;
	return f.ifindex == skb->ifindex;
}

/* A RST ends a flow: both entries go (as lb_ct_close). */
static __always_inline void np_close(const struct lb_ct_key *fk, const struct lb_ct_key *rk)
{
	bpf_map_delete_elem(&np_conntrack, rk);
	bpf_map_delete_elem(&np_conntrack, fk);
}

/* np_new_flow picks a backend for a new flow (lb_pick_backend: the
 * client's under sessionAffinity, else the hash's) and writes its two
 * entries (reverse first: a reply never finds the flow half-made). */
static __always_inline int np_new_flow(struct __sk_buff *skb, const struct lb_pkt *p, const struct lb_svc *svc,
				       const struct lb_ct_key *fk, struct np_ct *fwd)
{
	struct lb_ct_key rk = {};
	struct np_ct rev = {};
	struct lb_backend *b;
	__u32 h = lb_hash(p);
	int i;

	b = lb_pick_backend(svc, p, h);
	if (!b)
		return -1;
	fwd->addr = b->ip;
	fwd->port = b->port;
	fwd->svc_id = svc->id;
	fwd->snat_port = 0;
	fwd->flags = 0;
	fwd->client = 0;
	fwd->cport = 0;
	rev.addr = p->daddr;
	rev.port = p->dport;
	rev.client = p->saddr;
	rev.cport = p->sport;
	rev.svc_id = svc->id;
	rk.saddr = fwd->addr;
	rk.sport = fwd->port;
	rk.proto = p->proto;
	rk.dir = LB_CT_REV;
	if (!np_remote(skb, p, fwd->addr)) {
		rk.daddr = p->saddr;
		rk.dport = p->sport;
		bpf_map_update_elem(&np_conntrack, &rk, &rev, BPF_ANY);
	} else {
		/* A port whose reverse key is free: a few tries from the flow's
		 * hash, then give up (dropped, counted). */
		rev.flags = NP_CT_SNAT;
		fwd->flags = NP_CT_SNAT;
		fwd->client = np_snat_addr(p);
		rk.daddr = fwd->client;
		for (i = 0; i < NP_SNAT_TRIES; i++) {
			rk.dport = bpf_htons(NP_SNAT_MIN + (h + i * 1031) % NP_SNAT_N);
			if (bpf_map_update_elem(&np_conntrack, &rk, &rev, BPF_NOEXIST) == 0) {
				fwd->snat_port = rk.dport;
				break;
			}
		}
		if (!fwd->snat_port) {
			np_count(NP_STAT_NO_PORT);
			return -1;
		}
		np_count(NP_STAT_SNAT);
	}
	bpf_map_update_elem(&np_conntrack, fk, fwd, BPF_ANY);
	np_count(NP_STAT_NEW);
	return 0;
}

/* np_key: a conntrack key of one direction of a flow (pad zeroed). */
static __always_inline struct lb_ct_key np_key(__be32 saddr, __be32 daddr, __be16 sport, __be16 dport, __u8 proto, __u8 dir)
{
	return (struct lb_ct_key){ .saddr = saddr, .daddr = daddr, .sport = sport, .dport = dport, .proto = proto, .dir = dir };
}

/* np_snat_reply: a reply to a SNATed flow (backend:bport -> nodeIP:snatport)
 * becomes nodeIP:nodePort -> client:cport and goes straight back out.
 * Returns -1 when p is no such reply. */
static __always_inline int np_snat_reply(struct __sk_buff *skb, const struct lb_pkt *p)
{
	struct lb_ct_key rk = np_key(p->saddr, p->daddr, p->sport, p->dport, p->proto, LB_CT_REV);
	struct lb_ct_key fk;
	struct lb_tuple to;
	struct np_ct *ct;

	ct = bpf_map_lookup_elem(&np_conntrack, &rk);
	if (!ct || !(ct->flags & NP_CT_SNAT))
		return -1;
	to.saddr = ct->addr;
	to.sport = ct->port;
	to.daddr = ct->client;
	to.dport = ct->cport;
	if (lb_rewrite(skb, p, &to) < 0) {
		np_count(NP_STAT_ERROR);
		return TC_ACT_SHOT;
	}
	np_count(NP_STAT_RNAT);
	if (p->tcp_rst) {
		fk = np_key(to.daddr, to.saddr, to.dport, to.sport, p->proto, LB_CT_FWD);
		np_close(&fk, &rk);
	}
	return bpf_redirect_neigh(skb->ifindex, NULL, 0, 0);
}

/* np_from_wire: packets arriving at the node's uplink. */
static __always_inline int np_from_wire(struct __sk_buff *skb)
{
	struct lb_svc_key sk = {};
	struct lb_ct_key fk = {};
	struct lb_ct_key rk = {};
	struct lb_tuple to;
	struct np_ct flow;
	struct lb_svc *svc;
	struct np_ct *ct;
	struct lb_pkt p;
	int ret;

	/* ICMP, later fragments, anything not IPv4 TCP/UDP: left to the stack. */
	if (lb_parse(skb, &p) != LB_GO || p.proto == IPPROTO_ICMP || !p.has_l4)
		return TC_ACT_OK;
	if (bpf_ntohs(p.dport) >= NP_SNAT_MIN) {
		ret = np_snat_reply(skb, &p);
		if (ret >= 0)
			return ret;
	}
	if (!lb_maybe_vip(p.daddr))
		return TC_ACT_OK;
	sk.vip = p.daddr;
	sk.port = p.dport;
	sk.proto = p.proto;
	svc = bpf_map_lookup_elem(&lb_services, &sk);
	if (!svc)
		return TC_ACT_OK;
	if (svc->flags & LB_SVC_EXTERNAL) {
		/* externalTrafficPolicy Local: outside clients reach this node's
		 * endpoints only (the entry is written before the flag is set). */
		struct lb_svc *ext;

		sk.scope = LB_SCOPE_EXTERNAL;
		ext = bpf_map_lookup_elem(&lb_services, &sk);
		if (ext)
			svc = ext;
	}
	if (svc->count == 0) {
		/* kube-proxy drops too (policy Local without a local endpoint). */
		np_count(NP_STAT_NO_BACKEND);
		return TC_ACT_SHOT;
	}
	fk = np_key(p.saddr, p.daddr, p.sport, p.dport, p.proto, LB_CT_FWD);
	/* Always looked up, SYNs too: a retransmitted SYN must keep its SNAT port. */
	ct = bpf_map_lookup_elem(&np_conntrack, &fk);
	if (ct && ct->svc_id == svc->id) {
		flow = *ct;
	} else if (np_new_flow(skb, &p, svc, &fk, &flow) < 0) {
		np_count(NP_STAT_NO_BACKEND);
		return TC_ACT_SHOT;
	}
	to.saddr = p.saddr;
	to.sport = p.sport;
	to.daddr = flow.addr;
	to.dport = flow.port;
	if (flow.flags & NP_CT_SNAT) {
		to.saddr = flow.client;
		to.sport = flow.snat_port;
	}
	if (lb_rewrite(skb, &p, &to) < 0) {
		np_count(NP_STAT_ERROR);
		return TC_ACT_SHOT;
	}
	np_count(NP_STAT_DNAT);
	if (p.tcp_rst) {
		rk = np_key(to.daddr, to.saddr, to.dport, to.sport, p.proto, LB_CT_REV);
		np_close(&fk, &rk);
	}
	if (flow.flags & NP_CT_SNAT)
		return bpf_redirect_neigh(skb->ifindex, NULL, 0, 0);
	return TC_ACT_OK;
}

/* np_to_wire: packets leaving the node's uplink; replies of local backends
 * to a NodePort's clients are translated back (SNATed flows' replies never
 * pass here: they arrive at the uplink and leave by redirect). */
static __always_inline int np_to_wire(struct __sk_buff *skb)
{
	struct lb_ct_key rk = {};
	struct lb_ct_key fk = {};
	struct lb_tuple to;
	struct np_ct *ct;
	struct lb_pkt p;

	if (lb_parse(skb, &p) != LB_GO || p.proto == IPPROTO_ICMP || !p.has_l4)
		return TC_ACT_OK;
	if (!lb_maybe_backend_port(p.sport))
		return TC_ACT_OK;
	rk = np_key(p.saddr, p.daddr, p.sport, p.dport, p.proto, LB_CT_REV);
	ct = bpf_map_lookup_elem(&np_conntrack, &rk);
	if (!ct || (ct->flags & NP_CT_SNAT))
		return TC_ACT_OK;
	to.saddr = ct->addr;
	to.sport = ct->port;
	to.daddr = p.daddr;
	to.dport = p.dport;
	if (lb_rewrite(skb, &p, &to) < 0) {
		np_count(NP_STAT_ERROR);
		return TC_ACT_SHOT;
	}
	np_count(NP_STAT_RNAT);
	if (p.tcp_rst) {
		fk = np_key(p.daddr, to.saddr, p.dport, to.sport, p.proto, LB_CT_FWD);
		np_close(&fk, &rk);
	}
	return TC_ACT_OK;
}

#endif /* VNETLAB_NODEPORT_H */
