package tcbpf_test

// BPF_PROG_TEST_RUN tests of IPv6 host routing (bpf/host6.h): what
// host_from_pod redirects (unicast TCP, UDP and echo between pods: hop
// limit - 1, MACs, nothing else changed, checksums still valid), Service
// translation both ways before the redirect, and every packet a router must
// think about (NDP, multicast, link-local, extension headers, ICMPv6
// errors, hop limit 1, cut-off headers) left to the stack byte for byte.

import (
	"bytes"
	"net"
	"testing"

	"github.com/cilium/ebpf"

	dp "github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
)

// routedPlane6 has routes to back6 (pod-a, ifindex 41) and client6 (pod-b,
// ifindex 42), and their IPv4 routes.
func routedPlane6(t *testing.T) *dp.Plane {
	t.Helper()
	p := routedPlane(t)
	for _, r := range []dp.PodRoute{
		{IP: back6, MAC: macA, HostIfindex: 41, HostMAC: nodeMacA},
		{IP: client6, MAC: macB, HostIfindex: 42, HostMAC: nodeMacB},
	} {
		if err := p.AddRoute(r); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func hopOf(b []byte) uint8 { return b[ethLen+7] }

// delivered6 checks a frame host_from_pod redirected: from the destination's
// node-side MAC to its pod MAC, hop limit one less, L4 checksum valid.
func delivered6(t *testing.T, ret uint32, in, out []byte, podMAC, nodeMAC net.HardwareAddr) {
	t.Helper()
	if ret != actRedirect {
		t.Fatalf("return code %d, want TC_ACT_REDIRECT (bpf_redirect_peer)", int32(ret))
	}
	if !bytes.Equal(out[0:6], podMAC) || !bytes.Equal(out[6:12], nodeMAC) {
		t.Fatalf("MACs %s <- %s, want %s <- %s", net.HardwareAddr(out[0:6]), net.HardwareAddr(out[6:12]), podMAC, nodeMAC)
	}
	if hopOf(out) != hopOf(in)-1 || len(out) != len(in) {
		t.Fatalf("hop limit %d, length %d: want %d, %d", hopOf(out), len(out), hopOf(in)-1, len(in))
	}
	mustValid6(t, out)
}

func TestHostRoute6PodToPod(t *testing.T) {
	p := routedPlane6(t)
	for _, pkt := range []ipv6{
		{src: client6, dst: back6, proto: protoTCP, sport: 40000, dport: 5201, tcpFlags: tcpPSH | tcpACK, payload: []byte("pod to pod")},
		{src: client6, dst: back6, proto: protoUDP, sport: 40000, dport: 5201, payload: []byte("pod to pod")},
		icmp6Info(icmp6Echo, client6, back6, []byte{0, 1, 0, 1}),
		icmp6Info(icmp6Echo+1, client6, back6, []byte{0, 1, 0, 1}),
	} {
		in := pkt.bytes()
		ret, out := run(t, p.Objects().HostFromPod, in)
		delivered6(t, ret, in, out, macA, nodeMacA)
		// Only the MACs and the hop limit changed.
		a, b := append([]byte(nil), in[12:]...), append([]byte(nil), out[12:]...)
		a[2+7], b[2+7] = 0, 0
		if !bytes.Equal(a, b) {
			t.Fatalf("proto %d: more than MACs and hop limit changed", pkt.proto)
		}
	}
	hs, err := p.HostStats()
	if err != nil || hs.Redirected != 4 || hs.Stack != 0 {
		t.Fatalf("host stats %+v, %v: want 4 redirected", hs, err)
	}
}

// withHop sets a frame's hop limit.
func withHop(b []byte, hop uint8) []byte { b[ethLen+7] = hop; return b }

func TestHostRoute6LeavesToStack(t *testing.T) {
	p := routedPlane6(t)
	other := ipOf("fd00:10::99")
	tcp := func(src, dst string) []byte {
		return ipv6{src: ipOf(src), dst: ipOf(dst), proto: protoTCP, sport: 40000, dport: 5201, tcpFlags: tcpACK}.bytes()
	}
	quoted := ipv6{src: back6, dst: client6, proto: protoUDP, sport: 1, dport: 2}
	full := ipv6{src: client6, dst: back6, proto: protoTCP, sport: 40000, dport: 5201, tcpFlags: tcpACK}.bytes()
	v4 := append([]byte(nil), full...)
	v4[ethLen] = 0x40
	cases := []struct {
		name string
		in   []byte
	}{
		{"no pod here", ipv6{src: client6, dst: other, proto: protoTCP, sport: 1, dport: 2}.bytes()},
		{"hop limit 1", withHop(tcp(client6.String(), back6.String()), 1)},
		{"hop limit 0", withHop(tcp(client6.String(), back6.String()), 0)},
		{"neighbour solicitation to a pod", icmp6Info(icmp6NS, client6, back6, make([]byte, 20)).bytes()},
		{"neighbour advertisement to a pod", icmp6Info(icmp6NA, client6, back6, make([]byte, 20)).bytes()},
		{"router solicitation", icmp6Info(icmp6RS, ipOf("fe80::b"), ipOf("ff02::2"), make([]byte, 4)).bytes()},
		{"MLD report", icmp6Info(143, ipOf("fe80::b"), ipOf("ff02::16"), make([]byte, 24)).bytes()},
		{"multicast UDP", ipv6{src: client6, dst: ipOf("ff05::1:3"), proto: protoUDP, sport: 1, dport: 547}.bytes()},
		{"link-local destination", tcp("fe80::b", "fe80::a")},
		{"link-local source", tcp("fe80::b", back6.String())},
		{"hop-by-hop options", ipv6{src: client6, dst: back6, proto: protoTCP, sport: 1, dport: 2, ext: []ext6{pad6(nhHop, 1)}}.bytes()},
		{"fragment", ipv6{src: client6, dst: back6, proto: protoUDP, sport: 1, dport: 2, ext: []ext6{frag6(0, true, 7)}}.bytes()},
		{"routing header", ipv6{src: client6, dst: back6, proto: protoTCP, sport: 1, dport: 2, ext: []ext6{routing6()}}.bytes()},
		{"port unreachable", icmp6Error(icmp6Unreach, 4, back6, client6, quoted, 48).bytes()},
		{"packet too big", icmp6Error(icmp6TooBig, 0, back6, client6, quoted, 48).bytes()},
		{"cut off after the IPv6 header", full[:ethLen+41]}, // shorter frames: the kernel refuses to test-run them
		{"no ICMPv6 type", icmp6Info(icmp6Echo, client6, back6, nil).bytes()[:ethLen+40]},
		{"version 4 in an IPv6 frame", v4},
	}
	for _, c := range cases {
		in := append([]byte(nil), c.in...)
		ret, out := run(t, p.Objects().HostFromPod, in)
		if ret != actOK || !bytes.Equal(c.in, out) {
			t.Errorf("%s: return %d, changed %v: want it passed on untouched", c.name, int32(ret), !bytes.Equal(c.in, out))
		}
	}
	if hs, _ := p.HostStats(); hs.Redirected != 0 || hs.TTLExpired != 2 {
		t.Fatalf("host stats %+v: want nothing redirected, 2 hop limits expiring", hs)
	}
}

// A clusterIP is translated before the redirect, and the backend's reply
// reverse-translated before its own (it skips the client's node end).
func TestHostRoute6Service(t *testing.T) {
	p := routedPlane6(t)
	oneBackend6(t, p)
	for _, proto := range []uint8{protoTCP, protoUDP} {
		in := ipv6{src: client6, dst: vip6, proto: proto, sport: 40001, dport: svcPort6, tcpFlags: tcpSYN, payload: []byte("svc")}.bytes()
		ret, out := run(t, p.Objects().HostFromPod, in)
		delivered6(t, ret, in, out, macA, nodeMacA)
		expect6(t, out, client6, 40001, back6, backPort6)

		in = ipv6{src: back6, dst: client6, proto: proto, sport: backPort6, dport: 40001, tcpFlags: tcpSYN | tcpACK, payload: []byte("ok")}.bytes()
		ret, out = run(t, p.Objects().HostFromPod, in)
		delivered6(t, ret, in, out, macB, nodeMacB)
		expect6(t, out, vip6, svcPort6, client6, 40001)
		// to_pod at the client's node end must not translate it again.
		ret, out2 := run(t, p.Objects().ToPod, out)
		mustUntouched(t, ret, out, out2)
	}
	if st := stats6(t, p); st.DNAT != 2 || st.RNAT != 2 || st.Errors != 0 {
		t.Fatalf("stats %+v: want 2 DNAT, 2 reverse NAT", st)
	}
}

// A netfilter proxy's DNAT on a veth-ebpf node (the IPv6 half of
// TestHostRouteRepliesOfStackNAT): the backend's replies of a flow the stack
// forwarded go back to the stack; a flow host routing carried is redirected.
func TestHostRoute6RepliesOfStackNAT(t *testing.T) {
	p := routedPlane6(t)
	// The stack's DNAT delivered client6's SYN to back6 through back6's node end.
	syn := ipv6{src: client6, dst: back6, proto: protoTCP, sport: 40002, dport: 80, tcpFlags: tcpSYN}.bytes()
	ret, _ := run(t, p.Objects().HostToPod, syn)
	mustOK(t, ret)
	reply := ipv6{src: back6, dst: client6, proto: protoTCP, sport: 80, dport: 40002, tcpFlags: tcpSYN | tcpACK}.bytes()
	ret, out := run(t, p.Objects().HostFromPod, reply)
	mustUntouched(t, ret, reply, out)
	other := ipv6{src: back6, dst: client6, proto: protoTCP, sport: 80, dport: 40003, tcpFlags: tcpACK}.bytes()
	ret, out = run(t, p.Objects().HostFromPod, other)
	delivered6(t, ret, other, out, macB, nodeMacB)
}

// from_pod_l2 over IPv6 (macvlan-ebpf, bridge ports), as
// TestFromPodL2Rewrite: a packet translated to a same-segment backend gets
// the backend's MAC (hop limit untouched); an untranslated packet, a veth
// route, the plain from_pod, a hairpin and a hairpin's reply keep their
// MACs.
func TestFromPodL2Rewrite6(t *testing.T) {
	p := testPlane(t)
	oneBackend6(t, p)
	if err := p.AddRoute(dp.PodRoute{IP: back6, MAC: macA}); err != nil {
		t.Fatal(err)
	}
	const hop = 14 + 7 // Ethernet, then the IPv6 header's hop limit
	in := ipv6{src: client6, dst: vip6, proto: protoUDP, sport: 41000, dport: svcPort6, payload: []byte("x")}.bytes()
	ret, out := run(t, p.Objects().FromPodL2, in)
	mustOK(t, ret)
	if !bytes.Equal(out[0:6], macA) || !bytes.Equal(out[6:12], in[6:12]) || out[hop] != in[hop] {
		t.Fatalf("MACs %s <- %s hop limit %d: want %s <- the sender's, hop limit %d", net.HardwareAddr(out[0:6]), net.HardwareAddr(out[6:12]), out[hop], macA, in[hop])
	}
	expect6(t, out, client6, 41000, back6, backPort6)
	mustValid6(t, out)
	keeps := func(what string, prog *ebpf.Program, in []byte) {
		t.Helper()
		ret, out := run(t, prog, in)
		mustOK(t, ret)
		if !bytes.Equal(out[0:12], in[0:12]) {
			t.Fatalf("%s: MACs %s <- %s, want them unchanged", what, net.HardwareAddr(out[0:6]), net.HardwareAddr(out[6:12]))
		}
	}
	direct := ipv6{src: client6, dst: back6, proto: protoUDP, sport: 41001, dport: backPort6}.bytes()
	ret, out = run(t, p.Objects().FromPodL2, direct)
	mustUntouched(t, ret, direct, out)
	keeps("from_pod (not _l2)", p.Objects().FromPod, ipv6{src: client6, dst: vip6, proto: protoUDP, sport: 41002, dport: svcPort6}.bytes())
	// A hairpin and its reply go through the node (a bridge never sends a
	// frame back out of the port it came in on).
	keeps("a hairpin", p.Objects().FromPodL2, ipv6{src: back6, dst: vip6, proto: protoTCP, sport: 41003, dport: svcPort6, tcpFlags: tcpSYN}.bytes())
	keeps("a hairpin's reply", p.Objects().FromPodL2, ipv6{src: back6, dst: ipOf(dp.HairpinIP6), proto: protoTCP, sport: backPort6, dport: 41003, tcpFlags: tcpSYN | tcpACK}.bytes())
	// A veth route (with an ifindex) is host routing's, not an L2 neighbour.
	if err := p.AddRoute(dp.PodRoute{IP: back6, MAC: macA, HostIfindex: 7, HostMAC: nodeMacA}); err != nil {
		t.Fatal(err)
	}
	keeps("a veth pod", p.Objects().FromPodL2, ipv6{src: client6, dst: vip6, proto: protoUDP, sport: 41004, dport: svcPort6}.bytes())
	if hs, _ := p.HostStats(); hs.L2 != 1 || hs.Redirected != 0 {
		t.Fatalf("host stats %+v: want 1 L2 rewrite", hs)
	}
	if st := stats6(t, p); st.DNAT != 4 || st.RNAT != 1 || st.Errors != 0 {
		t.Fatalf("IPv6 stats %+v: want 4 DNAT (the first packet, from_pod's, the hairpin, the veth pod's), 1 reverse NAT", st)
	}
}
