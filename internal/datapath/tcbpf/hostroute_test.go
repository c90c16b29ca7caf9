package tcbpf_test

// BPF_PROG_TEST_RUN tests of host routing (bpf/host.h): host_from_pod's
// redirect decision, MAC and TTL rewrite with a valid IP checksum (checked
// by packet_test.go's own checksum routine), Service translation folded in
// before the redirect, and everything else left to the stack untouched.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"testing"

	dp "github.com/vnetlab/vnetlab/internal/datapath/tcbpf"

	"golang.org/x/sys/unix"
)

const actRedirect = 7 // TC_ACT_REDIRECT (= TCX_REDIRECT)

var (
	macA     = net.HardwareAddr{0x02, 0xaa, 0, 0, 0, 0x0a}
	macB     = net.HardwareAddr{0x02, 0xaa, 0, 0, 0, 0x0b}
	nodeMacA = net.HardwareAddr{0x02, 0xee, 0, 0, 0, 0x0a}
	nodeMacB = net.HardwareAddr{0x02, 0xee, 0, 0, 0, 0x0b}
)

// routedPlane has routes to pod-a (ifindex 41) and pod-b (ifindex 42).
func routedPlane(t *testing.T) *dp.Plane {
	t.Helper()
	p := testPlane(t)
	for _, r := range []dp.PodRoute{
		{IP: podA, MAC: macA, HostIfindex: 41, HostMAC: nodeMacA},
		{IP: podB, MAC: macB, HostIfindex: 42, HostMAC: nodeMacB},
	} {
		if err := p.AddRoute(r); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func ttlOf(b []byte) uint8 { return b[ethLen+8] }

// delivered checks a frame host_from_pod redirected: addressed from the
// destination's node-side MAC to its pod MAC, TTL one less, IP checksum
// valid, L4 checksum valid, nothing else changed.
func delivered(t *testing.T, ret uint32, in, out []byte, podMAC, nodeMAC net.HardwareAddr) {
	t.Helper()
	if ret != actRedirect {
		t.Fatalf("return code %d, want TC_ACT_REDIRECT (bpf_redirect_peer)", int32(ret))
	}
	if !bytes.Equal(out[0:6], podMAC) || !bytes.Equal(out[6:12], nodeMAC) {
		t.Fatalf("MACs %s <- %s, want %s <- %s", net.HardwareAddr(out[0:6]), net.HardwareAddr(out[6:12]), podMAC, nodeMAC)
	}
	if ttlOf(out) != ttlOf(in)-1 {
		t.Fatalf("TTL %d, want %d", ttlOf(out), ttlOf(in)-1)
	}
	if len(out) != len(in) {
		t.Fatalf("length %d, want %d", len(out), len(in))
	}
	mustValid(t, out)
}

func TestHostRoutePodToPod(t *testing.T) {
	p := routedPlane(t)
	payload := []byte("pod to pod, no node stack")
	for _, proto := range []uint8{protoTCP, protoUDP} {
		in := ipv4{src: podB, dst: podA, proto: proto, sport: 40000, dport: 5201, tcpFlags: tcpPSH | tcpACK, payload: payload}.bytes()
		ret, out := run(t, p.Objects().HostFromPod, in)
		delivered(t, ret, in, out, macA, nodeMacA)
		// Only the MACs, the TTL and the IP checksum changed.
		a, b := append([]byte(nil), in[12:]...), append([]byte(nil), out[12:]...)
		for _, x := range [][]byte{a, b} {
			x[2+8], x[2+10], x[2+11] = 0, 0, 0
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("proto %d: more than MACs, TTL and IP checksum changed", proto)
		}
	}
	// The other direction uses the other route.
	in := ipv4{src: podA, dst: podB, proto: protoTCP, sport: 5201, dport: 40000, tcpFlags: tcpACK}.bytes()
	ret, out := run(t, p.Objects().HostFromPod, in)
	delivered(t, ret, in, out, macB, nodeMacB)
	// Other IPv4 protocols are routed too (the translation only parses TCP, UDP, ICMP).
	in = ipv4{src: podB, dst: podA, proto: 132, raw: make([]byte, 16)}.bytes()
	ret, out = run(t, p.Objects().HostFromPod, in)
	if ret != actRedirect || ttlOf(out) != 63 || checkIP(out) != nil {
		t.Fatalf("SCTP: return %d, TTL %d, %v", int32(ret), ttlOf(out), checkIP(out))
	}
	hs, err := p.HostStats()
	if err != nil || hs.Redirected != 4 || hs.Stack != 0 {
		t.Fatalf("host stats %+v, %v: want 4 redirected", hs, err)
	}
}

// Every TTL value: the checksum stays right across the byte's wrap-around.
func TestHostRouteTTLChecksum(t *testing.T) {
	p := routedPlane(t)
	for ttl := 2; ttl < 256; ttl++ {
		in := ipv4{src: podB, dst: podA, proto: protoUDP, sport: 1, dport: 2, payload: []byte{byte(ttl)}, id: uint16(ttl * 257)}.bytes()
		in[ethLen+8] = byte(ttl)
		binary.BigEndian.PutUint16(in[ethLen+10:], 0)
		binary.BigEndian.PutUint16(in[ethLen+10:], checksum(in[ethLen:ethLen+20]))
		ret, out := run(t, p.Objects().HostFromPod, in)
		if ret != actRedirect || int(ttlOf(out)) != ttl-1 {
			t.Fatalf("ttl %d: return %d, ttl after %d", ttl, int32(ret), ttlOf(out))
		}
		if err := checkIP(out); err != nil {
			t.Fatalf("ttl %d: %v", ttl, err)
		}
	}
}

// Not a local pod, TTL about to expire, not IPv4, malformed: the stack's job,
// byte for byte untouched.
func TestHostRouteLeavesToStack(t *testing.T) {
	p := routedPlane(t)
	oneBackend(t, p)
	ttl1 := ipv4{src: podB, dst: podA, proto: protoTCP, sport: 1, dport: 2, tcpFlags: tcpSYN}.bytes()
	ttl1[ethLen+8] = 1
	binary.BigEndian.PutUint16(ttl1[ethLen+10:], 0)
	binary.BigEndian.PutUint16(ttl1[ethLen+10:], checksum(ttl1[ethLen:ethLen+20]))
	ipv6 := make([]byte, ethLen+40+8)
	binary.BigEndian.PutUint16(ipv6[12:], 0x86dd)
	ipv6[ethLen] = 0x60
	arp := make([]byte, ethLen+28)
	binary.BigEndian.PutUint16(arp[12:], 0x0806)
	full := ipv4{src: podB, dst: podA, proto: protoTCP, sport: 40000, dport: 5201, tcpFlags: tcpSYN}.bytes()
	badIHL := append([]byte(nil), full...)
	badIHL[ethLen] = 0x44
	badVersion := append([]byte(nil), full...)
	badVersion[ethLen] = 0x65
	cases := map[string][]byte{
		"outside-world":  ipv4{src: podB, dst: ipOf("10.10.0.1"), proto: protoTCP, sport: 1, dport: 80, tcpFlags: tcpSYN}.bytes(),
		"the-node":       ipv4{src: podB, dst: ipOf("10.10.0.11"), proto: protoUDP, sport: 1, dport: 53}.bytes(),
		"unknown-pod":    ipv4{src: podB, dst: ipOf("192.168.10.99"), proto: protoUDP, sport: 1, dport: 2}.bytes(),
		"ttl-1":          ttl1,
		"ipv6":           ipv6,
		"arp":            arp,
		"ihl-below-5":    badIHL,
		"version-6-in-4": badVersion,
		"ip-without-tcp": full[:ethLen+20+10],
		"half-ip-header": full[:ethLen+10],
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			ret, out, err := p.Objects().HostFromPod.Test(in)
			if name == "half-ip-header" && errors.Is(err, unix.EINVAL) {
				return // the kernel refuses to test-run it (see TestUntouched)
			}
			if err != nil {
				t.Fatal(err)
			}
			if name == "ip-without-tcp" {
				// Truncated L4: not translated, but still an IPv4 packet for
				// a local pod, so it is delivered (its receiver drops it).
				if ret != actRedirect || !bytes.Equal(in[ethLen+12:], out[ethLen+12:]) {
					t.Fatalf("return %d", int32(ret))
				}
				return
			}
			mustOK(t, ret)
			if !bytes.Equal(in, out) {
				t.Fatal("changed a packet it leaves to the stack")
			}
		})
	}
	hs, _ := p.HostStats()
	if hs.TTLExpired != 1 || hs.Stack != 3 {
		t.Fatalf("host stats %+v: want 1 TTL expiry, 3 left to the stack", hs)
	}
	if st, _ := p.Stats(); st.Errors != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A clusterIP packet is translated, then delivered to its backend in the
// same program; the backend's reply is translated back at the backend's
// veth (the client's veth egress is skipped by the redirect), then delivered.
func TestHostRouteService(t *testing.T) {
	p := routedPlane(t)
	oneBackend(t, p)
	for _, proto := range []uint8{protoTCP, protoUDP} {
		req := ipv4{src: podB, dst: vip, proto: proto, sport: 40001, dport: 5201, tcpFlags: tcpSYN, payload: []byte("svc")}
		in := req.bytes()
		ret, out := run(t, p.Objects().HostFromPod, in)
		delivered(t, ret, in, out, macA, nodeMacA)
		expect(t, out, podB, 40001, podA, 5201)

		rep := ipv4{src: podA, dst: podB, proto: proto, sport: 5201, dport: 40001, tcpFlags: tcpSYN | tcpACK, payload: []byte("ok")}
		in = rep.bytes()
		ret, out = run(t, p.Objects().HostFromPod, in)
		delivered(t, ret, in, out, macB, nodeMacB)
		expect(t, out, vip, 5201, podB, 40001)
		// to_pod at pod-b's veth egress (a reply that took the stack) must
		// not translate it a second time.
		ret, out2 := run(t, p.Objects().ToPod, out)
		mustOK(t, ret)
		if !bytes.Equal(out, out2) {
			t.Fatal("to_pod translated an already translated reply")
		}
	}
	// Hairpin: pod-a to its own service lands in pod-a, from 169.254.42.1,
	// and its answer comes back from the clusterIP.
	in := ipv4{src: podA, dst: vip, proto: protoTCP, sport: 41000, dport: 5201, tcpFlags: tcpSYN}.bytes()
	ret, out := run(t, p.Objects().HostFromPod, in)
	delivered(t, ret, in, out, macA, nodeMacA)
	expect(t, out, hairpin, 41000, podA, 5201)
	in = ipv4{src: podA, dst: hairpin, proto: protoTCP, sport: 5201, dport: 41000, tcpFlags: tcpSYN | tcpACK}.bytes()
	ret, out = run(t, p.Objects().HostFromPod, in)
	delivered(t, ret, in, out, macA, nodeMacA)
	expect(t, out, vip, 5201, podA, 41000)
	// A service without backends: a SYN is refused (turned into an ICMP
	// port unreachable sent back, not host-routed), a later segment dropped.
	if err := p.AddService(dp.Service{VIP: vip, Port: 9, Proto: dp.TCP}); err != nil {
		t.Fatal(err)
	}
	ret, out = run(t, p.Objects().HostFromPod, ipv4{src: podB, dst: vip, proto: protoTCP, sport: 1, dport: 9, tcpFlags: tcpSYN}.bytes())
	if d, _ := decode(out); ret != actRedirect || d.proto != protoICM || d.src != vip || d.dst != podB {
		t.Fatalf("return %d, packet %+v: want the SYN sent back as ICMP from the clusterIP", int32(ret), d)
	}
	checkICMP(t, out)
	ret, _ = run(t, p.Objects().HostFromPod, ipv4{src: podB, dst: vip, proto: protoTCP, sport: 1, dport: 9, tcpFlags: tcpACK}.bytes())
	if ret != actShot {
		t.Fatalf("return %d, want TC_ACT_SHOT for a later segment to a service without backends", int32(ret))
	}
	st, _ := p.Stats()
	if st.DNAT != 3 || st.RNAT != 3 || st.Errors != 0 || st.Rejects != 1 || st.NoBackend != 1 {
		t.Fatalf("stats %+v: want 3 DNAT, 3 reverse NAT", st)
	}
}

// macvlan-ebpf and bridge ports: from_pod_l2 addresses a translated packet
// to its backend's MAC when the backend is a same-segment pod (route without
// ifindex); anything untranslated, a hairpin, and every packet through the
// plain from_pod keep their MACs.
func TestFromPodL2Rewrite(t *testing.T) {
	p := testPlane(t)
	oneBackend(t, p)
	if err := p.AddRoute(dp.PodRoute{IP: podA, MAC: macA}); err != nil {
		t.Fatal(err)
	}
	in := ipv4{src: podB, dst: vip, proto: protoUDP, sport: 40000, dport: 5201, payload: []byte("x")}.bytes()
	ret, out := run(t, p.Objects().FromPodL2, in)
	mustOK(t, ret)
	if !bytes.Equal(out[0:6], macA) || !bytes.Equal(out[6:12], in[6:12]) || ttlOf(out) != ttlOf(in) {
		t.Fatalf("MACs %s <- %s TTL %d: want %s <- the sender's, TTL untouched", net.HardwareAddr(out[0:6]), net.HardwareAddr(out[6:12]), ttlOf(out), macA)
	}
	expect(t, out, podB, 40000, podA, 5201)
	mustValid(t, out)
	in = ipv4{src: podB, dst: podA, proto: protoUDP, sport: 40000, dport: 5201}.bytes()
	ret, out = run(t, p.Objects().FromPodL2, in)
	mustOK(t, ret)
	if !bytes.Equal(in, out) {
		t.Fatal("an untranslated packet changed")
	}
	// A veth route (with an ifindex) is host routing's, not an L2 neighbour.
	if err := p.AddRoute(dp.PodRoute{IP: podA, MAC: macA, HostIfindex: 7, HostMAC: nodeMacA}); err != nil {
		t.Fatal(err)
	}
	in = ipv4{src: podB, dst: vip, proto: protoUDP, sport: 40002, dport: 5201}.bytes()
	_, out = run(t, p.Objects().FromPodL2, in)
	if !bytes.Equal(out[0:12], in[0:12]) {
		t.Fatal("from_pod rewrote MACs for a veth pod")
	}
	// The plain from_pod (veth-routed endpoints) never looks routes up.
	if err := p.AddRoute(dp.PodRoute{IP: podA, MAC: macA}); err != nil {
		t.Fatal(err)
	}
	in = ipv4{src: podB, dst: vip, proto: protoUDP, sport: 40003, dport: 5201}.bytes()
	if _, out = run(t, p.Objects().FromPod, in); !bytes.Equal(out[0:12], in[0:12]) {
		t.Fatal("from_pod (not _l2) rewrote MACs")
	}
	// A hairpin (pod-a to its own service) goes through the node: a bridge
	// never sends a frame back out of the port it came in on.
	in = ipv4{src: podA, dst: vip, proto: protoUDP, sport: 40004, dport: 5201}.bytes()
	if _, out = run(t, p.Objects().FromPodL2, in); !bytes.Equal(out[0:12], in[0:12]) {
		t.Fatal("from_pod_l2 addressed a hairpin to the pod's own MAC")
	}
	if hs, _ := p.HostStats(); hs.L2 != 1 || hs.Redirected != 0 {
		t.Fatalf("host stats %+v", hs)
	}
}

func TestPodRouteAPI(t *testing.T) {
	p := routedPlane(t)
	bad := []dp.PodRoute{
		{IP: ipOf("fe80::1"), MAC: macA},
		{IP: ipOf("ff02::1"), MAC: macA},
		{IP: ipOf("::ffff:10.0.0.1"), MAC: macA},
		{IP: podA, MAC: net.HardwareAddr{1, 2, 3}},
		{IP: podA, MAC: macA, HostIfindex: 3},
	}
	for _, r := range bad {
		if err := p.AddRoute(r); err == nil {
			t.Errorf("%+v accepted", r)
		}
	}
	rs, err := p.Routes()
	if err != nil || len(rs) != 2 || rs[0].IP != podA || rs[0].HostIfindex != 41 || rs[0].MAC.String() != macA.String() || rs[1].HostMAC.String() != nodeMacB.String() {
		t.Fatalf("Routes = %+v, %v", rs, err)
	}
	if err := p.DelRoute(podA); err != nil {
		t.Fatal(err)
	}
	if err := p.DelRoute(podA); !errors.Is(err, dp.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	in := ipv4{src: podB, dst: podA, proto: protoUDP, sport: 1, dport: 2}.bytes()
	ret, out := run(t, p.Objects().HostFromPod, in)
	mustOK(t, ret)
	if !bytes.Equal(in, out) {
		t.Fatal("a deleted route is still used")
	}
}

// kube-proxy on a veth-ebpf node: a client pod's packet to a clusterIP goes
// to the node's stack (no Service in the maps), whose DNAT sends it to a
// backend pod of the same node through that pod's node end (host_to_pod at
// egress). The backend's replies must then go back through the stack (its
// conntrack restores the clusterIP), not be redirected to the client. A
// flow between the two pods that host routing carried is still redirected.
func TestHostRouteRepliesOfStackNAT(t *testing.T) {
	p := routedPlane(t)
	for _, proto := range []uint8{protoTCP, protoUDP} {
		// Before any such flow: a reply is redirected as ever.
		rep := ipv4{src: podA, dst: podB, proto: proto, sport: 5201, dport: 40002, tcpFlags: tcpSYN | tcpACK}.bytes()
		ret, out := run(t, p.Objects().HostFromPod, rep)
		delivered(t, ret, rep, out, macB, nodeMacB)
		// The stack forwards pod-b's first packet (after its DNAT) to pod-a.
		first := ipv4{src: podB, dst: podA, proto: proto, sport: 40002, dport: 5201, tcpFlags: tcpSYN}.bytes()
		ret, out = run(t, p.Objects().HostToPod, first)
		mustOK(t, ret)
		if !bytes.Equal(first, out) {
			t.Fatal("host_to_pod changed a packet it has no translation for")
		}
		// Its replies now go to the stack, untouched.
		for i := 0; i < 2; i++ {
			ret, out = run(t, p.Objects().HostFromPod, rep)
			mustOK(t, ret)
			if !bytes.Equal(rep, out) {
				t.Fatalf("proto %d: a reply of a flow the stack forwarded was changed", proto)
			}
		}
		// A mid-flow TCP packet through the stack (no SYN) notes nothing,
		// and other flows between the pods are still host-routed.
		mid := ipv4{src: podB, dst: podA, proto: proto, sport: 40003, dport: 5201, tcpFlags: tcpACK}.bytes()
		if proto == protoTCP {
			run(t, p.Objects().HostToPod, mid)
		}
		other := ipv4{src: podA, dst: podB, proto: proto, sport: 5201, dport: 40003, tcpFlags: tcpACK}.bytes()
		ret, out = run(t, p.Objects().HostFromPod, other)
		delivered(t, ret, other, out, macB, nodeMacB)
	}
	hs, _ := p.HostStats()
	if hs.Stack != 4 || hs.Redirected != 4 {
		t.Fatalf("host stats %+v: want 4 replies left to the stack, 4 redirected", hs)
	}
}
