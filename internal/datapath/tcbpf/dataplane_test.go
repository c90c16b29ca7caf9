package tcbpf_test

// BPF_PROG_TEST_RUN tests: crafted frames through from_pod / to_pod, checked
// field by field and with an independent checksum routine (packet_test.go).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"testing"

	dp "github.com/vnetlab/vnetlab/internal/datapath/tcbpf"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

const (
	actOK   = 0xffffffff // TC_ACT_UNSPEC (-1): pass on to the next program, or the stack
	actShot = 2          // TC_ACT_SHOT
)

var (
	vip     = ipOf("10.96.0.100")
	podA    = ipOf("192.168.10.10") // the backend
	podB    = ipOf("192.168.10.11") // the client
	hairpin = ipOf(dp.HairpinIP)
)

// testPlane loads the programs with private, unpinned maps.
func testPlane(t *testing.T) *dp.Plane {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (BPF_PROG_LOAD)")
	}
	p, err := dp.LoadPrivate()
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			t.Fatalf("verifier: %+v", ve)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// oneBackend adds 10.96.0.100:5201 tcp and udp -> pod-a:5201.
func oneBackend(t *testing.T, p *dp.Plane) {
	t.Helper()
	for _, proto := range []dp.Proto{dp.TCP, dp.UDP} {
		s := dp.Service{VIP: vip, Port: 5201, Proto: proto, Backends: []dp.Backend{{IP: podA, Port: 5201}}}
		if err := p.AddService(s); err != nil {
			t.Fatal(err)
		}
	}
}

func run(t *testing.T, prog *ebpf.Program, in []byte) (uint32, []byte) {
	t.Helper()
	ret, out, err := prog.Test(in)
	if err != nil {
		t.Fatalf("BPF_PROG_TEST_RUN: %v", err)
	}
	return ret, out
}

func mustOK(t *testing.T, ret uint32) {
	t.Helper()
	if ret != actOK {
		t.Fatalf("return code %d, want TC_ACT_UNSPEC (pass on)", int32(ret))
	}
}

func mustValid(t *testing.T, out []byte) {
	t.Helper()
	if err := checkIP(out); err != nil {
		t.Fatal(err)
	}
	if err := checkL4(out); err != nil {
		t.Fatal(err)
	}
}

func expect(t *testing.T, out []byte, src netip.Addr, sport uint16, dst netip.Addr, dport uint16) {
	t.Helper()
	d, err := decode(out)
	if err != nil {
		t.Fatal(err)
	}
	if d.src != src || d.dst != dst || d.sport != sport || d.dport != dport {
		t.Fatalf("got %s:%d -> %s:%d, want %s:%d -> %s:%d", d.src, d.sport, d.dst, d.dport, src, sport, dst, dport)
	}
}

func TestServiceDNATAndReverse(t *testing.T) {
	p := testPlane(t)
	oneBackend(t, p)
	payload := []byte("hello, service")
	cases := []struct {
		name  string
		proto uint8
		flags uint8
		data  []byte
		nocs  bool
	}{
		{"tcp-syn", protoTCP, tcpSYN, nil, false},
		{"tcp-ack", protoTCP, tcpACK, nil, false},
		{"tcp-psh-ack-data", protoTCP, tcpPSH | tcpACK, payload, false},
		{"tcp-fin", protoTCP, tcpFIN | tcpACK, nil, false},
		{"tcp-rst", protoTCP, tcpRST, nil, false},
		{"udp", protoUDP, 0, payload, false},
		{"udp-odd-length", protoUDP, 0, []byte("abc"), false},
		{"udp-no-checksum", protoUDP, 0, payload, true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sport := uint16(40000 + i)
			req := ipv4{src: podB, dst: vip, proto: c.proto, sport: sport, dport: 5201, tcpFlags: c.flags, payload: c.data, udpNoCsum: c.nocs, id: 1}
			in := req.bytes()
			ret, out := run(t, p.Objects().FromPod, in)
			mustOK(t, ret)
			expect(t, out, podB, sport, podA, 5201)
			mustValid(t, out)
			d, _ := decode(out)
			if !bytes.HasSuffix(d.l4, c.data) || len(out) != len(in) {
				t.Fatal("payload or length changed")
			}
			if c.nocs && binary.BigEndian.Uint16(d.l4[6:]) != 0 {
				t.Fatal("a zero UDP checksum must stay zero")
			}
			// The reply, as the backend sends it, arrives at the client.
			rep := ipv4{src: podA, dst: podB, proto: c.proto, sport: 5201, dport: sport, tcpFlags: c.flags | tcpACK, payload: c.data, udpNoCsum: c.nocs}
			ret, out = run(t, p.Objects().ToPod, rep.bytes())
			mustOK(t, ret)
			if c.flags&tcpRST != 0 {
				// A RST ends the flow: its entries are gone, nothing is
				// translated back any more.
				if !bytes.Equal(out, rep.bytes()) {
					t.Fatal("a packet after the client's RST was reverse-NATed: the flow's entries outlived it")
				}
				return
			}
			expect(t, out, vip, 5201, podB, sport)
			mustValid(t, out)
		})
	}
	st, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.DNAT != uint64(len(cases)) || st.RNAT != uint64(len(cases)-1) || st.Errors != 0 {
		t.Fatalf("stats %+v: want %d DNAT, %d RNAT (none after the RST), 0 errors", st, len(cases), len(cases)-1)
	}
}

// The backend's RST is translated back, and ends the flow: neither
// direction is translated from its entries afterwards (a later SYN is a new
// flow, with new entries).
func TestBackendRSTEndsFlow(t *testing.T) {
	p := testPlane(t)
	oneBackend(t, p)
	syn := ipv4{src: podB, dst: vip, proto: protoTCP, sport: 41000, dport: 5201, tcpFlags: tcpSYN}
	_, out := run(t, p.Objects().FromPod, syn.bytes())
	expect(t, out, podB, 41000, podA, 5201)
	rst := ipv4{src: podA, dst: podB, proto: protoTCP, sport: 5201, dport: 41000, tcpFlags: tcpRST | tcpACK}
	ret, out := run(t, p.Objects().ToPod, rst.bytes())
	mustOK(t, ret)
	expect(t, out, vip, 5201, podB, 41000)
	mustValid(t, out)
	late := ipv4{src: podA, dst: podB, proto: protoTCP, sport: 5201, dport: 41000, tcpFlags: tcpACK}
	if _, out = run(t, p.Objects().ToPod, late.bytes()); !bytes.Equal(out, late.bytes()) {
		t.Fatal("a reply after the backend's RST was reverse-NATed: the flow's entries outlived it")
	}
	var n int
	var k dp.CtKey
	var v dp.Ct
	for it := p.Objects().LbConntrack.Iterate(); it.Next(&k, &v); {
		n++
	}
	if n != 0 {
		t.Fatalf("%d conntrack entries left after the RST, want 0", n)
	}
	// The same tuple again: a new flow.
	_, out = run(t, p.Objects().FromPod, syn.bytes())
	expect(t, out, podB, 41000, podA, 5201)
	_, out = run(t, p.Objects().ToPod, ipv4{src: podA, dst: podB, proto: protoTCP, sport: 5201, dport: 41000, tcpFlags: tcpSYN | tcpACK}.bytes())
	expect(t, out, vip, 5201, podB, 41000)
}

// A pod that reuses, for a direct connection to a backend, the source port
// of an earlier connection to the Service gets its replies untouched: its
// SYN (or UDP datagram) towards the backend retires the old flow's reverse
// entry, which would otherwise rewrite them to the clusterIP.
func TestDirectFlowRetiresStaleReverseEntry(t *testing.T) {
	p := testPlane(t)
	oneBackend(t, p)
	for _, proto := range []uint8{protoTCP, protoUDP} {
		flags := uint8(0)
		if proto == protoTCP {
			flags = tcpSYN
		}
		// The old flow, through the clusterIP, left its entries (no RST).
		_, out := run(t, p.Objects().FromPod, ipv4{src: podB, dst: vip, proto: proto, sport: 42000, dport: 5201, tcpFlags: flags}.bytes())
		expect(t, out, podB, 42000, podA, 5201)
		// Now straight to the backend, same ports.
		direct := ipv4{src: podB, dst: podA, proto: proto, sport: 42000, dport: 5201, tcpFlags: flags}
		if _, out = run(t, p.Objects().FromPod, direct.bytes()); !bytes.Equal(out, direct.bytes()) {
			t.Fatalf("proto %d: a direct packet was changed", proto)
		}
		reply := ipv4{src: podA, dst: podB, proto: proto, sport: 5201, dport: 42000, tcpFlags: flags | tcpACK}
		if _, out = run(t, p.Objects().ToPod, reply.bytes()); !bytes.Equal(out, reply.bytes()) {
			d, _ := decode(out)
			t.Fatalf("proto %d: the direct flow's reply was rewritten to %s:%d", proto, d.src, d.sport)
		}
	}
}

// The prefilters count: two Services sharing a /16 and a backend port, one
// deleted, the other still translated both ways; both deleted, the keys
// hold a count of 0 and the mark of a TCP Service that left, KeptTCP (the
// connections established through a TCP Service keep their backend, so
// their packets must still be looked up) and no new connection is
// translated. UDP Services take the counts back to 0.
func TestPrefiltersCount(t *testing.T) {
	p := testPlane(t)
	other := ipOf("10.96.7.7")
	for _, v := range []netip.Addr{vip, other} {
		if err := p.AddService(dp.Service{VIP: v, Port: 80, Proto: dp.TCP, Backends: []dp.Backend{{IP: podA, Port: 8080}}}); err != nil {
			t.Fatal(err)
		}
	}
	udp := dp.Service{VIP: ipOf("10.97.0.1"), Port: 53, Proto: dp.UDP, Backends: []dp.Backend{{IP: podA, Port: 5353}}}
	if err := p.AddService(udp); err != nil {
		t.Fatal(err)
	}
	count := func(m *ebpf.Map, k uint32) uint32 {
		t.Helper()
		var n uint32
		if err := m.Lookup(&k, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n, m := count(p.Objects().LbVip16, 10<<8|96), count(p.Objects().LbBports, 8080); n != 2 || m != 2 {
		t.Fatalf("counts after two services: clusterIPs in 10.96/16 %d, backends on 8080 %d, want 2 and 2", n, m)
	}
	if err := p.DelService(vip, 80, dp.TCP); err != nil {
		t.Fatal(err)
	}
	_, out := run(t, p.Objects().FromPod, ipv4{src: podB, dst: other, proto: protoTCP, sport: 43000, dport: 80, tcpFlags: tcpSYN}.bytes())
	expect(t, out, podB, 43000, podA, 8080)
	mustValid(t, out)
	_, out = run(t, p.Objects().ToPod, ipv4{src: podA, dst: podB, proto: protoTCP, sport: 8080, dport: 43000, tcpFlags: tcpSYN | tcpACK}.bytes())
	expect(t, out, other, 80, podB, 43000)
	mustValid(t, out)
	if err := p.DelService(other, 80, dp.TCP); err != nil {
		t.Fatal(err)
	}
	if n, m := count(p.Objects().LbVip16, 10<<8|96), count(p.Objects().LbBports, 8080); n != dp.KeptTCP || m != dp.KeptTCP {
		t.Fatalf("counts after deleting both: %#x and %#x, want %#x (0, kept for their established connections)", n, m, dp.KeptTCP)
	}
	if err := p.DelService(udp.VIP, udp.Port, udp.Proto); err != nil {
		t.Fatal(err)
	}
	if n, m := count(p.Objects().LbVip16, 10<<8|97), count(p.Objects().LbBports, 5353); n != 0 || m != 0 {
		t.Fatalf("counts after deleting the UDP service: %d and %d, want 0", n, m)
	}
	in := ipv4{src: podB, dst: other, proto: protoTCP, sport: 43001, dport: 80, tcpFlags: tcpSYN}.bytes()
	if _, out = run(t, p.Objects().FromPod, in); !bytes.Equal(in, out) {
		t.Fatal("a deleted service is still translated")
	}
}

// A clusterIP alone in its /16 with a TCP and a UDP port (kube converge's
// probed Service), deleted as the proxy's sync deletes it: the TCP port
// first, then the UDP one. The UDP port's leaving must not take the /16's
// prefilter to 0: a connection established through the TCP port still
// reaches its backend, both ways, while new connections are not
// translated. (Before the KeptTCP mark, every kept connection stalled
// until the Service came back: 204-836 ms on a cluster.)
func TestPrefilterKeepsTCPPastAUDPPort(t *testing.T) {
	p := testPlane(t)
	alone := ipOf("10.105.214.95")
	tcp := dp.Service{VIP: alone, Port: 80, Proto: dp.TCP, Backends: []dp.Backend{{IP: podA, Port: 8080}}}
	udp := dp.Service{VIP: alone, Port: 53, Proto: dp.UDP, Backends: []dp.Backend{{IP: podA, Port: 5353}}}
	if err := p.AddServices([]dp.Service{tcp, udp}); err != nil {
		t.Fatal(err)
	}
	_, out := run(t, p.Objects().FromPod, ipv4{src: podB, dst: alone, proto: protoTCP, sport: 43000, dport: 80, tcpFlags: tcpSYN}.bytes())
	expect(t, out, podB, 43000, podA, 8080)
	for _, s := range []dp.Service{tcp, udp} {
		if err := p.DelService(s.VIP, s.Port, s.Proto); err != nil {
			t.Fatal(err)
		}
	}
	_, out = run(t, p.Objects().FromPod, ipv4{src: podB, dst: alone, proto: protoTCP, sport: 43000, dport: 80, tcpFlags: tcpACK}.bytes())
	expect(t, out, podB, 43000, podA, 8080)
	mustValid(t, out)
	_, out = run(t, p.Objects().ToPod, ipv4{src: podA, dst: podB, proto: protoTCP, sport: 8080, dport: 43000, tcpFlags: tcpACK}.bytes())
	expect(t, out, alone, 80, podB, 43000)
	mustValid(t, out)
	in := ipv4{src: podB, dst: alone, proto: protoTCP, sport: 43001, dport: 80, tcpFlags: tcpSYN}.bytes()
	if _, out = run(t, p.Objects().FromPod, in); !bytes.Equal(in, out) {
		t.Fatal("a new connection to the deleted Service was translated")
	}
}

// The IPv6 clusterIP prefilter (lb6_vip16) counts by fold16: two IPv6
// Services, one deleted: the other still translated, the deleted one's
// clusterIP's new connections not; both deleted: counts at 0 and marked
// KeptTCP (their established connections), a UDP Service's back to 0. The Go side's fold16
// names the slot the programs read (a wrong key would let no packet in).
func TestPrefiltersCount6(t *testing.T) {
	p := testPlane(t)
	other6 := ipOf("fd00:96::7:7")
	for _, v := range []netip.Addr{vip6, other6} {
		if err := p.AddService(dp.Service{VIP: v, Port: 80, Proto: dp.TCP, Backends: []dp.Backend{{IP: back6, Port: 8080}}}); err != nil {
			t.Fatal(err)
		}
	}
	count := func(a netip.Addr) uint32 {
		t.Helper()
		var n uint32
		if err := p.Objects().Lb6Vip16.Lookup(dp.Fold16(a), &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if dp.Fold16(vip6) == dp.Fold16(other6) {
		t.Fatal("the two clusterIPs fold alike: pick another")
	}
	if count(vip6) != 1 || count(other6) != 1 {
		t.Fatalf("counts %d and %d, want 1 each", count(vip6), count(other6))
	}
	if err := p.DelService(vip6, 80, dp.TCP); err != nil {
		t.Fatal(err)
	}
	_, out := run(t, p.Objects().FromPod, ipv6{src: client6, dst: other6, proto: protoTCP, sport: 43000, dport: 80, tcpFlags: tcpSYN}.bytes())
	expect6(t, out, client6, 43000, back6, 8080)
	in := ipv6{src: client6, dst: vip6, proto: protoTCP, sport: 43001, dport: 80, tcpFlags: tcpSYN}.bytes()
	ret, out := run(t, p.Objects().FromPod, in)
	mustUntouched(t, ret, in, out)
	if err := p.DelService(other6, 80, dp.TCP); err != nil {
		t.Fatal(err)
	}
	// A TCP Service's keys stay marked (its established connections keep
	// their backend, so their packets must still be looked up); a UDP
	// one's go back to 0.
	if count(vip6) != dp.KeptTCP || count(other6) != dp.KeptTCP {
		t.Fatalf("counts after deleting both: %#x and %#x, want %#x (their established connections)", count(vip6), count(other6), dp.KeptTCP)
	}
	udp6 := ipOf("fd00:97::53")
	if dp.Fold16(udp6) == dp.Fold16(vip6) || dp.Fold16(udp6) == dp.Fold16(other6) {
		t.Fatal("the UDP clusterIP folds as a TCP one: pick another")
	}
	if err := p.AddService(dp.Service{VIP: udp6, Port: 53, Proto: dp.UDP, Backends: []dp.Backend{{IP: back6, Port: 5353}}}); err != nil {
		t.Fatal(err)
	}
	if err := p.DelService(udp6, 53, dp.UDP); err != nil {
		t.Fatal(err)
	}
	if count(udp6) != 0 {
		t.Fatalf("count after deleting the UDP service: %d, want 0", count(udp6))
	}
}

// A UDP checksum that becomes 0 after translation must be sent as 0xffff
// (0 would mean "no checksum").
func TestUDPChecksumNeverBecomesZero(t *testing.T) {
	p := testPlane(t)
	oneBackend(t, p)
	for x := 0; x < 1<<16; x++ {
		pl := []byte{byte(x >> 8), byte(x)}
		after := ipv4{src: podB, dst: podA, proto: protoUDP, sport: 40000, dport: 5201, payload: pl}
		seg := after.l4()
		binary.BigEndian.PutUint16(seg[6:], 0)
		if csumFold(csumAdd(pseudo(podB, podA, protoUDP, len(seg)), seg)) != 0 {
			continue
		}
		req := ipv4{src: podB, dst: vip, proto: protoUDP, sport: 40000, dport: 5201, payload: pl}
		ret, out := run(t, p.Objects().FromPod, req.bytes())
		mustOK(t, ret)
		d, _ := decode(out)
		if got := binary.BigEndian.Uint16(d.l4[6:]); got != 0xffff {
			t.Fatalf("checksum %#04x, want 0xffff", got)
		}
		mustValid(t, out)
		return
	}
	t.Fatal("found no payload whose translated checksum folds to zero")
}

// Everything that is not service traffic leaves the programs byte for byte.
func TestUntouched(t *testing.T) {
	p := testPlane(t)
	oneBackend(t, p)
	ipv6 := make([]byte, ethLen+40+8)
	binary.BigEndian.PutUint16(ipv6[12:], 0x86dd)
	ipv6[ethLen] = 0x60
	ipv6[ethLen+6] = protoUDP
	arp := make([]byte, ethLen+28)
	binary.BigEndian.PutUint16(arp[12:], 0x0806)
	ethOnly := make([]byte, ethLen)
	binary.BigEndian.PutUint16(ethOnly[12:], 0x0800)
	full := ipv4{src: podB, dst: vip, proto: protoTCP, sport: 40000, dport: 5201, tcpFlags: tcpSYN}.bytes()
	fullUDP := ipv4{src: podB, dst: vip, proto: protoUDP, sport: 40000, dport: 5201}.bytes()
	badIHL := append([]byte(nil), full...)
	badIHL[ethLen] = 0x44 // ihl 4 < 5
	cases := map[string][]byte{
		"pod-ip":             ipv4{src: podB, dst: podA, proto: protoTCP, sport: 40000, dport: 5201, tcpFlags: tcpSYN}.bytes(),
		"vip-other-port":     ipv4{src: podB, dst: vip, proto: protoTCP, sport: 40000, dport: 80, tcpFlags: tcpSYN}.bytes(),
		"vip-other-protocol": ipv4{src: podB, dst: vip, proto: 132 /* SCTP */, raw: make([]byte, 12)}.bytes(),
		"icmp-echo-to-vip":   ipv4{src: podB, dst: vip, proto: protoICM, raw: []byte{8, 0, 0, 0, 0, 1, 0, 1, 'p', 'i', 'n', 'g'}}.bytes(),
		"icmp-error-no-flow": icmpError(3, 3, podA, podB, ipv4{src: podB, dst: podA, proto: protoUDP, sport: 1, dport: 2}).bytes(),
		"ipv6":               ipv6,
		"arp":                arp,
		"eth-only":           ethOnly,
		"half-ip-header":     full[:ethLen+10],
		"ip-without-tcp":     full[:ethLen+20+10],
		"ip-without-udp":     fullUDP[:ethLen+20+4],
		"ihl-below-5":        badIHL,
		"later-fragment-unknown": ipv4{src: podB, dst: vip, proto: protoUDP, id: 999, frag: 100,
			noL4: true, payload: []byte("no header here")}.bytes(),
	}
	ihlBeyond := append([]byte(nil), full[:ethLen+20]...)
	ihlBeyond[ethLen] = 0x4f // ihl 15: options would run past the frame
	cases["ihl-beyond-frame"] = ihlBeyond
	// The kernel itself refuses to test-run an IPv4 frame shorter than
	// Ethernet + 20 bytes (EINVAL before the program runs); such frames are
	// still tried, and must either be refused that way or pass untouched.
	shortOK := map[string]bool{"eth-only": true, "half-ip-header": true}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			for _, prog := range []*ebpf.Program{p.Objects().FromPod, p.Objects().ToPod} {
				if shortOK[name] {
					if _, _, err := prog.Test(in); errors.Is(err, unix.EINVAL) {
						t.Logf("%d-byte IPv4 frame: the kernel refuses to test-run it (EINVAL)", len(in))
						continue
					}
				}
				ret, out := run(t, prog, in)
				mustOK(t, ret)
				if !bytes.Equal(in, out) {
					t.Fatalf("%s changed the packet", prog)
				}
			}
		})
	}
	if st, _ := p.Stats(); st.DNAT+st.RNAT+st.Errors != 0 {
		t.Fatalf("stats %+v: nothing should have been translated", st)
	}
}

func TestIPOptions(t *testing.T) {
	p := testPlane(t)
	oneBackend(t, p)
	opts := []byte{1, 1, 1, 0} // NOP NOP NOP EOL: ihl 6
	req := ipv4{src: podB, dst: vip, proto: protoTCP, sport: 40000, dport: 5201, tcpFlags: tcpSYN, options: opts}
	ret, out := run(t, p.Objects().FromPod, req.bytes())
	mustOK(t, ret)
	expect(t, out, podB, 40000, podA, 5201)
	mustValid(t, out)
	if d, _ := decode(out); d.ihl != 24 || !bytes.Equal(out[ethLen+20:ethLen+24], opts) {
		t.Fatal("options lost")
	}
	rep := ipv4{src: podA, dst: podB, proto: protoTCP, sport: 5201, dport: 40000, tcpFlags: tcpSYN | tcpACK, options: opts}
	ret, out = run(t, p.Objects().ToPod, rep.bytes())
	mustOK(t, ret)
	expect(t, out, vip, 5201, podB, 40000)
	mustValid(t, out)
}

// The first fragment carries the ports and is translated like any packet;
// later fragments of the same datagram get the same addresses (from the
// fragment map); later fragments of unknown datagrams are left alone.
func TestFragments(t *testing.T) {
	p := testPlane(t)
	oneBackend(t, p)
	first := ipv4{src: podB, dst: vip, proto: protoUDP, sport: 40000, dport: 5201, id: 4242, frag: 0x2000, payload: bytes.Repeat([]byte{7}, 16)}
	in := first.bytes()
	ret, out := run(t, p.Objects().FromPod, in)
	mustOK(t, ret)
	expect(t, out, podB, 40000, podA, 5201)
	if err := checkIP(out); err != nil {
		t.Fatal(err)
	}
	// The UDP checksum covers the whole datagram: check it moved by exactly
	// the pseudo-header and port change.
	din, _ := decode(in)
	dout, _ := decode(out)
	sumIn := csumAdd(pseudo(din.src, din.dst, protoUDP, 0), din.l4)
	sumOut := csumAdd(pseudo(dout.src, dout.dst, protoUDP, 0), dout.l4)
	if csumFold(sumIn) != csumFold(sumOut) {
		t.Fatalf("first fragment: checksum not updated consistently (%#04x vs %#04x)", csumFold(sumIn), csumFold(sumOut))
	}

	later := ipv4{src: podB, dst: vip, proto: protoUDP, id: 4242, frag: 3, noL4: true, payload: []byte("rest of the datagram")}
	in = later.bytes()
	ret, out = run(t, p.Objects().FromPod, in)
	mustOK(t, ret)
	if d, _ := decode(out); d.dst != podA || d.src != podB {
		t.Fatalf("later fragment: %s -> %s, want -> %s", d.src, d.dst, podA)
	}
	if err := checkIP(out); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out[ethLen+20:], in[ethLen+20:]) {
		t.Fatal("later fragment: payload changed")
	}

	// Replies, fragmented too.
	rfirst := ipv4{src: podA, dst: podB, proto: protoUDP, sport: 5201, dport: 40000, id: 77, frag: 0x2000, payload: []byte("12345678")}
	ret, out = run(t, p.Objects().ToPod, rfirst.bytes())
	mustOK(t, ret)
	expect(t, out, vip, 5201, podB, 40000)
	rlater := ipv4{src: podA, dst: podB, proto: protoUDP, id: 77, frag: 1, noL4: true, payload: []byte("tail")}
	ret, out = run(t, p.Objects().ToPod, rlater.bytes())
	mustOK(t, ret)
	if d, _ := decode(out); d.src != vip {
		t.Fatalf("later reply fragment from %s, want %s", d.src, vip)
	}
	if err := checkIP(out); err != nil {
		t.Fatal(err)
	}
	if st, _ := p.Stats(); st.Frags != 2 {
		t.Fatalf("stats %+v: want 2 fragments", st)
	}
}

// checkICMP verifies the ICMP checksum and the quoted IP header's checksum,
// and returns the quoted packet's addresses and ports.
func checkICMP(t *testing.T, out []byte) (qsrc netip.Addr, qsport uint16, qdst netip.Addr, qdport uint16) {
	t.Helper()
	if err := checkIP(out); err != nil {
		t.Fatal(err)
	}
	d, _ := decode(out)
	if c := checksum(d.l4); c != 0 {
		t.Fatalf("ICMP checksum wrong (residue %#04x)", c)
	}
	q := d.l4[8:]
	qihl := int(q[0]&0xf) * 4
	if c := checksum(q[:qihl]); c != 0 {
		t.Fatalf("quoted IP header checksum wrong (residue %#04x)", c)
	}
	return netip.AddrFrom4([4]byte(q[12:16])), binary.BigEndian.Uint16(q[qihl:]),
		netip.AddrFrom4([4]byte(q[16:20])), binary.BigEndian.Uint16(q[qihl+2:])
}

func TestICMPErrors(t *testing.T) {
	p := testPlane(t)
	oneBackend(t, p)
	req := ipv4{src: podB, dst: vip, proto: protoUDP, sport: 40000, dport: 5201, payload: []byte("x")}
	ret, _ := run(t, p.Objects().FromPod, req.bytes())
	mustOK(t, ret)

	// The backend's port is closed: it answers port unreachable quoting the
	// translated packet pod-b:40000 -> pod-a:5201.
	atBackend := ipv4{src: podB, dst: podA, proto: protoUDP, sport: 40000, dport: 5201, payload: []byte("x")}
	unreach := icmpError(3, 3, podA, podB, atBackend)
	ret, out := run(t, p.Objects().ToPod, unreach.bytes())
	mustOK(t, ret)
	if d, _ := decode(out); d.src != vip || d.dst != podB {
		t.Fatalf("outer header %s -> %s, want %s -> %s", d.src, d.dst, vip, podB)
	}
	qs, qsp, qd, qdp := checkICMP(t, out)
	if qs != podB || qsp != 40000 || qd != vip || qdp != 5201 {
		t.Fatalf("quote %s:%d -> %s:%d, want %s:40000 -> %s:5201", qs, qsp, qd, qdp, podB, vip)
	}

	// The client's port is closed for a reply it got from the clusterIP: its
	// error quotes vip:5201 -> pod-b:40000 and must reach the backend.
	atClient := ipv4{src: vip, dst: podB, proto: protoUDP, sport: 5201, dport: 40000, payload: []byte("y")}
	back := icmpError(3, 3, podB, vip, atClient)
	ret, out = run(t, p.Objects().FromPod, back.bytes())
	mustOK(t, ret)
	if d, _ := decode(out); d.src != podB || d.dst != podA {
		t.Fatalf("outer header %s -> %s, want %s -> %s", d.src, d.dst, podB, podA)
	}
	qs, qsp, qd, qdp = checkICMP(t, out)
	if qs != podA || qsp != 5201 || qd != podB || qdp != 40000 {
		t.Fatalf("quote %s:%d -> %s:%d, want %s:5201 -> %s:40000", qs, qsp, qd, qdp, podA, podB)
	}
	if st, _ := p.Stats(); st.ICMP != 2 {
		t.Fatalf("stats %+v: want 2 ICMP errors translated", st)
	}
}

// Pod-a reaching its own service lands on itself: source becomes the hairpin
// address; its reply (leaving pod-a, through from_pod) is translated back.
func TestHairpin(t *testing.T) {
	p := testPlane(t)
	oneBackend(t, p)
	req := ipv4{src: podA, dst: vip, proto: protoTCP, sport: 41000, dport: 5201, tcpFlags: tcpSYN}
	ret, out := run(t, p.Objects().FromPod, req.bytes())
	mustOK(t, ret)
	expect(t, out, hairpin, 41000, podA, 5201)
	mustValid(t, out)
	// to_pod (pod-a's ingress) must leave it alone: it is not a reply.
	ret, out2 := run(t, p.Objects().ToPod, out)
	mustOK(t, ret)
	if !bytes.Equal(out, out2) {
		t.Fatal("to_pod changed a hairpinned request")
	}
	rep := ipv4{src: podA, dst: hairpin, proto: protoTCP, sport: 5201, dport: 41000, tcpFlags: tcpSYN | tcpACK}
	ret, out = run(t, p.Objects().FromPod, rep.bytes())
	mustOK(t, ret)
	expect(t, out, vip, 5201, podA, 41000)
	mustValid(t, out)

	// An ICMP error from pod-a about the hairpinned flow goes back the same way.
	quoted := ipv4{src: hairpin, dst: podA, proto: protoTCP, sport: 41000, dport: 5201, tcpFlags: tcpSYN}
	ret, out = run(t, p.Objects().FromPod, icmpError(3, 3, podA, hairpin, quoted).bytes())
	mustOK(t, ret)
	if d, _ := decode(out); d.src != vip || d.dst != podA {
		t.Fatalf("outer header %s -> %s, want %s -> %s", d.src, d.dst, vip, podA)
	}
	qs, qsp, qd, qdp := checkICMP(t, out)
	if qs != podA || qsp != 41000 || qd != vip || qdp != 5201 {
		t.Fatalf("quote %s:%d -> %s:%d", qs, qsp, qd, qdp)
	}
	if st, _ := p.Stats(); st.Hairpin != 1 {
		t.Fatalf("stats %+v: want 1 hairpin flow", st)
	}
}

// At a tc ingress (the node end of a pod's veth: the run's skb came in by
// the interface it is on), a hairpinned packet, the request and its reply,
// goes straight back out of that interface into the pod (TC_ACT_REDIRECT,
// its MACs swapped so that the pod's own is the destination), never to
// the node's routing and netfilter; a packet to another backend goes on
// to the stack.
func TestHairpinBackToSender(t *testing.T) {
	p := testPlane(t)
	oneBackend(t, p)
	atIngress := func(in []byte) (uint32, []byte) {
		t.Helper()
		out := make([]byte, len(in)+256)
		// ifindex 1 is the test's loopback, the run's skb->dev; the same
		// ingress_ifindex says it came in by it.
		ctx := make([]byte, 48)
		binary.LittleEndian.PutUint32(ctx[36:], 1) // ingress_ifindex
		binary.LittleEndian.PutUint32(ctx[40:], 1) // ifindex
		ret, err := p.Objects().FromPod.Run(&ebpf.RunOptions{Data: in, DataOut: out, Context: ctx})
		if err != nil {
			t.Fatalf("BPF_PROG_TEST_RUN: %v", err)
		}
		return ret, out[:len(in)]
	}
	swapped := func(in, out []byte) bool { return bytes.Equal(out[0:6], in[6:12]) && bytes.Equal(out[6:12], in[0:6]) }
	for _, proto := range []uint8{protoTCP, protoUDP} {
		req := ipv4{src: podA, dst: vip, proto: proto, sport: 41001, dport: 5201, tcpFlags: tcpSYN}
		in := req.bytes()
		ret, out := atIngress(in)
		if ret != actRedirect || !swapped(in, out) {
			t.Fatalf("proto %d: hairpinned request: return code %d, MACs %x -> %x; want TC_ACT_REDIRECT with the MACs swapped", proto, int32(ret), in[:12], out[:12])
		}
		expect(t, out, hairpin, 41001, podA, 5201)
		mustValid(t, out)
		rep := ipv4{src: podA, dst: hairpin, proto: proto, sport: 5201, dport: 41001, tcpFlags: tcpSYN | tcpACK}
		in = rep.bytes()
		ret, out = atIngress(in)
		if ret != actRedirect || !swapped(in, out) {
			t.Fatalf("proto %d: its reply: return code %d, MACs %x -> %x; want TC_ACT_REDIRECT with the MACs swapped", proto, int32(ret), in[:12], out[:12])
		}
		expect(t, out, vip, 5201, podA, 41001)
		mustValid(t, out)
	}
	other := ipv4{src: podB, dst: vip, proto: protoTCP, sport: 41002, dport: 5201, tcpFlags: tcpSYN}
	in := other.bytes()
	ret, out := atIngress(in)
	mustOK(t, ret)
	if !bytes.Equal(out[:12], in[:12]) {
		t.Fatal("a packet to another pod had its MACs changed")
	}
	expect(t, out, podB, 41002, podA, 5201)
}

// Flows stick to their backend; new flows spread over all backends. A
// deleted service translates no new connection (its SYN passes as it is),
// and an established one keeps its backend, as kube-proxy's conntrack NAT
// keeps it: after the deletion, and after a new service on the same
// address, whose new connections go to its own backends. Its UDP flows
// stop at once (kube-proxy clears their conntrack entries): the new
// service's id is never the old one's, so a UDP flow picks anew.
func TestBackendsAndLifecycle(t *testing.T) {
	p := testPlane(t)
	backends := []dp.Backend{{IP: podA, Port: 5201}, {IP: ipOf("192.168.10.12"), Port: 5201}, {IP: ipOf("192.168.10.13"), Port: 5201}}
	if err := p.AddService(dp.Service{VIP: vip, Port: 5201, Proto: dp.TCP, Backends: backends}); err != nil {
		t.Fatal(err)
	}
	hits := map[netip.Addr]int{}
	for i := 0; i < 300; i++ {
		sport := uint16(30000 + i)
		_, out := run(t, p.Objects().FromPod, ipv4{src: podB, dst: vip, proto: protoTCP, sport: sport, dport: 5201, tcpFlags: tcpSYN}.bytes())
		d, _ := decode(out)
		hits[d.dst]++
		// Later packets of the flow go to the same backend.
		_, out = run(t, p.Objects().FromPod, ipv4{src: podB, dst: vip, proto: protoTCP, sport: sport, dport: 5201, tcpFlags: tcpACK}.bytes())
		if d2, _ := decode(out); d2.dst != d.dst {
			t.Fatalf("flow %d moved from %s to %s", sport, d.dst, d2.dst)
		}
	}
	for _, b := range backends {
		if hits[b.IP] < 50 {
			t.Fatalf("backend %s got %d of 300 flows: %v", b.IP, hits[b.IP], hits)
		}
	}
	t.Logf("300 flows over 3 backends: %v", hits)

	udp := dp.Service{VIP: vip, Port: 5201, Proto: dp.UDP, Backends: backends[:1]}
	if err := p.AddService(udp); err != nil {
		t.Fatal(err)
	}
	udpIn := ipv4{src: podB, dst: vip, proto: protoUDP, sport: 30000, dport: 5201}.bytes()
	_, out := run(t, p.Objects().FromPod, udpIn)
	expect(t, out, podB, 30000, podA, 5201)
	kept := func() netip.Addr { // flow 30000's backend
		_, out := run(t, p.Objects().FromPod, ipv4{src: podB, dst: vip, proto: protoTCP, sport: 30000, dport: 5201, tcpFlags: tcpACK}.bytes())
		d, _ := decode(out)
		return d.dst
	}
	was := kept()
	for _, gone := range []dp.Service{udp, {VIP: vip, Port: 5201, Proto: dp.TCP}} {
		if err := p.DelService(gone.VIP, gone.Port, gone.Proto); err != nil {
			t.Fatal(err)
		}
	}
	syn := ipv4{src: podB, dst: vip, proto: protoTCP, sport: 31000, dport: 5201, tcpFlags: tcpSYN}.bytes()
	ret, out := run(t, p.Objects().FromPod, syn)
	mustOK(t, ret)
	if !bytes.Equal(syn, out) {
		t.Fatal("a deleted service translated a new connection")
	}
	if got := kept(); got != was {
		t.Fatalf("an established connection of the deleted service went to %s, want its backend %s", got, was)
	}
	// Its backend's replies are still turned into the clusterIP's.
	_, out = run(t, p.Objects().ToPod, ipv4{src: was, dst: podB, proto: protoTCP, sport: 5201, dport: 30000, tcpFlags: tcpACK}.bytes())
	expect(t, out, vip, 5201, podB, 30000)
	if ret, out = run(t, p.Objects().FromPod, udpIn); ret != actOK || !bytes.Equal(udpIn, out) {
		t.Fatal("a UDP flow of the deleted service is still translated")
	}
	other := ipOf("192.168.10.20")
	if err := p.AddService(dp.Service{VIP: vip, Port: 5201, Proto: dp.TCP, Backends: []dp.Backend{{IP: other, Port: 80}}}); err != nil {
		t.Fatal(err)
	}
	if got := kept(); got != was {
		t.Fatalf("after a new service on the address, the established connection went to %s, want %s", got, was)
	}
	_, out = run(t, p.Objects().FromPod, syn)
	expect(t, out, podB, 31000, other, 80)
	mustValid(t, out)
}

func TestServiceValidation(t *testing.T) {
	p := testPlane(t)
	ok := dp.Service{VIP: vip, Port: 5201, Proto: dp.TCP, Backends: []dp.Backend{{IP: podA, Port: 5201}}}
	if err := p.AddService(ok); err != nil {
		t.Fatal(err)
	}
	bad := map[string]dp.Service{
		"duplicate":             ok,
		"ipv6-vip-ipv4-backend": {VIP: ipOf("fd00::1"), Port: 1, Proto: dp.TCP, Backends: []dp.Backend{{IP: podA, Port: 1}}},
		"ipv4-vip-ipv6-backend": {VIP: vip, Port: 5, Proto: dp.TCP, Backends: []dp.Backend{{IP: ipOf("fd00::a"), Port: 1}}},
		"ipv6-external-twice":   {VIP: ipOf("fd00::1"), Port: 1, Proto: dp.TCP, External: true, HasExternal: true},
		"v4-mapped-vip":         {VIP: ipOf("::ffff:10.96.0.1"), Port: 1, Proto: dp.TCP},
		"port-0":                {VIP: vip, Port: 0, Proto: dp.TCP},
		"sctp":                  {VIP: vip, Port: 1, Proto: 132},
		"backend-port-0":        {VIP: vip, Port: 2, Proto: dp.TCP, Backends: []dp.Backend{{IP: podA}}},
		"backend-twice":         {VIP: vip, Port: 3, Proto: dp.TCP, Backends: []dp.Backend{{IP: podA, Port: 1}, {IP: podA, Port: 1}}},
		"backend-not-ipv4":      {VIP: vip, Port: 4, Proto: dp.TCP, Backends: []dp.Backend{{Port: 1}}},
	}
	for name, s := range bad {
		if err := p.AddService(s); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := p.AddService(ok); !errors.Is(err, dp.ErrExists) {
		t.Errorf("duplicate: %v, want ErrExists", err)
	}
	// All or nothing: one bad service in a batch adds none.
	batch := []dp.Service{{VIP: vip, Port: 6000, Proto: dp.UDP, Backends: ok.Backends}, {VIP: vip, Port: 0, Proto: dp.UDP}}
	if err := p.AddServices(batch); err == nil {
		t.Error("bad batch accepted")
	}
	if err := p.DelService(vip, 6000, dp.UDP); !errors.Is(err, dp.ErrNotFound) {
		t.Errorf("after a bad batch: %v, want ErrNotFound", err)
	}
	list, err := p.ListServices()
	if err != nil || len(list) != 1 || list[0].String() != "10.96.0.100:5201/tcp" || list[0].Backends[0] != ok.Backends[0] {
		t.Fatalf("ListServices = %+v, %v", list, err)
	}
}

// An ICMP error from the client quoting a clusterIP reply of no translated
// flow (no reply entry, or a Service that does not exist) is left alone.
func TestICMPErrorWithoutFlowUntouched(t *testing.T) {
	p := testPlane(t)
	oneBackend(t, p)
	for name, quote := range map[string]ipv4{
		"no-flow":    {src: vip, dst: podB, proto: protoUDP, sport: 5201, dport: 40001, payload: []byte("y")},
		"no-service": {src: vip, dst: podB, proto: protoUDP, sport: 5999, dport: 40001, payload: []byte("y")},
		"not-a-vip":  {src: ipOf("10.10.0.1"), dst: podB, proto: protoUDP, sport: 5201, dport: 40001, payload: []byte("y")},
	} {
		in := icmpError(3, 3, podB, quote.src, quote).bytes()
		ret, out := run(t, p.Objects().FromPod, in)
		mustOK(t, ret)
		if !bytes.Equal(in, out) {
			t.Fatalf("%s: an ICMP error about no translated flow was changed", name)
		}
	}
	if st, _ := p.Stats(); st.ICMP != 0 || st.Errors != 0 {
		t.Fatalf("stats %+v", st)
	}
}
