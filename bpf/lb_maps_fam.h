/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * lb_maps_fam.h: the Service maps of lb.h and lb6.h and their counter,
 * written once for IPv4 and IPv6. Not a header of its own: lb.h includes it
 * for IPv4 and lb6.h for IPv6, after defining
 *
 *   LBF(name)         the family's name: lb_##name or lb6_##name
 *                     (lb_services, struct lb6_ct_key, lb6_count, ...);
 *   LB_FAM_SERVICES   lb_services' size, LB_FAM_BACKENDS lb_backends';
 *   LB_FAM_STATS      how many counters lb_stats holds;
 *   LB_FAM_ADDR       the address type: __be32 or struct lb6_addr;
 *   LB_FAM_VIP16(a)   the key of the address at a in lb_vip16.
 *
 * Names, sizes, key and value types are the family's own. The macros are undefined
 * again at the end.
 */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LB_FAM_SERVICES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct LBF(svc_key));
	__type(value, struct lb_svc);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} LBF(services) SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LB_FAM_BACKENDS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lb_backend_key);
	__type(value, struct LBF(backend));
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} LBF(backends) SEC(".maps");

/* lb_slots: where each Service's backend is (its id and the backend ->
 * its slot), for lb_backend_slot to find one that moved. The Go side
 * writes it beside lb_backends; a stale entry is harmless (the slot it
 * names is checked). */
struct LBF(slot_key) {
	__u32 svc_id;
	LB_FAM_ADDR ip;
	__be16 port;
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LB_FAM_BACKENDS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct LBF(slot_key));
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} LBF(slots) SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LB_MAX_FLOWS);
	__type(key, struct LBF(ct_key));
	__type(value, struct LBF(ct));
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} LBF(conntrack) SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LB_MAX_FRAGS);
	__type(key, struct LBF(frag_key));
	__type(value, struct lb_frag);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} LBF(frags) SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LB_FAM_STATS);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} LBF(stats) SEC(".maps");

/* sessionAffinity ClientIP: a client's new flows to a Service go to the
 * backend its last new flow got, unless that was longer than the Service's
 * affinity_timeout ago or the backend left the Service (no slot holds it).
 * Consulted only when a flow gets its backend (a SYN, a flow the conntrack
 * does not know): established flows follow the conntrack. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LB_MAX_AFFINITY);
	__type(key, struct LBF(affinity_key));
	__type(value, struct LBF(affinity));
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} LBF(affinity) SEC(".maps");

/* lb_vip16: the clusterIP prefilter (lb.h): how many Services have an
 * address whose LB_FAM_VIP16 is the key, kept by the Go side. */
LB_PREFILTER(LBF(vip16));

/* lb_maybe_vip: whether the address at a may be a clusterIP. */
static __always_inline int LBF(maybe_vip)(const LB_FAM_ADDR *a)
{
	__u32 k = LB_FAM_VIP16(a);
	__u32 *n = bpf_map_lookup_elem(&LBF(vip16), &k);

	return n && *n;
}

static __always_inline void LBF(count)(__u32 what)
{
	__u64 *v = bpf_map_lookup_elem(&LBF(stats), &what);
	if (v)
		*v += 1;
}

#undef LBF
#undef LB_FAM_SERVICES
#undef LB_FAM_BACKENDS
#undef LB_FAM_STATS
#undef LB_FAM_ADDR
#undef LB_FAM_VIP16
