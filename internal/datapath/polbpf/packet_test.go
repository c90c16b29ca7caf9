package polbpf

// Hand-made frames for BPF_PROG_TEST_RUN: the programs read addresses,
// protocol, ports, fragment fields and IPv6 extension headers, never a
// checksum, so none is computed.

import (
	"encoding/binary"
	"net/netip"
)

const (
	protoICMP  = 1
	protoTCP   = 6
	protoUDP   = 17
	protoICMP6 = 58
	protoSCTP  = 132

	nhHop     = 0
	nhRouting = 43
	nhFrag    = 44
	nhAH      = 51
	nhDest    = 60
)

// frame is one crafted packet.
type frame struct {
	src, dst     netip.Addr
	proto        uint8
	sport, dport uint16
	id           uint32
	fragOff      uint16 // in 8-byte units
	more         bool   // more fragments follow
	exts         []ext  // IPv6 extension headers before the L4 header
	icmpType     uint8
}

// ext is an IPv6 extension header: its type and its body after the
// next-header byte (length filled in).
type ext struct {
	typ  uint8
	body []byte
}

// opts6 is a hop-by-hop or destination options header of n*8 bytes (PadN).
func opts6(typ uint8, n int) ext {
	b := make([]byte, n*8-1)
	b[0] = byte(n - 1)
	b[1] = 1 // PadN
	b[2] = byte(n*8 - 4)
	return ext{typ: typ, body: b}
}

func routing6() ext { return ext{typ: nhRouting, body: []byte{0, 0, 0, 0, 0, 0, 0}} }

// ah6 is an authentication header of 12 bytes: its length field (12/4)-2.
func ah6() ext {
	b := make([]byte, 11)
	b[0] = 1
	return ext{typ: nhAH, body: b}
}

func (f frame) l4() []byte {
	if f.fragOff > 0 {
		return make([]byte, 16) // a later fragment: payload only
	}
	switch f.proto {
	case protoTCP:
		b := make([]byte, 20)
		binary.BigEndian.PutUint16(b[0:], f.sport)
		binary.BigEndian.PutUint16(b[2:], f.dport)
		b[12] = 5 << 4
		b[13] = 0x02 // SYN
		return b
	case protoUDP:
		b := make([]byte, 8+8)
		binary.BigEndian.PutUint16(b[0:], f.sport)
		binary.BigEndian.PutUint16(b[2:], f.dport)
		binary.BigEndian.PutUint16(b[4:], uint16(len(b)))
		return b
	case protoSCTP:
		b := make([]byte, 12+16) // common header, then an INIT chunk's room
		binary.BigEndian.PutUint16(b[0:], f.sport)
		binary.BigEndian.PutUint16(b[2:], f.dport)
		b[12] = 1 // INIT
		return b
	case protoICMP, protoICMP6:
		b := make([]byte, 8+8)
		b[0] = f.icmpType
		return b
	}
	return make([]byte, 16)
}

// bytes is the Ethernet frame.
func (f frame) bytes() []byte {
	eth := make([]byte, 14)
	copy(eth[0:], []byte{2, 0, 0, 0, 0, 1})
	copy(eth[6:], []byte{2, 0, 0, 0, 0, 2})
	l4 := f.l4()
	if f.src.Is4() {
		binary.BigEndian.PutUint16(eth[12:], 0x0800)
		ip := make([]byte, 20)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(l4)))
		binary.BigEndian.PutUint16(ip[4:], uint16(f.id))
		fo := f.fragOff
		if f.more {
			fo |= 0x2000
		}
		binary.BigEndian.PutUint16(ip[6:], fo)
		ip[8] = 64
		ip[9] = f.proto
		s, d := f.src.As4(), f.dst.As4()
		copy(ip[12:], s[:])
		copy(ip[16:], d[:])
		return append(append(eth, ip...), l4...)
	}
	binary.BigEndian.PutUint16(eth[12:], 0x86dd)
	exts := f.exts
	if f.fragOff > 0 || f.more {
		b := make([]byte, 7)
		fo := f.fragOff << 3
		if f.more {
			fo |= 1
		}
		binary.BigEndian.PutUint16(b[1:], fo)
		binary.BigEndian.PutUint32(b[3:], f.id)
		exts = append(append([]ext(nil), exts...), ext{typ: nhFrag, body: b})
	}
	var hdrs []byte
	for i, e := range exts {
		next := f.proto
		if i+1 < len(exts) {
			next = exts[i+1].typ
		}
		hdrs = append(hdrs, next)
		hdrs = append(hdrs, e.body...)
	}
	ip := make([]byte, 40)
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(len(hdrs)+len(l4)))
	ip[6] = f.proto
	if len(exts) > 0 {
		ip[6] = exts[0].typ
	}
	ip[7] = 64
	s, d := f.src.As16(), f.dst.As16()
	copy(ip[8:], s[:])
	copy(ip[24:], d[:])
	return append(append(append(eth, ip...), hdrs...), l4...)
}
