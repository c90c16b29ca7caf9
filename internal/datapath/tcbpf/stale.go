package tcbpf

import (
	"cmp"
	"errors"
	"net/netip"
	"slices"
	"structs"
	"sync"

	"github.com/cilium/ebpf"
)

// ForgetUDPFlows deletes the conntrack entries of the UDP flows from
// outside the node whose frontend (the node IP or external IP and port the
// client reached) is a key of keep and whose backend is not in
// keep[frontend]: both directions, in each family's NodePort conntrack
// (np_conntrack, np6_conntrack). The next datagram of such a flow is a new
// flow and gets a live backend. kube-proxy clears the kernel's conntrack
// the same way (pkg/proxy/conntrack: UDP only; a TCP flow keeps a removed
// endpoint until it ends). It returns how many flows were forgotten.
//
// The node's pods' conntrack (lb_conntrack, lb6_conntrack) is not walked:
// from_pod checks an established UDP flow's backend against its Service's
// at every datagram (bpf/lb_pod_fam.h) and picks again, its old reverse
// entry deleted, when it left. Its walk was what a cleanup cost: the
// probers of kube converge keep that LRU full (131,072 entries), and each
// removal's walk of it took both nodes' proxies ~50 ms of CPU at the same
// moment, which on 2 vCPUs stalled the pods' own sends by 35-150 ms (kube
// converge: a removal's p99 was 90-160 ms, 5-10 ms without it). What that leaves:
// a pod flow that sends nothing more keeps its entries until the LRU evicts
// them, so a late reply from the backend that left is still made the
// Service's until then (kube-proxy's deletion would leave it untranslated).
func (p *Plane) ForgetUDPFlows(keep map[netip.AddrPort][]Backend) (int, error) {
	return p.ForgetUDPFlowsGuarded(keep, nil)
}

// FlowGuard is what ForgetUDPFlowsGuarded asks before it deletes the
// flows its walk found: it holds the guard's lock while it deletes a batch
// of them, and keeps, of that batch, only the flows whose backend the
// frontend has not got back meanwhile (Backends, under the lock). A caller
// that writes the Service maps holding the same lock can never have a
// flow to a backend it just wrote deleted: the walk takes a while, the
// maps may change during it.
type FlowGuard interface {
	sync.Locker
	// Backends says, under the lock, the backends frontend fe has now
	// (ok false: none; fe is no frontend any more).
	Backends(fe netip.AddrPort) (bs []Backend, ok bool)
}

// ForgetUDPFlowsGuarded is ForgetUDPFlows whose deletes g guards (nil: no
// guard): what keep says is read as the walk starts, g's Backends as each
// batch is deleted, and a flow goes only when both say its backend left.
func (p *Plane) ForgetUDPFlowsGuarded(keep map[netip.AddrPort][]Backend, g FlowGuard) (int, error) {
	if len(keep) == 0 {
		return 0, nil
	}
	allowed := make(map[netip.AddrPort]map[netip.AddrPort]bool, len(keep))
	for fe, bs := range keep {
		set := make(map[netip.AddrPort]bool, len(bs))
		for _, b := range bs {
			set[netip.AddrPortFrom(b.IP, b.Port)] = true
		}
		allowed[fe] = set
	}
	// stale: a forward entry of UDP flow f, whose frontend no longer has
	// its backend.
	stale := func(dir, proto uint8, f flowOf) bool {
		if dir != ctFwd || Proto(proto) != UDP {
			return false
		}
		set, ok := allowed[f.fe]
		return ok && !set[f.backend]
	}
	// still: under g's lock, whether the flow from fe to backend is still
	// stale (fe has not got backend back since keep was made).
	still := func(f flowOf) bool {
		bs, ok := g.Backends(f.fe)
		return !ok || !slices.ContainsFunc(bs, func(b Backend) bool { return netip.AddrPortFrom(b.IP, b.Port) == f.backend })
	}
	if g == nil {
		still = nil
	}
	// A SNATed flow's replies go to the SNAT address and port: the node IP,
	// or for a flow made before np_node existed the address the client
	// reached (IPv4 only: np6_new_flow always sets it).
	outside := func(k *ctKey[uint32], v *serviceNpCt) (ctKey[uint32], flowOf, bool) {
		rev, f := k.reverse(v.Addr, v.Port, v.Flags&npSNAT != 0, cmp.Or(v.Client, k.Daddr), v.SnatPort)
		return rev, f, stale(k.Dir, k.Proto, f)
	}
	outside6 := func(k *ctKey[serviceLb6Addr], v *serviceNp6Ct) (ctKey[serviceLb6Addr], flowOf, bool) {
		rev, f := k.reverse(v.Addr, v.Port, v.Flags&npSNAT != 0, v.Client, v.SnatPort)
		return rev, f, stale(k.Dir, k.Proto, f)
	}

	// A family's maps hold only flows to its frontends: the other's are
	// not walked (each walk reads every bucket of a map).
	var v4, v6 bool
	for fe := range keep {
		v4, v6 = v4 || fe.Addr().Is4(), v6 || !fe.Addr().Is4()
	}
	var n [2]int
	var errs [2]error
	if v4 {
		n[0], errs[0] = forgetFlows(p.objs.NpConntrack, outside, g, still)
	}
	if v6 {
		n[1], errs[1] = forgetFlows(p.objs.Np6Conntrack, outside6, g, still)
	}
	return n[0] + n[1], errors.Join(errs[:]...)
}

// flowOf is a forward entry's frontend and backend.
type flowOf struct{ fe, backend netip.AddrPort }

// ctKey is the key of np_conntrack (struct lb_ct_key, A uint32) and of
// np6_conntrack (struct lb6_ct_key, A serviceLb6Addr), written once for
// both families' walks; the conversions below keep it bpf2go's layout.
type ctKey[A uint32 | serviceLb6Addr] struct {
	_            structs.HostLayout
	Saddr, Daddr A
	Sport, Dport uint16
	Proto, Dir   uint8
	Pad          uint16
}

var (
	_ = ctKey[uint32](serviceLbCtKey{})
	_ = ctKey[serviceLb6Addr](serviceLb6CtKey{})
)

// reverse is the flow of forward entry k to backend addr:port, and the
// key of its reverse entry as the programs write it: towards the client,
// or when moved towards dst:dport (a SNATed flow's reply address).
func (k *ctKey[A]) reverse(addr A, port uint16, moved bool, dst A, dport uint16) (ctKey[A], flowOf) {
	rev := ctKey[A]{Saddr: addr, Daddr: k.Saddr, Sport: port, Dport: k.Sport, Proto: k.Proto, Dir: ctRev}
	if moved {
		rev.Daddr, rev.Dport = dst, dport
	}
	return rev, flowOf{addrPort(netAddr(k.Daddr), k.Dport), addrPort(netAddr(addr), port)}
}

// netAddr is a conntrack key's or entry's address of either family.
func netAddr[A uint32 | serviceLb6Addr](a A) netip.Addr {
	if v, ok := any(a).(uint32); ok {
		return addrOf(v)
	}
	return addrOf6(any(a).(serviceLb6Addr))
}

// forgetFlows deletes from conntrack map m each forward entry that pick
// chooses, and the reverse entry pick names for it; it returns how many
// flows went. Keys are collected first, deleted after: deleting while
// iterating a hash map restarts or skips the walk. With a guard g, each
// batch is deleted under g's lock, the flows still says are no longer
// stale left out.
func forgetFlows[K, V any](m *ebpf.Map, pick func(k *K, v *V) (rev K, f flowOf, ok bool), g FlowGuard, still func(flowOf) bool) (int, error) {
	var keys []K
	var flows []flowOf
	err := walk(m, func(k *K, v *V) bool {
		if rev, f, ok := pick(k, v); ok {
			keys = append(keys, *k, rev)
			flows = append(flows, f)
		}
		return true
	})
	if err != nil || len(keys) == 0 {
		return 0, err
	}
	if g == nil {
		return len(keys) / 2, deleteKeys(m, keys)
	}
	n := 0
	for len(flows) > 0 {
		c := min(len(flows), walkBatch/2)
		batch := make([]K, 0, 2*c)
		g.Lock()
		for i, f := range flows[:c] {
			if still(f) {
				batch = append(batch, keys[2*i], keys[2*i+1])
			}
		}
		err := deleteKeys(m, batch)
		g.Unlock()
		if err != nil {
			return n, err
		}
		n += len(batch) / 2
		flows, keys = flows[c:], keys[2*c:]
	}
	return n, nil
}

// deleteKeys deletes keys from m, a batch per system call
// (BPF_MAP_DELETE_BATCH); a key already gone (a reverse entry the LRU
// evicted, a flow that ended meanwhile) is skipped. A kernel without
// batches deletes them one by one. A removed backend's flows are
// thousands at a probe a millisecond, two system calls each one by one.
func deleteKeys[K any](m *ebpf.Map, keys []K) error {
	for len(keys) > 0 {
		n, err := m.BatchDelete(keys[:min(len(keys), walkBatch)], nil)
		switch {
		case errors.Is(err, ebpf.ErrNotSupported):
			var errs []error
			for i := range keys {
				if err := m.Delete(&keys[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
					errs = append(errs, err)
				}
			}
			return errors.Join(errs...)
		case errors.Is(err, ebpf.ErrKeyNotExist):
			n++ // the batch stopped at a key not there: skip it
		case err != nil:
			return err // the rest stay: the caller tries again
		}
		keys = keys[min(n, len(keys)):]
	}
	return nil
}

// walkBatch is how many entries one system call of walk reads (or of
// deleteKeys deletes). The cost is per entry (a full conntrack: 58 ms in
// batches of 256 or of 4,096): small batches keep each call short, so
// the node's other processes wait for none of them.
const walkBatch = 256

// walk calls fn with each entry of hash map m until fn returns false, a
// batch of entries per system call (BPF_MAP_LOOKUP_BATCH). A conntrack
// map holds up to 131,072 entries: walked one key at a time (two system
// calls each) it took 0.5 s of system time on a quiet machine (45-60 ms in
// batches, TestForgetUDPFlowsFullConntrack), 0.1-1 s on a cluster's node
// while its probers filled it: every node's proxy walks at the same
// moment, after a backend's removal, and on 2 vCPUs that starved the
// pods (kube converge's probers sent 1-24 probes in the 30-190 ms after a
// removal, against ~0.8 a millisecond otherwise; kube converge measured a removal's
// network programming duration read 0.66 s p50, an addition's 10 ms). A
// kernel without batches is walked key by key.
func walk[K, V any](m *ebpf.Map, fn func(k *K, v *V) bool) error {
	keys, vals := make([]K, walkBatch), make([]V, walkBatch)
	var cursor ebpf.MapBatchCursor
	for {
		n, err := m.BatchLookup(&cursor, keys, vals, nil)
		if errors.Is(err, ebpf.ErrNotSupported) {
			return walkKeys(m, fn)
		}
		for i := range n {
			if !fn(&keys[i], &vals[i]) {
				return nil
			}
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil // the end
		}
		if err != nil {
			return err
		}
	}
}

// walkKeys is walk one key at a time.
func walkKeys[K, V any](m *ebpf.Map, fn func(k *K, v *V) bool) error {
	var (
		k K
		v V
	)
	it := m.Iterate()
	for it.Next(&k, &v) {
		if !fn(&k, &v) {
			return nil
		}
	}
	return it.Err()
}

// addrPort is a conntrack key's or entry's address and port (network
// order) as a netip.AddrPort.
func addrPort(a netip.Addr, port uint16) netip.AddrPort { return netip.AddrPortFrom(a, portOf(port)) }
