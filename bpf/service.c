// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* service.c: vnetlab's Service data plane as tc programs (lb.h has the
 * translation, host.h and host6.h the delivery to pods). */
#include "lb.h"
#include "lb6.h"
#include "host.h"
#include "host6.h"
#include "nodeport.h"
#include "nodeport6.h"

/* A packet passed or translated goes on to the next program on the hook
 * (tcx: TCX_NEXT; cls_bpf: the next filter), or to the stack when there is
 * none: vnetlab's programs never hide a packet from other tools' programs. */
static __always_inline int lb_verdict(int ret)
{
	return ret == TC_ACT_OK ? TC_ACT_UNSPEC : ret;
}

static __always_inline int is_ipv6(const struct __sk_buff *skb)
{
	return skb->protocol == bpf_htons(ETH_P_IPV6);
}

/* Packets leaving a pod: pod eth0 egress, or the node-side veth's ingress
 * (where a hairpinned packet goes back into its pod: lb_back_to_sender). */
SEC("tc")
int from_pod(struct __sk_buff *skb)
{
	struct lb_pkt p;

	if (is_ipv6(skb))
		return lb_verdict(lb_back_to_sender(skb, lb6_from_pod(skb)));
	if (lb_parse(skb, &p) != LB_GO)
		return TC_ACT_UNSPEC;
	return lb_verdict(lb_back_to_sender(skb, lb_from_pod_pkt(skb, &p)));
}

/* from_pod for pods on a shared L2 segment (macvlan-ebpf, bridge ports): a
 * translated packet whose backend is a sibling on the segment is addressed
 * to the backend's MAC, so it never crosses the node's routing. A program of
 * its own so that the other endpoints skip the route lookup. */
SEC("tc")
int from_pod_l2(struct __sk_buff *skb)
{
	struct lb_pkt p;
	int ret;

	if (is_ipv6(skb))
		return lb_verdict(lb_back_to_sender(skb, from_pod_l2_6(skb)));
	if (lb_parse(skb, &p) != LB_GO)
		return TC_ACT_UNSPEC;
	ret = lb_from_pod_pkt(skb, &p);
	if (ret == TC_ACT_OK)
		pod_set_dmac(skb, &p);
	return lb_verdict(lb_back_to_sender(skb, ret));
}

/* Packets arriving at a pod: pod eth0 ingress, or the node-side veth's egress. */
SEC("tc")
int to_pod(struct __sk_buff *skb)
{
	if (is_ipv6(skb))
		return lb_verdict(lb6_to_pod(skb));
	return lb_verdict(lb_to_pod(skb));
}

/* veth-ebpf: the node end of a pod's veth, ingress. Service translation,
 * then bpf_redirect_peer into the destination pod (TC_ACT_REDIRECT), or on
 * to the node's stack. Its egress carries host_to_pod. */
SEC("tc")
int host_from_pod(struct __sk_buff *skb)
{
	if (is_ipv6(skb))
		return lb_verdict(host_from_pod_route6(skb));
	return lb_verdict(host_from_pod_route(skb));
}

/* NodePort Services (nodeport.h): the node's uplink (eth0), ingress. */
SEC("tc")
int nodeport_in(struct __sk_buff *skb)
{
	if (is_ipv6(skb))
		return lb_verdict(np6_from_wire(skb));
	return lb_verdict(np_from_wire(skb));
}

/* The node's uplink, egress: replies of local backends to NodePort clients. */
SEC("tc")
int nodeport_out(struct __sk_buff *skb)
{
	if (is_ipv6(skb))
		return lb_verdict(np6_to_wire(skb));
	return lb_verdict(np_to_wire(skb));
}

/* veth-ebpf: the node end of a pod's veth, egress: to_pod, and notes the
 * flows the node's stack forwarded between two pods of this node (host.h). */
SEC("tc")
int host_to_pod(struct __sk_buff *skb)
{
	if (is_ipv6(skb))
		return lb_verdict(host_to_pod_route6(skb));
	return lb_verdict(host_to_pod_route(skb));
}

/* host_from_pod's second half for IPv6 (host6.h), tail-called by it. */
SEC("tc")
int host6_route(struct __sk_buff *skb)
{
	return lb_verdict(host_from_pod_route6_rest(skb));
}

char __license[] SEC("license") = "Dual BSD/GPL";

/* lb6_reject: lb6_tail's REJECT for an IPv6 Service without backends
 * (bpf/lb6.h), tail-called from the programs above with the packet as it
 * came: parsed again here, in a stack of its own. */
SEC("tc")
int lb6_reject(struct __sk_buff *skb)
{
	struct lb6_pkt p;

	if (lb6_parse(skb, &p) != LB_GO) {
		lb6_count(LB_STAT_NO_BACKEND);
		return TC_ACT_SHOT;
	}
	return lb6_reject_pkt(skb, &p);
}
