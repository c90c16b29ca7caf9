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

/* np_snat_addr: the source of p's flow when SNATed. */
static __always_inline void np_snat_addr(__be32 *out, const struct lb_pkt *p)
{
	__u32 zero = 0;
	__be32 *ip = bpf_map_lookup_elem(&np_node, &zero);

	*out = ip && *ip ? *ip : p->daddr;
}

static __always_inline void np_count(__u32 what)
{
	__u64 *v = bpf_map_lookup_elem(&np_stats, &what);
	if (v)
		*v += 1;
}

/* np_conntrack (struct np_ct), np_new_flow, np_snat_reply, np_from_wire
 * and np_to_wire, written once with nodeport6.h's (nodeport_fam.h); the
 * flow, its keys and the rewrite live on the stack (struct np_scratch). */
#define NPF(n)             np_##n
#define LBF(n)             lb_##n
#define NP_ADDR            __be32
#define NP_ICMP            IPPROTO_ICMP
#define NP_MAYBE_VIP(p)    lb_maybe_vip(&(p)->daddr)
#define NP_PICK(svc, p, h) lb_pick_backend(svc, p, h, NULL)
#define NP_FIB(f, p, dst)  ((f)->family = 2 /* AF_INET */, (f)->ipv4_src = (p)->saddr, (f)->ipv4_dst = *(dst))
#define NP_SCRATCH_DECL    struct np_scratch np_sc
#define NP_SCRATCH         (&np_sc)
#include "nodeport_fam.h"

#endif /* VNETLAB_NODEPORT_H */
