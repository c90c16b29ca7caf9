/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * policy.h: vnetlab's NetworkPolicy data plane (the lab's `ebpf` policy
 * provider; Go side internal/datapath/polbpf, docs/policies.md).
 *
 * Two tc programs on each pod's own interface (its eth0, in the pod's
 * namespace): pol_egress at its egress sees every packet the pod sends
 * before anything translates it, pol_ingress at its ingress every packet
 * the pod receives after every translation and redirect (bpf_redirect_peer
 * of veth-ebpf included: the peer's tc ingress runs for it).
 *
 * Identities, as Cilium's: every pod address has a numeric identity (a
 * pod's IPv4 and IPv6 addresses two, so that an ipBlock of one family never
 * allows the other's), and so has every prefix a rule names (ipBlocks and
 * their excepts). pol_ipcache4/6 (LPM tries) give an address the identity
 * of its most specific prefix; pol_eps4/6 (hash) give a pod address its
 * endpoint (identity, isolation).
 * pol_rules, one LPM trie for both families, holds the allowed
 * {endpoint, peer identity, direction, protocol, port prefix}: a port range
 * is a few port prefixes, every port of a protocol a prefix of zero bits,
 * every protocol a prefix that stops before it, any peer identity 0. An
 * ipBlock allows every identity whose prefix lies inside it and inside none
 * of its excepts, so one lookup of the peer's identity decides it. A
 * decision costs two LPM lookups (and the peer's identity, one more)
 * whatever the number of policies.
 *
 * The rule maps are double-buffered: each is an array of two maps
 * (map-in-map), and pol_gen's low bit says which slot is in force. An
 * update edits the other slot's maps and then bumps pol_gen: a packet sees
 * the old rules or the new ones, never a mix (the writer waits for running
 * programs to finish before it edits a slot again).
 *
 * Flows (pol_flows4/6, LRU): a new flow is decided once, then its entry
 * (and its reply's) lets the next packets through with one hash lookup.
 * An entry remembers the generation it was decided in: after an update the
 * initiator's next packet is decided again (a reply still passes). It
 * also remembers when it last passed a packet, and lives as long after
 * that as conntrack keeps a flow (pol_flow_life_*): an older one is as if
 * absent, so an entry outlives its flow's traffic by that much, not until
 * the LRU evicts it (a reply entry left by a flow denied since would
 * otherwise let its tuple in again whenever the port comes back).
 *
 * Services: egress must be decided against the backend, not the clusterIP.
 * A pod's egress to a Service frontend (the Service plane's lb_services /
 * lb6_services, given to the programs at load) is deferred: the backend
 * pod's pol_ingress, which sees the translated packet, decides the
 * sender's egress and its own ingress together.
 */
#ifndef VNETLAB_POLICY_H
#define VNETLAB_POLICY_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define POL_MAX_EPS      (1 << 16)
#define POL_MAX_PREFIXES (1 << 20) /* identities of addresses: pods, ipBlocks, excepts */
#define POL_MAX_RULES    (1 << 22)
#define POL_MAX_FLOWS    (1 << 17) /* two entries per flow */
#define POL_MAX_FRAGS    8192
#define POL_MAX_EXTHDRS  8 /* IPv6 extension headers walked before the L4 header */

/* Service frontends: the layout of lb.h's lb_services and lb6.h's
 * lb6_services, which the Go side hands to the programs in place of these
 * (empty) maps; the load refuses a map of another size (labpolicy's
 * TestTruthTableInLabs on veth-ebpf shows it). */
#define POL_MAX_SERVICES (1 << 18)
#define POL_SCOPE_ALL    0

/* Reserved identities. */
#define POL_ID_ANY   0 /* a rule's "any peer" */
#define POL_ID_WORLD 1 /* an address in no prefix of pol_ipcache */

/* pol_ep.flags */
#define POL_ISO_IN 0x1 /* isolated for ingress */
#define POL_ISO_EG 0x2 /* isolated for egress */

/* pol_rule_key.dir */
#define POL_DIR_IN 1
#define POL_DIR_EG 2

/* pol_flow.flags */
#define POL_FLOW_EG    0x1 /* the sender's egress allows it (or it needs no check) */
#define POL_FLOW_IN    0x2 /* the receiver's ingress allows it (or needs no check) */
#define POL_FLOW_DEFER 0x4 /* to a Service frontend: egress decided after translation */
#define POL_FLOW_REPLY 0x8 /* the reply of an allowed flow */

#define POL_HOP      0
#define POL_ROUTING  43
#define POL_FRAGMENT 44
#define POL_AH       51
#define POL_ICMP6    58
#define POL_DEST     60
#define POL_SCTP     132

struct pol_ep {
	__u32 id;    /* the pod's identity */
	__u32 flags; /* POL_ISO_* */
};

struct pol_rule_key {
	__u32 prefixlen; /* 80 + the port prefix's bits; 72: every protocol and port */
	__u32 ep;        /* the selected pod's identity */
	__u32 peer;      /* the peer's identity; POL_ID_ANY: every peer */
	__u8 dir;        /* POL_DIR_IN or POL_DIR_EG */
	__u8 proto;
	__be16 port;     /* destination port, prefix-matched */
};

#define POL_RULE_FULL 96

struct pol_flow {
	__u64 seen;  /* bpf_jiffies64 of its last packet, to pol_flow_touch */
	__u32 gen;   /* pol_gen when it was decided */
	__u8 flags;  /* POL_FLOW_* */
	__u8 pad[3];
};

/* A flow entry's lifetime after its last packet, TCP's and every other
 * protocol's, and how stale its seen may grow before a packet writes it
 * again (a second: not each packet's write), all in jiffies: set at load
 * (polbpf's FlowLifetimes). The verifier inlines bpf_jiffies64, where
 * bpf_ktime_get_coarse_ns is a helper call (a return costs ~20 ns on a
 * CPU with Safe RET). */
volatile const __u64 pol_flow_life_tcp = 0;
volatile const __u64 pol_flow_life_other = 0;
volatile const __u64 pol_flow_touch = 0;

/* pol_flow_live: the entry f (may be NULL) for a packet of protocol proto
 * at now, refreshed, or NULL when it has outlived its lifetime. */
static __always_inline struct pol_flow *pol_flow_live(struct pol_flow *f, __u8 proto, __u64 now)
{
	__u64 life = proto == IPPROTO_TCP ? pol_flow_life_tcp : pol_flow_life_other;

	if (!f || now - f->seen > life)
		return NULL;
	if (now - f->seen > pol_flow_touch)
		f->seen = now;
	return f;
}

struct pol_svc {
	__u32 id;
	__u16 count, flags;
	__u32 timeout;
	__u16 kept, pad;
	__u32 affinity_id;
};

enum {
	POL_STAT_UNISOLATED = 0, /* neither end isolated: passed with no flow lookup */
	POL_STAT_FLOW = 1,       /* passed by its flow's entry (established, reply) */
	POL_STAT_ALLOWED = 2,    /* a new flow decided and allowed */
	POL_STAT_DENIED = 3,     /* a new flow decided and dropped */
	POL_STAT_DEFERRED = 4,   /* to a Service frontend: decided at the backend */
	POL_STAT_FRAG_PASS = 5,  /* a later fragment of an allowed datagram */
	POL_STAT_FRAG_DROP = 6,  /* a later fragment of a datagram not seen allowed, at an isolated pod */
	POL_STAT_UNPARSED = 7,   /* cut off, or more IPv6 extension headers than walked: dropped at an isolated pod */
	POL_STAT_NDP = 8,        /* IPv6 neighbour discovery: always passed */
	POL_STAT_HAIRPIN = 9,    /* a pod reaching itself through a Service */
	POL_STAT_MAX = 10,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, POL_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pol_stats SEC(".maps");

static __always_inline void pol_count(__u32 what)
{
	__u64 *v = bpf_map_lookup_elem(&pol_stats, &what);
	if (v)
		*v += 1;
}

/* pol_gen: the generation of the rules in force; its low bit is the slot
 * of the rule maps the programs read. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pol_gen SEC(".maps");

/* POL_SLOTS: a double-buffered rule map name, an array of two maps
 * (pinned; slot pol_gen & 1 in force) of struct inner: their type, size,
 * key and value (unpreallocated). The inner maps give sizes, not types:
 * clang emits a struct reached only through the outer map's pointer to the
 * inner one as a forward declaration, which cannot be loaded. polbpf's Go
 * types mirror them. */
#define POL_SLOTS(name, inner, itype, max, ktype, vtype)     \
	struct inner {                                       \
		__uint(type, itype);                         \
		__uint(max_entries, max);                    \
		__uint(map_flags, BPF_F_NO_PREALLOC);        \
		__uint(key_size, sizeof(ktype));             \
		__uint(value_size, sizeof(vtype));           \
	};                                                   \
	struct {                                             \
		__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);    \
		__uint(max_entries, 2);                      \
		__type(key, __u32);                          \
		__uint(pinning, LIBBPF_PIN_BY_NAME);         \
		__array(values, struct inner);               \
	} name SEC(".maps")

POL_SLOTS(pol_rules, pol_rules_inner, BPF_MAP_TYPE_LPM_TRIE, POL_MAX_RULES, struct pol_rule_key, __u8);

/* pol_allows: does a rule of endpoint ep allow peer identity peer in
 * direction dir on proto/port? Two lookups: the peer, then any peer. The
 * protocol and port close the key, so one longest-prefix match finds a
 * rule on the port's range (80 bits + the port prefix) or on every
 * protocol and port (72 bits: the protocol wildcarded with the port), as
 * Cilium's policy map does. */
static __always_inline int pol_allows(void *rules, __u32 ep, __u32 peer, __u8 dir, __u8 proto, __be16 port)
{
	struct pol_rule_key k = { .prefixlen = POL_RULE_FULL, .ep = ep, .peer = peer, .dir = dir, .proto = proto, .port = port };

	if (bpf_map_lookup_elem(rules, &k))
		return 1;
	k.peer = POL_ID_ANY;
	return bpf_map_lookup_elem(rules, &k) != NULL;
}

/* pol_view: the generation in force and its slot's rule maps. */
struct pol_view {
	__u32 gen;
	__u32 slot;
	void *rules;
};

static __always_inline int pol_view_of(struct pol_view *v)
{
	__u32 zero = 0, *g = bpf_map_lookup_elem(&pol_gen, &zero);

	if (!g)
		return -1;
	v->gen = *g;
	v->slot = v->gen & 1;
	v->rules = bpf_map_lookup_elem(&pol_rules, &v->slot);
	return v->rules ? 0 : -1;
}

/* A parsed packet's kind. */
enum {
	POL_PLAIN = 0,      /* not a fragment */
	POL_FRAG_FIRST = 1, /* offset 0, more fragments: has the L4 header */
	POL_FRAG_LATER = 2, /* no L4 header: judged by its datagram's first fragment */
};

/* What a parse says. */
enum {
	POL_GO = 0,     /* judge it */
	POL_PASS = 1,   /* not the policies' business (not IP, NDP) */
	POL_BROKEN = 2, /* cannot be classified: dropped where a policy applies */
};

/* A packet leaving or reaching a pod goes on (the next program on the
 * hook, or the stack) or is dropped. */
#define POL_ACCEPT TC_ACT_UNSPEC
#define POL_DROP   TC_ACT_SHOT

#endif /* VNETLAB_POLICY_H */
