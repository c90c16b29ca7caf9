// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* service.c: vnetlab's Service data plane as two tc programs (lb.h has the logic). */
#include "lb.h"

/* Packets leaving a pod: pod eth0 egress, or the node-side veth's ingress. */
SEC("tc")
int from_pod(struct __sk_buff *skb)
{
	return lb_from_pod(skb);
}

/* Packets arriving at a pod: pod eth0 ingress, or the node-side veth's egress. */
SEC("tc")
int to_pod(struct __sk_buff *skb)
{
	return lb_to_pod(skb);
}

char __license[] SEC("license") = "Dual BSD/GPL";
