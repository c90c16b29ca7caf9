package tcbpf_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	dp "github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
)

// A Service without backends answers a TCP SYN and a UDP datagram with an
// ICMP port unreachable from the clusterIP to the client (kube-proxy's
// REJECT), built in place of the packet: valid checksums, the MACs
// swapped, the original IP header and first L4 bytes quoted, sent back
// (TC_ACT_REDIRECT). Whatever it cannot answer is dropped, as before.
func TestNoBackendsRejects(t *testing.T) {
	p := testPlane(t)
	for _, proto := range []dp.Proto{dp.TCP, dp.UDP} {
		if err := p.AddService(dp.Service{VIP: vip, Port: 5201, Proto: proto}); err != nil {
			t.Fatal(err)
		}
	}
	long := bytes.Repeat([]byte("x"), 1000)
	for _, c := range []struct {
		name  string
		req   ipv4
		quote int // L4 bytes quoted
	}{
		{"tcp-syn", ipv4{src: podB, dst: vip, proto: protoTCP, sport: 40000, dport: 5201, tcpFlags: tcpSYN, id: 7}, 20},
		{"tcp-syn-with-data", ipv4{src: podB, dst: vip, proto: protoTCP, sport: 40001, dport: 5201, tcpFlags: tcpSYN, payload: []byte("fast open")}, 20},
		{"udp", ipv4{src: podB, dst: vip, proto: protoUDP, sport: 40002, dport: 5201, payload: []byte("?")}, 8},
		{"udp-large", ipv4{src: podB, dst: vip, proto: protoUDP, sport: 40003, dport: 5201, payload: long}, 8},
		{"udp-no-checksum", ipv4{src: podB, dst: vip, proto: protoUDP, sport: 40004, dport: 5201, payload: []byte("abc"), udpNoCsum: true}, 8},
		{"udp-empty", ipv4{src: podB, dst: vip, proto: protoUDP, sport: 40005, dport: 5201}, 8},
		{"udp-first-fragment", ipv4{src: podB, dst: vip, proto: protoUDP, sport: 40006, dport: 5201, payload: long, id: 9, frag: 0x2000}, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := c.req.bytes()
			ret, out := run(t, p.Objects().FromPod, in)
			if ret != actRedirect {
				t.Fatalf("return code %d, want TC_ACT_REDIRECT (the ICMP error sent back)", int32(ret))
			}
			if want := ethLen + 20 + 8 + 20 + c.quote; len(out) != want {
				t.Fatalf("reply of %d bytes, want %d", len(out), want)
			}
			if !bytes.Equal(out[0:6], in[6:12]) || !bytes.Equal(out[6:12], in[0:6]) || binary.BigEndian.Uint16(out[12:]) != 0x0800 {
				t.Fatalf("Ethernet header % x: want the MACs of % x swapped", out[:14], in[:14])
			}
			d, _ := decode(out)
			ip := out[ethLen:]
			if d.proto != protoICM || d.src != vip || d.dst != podB || d.ihl != 20 || ip[8] != 64 ||
				int(binary.BigEndian.Uint16(ip[2:])) != len(out)-ethLen || binary.BigEndian.Uint16(ip[6:]) != 0 {
				t.Fatalf("IP header % x: want ICMP %s -> %s, TTL 64, its length, not fragmented", ip[:20], vip, podB)
			}
			if d.l4[0] != 3 || d.l4[1] != 3 {
				t.Fatalf("ICMP type %d code %d, want 3/3 (port unreachable)", d.l4[0], d.l4[1])
			}
			qsrc, qsport, qdst, qdport := checkICMP(t, out) // both checksums
			if qsrc != podB || qdst != vip || qsport != c.req.sport || qdport != 5201 {
				t.Fatalf("quote %s:%d -> %s:%d", qsrc, qsport, qdst, qdport)
			}
			// The quote is the packet as sent: its IP header and first bytes.
			if q := d.l4[8:]; !bytes.Equal(q, in[ethLen:ethLen+20+c.quote]) {
				t.Fatalf("quote % x\nwant  % x", q, in[ethLen:ethLen+20+c.quote])
			}
		})
	}
	st, _ := p.Stats()
	if st.Rejects != 7 || st.NoBackend != 0 || st.Errors != 0 || st.DNAT != 0 {
		t.Fatalf("stats %+v: want 7 rejects and nothing else", st)
	}

	// Not answered: dropped and counted, as before.
	for name, req := range map[string]ipv4{
		"tcp-ack":     {src: podB, dst: vip, proto: protoTCP, sport: 40010, dport: 5201, tcpFlags: tcpACK},
		"tcp-syn-ack": {src: podB, dst: vip, proto: protoTCP, sport: 40011, dport: 5201, tcpFlags: tcpSYN | tcpACK},
		"tcp-rst":     {src: podB, dst: vip, proto: protoTCP, sport: 40012, dport: 5201, tcpFlags: tcpRST},
		"ip-options":  {src: podB, dst: vip, proto: protoTCP, sport: 40013, dport: 5201, tcpFlags: tcpSYN, options: []byte{1, 1, 1, 0}},
	} {
		if ret, _ := run(t, p.Objects().FromPod, req.bytes()); ret != actShot {
			t.Errorf("%s: return code %d, want TC_ACT_SHOT", name, int32(ret))
		}
	}
	// Malformed or short packets to the Service are left alone.
	syn := ipv4{src: podB, dst: vip, proto: protoTCP, sport: 40020, dport: 5201, tcpFlags: tcpSYN}.bytes()
	udp := ipv4{src: podB, dst: vip, proto: protoUDP, sport: 40021, dport: 5201}.bytes()
	for name, in := range map[string][]byte{
		"tcp-header-cut": syn[:ethLen+20+12],
		"udp-header-cut": udp[:ethLen+20+6],
		"later-fragment": ipv4{src: podB, dst: vip, proto: protoUDP, id: 77, frag: 10, noL4: true, payload: []byte("tail")}.bytes(),
	} {
		ret, out := run(t, p.Objects().FromPod, in)
		mustOK(t, ret)
		if !bytes.Equal(in, out) {
			t.Errorf("%s: changed", name)
		}
	}
	st, _ = p.Stats()
	if st.Rejects != 7 || st.NoBackend != 4 || st.Errors != 0 {
		t.Fatalf("stats %+v: want 7 rejects, 4 drops", st)
	}

	// With a backend again, the same SYN is translated.
	if err := p.UpdateService(dp.Service{VIP: vip, Port: 5201, Proto: dp.TCP, Backends: []dp.Backend{{IP: podA, Port: 80}}}); err != nil {
		t.Fatal(err)
	}
	ret, out := run(t, p.Objects().FromPod, syn)
	mustOK(t, ret)
	expect(t, out, podB, 40020, podA, 80)
	mustValid(t, out)
}
