package tcbpf_test

// Hand-made IPv6 frames, and a decoder that walks extension headers on its
// own (any number of them), so the IPv6 tests trust neither the programs'
// parsing nor their checksum arithmetic.

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

const (
	protoICMP6 = 58

	nhHop      = 0
	nhRouting  = 43
	nhFragment = 44
	nhAH       = 51
	nhDest     = 60

	icmp6Unreach = 1
	icmp6TooBig  = 2
	icmp6Echo    = 128
	icmp6RS      = 133
	icmp6RA      = 134
	icmp6NS      = 135
	icmp6NA      = 136
)

// ext6 is one extension header: its type and its bytes after the
// next-header field (7 bytes for an 8-byte header; the builder sets the
// next-header byte, and the length byte of all but fragment headers).
type ext6 struct {
	typ  uint8
	body []byte
}

// pad6 is an extension header of n*8 bytes with PadN options.
func pad6(typ uint8, n int) ext6 {
	b := make([]byte, n*8-1)
	b[1], b[2] = 1, byte(len(b)-3) // PadN over the rest
	return ext6{typ: typ, body: b}
}

// routing6 is a routing header (type 0 format) with segments left 0: the
// destination in the IPv6 header is the final one.
func routing6() ext6 { return ext6{typ: nhRouting, body: make([]byte, 7)} }

// frag6 is a fragment header: offset in 8-byte units, more fragments, id.
func frag6(offset uint16, more bool, id uint32) ext6 {
	b := make([]byte, 7)
	fo := offset << 3
	if more {
		fo |= 1
	}
	binary.BigEndian.PutUint16(b[1:], fo)
	binary.BigEndian.PutUint32(b[3:], id)
	return ext6{typ: nhFragment, body: b}
}

// jumbo6 is a hop-by-hop header with a jumbo payload option (RFC 2675).
func jumbo6(plen uint32) ext6 {
	b := make([]byte, 7)
	b[1], b[2] = 0xc2, 4
	binary.BigEndian.PutUint32(b[3:], plen)
	return ext6{typ: nhHop, body: b}
}

// ipv6 describes one crafted IPv6 packet.
type ipv6 struct {
	src, dst     netip.Addr
	proto        uint8 // the upper-layer protocol
	sport, dport uint16
	tcpFlags     uint8
	payload      []byte
	ext          []ext6
	noL4         bool   // a later fragment: payload only
	raw          []byte // ICMPv6: the whole message (checksum filled in)
	jumbo        bool   // payload length 0 (a jumbogram: with jumbo6 in ext)
}

func pseudo6(src, dst netip.Addr, proto uint8, l4len int) uint32 {
	s, d := src.As16(), dst.As16()
	sum := csumAdd(0, s[:])
	sum = csumAdd(sum, d[:])
	return sum + uint32(l4len>>16) + uint32(l4len&0xffff) + uint32(proto)
}

// l4Checksum6 computes a TCP/UDP/ICMPv6 checksum over seg (its checksum
// field holding zero), as a sender would.
func l4Checksum6(src, dst netip.Addr, proto uint8, seg []byte) uint16 {
	c := csumFold(csumAdd(pseudo6(src, dst, proto, len(seg)), seg))
	if proto == protoUDP && c == 0 {
		c = 0xffff
	}
	return c
}

func icmp6CsumOff() int { return 2 }

func (p ipv6) l4() []byte {
	if p.raw != nil {
		b := append([]byte(nil), p.raw...)
		binary.BigEndian.PutUint16(b[2:], 0)
		binary.BigEndian.PutUint16(b[2:], l4Checksum6(p.src, p.dst, protoICMP6, b))
		return b
	}
	if p.noL4 {
		return append([]byte(nil), p.payload...)
	}
	// The same TCP/UDP header as IPv4's; the checksum, over the fragment's
	// own bytes when it is a first fragment (the test checks the program
	// keeps it consistent with the new addresses and ports).
	// (frag and udpNoCsum: IPv4's header only, its checksum is not computed.)
	seg := ipv4{proto: p.proto, sport: p.sport, dport: p.dport, tcpFlags: p.tcpFlags, payload: p.payload, udpNoCsum: true, frag: 0x2000}.l4()
	binary.BigEndian.PutUint16(seg[csumOff(p.proto):], 0)
	binary.BigEndian.PutUint16(seg[csumOff(p.proto):], l4Checksum6(p.src, p.dst, p.proto, seg))
	return seg
}

// bytes builds the frame: Ethernet, IPv6, extension headers, L4, payload.
func (p ipv6) bytes() []byte {
	b := make([]byte, ethLen+40)
	copy(b[0:6], []byte{0x02, 0, 0, 0, 0, 1})
	copy(b[6:12], []byte{0x02, 0, 0, 0, 0, 2})
	binary.BigEndian.PutUint16(b[12:], 0x86dd)
	ip := b[ethLen:]
	binary.BigEndian.PutUint32(ip[0:], 6<<28)
	ip[7] = 64
	s, d := p.src.As16(), p.dst.As16()
	copy(ip[8:], s[:])
	copy(ip[24:], d[:])
	next := &ip[6]
	for _, e := range p.ext {
		*next = e.typ
		h := append([]byte{0}, e.body...)
		if e.typ != nhFragment {
			h[1] = byte(len(h)/8 - 1)
		}
		b = append(b, h...)
		next = &b[len(b)-len(h)]
	}
	*next = p.proto
	b = append(b, p.l4()...)
	if !p.jumbo {
		binary.BigEndian.PutUint16(b[ethLen+4:], uint16(len(b)-ethLen-40))
	}
	return b
}

// decoded6 is what the IPv6 tests read back from a frame.
type decoded6 struct {
	src, dst     netip.Addr
	proto        uint8 // the upper layer, after every extension header
	later        bool  // a later fragment: no L4 header
	sport, dport uint16
	l4           []byte
}

func decode6(b []byte) (decoded6, error) {
	if len(b) < ethLen+40 {
		return decoded6{}, fmt.Errorf("frame of %d bytes", len(b))
	}
	ip := b[ethLen:]
	d := decoded6{src: netip.AddrFrom16([16]byte(ip[8:24])), dst: netip.AddrFrom16([16]byte(ip[24:40]))}
	nh, off := ip[6], 40
	for nh == nhHop || nh == nhRouting || nh == nhDest || nh == nhFragment {
		if off+8 > len(ip) {
			return d, fmt.Errorf("extension header cut off")
		}
		next := ip[off]
		if nh == nhFragment {
			d.later = binary.BigEndian.Uint16(ip[off+2:])&0xfff8 != 0
			off += 8
		} else {
			off += (int(ip[off+1]) + 1) * 8
		}
		nh = next
		if d.later {
			break
		}
	}
	d.proto = nh
	d.l4 = ip[min(off, len(ip)):]
	if !d.later && len(d.l4) >= 4 && (nh == protoTCP || nh == protoUDP) {
		d.sport = binary.BigEndian.Uint16(d.l4[0:])
		d.dport = binary.BigEndian.Uint16(d.l4[2:])
	}
	return d, nil
}

// checkL4v6 verifies the TCP/UDP/ICMPv6 checksum of a frame's upper layer
// (over the bytes in this frame: a first fragment's checksum was made so).
func checkL4v6(b []byte) error {
	d, err := decode6(b)
	if err != nil {
		return err
	}
	off := icmp6CsumOff()
	if d.proto != protoICMP6 {
		off = csumOff(d.proto)
	}
	seg := append([]byte(nil), d.l4...)
	got := binary.BigEndian.Uint16(seg[off:])
	binary.BigEndian.PutUint16(seg[off:], 0)
	if want := l4Checksum6(d.src, d.dst, d.proto, seg); got != want {
		return fmt.Errorf("protocol %d checksum %#04x, want %#04x", d.proto, got, want)
	}
	return nil
}

// icmp6Error builds an ICMPv6 error quoting the first quote bytes of
// packet q from its IPv6 header (the kernel quotes as much as fits).
func icmp6Error(typ, code uint8, from, to netip.Addr, q ipv6, quote int) ipv6 {
	qb := q.bytes()[ethLen:]
	msg := make([]byte, 8, 8+quote)
	msg[0], msg[1] = typ, code
	if typ == icmp6TooBig {
		binary.BigEndian.PutUint32(msg[4:], 1280)
	}
	msg = append(msg, qb[:min(quote, len(qb))]...)
	return ipv6{src: from, dst: to, proto: protoICMP6, raw: msg}
}

// icmp6Info builds an informational ICMPv6 message (echo, NDP) with body.
func icmp6Info(typ uint8, from, to netip.Addr, body []byte) ipv6 {
	msg := append([]byte{typ, 0, 0, 0}, body...)
	return ipv6{src: from, dst: to, proto: protoICMP6, raw: msg}
}
