/* SPDX-License-Identifier: GPL-2.0 */
/*
 * netns.h: the kernel's structs as the tracing programs (profile.c,
 * pktsize.c) read them to tell which network namespace a device or a task
 * is in, by its inode number. Only the fields read, relocated against the
 * kernel's BTF (CO-RE); each program declares the rest of what it reads
 * (sk_buff, task_struct) itself.
 */
#ifndef VNETLAB_NETNS_H
#define VNETLAB_NETNS_H

struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net {
	struct ns_common ns;
} __attribute__((preserve_access_index));

struct net_device {
	int ifindex;
	struct {
		struct net *net;
	} nd_net;
} __attribute__((preserve_access_index));

/* dev_netns: the inode number of dev's network namespace (dev not NULL). */
static __always_inline __u32 dev_netns(struct net_device *dev)
{
	return dev->nd_net.net->ns.inum;
}

#endif
