package tcbpf_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	dp "github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
)

// An IPv6 Service without backends answers a TCP SYN and a UDP datagram
// with an ICMPv6 port unreachable (type 1, code 4) from the clusterIP to
// the client, built in place of the packet by lb6_reject (a tail call):
// the MACs swapped, a valid checksum over the pseudo-header, the packet's
// IPv6 header and first L4 bytes quoted, sent back (TC_ACT_REDIRECT).
// What it cannot answer (a later TCP segment, extension headers) is
// dropped and counted.
func TestIPv6NoBackendsRejects(t *testing.T) {
	p := testPlane(t)
	for _, proto := range []dp.Proto{dp.TCP, dp.UDP} {
		if err := p.AddService(dp.Service{VIP: vip6, Port: svcPort6, Proto: proto}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		req   ipv6
		quote int
	}{
		{"tcp-syn", ipv6{src: client6, dst: vip6, proto: protoTCP, sport: 47000, dport: svcPort6, tcpFlags: tcpSYN}, 20},
		{"udp", ipv6{src: client6, dst: vip6, proto: protoUDP, sport: 47001, dport: svcPort6, payload: []byte("?")}, 8},
		{"udp-large", ipv6{src: client6, dst: vip6, proto: protoUDP, sport: 47002, dport: svcPort6, payload: bytes.Repeat([]byte("x"), 1000)}, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := c.req.bytes()
			ret, out := run(t, p.Objects().FromPod, in)
			if ret != actRedirect {
				t.Fatalf("return code %d, want TC_ACT_REDIRECT (the ICMPv6 error sent back)", int32(ret))
			}
			if want := ethLen + 40 + 8 + 40 + c.quote; len(out) != want {
				t.Fatalf("reply of %d bytes, want %d", len(out), want)
			}
			if !bytes.Equal(out[0:6], in[6:12]) || !bytes.Equal(out[6:12], in[0:6]) || binary.BigEndian.Uint16(out[12:]) != 0x86dd {
				t.Fatalf("Ethernet header % x: want the MACs of % x swapped", out[:14], in[:14])
			}
			ip := out[ethLen:]
			d, _ := decode6(out)
			if ip[0]>>4 != 6 || d.proto != protoICMP6 || d.src != vip6 || d.dst != client6 || ip[7] != 64 ||
				int(binary.BigEndian.Uint16(ip[4:])) != len(out)-ethLen-40 {
				t.Fatalf("IPv6 header % x: want ICMPv6 %s -> %s, hop limit 64, its payload length", ip[:40], vip6, client6)
			}
			if d.l4[0] != 1 || d.l4[1] != 4 {
				t.Fatalf("ICMPv6 type %d code %d, want 1/4 (port unreachable)", d.l4[0], d.l4[1])
			}
			mustValid6(t, out)
			if q := d.l4[8:]; !bytes.Equal(q, in[ethLen:ethLen+40+c.quote]) {
				t.Fatalf("quote % x\nwant  % x", q, in[ethLen:ethLen+40+c.quote])
			}
		})
	}
	if st, _ := p.Stats6(); st.Rejects != 3 || st.NoBackend != 0 || st.Errors != 0 || st.DNAT != 0 {
		t.Fatalf("stats %+v: want 3 rejects and nothing else", st)
	}
	for name, req := range map[string]ipv6{
		"tcp-ack":     {src: client6, dst: vip6, proto: protoTCP, sport: 47010, dport: svcPort6, tcpFlags: tcpACK},
		"tcp-syn-ack": {src: client6, dst: vip6, proto: protoTCP, sport: 47011, dport: svcPort6, tcpFlags: tcpSYN | tcpACK},
		"with-exthdr": {src: client6, dst: vip6, proto: protoUDP, sport: 47012, dport: svcPort6, payload: []byte("?"), ext: []ext6{pad6(nhDest, 1)}},
	} {
		if ret, _ := run(t, p.Objects().FromPod, req.bytes()); ret != actShot {
			t.Errorf("%s: return code %d, want TC_ACT_SHOT", name, int32(ret))
		}
	}
	if st, _ := p.Stats6(); st.Rejects != 3 || st.NoBackend != 3 || st.Errors != 0 {
		t.Fatalf("stats %+v: want 3 rejects, 3 drops", st)
	}
	// With a backend again, the same SYN is translated.
	if err := p.UpdateService(dp.Service{VIP: vip6, Port: svcPort6, Proto: dp.TCP, Backends: []dp.Backend{{IP: back6, Port: backPort6}}}); err != nil {
		t.Fatal(err)
	}
	ret, out := run(t, p.Objects().FromPod, ipv6{src: client6, dst: vip6, proto: protoTCP, sport: 47020, dport: svcPort6, tcpFlags: tcpSYN}.bytes())
	mustOK(t, ret)
	expect6(t, out, client6, 47020, back6, backPort6)
	mustValid6(t, out)
}
