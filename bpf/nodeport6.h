/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * nodeport6.h: NodePort Services and external IPs over IPv6, on the node's
 * uplink: nodeport.h's design on lb6.h's maps. An IPv6 node port is an
 * lb6_services entry keyed by the node's IPv6 address (an external IP's by
 * that address); with externalTrafficPolicy Local it carries
 * LB_SVC_EXTERNAL and outside clients use its LB_SCOPE_EXTERNAL entry.
 *
 *   np6_from_wire (uplink ingress): DNAT [nodeIP]:nodePort -> backend; a
 *     backend whose route leaves through the uplink again (a pod on another
 *     node) also gets the source [np6_node]:NP_SNAT_MIN.. and the packet is
 *     sent straight out (bpf_redirect_neigh); that flow's replies arrive
 *     here too, are translated back and sent out the same way.
 *   np6_to_wire (uplink egress): replies of local backends to a NodePort's
 *     clients, translated back.
 *
 * ICMPv6 (NDP included) and anything lb6_parse does not take go to the
 * stack untouched, as nodeport.h leaves ICMP. Counters are np_stats'.
 */
#ifndef VNETLAB_NODEPORT6_H
#define VNETLAB_NODEPORT6_H

#include "lb6.h"
#include "nodeport.h"

/* The node's own IPv6 address (slot 0, written by the Go side): the source
 * of SNATed flows. All zero: the address the client reached. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lb6_addr);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} np6_node SEC(".maps");

static __always_inline void np6_snat_addr(struct lb6_addr *out, const struct lb6_pkt *p)
{
	__u32 zero = 0;
	struct lb6_addr *ip = bpf_map_lookup_elem(&np6_node, &zero);

	if (ip && (ip->w[0] | ip->w[1] | ip->w[2] | ip->w[3]))
		*out = *ip;
	else
		*out = p->daddr;
}

/* np6_conntrack (struct np6_ct), np6_new_flow, np6_snat_reply,
 * np6_from_wire and np6_to_wire: nodeport.h's, written once
 * (nodeport_fam.h). The flow, its keys and the rewrite live in np6_scratch,
 * a per-CPU array: the stack cannot hold them. No prefilter in front of
 * lb6_services here. */
#define NPF(n)             np6_##n
#define LBF(n)             lb6_##n
#define NP_ADDR            struct lb6_addr
#define NP_ICMP            LB6_ICMP
#define NP_MAYBE_VIP(p)    1
#define NP_PICK(svc, p, h) lb6_pick_backend(svc, p, h, NULL)
#define NP_FIB(f, p, dst)  ((f)->family = 10 /* AF_INET6 */, __builtin_memcpy((f)->ipv6_src, &(p)->saddr, 16), \
			    __builtin_memcpy((f)->ipv6_dst, dst, 16))
#define NP_SCRATCH_MAP     np6_scratch
#define NP_SCRATCH_DECL    __u32 np_zero = 0
#define NP_SCRATCH         bpf_map_lookup_elem(&np6_scratch, &np_zero)
#include "nodeport_fam.h"

#endif /* VNETLAB_NODEPORT6_H */
