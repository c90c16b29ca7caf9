// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* service.c: vnetlab's Service data plane as two tc programs (lb.h has the logic). */
#include "lb.h"

/* A packet passed or translated goes on to the next program on the hook
 * (tcx: TCX_NEXT; cls_bpf: the next filter), or to the stack when there is
 * none: vnetlab's programs never hide a packet from other tools' programs. */
static __always_inline int lb_verdict(int ret)
{
	return ret == TC_ACT_OK ? TC_ACT_UNSPEC : ret;
}

/* Packets leaving a pod: pod eth0 egress, or the node-side veth's ingress. */
SEC("tc")
int from_pod(struct __sk_buff *skb)
{
	return lb_verdict(lb_from_pod(skb));
}

/* Packets arriving at a pod: pod eth0 ingress, or the node-side veth's egress. */
SEC("tc")
int to_pod(struct __sk_buff *skb)
{
	return lb_verdict(lb_to_pod(skb));
}

char __license[] SEC("license") = "Dual BSD/GPL";
