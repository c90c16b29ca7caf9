package polnft

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
)

// A rule's matches as nf_tables expressions, written the way nft 1.0
// writes the same text, so that nft lists a rule added through netlink as
// it lists one it added itself (TestAddedRulesListAsNft compares the two):
//   - an address family's match starts with its nfproto;
//   - one address is compared, several are looked up in an anonymous set;
//   - a prefix loads only its whole bytes when it has no others (10.0.0.0/8:
//     one byte), else the address masked;
//   - an ipBlock's excepts: one is compared (!=), several are an interval
//     set looked up inverted, adjacent intervals merged;
//   - the ports: `meta l4proto . th dport` looked up in a concatenated set,
//     an interval one (with l4proto put in network order) when a range is
//     not one port.

// The registers: an address or a concatenation's first field, and the
// concatenation's second field (the 32-bit register after the first).
const (
	regKey    = 1
	regSecond = 9
)

// nfproto is the family's value of meta nfproto.
func (f family) nfproto() byte {
	if f.is4 {
		return unix.NFPROTO_IPV4
	}
	return unix.NFPROTO_IPV6
}

// offset is where the address peer ("saddr", "daddr") is in the family's
// network header.
func (f family) offset(peer string) uint32 {
	switch {
	case f.is4 && peer == "saddr":
		return 12
	case f.is4:
		return 16
	case peer == "saddr":
		return 8
	}
	return 24
}

// setType is the family's address type of a set's key.
func (f family) setType() nftables.SetDatatype {
	if f.is4 {
		return nftables.TypeIPAddr
	}
	return nftables.TypeIP6Addr
}

// writable says whether nftExprs writes Allow a's rules: all but an
// ipBlock whose excepts reach the family's last address, an interval that
// nft marks open in the element's user data, which the library does not
// write.
func writable(a *netpol.Allow) bool {
	for _, b := range a.Blocks {
		for _, e := range b.Except {
			if !lastOf(e).Next().IsValid() {
				return false
			}
		}
	}
	return true
}

// nftExprs is the expressions of the rule of Allow a whose peers are m in
// direction d, adding the anonymous sets they look up to c's batch (on
// table t).
func (d direction) nftExprs(c *nftables.Conn, t *nftables.Table, m peerMatch, a *netpol.Allow) ([]expr.Any, error) {
	var e []expr.Any
	if m.f != nil {
		off := m.f.offset(d.peer)
		e = append(e, &expr.Meta{Key: expr.MetaKeyNFPROTO, Register: regKey},
			&expr.Cmp{Op: expr.CmpOpEq, Register: regKey, Data: []byte{m.f.nfproto()}})
		switch {
		case m.block == nil && len(m.pods) == 1:
			e = append(e, prefixExprs(netip.PrefixFrom(m.pods[0], m.pods[0].BitLen()), off, expr.CmpOpEq)...)
		case m.block == nil:
			var el []nftables.SetElement
			for _, ip := range m.pods {
				el = append(el, nftables.SetElement{Key: ip.AsSlice()})
			}
			s := &nftables.Set{Table: t, Anonymous: true, Constant: true, KeyType: m.f.setType()}
			if err := c.AddSet(s, el); err != nil {
				return nil, fmt.Errorf("the set of %s: %w", m.text(d.peer), err)
			}
			e = append(e, loadAddr(m.pods[0], off), &expr.Lookup{SourceRegister: regKey, SetName: s.Name, SetID: s.ID})
		default:
			e = append(e, prefixExprs(m.block.CIDR, off, expr.CmpOpEq)...)
			switch ex := m.block.Except; len(ex) {
			case 0:
			case 1:
				e = append(e, prefixExprs(ex[0], off, expr.CmpOpNeq)...)
			default:
				s := &nftables.Set{Table: t, Anonymous: true, Constant: true, Interval: true, KeyType: m.f.setType()}
				if err := c.AddSet(s, intervals(ex)); err != nil {
					return nil, fmt.Errorf("the set of %s: %w", m.text(d.peer), err)
				}
				e = append(e, loadAddr(ex[0].Addr(), off), &expr.Lookup{SourceRegister: regKey, SetName: s.Name, SetID: s.ID, Invert: true})
			}
		}
	}
	if !a.AnyPort {
		pe, err := portExprs(c, t, a.Ports)
		if err != nil {
			return nil, fmt.Errorf("the ports of %s: %w", portsText(a), err)
		}
		e = append(e, pe...)
	}
	v := d.verdictExpr
	return append(e, &v), nil
}

// loadAddr loads the whole address at off (of a's family) into regKey.
func loadAddr(a netip.Addr, off uint32) *expr.Payload {
	return &expr.Payload{OperationType: expr.PayloadLoad, DestRegister: regKey, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: uint32(a.BitLen() / 8)}
}

// prefixExprs compares the address at off with prefix p (op: CmpOpEq, or
// CmpOpNeq for an except): a whole address compared; a prefix of whole
// bytes by loading only those; any other masked first.
func prefixExprs(p netip.Prefix, off uint32, op expr.CmpOp) []expr.Any {
	addr := p.Masked().Addr().AsSlice()
	load := loadAddr(p.Addr(), off)
	switch bits := p.Bits(); {
	case bits == p.Addr().BitLen():
	case bits > 0 && bits%8 == 0:
		load.Len = uint32(bits / 8)
		addr = addr[:bits/8]
	default:
		return []expr.Any{load,
			&expr.Bitwise{SourceRegister: regKey, DestRegister: regKey, Len: uint32(len(addr)), Mask: mask(p), Xor: make([]byte, len(addr))},
			&expr.Cmp{Op: op, Register: regKey, Data: addr}}
	}
	return []expr.Any{load, &expr.Cmp{Op: op, Register: regKey, Data: addr}}
}

// mask is prefix p's netmask, as many bytes as its address.
func mask(p netip.Prefix) []byte {
	m := make([]byte, p.Addr().BitLen()/8)
	for i := range m {
		m[i] = byte(0xff << max(0, min(8, 8-(p.Bits()-8*i))))
	}
	return m
}

// lastOf is the last address of prefix p: its address with every bit
// outside the mask set.
func lastOf(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i, m := range mask(p) {
		b[i] |= ^m
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// intervals is the elements of an interval set holding prefixes ps
// (sorted, none inside another, as netpol leaves an ipBlock's excepts), as
// nft writes them: each interval's start and, flagged as an end, the
// address after its last, adjacent intervals merged; and first an end at
// the family's first address when no interval starts there. writable
// leaves out an interval reaching the last address.
func intervals(ps []netip.Prefix) []nftables.SetElement {
	type span struct{ first, last netip.Addr }
	var spans []span
	for _, p := range ps {
		first, last := p.Masked().Addr(), lastOf(p)
		if n := len(spans); n > 0 && spans[n-1].last.Next() == first {
			spans[n-1].last = last
			continue
		}
		spans = append(spans, span{first, last})
	}
	var el []nftables.SetElement
	if first := spans[0].first; first.Prev().IsValid() {
		el = append(el, nftables.SetElement{Key: make([]byte, first.BitLen()/8), IntervalEnd: true})
	}
	for _, s := range spans {
		el = append(el, nftables.SetElement{Key: s.first.AsSlice()}, nftables.SetElement{Key: s.last.Next().AsSlice(), IntervalEnd: true})
	}
	return el
}

// portExprs looks `meta l4proto . th dport` up in an anonymous set of
// ports rs.
func portExprs(c *nftables.Conn, t *nftables.Table, rs []netpol.PortRange) ([]expr.Any, error) {
	interval := false
	for _, r := range rs {
		interval = interval || r.First != r.Last
	}
	key := func(p netpol.Proto, port uint16) []byte {
		return []byte{p.Number(), 0, 0, 0, byte(port >> 8), byte(port), 0, 0}
	}
	var el []nftables.SetElement
	for _, r := range rs {
		x := nftables.SetElement{Key: key(r.Proto, r.First)}
		if interval {
			x.KeyEnd = key(r.Proto, r.Last)
		}
		el = append(el, x)
	}
	s := &nftables.Set{Table: t, Anonymous: true, Constant: true, Interval: interval, Concatenation: interval,
		KeyType: nftables.MustConcatSetType(nftables.TypeInetProto, nftables.TypeInetService)}
	if err := c.AddSet(s, el); err != nil {
		return nil, err
	}
	e := []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: regKey}}
	if interval {
		e = append(e, &expr.Byteorder{SourceRegister: regKey, DestRegister: regKey, Op: expr.ByteorderHton, Len: 1, Size: 2})
	}
	return append(e,
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: regSecond, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Lookup{SourceRegister: regKey, SetName: s.Name, SetID: s.ID}), nil
}
