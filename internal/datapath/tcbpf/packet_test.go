package tcbpf_test

// Hand-made packets and an independent checksum routine (RFC 1071), so the
// tests never trust the programs' own arithmetic.

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

const (
	ethLen   = 14
	protoTCP = 6
	protoUDP = 17
	protoICM = 1

	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpPSH = 0x08
	tcpACK = 0x10
)

// ipv4 describes one crafted IPv4 packet.
type ipv4 struct {
	src, dst     netip.Addr
	proto        uint8
	sport, dport uint16
	tcpFlags     uint8
	payload      []byte
	options      []byte // IP options, a multiple of 4 bytes
	id           uint16
	frag         uint16 // flags (0x2000 = MF) | offset in 8-byte units
	noL4         bool   // a non-first fragment: payload only
	udpNoCsum    bool   // UDP checksum 0 (none)
	raw          []byte // ICMP: the whole ICMP message (checksum filled in)
}

func csumAdd(sum uint32, b []byte) uint32 {
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	return sum
}

func csumFold(sum uint32) uint16 {
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// checksum is the Internet checksum of b.
func checksum(b []byte) uint16 { return csumFold(csumAdd(0, b)) }

func pseudo(src, dst netip.Addr, proto uint8, l4len int) uint32 {
	s, d := src.As4(), dst.As4()
	sum := csumAdd(0, s[:])
	sum = csumAdd(sum, d[:])
	return sum + uint32(proto) + uint32(l4len)
}

// l4Checksum computes a TCP/UDP checksum over segment (its checksum field
// must hold zero), as a sender would.
func l4Checksum(src, dst netip.Addr, proto uint8, seg []byte) uint16 {
	c := csumFold(csumAdd(pseudo(src, dst, proto, len(seg)), seg))
	if proto == protoUDP && c == 0 {
		c = 0xffff
	}
	return c
}

func (p ipv4) l4() []byte {
	if p.raw != nil {
		b := append([]byte(nil), p.raw...)
		binary.BigEndian.PutUint16(b[2:], 0)
		binary.BigEndian.PutUint16(b[2:], checksum(b))
		return b
	}
	if p.noL4 {
		return append([]byte(nil), p.payload...)
	}
	var h []byte
	switch p.proto {
	case protoTCP:
		h = make([]byte, 20)
		binary.BigEndian.PutUint32(h[4:], 1000) // seq
		binary.BigEndian.PutUint32(h[8:], 2000) // ack
		h[12] = 5 << 4
		h[13] = p.tcpFlags
		binary.BigEndian.PutUint16(h[14:], 64240)
	case protoUDP:
		h = make([]byte, 8)
		binary.BigEndian.PutUint16(h[4:], uint16(8+len(p.payload)))
	}
	binary.BigEndian.PutUint16(h[0:], p.sport)
	binary.BigEndian.PutUint16(h[2:], p.dport)
	seg := append(h, p.payload...)
	if p.proto == protoUDP && p.udpNoCsum {
		return seg
	}
	if p.frag&0x2000 != 0 {
		// A first fragment: the checksum covers the whole datagram, which
		// the test does not know; any value will do, the test checks the
		// program changes it by exactly the right amount.
		binary.BigEndian.PutUint16(seg[csumOff(p.proto):], 0x1234)
		return seg
	}
	binary.BigEndian.PutUint16(seg[csumOff(p.proto):], l4Checksum(p.src, p.dst, p.proto, seg))
	return seg
}

func csumOff(proto uint8) int {
	if proto == protoTCP {
		return 16
	}
	return 6
}

// bytes builds the frame: Ethernet, IPv4 (with options), L4, payload.
func (p ipv4) bytes() []byte {
	l4 := p.l4()
	ihl := 20 + len(p.options)
	b := make([]byte, ethLen+ihl, ethLen+ihl+len(l4))
	copy(b[0:6], []byte{0x02, 0, 0, 0, 0, 1})
	copy(b[6:12], []byte{0x02, 0, 0, 0, 0, 2})
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[ethLen:]
	ip[0] = 0x40 | uint8(ihl/4)
	binary.BigEndian.PutUint16(ip[2:], uint16(ihl+len(l4)))
	binary.BigEndian.PutUint16(ip[4:], p.id)
	binary.BigEndian.PutUint16(ip[6:], p.frag)
	ip[8] = 64
	ip[9] = p.proto
	s, d := p.src.As4(), p.dst.As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	copy(ip[20:], p.options)
	binary.BigEndian.PutUint16(ip[10:], checksum(ip[:ihl]))
	return append(b, l4...)
}

// decoded is what the tests read back from a frame.
type decoded struct {
	src, dst     netip.Addr
	proto        uint8
	ihl          int
	sport, dport uint16
	l4           []byte
}

func decode(b []byte) (decoded, error) {
	if len(b) < ethLen+20 {
		return decoded{}, fmt.Errorf("frame of %d bytes", len(b))
	}
	ip := b[ethLen:]
	d := decoded{ihl: int(ip[0]&0xf) * 4, proto: ip[9]}
	d.src = netip.AddrFrom4([4]byte(ip[12:16]))
	d.dst = netip.AddrFrom4([4]byte(ip[16:20]))
	d.l4 = ip[d.ihl:]
	if len(d.l4) >= 4 && (d.proto == protoTCP || d.proto == protoUDP) {
		d.sport = binary.BigEndian.Uint16(d.l4[0:])
		d.dport = binary.BigEndian.Uint16(d.l4[2:])
	}
	return d, nil
}

// checkIP verifies the IPv4 header checksum of a frame.
func checkIP(b []byte) error {
	ip := b[ethLen:]
	ihl := int(ip[0]&0xf) * 4
	if c := checksum(ip[:ihl]); c != 0 {
		return fmt.Errorf("IP header checksum wrong (residue %#04x)", c)
	}
	return nil
}

// checkL4 verifies the TCP/UDP checksum of a whole (unfragmented) segment.
func checkL4(b []byte) error {
	d, err := decode(b)
	if err != nil {
		return err
	}
	got := binary.BigEndian.Uint16(d.l4[csumOff(d.proto):])
	if d.proto == protoUDP && got == 0 {
		return nil // no checksum: legal
	}
	seg := append([]byte(nil), d.l4...)
	binary.BigEndian.PutUint16(seg[csumOff(d.proto):], 0)
	if want := l4Checksum(d.src, d.dst, d.proto, seg); got != want {
		return fmt.Errorf("%d checksum %#04x, want %#04x", d.proto, got, want)
	}
	return nil
}

// icmpError builds an ICMP error (type/code) quoting the first 8 L4 bytes
// of the packet q (as the kernel would: IP header + 8 bytes).
func icmpError(typ, code uint8, from, to netip.Addr, q ipv4) ipv4 {
	qb := q.bytes()[ethLen:]
	ihl := int(qb[0]&0xf) * 4
	msg := make([]byte, 8, 8+ihl+8)
	msg[0], msg[1] = typ, code
	msg = append(msg, qb[:ihl+8]...)
	return ipv4{src: from, dst: to, proto: protoICM, raw: msg}
}

func ipOf(s string) netip.Addr { return netip.MustParseAddr(s) }
