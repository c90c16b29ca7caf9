package tcbpf

import (
	"errors"
	"net/netip"

	"github.com/cilium/ebpf"
)

// ForgetUDPFlows deletes the conntrack entries of the UDP flows whose
// frontend (the clusterIP, node IP or external IP and port the client
// reached) is a key of keep and whose backend is not in keep[frontend]:
// both directions, in lb_conntrack (flows of the node's pods) and
// np_conntrack (flows from outside the node). The next datagram of such a
// flow is a new flow and gets a live backend. kube-proxy clears the
// kernel's conntrack the same way (pkg/proxy/conntrack: UDP only; a TCP
// flow keeps a removed endpoint until it ends). It returns how many flows
// were forgotten.
func (p *Plane) ForgetUDPFlows(keep map[netip.AddrPort][]Backend) (int, error) {
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
	stale := func(k serviceLbCtKey, addr uint32, port uint16) bool {
		if k.Dir != ctFwd || Proto(k.Proto) != UDP {
			return false
		}
		set, ok := allowed[netip.AddrPortFrom(addrOf(k.Daddr), portOf(k.Dport))]
		return ok && !set[netip.AddrPortFrom(addrOf(addr), portOf(port))]
	}

	// Keys are collected first, deleted after: deleting while iterating
	// a hash map restarts or skips the walk.
	var pods []serviceLbCtKey
	var (
		k serviceLbCtKey
		v serviceLbCt
	)
	it := p.objs.LbConntrack.Iterate()
	for it.Next(&k, &v) {
		if !stale(k, v.Addr, v.Port) {
			continue
		}
		rev := serviceLbCtKey{Saddr: v.Addr, Daddr: k.Saddr, Sport: v.Port, Dport: k.Sport, Proto: k.Proto, Dir: ctRev}
		if v.Flags&ctHairpin != 0 {
			rev.Daddr = be32(netip.MustParseAddr(HairpinIP))
		}
		pods = append(pods, k, rev)
	}
	if err := it.Err(); err != nil {
		return 0, err
	}
	var outside []serviceLbCtKey
	var nv serviceNpCt
	it = p.objs.NpConntrack.Iterate()
	for it.Next(&k, &nv) {
		if !stale(k, nv.Addr, nv.Port) {
			continue
		}
		rev := serviceLbCtKey{Saddr: nv.Addr, Daddr: k.Saddr, Sport: nv.Port, Dport: k.Sport, Proto: k.Proto, Dir: ctRev}
		if nv.Flags&npSNAT != 0 {
			// The reply comes back to the SNAT address (the node IP; a flow
			// made before np_node existed: the address the client reached).
			rev.Daddr, rev.Dport = nv.Client, nv.SnatPort
			if rev.Daddr == 0 {
				rev.Daddr = k.Daddr
			}
		}
		outside = append(outside, k, rev)
	}
	if err := it.Err(); err != nil {
		return 0, err
	}
	var errs []error
	for _, m := range []struct {
		m    *ebpf.Map
		keys []serviceLbCtKey
	}{{p.objs.LbConntrack, pods}, {p.objs.NpConntrack, outside}} {
		for _, k := range m.keys {
			if err := m.m.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return (len(pods) + len(outside)) / 2, errors.Join(errs...)
}
