package polbpf

import (
	"math/bits"
	"net/netip"
	"slices"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
)

// The maps' keys and values (bpf/policy.h, policy_fam.h; their sizes are
// checked against the object's in the tests). Ports are in network order:
// Port holds the bytes as the packet does.

// Endpoint is pol_ep: a pod's identity and isolation.
type Endpoint struct {
	ID    uint32
	Flags uint32
}

// Endpoint flags.
const (
	IsoIn uint32 = 0x1
	IsoEg uint32 = 0x2
)

// Directions of a rule.
const (
	DirIn uint8 = 1
	DirEg uint8 = 2
)

// Reserved identities.
const (
	IDAny   uint32 = 0 // a rule's "any peer"
	IDWorld uint32 = 1 // an address in no prefix
	// idFirst is the first identity given to a pod; then prefixes.
	idFirst uint32 = 16
)

// RuleKey is pol_rule_key: an allowed {endpoint, peer, direction,
// protocol, port prefix}.
type RuleKey struct {
	Prefixlen uint32
	EP        uint32
	Peer      uint32
	Dir       uint8
	Proto     uint8
	Port      uint16 // network order
}

// ruleFixedBits: the key's bits before the port (ep, peer, dir, proto);
// ruleAnyBits: before the protocol (a rule on every protocol and port).
const (
	ruleFixedBits = 80
	ruleAnyBits   = 72
)

type lpmKey4 struct {
	Prefixlen uint32
	Addr      [4]byte
}

type lpmKey6 struct {
	Prefixlen uint32
	Addr      [16]byte
}

// Entries are netpol.Rules as the maps hold them.
type Entries struct {
	EPs4     map[[4]byte]Endpoint
	EPs6     map[[16]byte]Endpoint
	Ipcache4 map[lpmKey4]uint32
	Ipcache6 map[lpmKey6]uint32
	Rules    map[RuleKey]struct{}
}

// Count is how many entries the maps get.
func (e *Entries) Count() int {
	return len(e.EPs4) + len(e.EPs6) + len(e.Ipcache4) + len(e.Ipcache6) + len(e.Rules)
}

// prefixID is a prefix and its identity.
type prefixID struct {
	p  netip.Prefix
	id uint32
}

// Compile turns the compiled policies into map entries: every address of
// a pod an identity (a pod's IPv4 and IPv6 addresses two: an ipBlock of
// one family names only that family's, and must not allow the pod's
// packets of the other), every ipBlock and except prefix another (a prefix
// equal to a pod's address is that address's), and each Allow, for each
// address of its pod, the rule keys of its peers' identities of that
// family times its ports' prefixes. A block
// allows every identity whose prefix lies inside it and inside none of its
// excepts: the identity a lookup gives an address is its most specific
// prefix's, which lies inside the block exactly when the address does.
func Compile(r *netpol.Rules) *Entries {
	e := &Entries{EPs4: map[[4]byte]Endpoint{}, EPs6: map[[16]byte]Endpoint{}, Ipcache4: map[lpmKey4]uint32{},
		Ipcache6: map[lpmKey6]uint32{}, Rules: map[RuleKey]struct{}{}}
	byAddr := map[netip.Addr]uint32{}
	ids := map[netip.Prefix]uint32{}
	next := idFirst
	for _, p := range r.Pods {
		var flags uint32
		if p.Ingress.Isolated {
			flags |= IsoIn
		}
		if p.Egress.Isolated {
			flags |= IsoEg
		}
		for _, a := range p.IPs {
			byAddr[a] = next
			ids[netip.PrefixFrom(a, a.BitLen())] = next
			if a.Is4() {
				e.EPs4[a.As4()] = Endpoint{ID: next, Flags: flags}
			} else {
				e.EPs6[a.As16()] = Endpoint{ID: next, Flags: flags}
			}
			next++
		}
	}
	for _, p := range r.Pods {
		for _, s := range []netpol.Side{p.Ingress, p.Egress} {
			for _, a := range s.Allow {
				for _, b := range a.Blocks {
					for _, q := range append([]netip.Prefix{b.CIDR}, b.Except...) {
						if _, ok := ids[q.Masked()]; !ok {
							ids[q.Masked()] = next
							next++
						}
					}
				}
			}
		}
	}
	var fam4, fam6 []prefixID
	for q, id := range ids {
		if q.Addr().Is4() {
			e.Ipcache4[lpmKey4{uint32(q.Bits()), q.Addr().As4()}] = id
			fam4 = append(fam4, prefixID{q, id})
		} else {
			e.Ipcache6[lpmKey6{uint32(q.Bits()), q.Addr().As16()}] = id
			fam6 = append(fam6, prefixID{q, id})
		}
	}
	sortPrefixes(fam4)
	sortPrefixes(fam6)
	podID := func(a netip.Addr) (uint32, bool) {
		id, ok := byAddr[a]
		return id, ok
	}
	var keys []RuleKey
	for _, p := range r.Pods {
		for _, addr := range p.IPs {
			fam := fam4
			if addr.Is6() {
				fam = fam6
			}
			keys = appendRules(keys[:0], byAddr[addr], DirIn, p.Ingress, addr.Is6(), podID, fam)
			keys = appendRules(keys, byAddr[addr], DirEg, p.Egress, addr.Is6(), podID, fam)
			for _, k := range keys {
				e.Rules[k] = struct{}{}
			}
		}
	}
	return e
}

// appendRules appends the rule keys of one side (direction dir) of the pod
// address of identity ep and family v6 (IPv6 true; fam: that family's
// prefixes, sorted; podID: a pod address's identity).
func appendRules(out []RuleKey, ep uint32, dir uint8, side netpol.Side, v6 bool, podID func(netip.Addr) (uint32, bool), fam []prefixID) []RuleKey {
	if !side.Isolated {
		return out
	}
	for _, a := range side.Allow {
		peers := peerIDs(a, v6, podID, fam)
		for _, pp := range portPrefixes(a) {
			for _, peer := range peers {
				k := pp
				k.EP, k.Peer, k.Dir = ep, peer, dir
				out = append(out, k)
			}
		}
	}
	return out
}

func sortPrefixes(ps []prefixID) {
	slices.SortFunc(ps, func(a, b prefixID) int {
		if c := a.p.Addr().Compare(b.p.Addr()); c != 0 {
			return c
		}
		return a.p.Bits() - b.p.Bits()
	})
}

// peerIDs are the identities of family v6 (IPv6 true) an Allow's peers
// cover; fam are the family's prefixes, sorted, podID gives a pod
// address's.
func peerIDs(a *netpol.Allow, v6 bool, podID func(netip.Addr) (uint32, bool), fam []prefixID) []uint32 {
	if a.AnyPeer {
		return []uint32{IDAny}
	}
	var (
		seen map[uint32]bool // once there are many
		out  []uint32
	)
	add := func(id uint32) {
		switch {
		case seen != nil:
			if seen[id] {
				return
			}
			seen[id] = true
		case slices.Contains(out, id):
			return
		case len(out) == 16:
			seen = map[uint32]bool{}
			for _, x := range out {
				seen[x] = true
			}
			seen[id] = true
		}
		out = append(out, id)
	}
	for _, ip := range a.Pods {
		if id, ok := podID(ip); ok && ip.Is6() == v6 {
			add(id)
		}
	}
	for _, b := range a.Blocks {
		if b.CIDR.Addr().Is6() != v6 {
			continue
		}
		for _, x := range inside(fam, b.CIDR.Masked()) {
			if !slices.ContainsFunc(b.Except, func(ex netip.Prefix) bool { return ex.Bits() <= x.p.Bits() && ex.Contains(x.p.Addr()) }) {
				add(x.id)
			}
		}
	}
	return out
}

// inside are the prefixes of sorted fam that lie inside b: those from b's
// first address to its last, no shorter than b.
func inside(fam []prefixID, b netip.Prefix) []prefixID {
	i, _ := slices.BinarySearchFunc(fam, b.Addr(), func(x prefixID, a netip.Addr) int { return x.p.Addr().Compare(a) })
	last := lastAddr(b)
	var out []prefixID
	for ; i < len(fam) && fam[i].p.Addr().Compare(last) <= 0; i++ {
		if fam[i].p.Bits() >= b.Bits() {
			out = append(out, fam[i])
		}
	}
	return out
}

// lastAddr is the highest address of prefix p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// portPrefixes are an Allow's ports as rule keys (protocol, port, prefix
// length): every protocol (a prefix that stops before it), or each range
// split into the aligned blocks an LPM trie matches.
func portPrefixes(a *netpol.Allow) []RuleKey {
	if a.AnyPort {
		return []RuleKey{{Prefixlen: ruleAnyBits}}
	}
	var out []RuleKey
	for _, r := range a.Ports {
		for lo, hi := uint32(r.First), uint32(r.Last); lo <= hi; {
			k := 0 // the block is 2^k ports from lo
			for k < 16 {
				size := uint32(1) << (k + 1)
				if lo%size != 0 || lo+size-1 > hi {
					break
				}
				k++
			}
			out = append(out, RuleKey{Prefixlen: ruleFixedBits + uint32(16-k), Proto: r.Proto.Number(), Port: bits.ReverseBytes16(uint16(lo))})
			lo += 1 << k
		}
	}
	return out
}
