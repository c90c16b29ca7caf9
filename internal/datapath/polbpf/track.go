package polbpf

import (
	"net/netip"
	"slices"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
)

// tracker keeps the entries of the rules a plane last loaded, pod by pod,
// so that a Load works on the pods whose rules changed rather than on all
// of them (Compile's), and writes only the keys that changed. Its entries
// are Compile's but for the identities' numbers: an identity, once given
// to a prefix, stays the prefix's while some pod's rules name it (Compile
// numbers them afresh), so a pod's change leaves the other pods' keys as
// they were. Besides the pods whose rules changed, a change rewrites the
// rule keys of the pods whose ipBlocks hold a prefix that came or went, or
// whose peers name a pod address that came or went: those are the keys
// that depend on other pods' rules.
type tracker struct {
	pods map[netpol.PodKey]*podEntries
	// ids are the prefixes' identities, with how many of the pods' rules
	// name each (its addresses, its blocks and excepts); fam4 and fam6
	// the prefixes, sorted (for inside).
	ids        map[netip.Prefix]uint32
	refs       map[netip.Prefix]int
	fam4, fam6 []prefixID
	next       uint32
	// addrs are the pods' addresses, with how many pods have each.
	addrs map[netip.Addr]int
	// e are the entries of the rules in force, each rule key counted once
	// per pod address that writes it.
	e        *Entries
	ruleRefs map[RuleKey]int
	// dirty are the keys changed since each slot was last written.
	dirty [2]*changedKeys
}

// podEntries are what one pod's rules put in the maps: the prefixes its
// rules give identities to (its addresses, its blocks and excepts), each
// with how many of its Allows (or addresses) name it, and its rule keys,
// each with how many times its Allows make it.
type podEntries struct {
	rules    netpol.PodRules
	prefixes map[netip.Prefix]int
	keys     map[RuleKey]int
}

// changedKeys are the keys of each map that changed.
type changedKeys struct {
	eps4     map[[4]byte]bool
	eps6     map[[16]byte]bool
	ipcache4 map[lpmKey4]bool
	ipcache6 map[lpmKey6]bool
	rules    map[RuleKey]bool
}

func newChangedKeys() *changedKeys {
	return &changedKeys{eps4: map[[4]byte]bool{}, eps6: map[[16]byte]bool{}, ipcache4: map[lpmKey4]bool{},
		ipcache6: map[lpmKey6]bool{}, rules: map[RuleKey]bool{}}
}

func newTracker() *tracker {
	return &tracker{pods: map[netpol.PodKey]*podEntries{}, ids: map[netip.Prefix]uint32{}, refs: map[netip.Prefix]int{},
		next: idFirst, addrs: map[netip.Addr]int{},
		e: &Entries{EPs4: map[[4]byte]Endpoint{}, EPs6: map[[16]byte]Endpoint{}, Ipcache4: map[lpmKey4]uint32{},
			Ipcache6: map[lpmKey6]uint32{}, Rules: map[RuleKey]struct{}{}},
		ruleRefs: map[RuleKey]int{}, dirty: [2]*changedKeys{newChangedKeys(), newChangedKeys()}}
}

// update makes the tracker's entries r's; it says how many pods' rule
// keys it made again. A pod whose addresses and isolation are as they were
// is changed by the Allows that came and went alone: those a change of
// changes gives (its Delta, from the rules the tracker holds: a
// Compiler's Changes since the last update), else allowDiff's. A pod many
// policies select costs what its change touches.
func (t *tracker) update(r *netpol.Rules, changes []netpol.PodChange) int {
	deltas := map[netpol.PodKey]*netpol.AllowDelta{}
	for i := range changes {
		ch := &changes[i]
		if had := t.pods[ch.Key]; ch.Delta != nil && had != nil && holds(&had.rules, ch.Old) {
			deltas[ch.Key] = ch.Delta
		}
	}
	seen := make(map[netpol.PodKey]bool, len(r.Pods))
	var changed []*netpol.PodRules
	for i := range r.Pods {
		p := &r.Pods[i]
		k := netpol.PodKey{Namespace: p.Namespace, Name: p.Pod}
		seen[k] = true
		if had := t.pods[k]; had == nil || deltas[k] != nil || !had.rules.Equal(p) {
			changed = append(changed, p)
		}
	}
	var gone []netpol.PodKey
	for k := range t.pods {
		if !seen[k] {
			gone = append(gone, k)
		}
	}
	if len(changed) == 0 && len(gone) == 0 {
		return 0
	}
	// Whether each prefix and address touched was there before: those
	// that come or go decide which other pods' keys change.
	before := map[netip.Prefix]bool{}
	beforeAddr := map[netip.Addr]bool{}
	note := func(q netip.Prefix) {
		if _, ok := before[q]; !ok {
			before[q] = t.refs[q] > 0
		}
	}
	noteAddrs := func(p *netpol.PodRules) {
		for _, a := range p.IPs {
			if _, ok := beforeAddr[a]; !ok {
				beforeAddr[a] = t.addrs[a] > 0
			}
		}
	}
	// The new rules counted in before the old are counted out, so that a
	// prefix both name keeps its identity; a pod keeps its keys until its
	// new ones are made, so that only the difference is written.
	var made, old []*podEntries
	var edits []allowEdit
	for _, p := range changed {
		k := netpol.PodKey{Namespace: p.Namespace, Name: p.Pod}
		had := t.pods[k]
		if had != nil && sameShape(&had.rules, p) {
			e := allowEdit{pe: had}
			if d := deltas[k]; d != nil {
				e.gone, e.came = fromDelta(p, d.Ingress.Went, d.Egress.Went), fromDelta(p, d.Ingress.Came, d.Egress.Came)
			} else {
				e.gone, e.came = allowDiff(had.rules, *p), allowDiff(*p, had.rules)
			}
			// The keys of the Allows that go, with the identities they
			// were made with (before any prefix goes).
			e.goneKeys = t.ruleKeys(&e.gone)
			for _, q := range allowPrefixes(&e.came) {
				note(q)
				if had.prefixes[q]++; had.prefixes[q] == 1 {
					t.ref(q, 1)
				}
			}
			had.rules = *p
			edits = append(edits, e)
			continue
		}
		pe := &podEntries{rules: *p, prefixes: prefixCounts(p), keys: map[RuleKey]int{}}
		if had != nil {
			pe.keys = had.keys
			old = append(old, had)
		}
		for q := range pe.prefixes {
			note(q)
		}
		noteAddrs(p)
		t.count(pe, 1)
		t.pods[k] = pe
		made = append(made, pe)
	}
	for _, e := range edits {
		for _, q := range allowPrefixes(&e.gone) {
			note(q)
			if e.pe.prefixes[q]--; e.pe.prefixes[q] <= 0 {
				delete(e.pe.prefixes, q)
				t.ref(q, -1)
			}
		}
	}
	for _, k := range gone {
		pe := t.pods[k]
		t.setKeys(pe, nil)
		old = append(old, pe)
		delete(t.pods, k)
	}
	for _, pe := range old {
		for q := range pe.prefixes {
			note(q)
		}
		noteAddrs(&pe.rules)
		t.count(pe, -1)
		t.setEndpoints(pe, false)
	}
	for _, pe := range made {
		t.setEndpoints(pe, true)
	}
	var moved []netip.Prefix
	for q, was := range before {
		if was != (t.refs[q] > 0) {
			moved = append(moved, q)
		}
	}
	var movedAddr []netip.Addr
	for a, was := range beforeAddr {
		if was != (t.addrs[a] > 0) {
			movedAddr = append(movedAddr, a)
		}
	}
	redo := map[*podEntries]bool{}
	for _, pe := range made {
		redo[pe] = true
	}
	if len(moved) > 0 || len(movedAddr) > 0 {
		for _, pe := range t.pods {
			if !redo[pe] && dependsOn(&pe.rules, moved, movedAddr) {
				redo[pe] = true
			}
		}
	}
	for _, e := range edits {
		if redo[e.pe] {
			continue // its keys are made again whole
		}
		t.addKeys(e.pe, t.ruleKeys(&e.came), 1)
		t.addKeys(e.pe, e.goneKeys, -1)
		redo[e.pe] = false // counted, not made again
	}
	n := 0
	for pe, whole := range redo {
		if whole {
			t.setKeys(pe, t.ruleKeys(&pe.rules))
		}
		n++
	}
	return n
}

// allowEdit is a pod whose Allows alone changed: those that came and went
// (each side's, on the pod's addresses and isolation), and the keys of
// those that went.
type allowEdit struct {
	pe         *podEntries
	gone, came netpol.PodRules
	goneKeys   []RuleKey
}

// sameShape says whether two rules of a pod have the same addresses and
// isolation (so that they differ in their Allows alone).
func sameShape(a, b *netpol.PodRules) bool {
	return slices.Equal(a.IPs, b.IPs) && a.Ingress.Isolated == b.Ingress.Isolated && a.Egress.Isolated == b.Egress.Isolated
}

// allowDiff is a's rules holding only the Allows of each side that b's
// lack (as multisets: an Allow twice in a and once in b is there once),
// with a's addresses and isolation. The common start and end are skipped
// first: a policy's change moves a run of Allows in a long list.
func allowDiff(a, b netpol.PodRules) netpol.PodRules {
	side := func(x, y netpol.Side) netpol.Side {
		head, tail := netpol.CommonEnds(x.Allow, y.Allow)
		xs, ys := x.Allow[head:len(x.Allow)-tail], y.Allow[head:len(y.Allow)-tail]
		out := netpol.Side{Isolated: x.Isolated}
		if len(ys) == 0 {
			out.Allow = xs
			return out
		}
		byHash := map[uint64][]int{}
		for i := range ys {
			h := ys[i].Hash()
			byHash[h] = append(byHash[h], i)
		}
		for _, al := range xs {
			h := al.Hash()
			is := byHash[h]
			j := slices.IndexFunc(is, func(i int) bool { return ys[i].Same(al) })
			if j < 0 {
				out.Allow = append(out.Allow, al)
				continue
			}
			byHash[h] = slices.Delete(is, j, j+1)
		}
		return out
	}
	return netpol.PodRules{Pod: a.Pod, Namespace: a.Namespace, IPs: a.IPs, Ingress: side(a.Ingress, b.Ingress), Egress: side(a.Egress, b.Egress)}
}

// holds says whether a tracker's rules of a pod are a change's Old: the
// same addresses and isolation, each side's Allows the same slice (a
// Compiler's rules share them), so that the change's delta applies.
func holds(had, old *netpol.PodRules) bool {
	same := func(a, b []*netpol.Allow) bool {
		return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
	}
	return old != nil && sameShape(had, old) && same(had.Ingress.Allow, old.Ingress.Allow) && same(had.Egress.Allow, old.Egress.Allow)
}

// fromDelta is pod p's rules holding the Allows in and eg alone.
func fromDelta(p *netpol.PodRules, in, eg []*netpol.Allow) netpol.PodRules {
	return netpol.PodRules{Pod: p.Pod, Namespace: p.Namespace, IPs: p.IPs,
		Ingress: netpol.Side{Isolated: p.Ingress.Isolated, Allow: in}, Egress: netpol.Side{Isolated: p.Egress.Isolated, Allow: eg}}
}

// count counts a pod's prefixes and addresses in (1) or out (-1).
func (t *tracker) count(pe *podEntries, delta int) {
	for q := range pe.prefixes {
		t.ref(q, delta)
	}
	for _, a := range pe.rules.IPs {
		if t.addrs[a] += delta; t.addrs[a] <= 0 {
			delete(t.addrs, a)
		}
	}
}

// prefixCounts are the prefixes a pod's rules give identities to: its
// addresses (once each), and its Allows' blocks and excepts, with how many
// of its Allows name each.
func prefixCounts(p *netpol.PodRules) map[netip.Prefix]int {
	out := map[netip.Prefix]int{}
	for _, a := range p.IPs {
		out[netip.PrefixFrom(a, a.BitLen())]++
	}
	for _, q := range allowPrefixes(p) {
		out[q]++
	}
	return out
}

// allowPrefixes are the blocks and excepts of a pod's Allows, once per
// Allow that names each.
func allowPrefixes(p *netpol.PodRules) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []*netpol.Side{&p.Ingress, &p.Egress} {
		for _, a := range s.Allow {
			for _, b := range a.Blocks {
				out = append(out, b.CIDR.Masked())
				for _, x := range b.Except {
					out = append(out, x.Masked())
				}
			}
		}
	}
	return out
}

// dependsOn says whether a pod's rule keys name a prefix of moved (a block
// holding it) or an address of movedAddr (a peer pod's).
func dependsOn(p *netpol.PodRules, moved []netip.Prefix, movedAddr []netip.Addr) bool {
	for _, s := range []*netpol.Side{&p.Ingress, &p.Egress} {
		if !s.Isolated {
			continue
		}
		for _, a := range s.Allow {
			for _, b := range a.Blocks {
				cidr := b.CIDR.Masked()
				for _, q := range moved {
					if q.Bits() >= cidr.Bits() && cidr.Contains(q.Addr()) {
						return true
					}
				}
			}
			for _, x := range movedAddr {
				if _, found := slices.BinarySearchFunc(a.Pods, x, netip.Addr.Compare); found {
					return true
				}
			}
		}
	}
	return false
}

// ref counts one more (delta 1) or one less (-1) use of prefix q, giving
// it an identity at its first and taking it back at its last.
func (t *tracker) ref(q netip.Prefix, delta int) {
	t.refs[q] += delta
	fam := &t.fam4
	if q.Addr().Is6() {
		fam = &t.fam6
	}
	i, found := slices.BinarySearchFunc(*fam, q, func(x prefixID, q netip.Prefix) int {
		if c := x.p.Addr().Compare(q.Addr()); c != 0 {
			return c
		}
		return x.p.Bits() - q.Bits()
	})
	switch {
	case t.refs[q] > 0 && !found:
		id := t.next
		t.next++
		t.ids[q] = id
		*fam = slices.Insert(*fam, i, prefixID{q, id})
		t.setIpcache(q, id, true)
	case t.refs[q] <= 0:
		delete(t.refs, q)
		if found {
			*fam = slices.Delete(*fam, i, i+1)
			delete(t.ids, q)
			t.setIpcache(q, 0, false)
		}
	}
}

func (t *tracker) setIpcache(q netip.Prefix, id uint32, in bool) {
	if q.Addr().Is4() {
		setKey(t.e.Ipcache4, lpmKey4{uint32(q.Bits()), q.Addr().As4()}, id, in, t.dirty[0].ipcache4, t.dirty[1].ipcache4)
	} else {
		setKey(t.e.Ipcache6, lpmKey6{uint32(q.Bits()), q.Addr().As16()}, id, in, t.dirty[0].ipcache6, t.dirty[1].ipcache6)
	}
}

// setEndpoints writes (in) the endpoints of a pod's addresses, or deletes
// those no pod has any more; a key is changed only when its value is.
func (t *tracker) setEndpoints(pe *podEntries, in bool) {
	var flags uint32
	if pe.rules.Ingress.Isolated {
		flags |= IsoIn
	}
	if pe.rules.Egress.Isolated {
		flags |= IsoEg
	}
	for _, a := range pe.rules.IPs {
		if !in && t.addrs[a] > 0 {
			continue
		}
		ep := Endpoint{ID: t.ids[netip.PrefixFrom(a, a.BitLen())], Flags: flags}
		if a.Is4() {
			setKey(t.e.EPs4, a.As4(), ep, in, t.dirty[0].eps4, t.dirty[1].eps4)
		} else {
			setKey(t.e.EPs6, a.As16(), ep, in, t.dirty[0].eps6, t.dirty[1].eps6)
		}
	}
}

// setKey writes (in) or deletes key k of m, noting it in both slots' dirty
// keys when that changes m.
func setKey[K, V comparable](m map[K]V, k K, v V, in bool, dirty0, dirty1 map[K]bool) {
	cur, ok := m[k]
	switch {
	case in && (!ok || cur != v):
		m[k] = v
	case !in && ok:
		delete(m, k)
	default:
		return
	}
	dirty0[k], dirty1[k] = true, true
}

// setKeys replaces a pod's rule keys with keys: the new counted in before
// the old are counted out, so a key in both is not written again.
func (t *tracker) setKeys(pe *podEntries, keys []RuleKey) {
	was := pe.keys
	pe.keys = map[RuleKey]int{}
	t.addKeys(pe, keys, 1)
	for k, n := range was {
		t.refKey(k, -n)
	}
}

// addKeys counts keys in (delta 1) or out (-1) of pod pe's rule keys and
// the tracker's.
func (t *tracker) addKeys(pe *podEntries, keys []RuleKey, delta int) {
	for _, k := range keys {
		if pe.keys[k] += delta; pe.keys[k] <= 0 {
			delete(pe.keys, k)
		}
		t.refKey(k, delta)
	}
}

// refKey counts delta more uses of rule key k, writing it at its first
// and deleting it at its last.
func (t *tracker) refKey(k RuleKey, delta int) {
	n := t.ruleRefs[k] + delta
	switch {
	case n > 0 && t.ruleRefs[k] <= 0:
		t.e.Rules[k] = struct{}{}
		t.dirty[0].rules[k], t.dirty[1].rules[k] = true, true
	case n <= 0 && t.ruleRefs[k] > 0:
		delete(t.e.Rules, k)
		t.dirty[0].rules[k], t.dirty[1].rules[k] = true, true
	}
	if n <= 0 {
		delete(t.ruleRefs, k)
	} else {
		t.ruleRefs[k] = n
	}
}

// ruleKeys are a pod's rule keys (Compile's addRules for each of its
// addresses), with the tracker's identities.
func (t *tracker) ruleKeys(p *netpol.PodRules) []RuleKey {
	byAddr := func(a netip.Addr) (uint32, bool) {
		if t.addrs[a] == 0 {
			return 0, false
		}
		id, ok := t.ids[netip.PrefixFrom(a, a.BitLen())]
		return id, ok
	}
	var out []RuleKey
	for _, addr := range p.IPs {
		fam := t.fam4
		if addr.Is6() {
			fam = t.fam6
		}
		ep, _ := byAddr(addr)
		out = appendRules(out, ep, DirIn, p.Ingress, addr.Is6(), byAddr, fam)
		out = appendRules(out, ep, DirEg, p.Egress, addr.Is6(), byAddr, fam)
	}
	return out
}
