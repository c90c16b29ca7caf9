package tcbpf_test

// BPF_PROG_TEST_RUN tests of the IPv6 Service path (bpf/lb6.h): crafted
// frames through from_pod / to_pod, read back by packet6_test.go's own
// decoder and checksum. No namespace, pin or traffic: programs and private
// maps only.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/svcsync"
	dp "github.com/vnetlab/vnetlab/internal/datapath/tcbpf"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

var (
	vip6    = ipOf("fd00:96::100")
	back6   = ipOf("fd00:10::a") // the backend, listening on backPort6
	client6 = ipOf("fd00:10::b")
)

const (
	svcPort6  = 5201
	backPort6 = 8080 // a port change too, so both checksum terms move
)

// oneBackend6 adds [fd00:96::100]:5201 tcp and udp -> [fd00:10::a]:8080.
func oneBackend6(t *testing.T, p *dp.Plane) {
	t.Helper()
	for _, proto := range []dp.Proto{dp.TCP, dp.UDP} {
		s := dp.Service{VIP: vip6, Port: svcPort6, Proto: proto, Backends: []dp.Backend{{IP: back6, Port: backPort6}}}
		if err := p.AddService(s); err != nil {
			t.Fatal(err)
		}
	}
}

func expect6(t *testing.T, out []byte, src netip.Addr, sport uint16, dst netip.Addr, dport uint16) decoded6 {
	t.Helper()
	d, err := decode6(out)
	if err != nil {
		t.Fatal(err)
	}
	if d.src != src || d.dst != dst || d.sport != sport || d.dport != dport {
		t.Fatalf("got [%s]:%d -> [%s]:%d, want [%s]:%d -> [%s]:%d", d.src, d.sport, d.dst, d.dport, src, sport, dst, dport)
	}
	return d
}

func mustValid6(t *testing.T, out []byte) {
	t.Helper()
	if err := checkL4v6(out); err != nil {
		t.Fatal(err)
	}
}

// mustUntouched: passed on, byte for byte.
func mustUntouched(t *testing.T, ret uint32, in, out []byte) {
	t.Helper()
	mustOK(t, ret)
	if !bytes.Equal(in, out) {
		t.Fatalf("packet changed:\n in %x\nout %x", in, out)
	}
}

func stats6(t *testing.T, p *dp.Plane) dp.Stats6 {
	t.Helper()
	s, err := p.Stats6()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A TCP SYN (and the rest of a flow, and UDP) to an IPv6 clusterIP leaves
// the pod DNATed to the backend with a correct checksum; the backend's
// reply arrives reverse-NATed to the clusterIP, its checksum correct too.
func TestIPv6DNATAndReverse(t *testing.T) {
	p := testPlane(t)
	oneBackend6(t, p)
	payload := []byte("hello, IPv6 service")
	cases := []struct {
		name  string
		proto uint8
		flags uint8
		data  []byte
	}{
		{"tcp-syn", protoTCP, tcpSYN, nil},
		{"tcp-ack", protoTCP, tcpACK, nil},
		{"tcp-psh-ack-data", protoTCP, tcpPSH | tcpACK, payload},
		{"udp", protoUDP, 0, payload},
		{"udp-odd-length", protoUDP, 0, []byte("abc")},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sport := uint16(41000 + i)
			in := ipv6{src: client6, dst: vip6, proto: c.proto, sport: sport, dport: svcPort6, tcpFlags: c.flags, payload: c.data}.bytes()
			ret, out := run(t, p.Objects().FromPod, in)
			mustOK(t, ret)
			d := expect6(t, out, client6, sport, back6, backPort6)
			mustValid6(t, out)
			if !bytes.HasSuffix(d.l4, c.data) || len(out) != len(in) {
				t.Fatal("payload or length changed")
			}
			replyFlags := uint8(tcpSYN | tcpACK)
			if c.flags != tcpSYN {
				replyFlags = tcpACK
			}
			reply := ipv6{src: back6, dst: client6, proto: c.proto, sport: backPort6, dport: sport, tcpFlags: replyFlags, payload: c.data}.bytes()
			ret, out = run(t, p.Objects().ToPod, reply)
			mustOK(t, ret)
			expect6(t, out, vip6, svcPort6, client6, sport)
			mustValid6(t, out)
		})
	}
	st := stats6(t, p)
	if st.DNAT != uint64(len(cases)) || st.RNAT != uint64(len(cases)) || st.Errors != 0 {
		t.Fatalf("stats %+v: want %d DNAT and RNAT, no errors", st, len(cases))
	}
	// The IPv4 counters saw none of it.
	if s4, err := p.Stats(); err != nil || s4.DNAT != 0 || s4.RNAT != 0 {
		t.Fatalf("IPv4 stats %+v, %v: want none", s4, err)
	}
	// An IPv4 packet to the same port meets no Service: untouched.
	in := ipv4{src: podB, dst: vip, proto: protoTCP, sport: 40000, dport: svcPort6, tcpFlags: tcpSYN}.bytes()
	ret, out := run(t, p.Objects().FromPod, in)
	mustUntouched(t, ret, in, out)
}

// A pod reaching its own IPv6 Service lands on itself: the source becomes
// the IPv6 hairpin address; to_pod leaves that request alone; the pod's
// reply (leaving it, through from_pod) is translated back to clusterIP ->
// pod, checksums right; its RST ends the flow (the next reply to the
// hairpin address is no longer translated).
func TestIPv6Hairpin(t *testing.T) {
	p := testPlane(t)
	oneBackend6(t, p)
	hairpin6 := ipOf(dp.HairpinIP6)
	req := ipv6{src: back6, dst: vip6, proto: protoTCP, sport: 41000, dport: svcPort6, tcpFlags: tcpSYN}.bytes()
	ret, out := run(t, p.Objects().FromPod, req)
	mustOK(t, ret)
	expect6(t, out, hairpin6, 41000, back6, backPort6)
	mustValid6(t, out)
	ret, out2 := run(t, p.Objects().ToPod, out)
	mustUntouched(t, ret, out, out2)
	for _, flags := range []uint8{tcpSYN | tcpACK, tcpRST} {
		rep := ipv6{src: back6, dst: hairpin6, proto: protoTCP, sport: backPort6, dport: 41000, tcpFlags: flags}.bytes()
		ret, out = run(t, p.Objects().FromPod, rep)
		mustOK(t, ret)
		expect6(t, out, vip6, svcPort6, back6, 41000)
		mustValid6(t, out)
	}
	rep := ipv6{src: back6, dst: hairpin6, proto: protoTCP, sport: backPort6, dport: 41000, tcpFlags: tcpACK}.bytes()
	ret, out = run(t, p.Objects().FromPod, rep)
	mustUntouched(t, ret, rep, out)
	// A client that is not the backend keeps its address.
	ret, out = run(t, p.Objects().FromPod, ipv6{src: client6, dst: vip6, proto: protoTCP, sport: 41001, dport: svcPort6, tcpFlags: tcpSYN}.bytes())
	mustOK(t, ret)
	expect6(t, out, client6, 41001, back6, backPort6)

	// At a tc ingress (TestHairpinBackToSender's), a hairpinned request
	// and its reply go back out of the interface they came in by.
	atIngress := func(in []byte) (uint32, []byte) {
		t.Helper()
		out := make([]byte, len(in)+256)
		ctx := make([]byte, 48)
		binary.LittleEndian.PutUint32(ctx[36:], 1) // ingress_ifindex
		binary.LittleEndian.PutUint32(ctx[40:], 1) // ifindex: the run's loopback
		ret, err := p.Objects().FromPod.Run(&ebpf.RunOptions{Data: in, DataOut: out, Context: ctx})
		if err != nil {
			t.Fatalf("BPF_PROG_TEST_RUN: %v", err)
		}
		return ret, out[:len(in)]
	}
	for _, in := range [][]byte{ipv6{src: back6, dst: vip6, proto: protoUDP, sport: 41002, dport: svcPort6}.bytes(),
		ipv6{src: back6, dst: hairpin6, proto: protoUDP, sport: backPort6, dport: 41002}.bytes()} {
		ret, out := atIngress(in)
		if ret != actRedirect || !bytes.Equal(out[0:6], in[6:12]) || !bytes.Equal(out[6:12], in[0:6]) {
			t.Fatalf("hairpin at a tc ingress: return code %d, MACs %x -> %x; want TC_ACT_REDIRECT with the MACs swapped", int32(ret), in[:12], out[:12])
		}
		mustValid6(t, out)
	}
}

// Services list, update and delete in either family, one code path.
func TestIPv6ServiceLifecycle(t *testing.T) {
	p := testPlane(t)
	oneBackend(t, p)
	oneBackend6(t, p)
	list, err := p.ListServices()
	if err != nil || len(list) != 4 {
		t.Fatalf("ListServices = %+v, %v: want 4", list, err)
	}
	if got := list[2].String(); got != "[fd00:96::100]:5201/tcp" || list[2].Backends[0] != (dp.Backend{IP: back6, Port: backPort6}) {
		t.Fatalf("third Service %s %+v: want the IPv6 one, IPv4 first", got, list[2].Backends)
	}
	other := ipOf("fd00:10::c")
	if err := p.UpdateService(dp.Service{VIP: vip6, Port: svcPort6, Proto: dp.TCP, Backends: []dp.Backend{{IP: other, Port: 80}}}); err != nil {
		t.Fatal(err)
	}
	_, out := run(t, p.Objects().FromPod, ipv6{src: client6, dst: vip6, proto: protoTCP, sport: 42000, dport: svcPort6, tcpFlags: tcpSYN}.bytes())
	expect6(t, out, client6, 42000, other, 80)
	mustValid6(t, out)
	flows, err := p.Flows(0)
	if want := (dp.Flow{Client: netip.AddrPortFrom(client6, 42000), Service: netip.AddrPortFrom(vip6, svcPort6), Proto: dp.TCP,
		Backend: netip.AddrPortFrom(other, 80)}); err != nil || len(flows) != 1 || flows[0] != want {
		t.Fatalf("Flows = %+v, %v: want %+v", flows, err, want)
	}
	if err := p.DelService(vip6, svcPort6, dp.TCP); err != nil {
		t.Fatal(err)
	}
	in := ipv6{src: client6, dst: vip6, proto: protoTCP, sport: 42001, dport: svcPort6, tcpFlags: tcpSYN}.bytes()
	ret, out := run(t, p.Objects().FromPod, in)
	mustUntouched(t, ret, in, out)
	if list, _ = p.ListServices(); len(list) != 3 {
		t.Fatalf("after delete: %+v", list)
	}
}

// NDP, echo and other informational ICMPv6 pass untouched, in both
// directions, even when addressed to a clusterIP or a backend.
func TestIPv6NDPUntouched(t *testing.T) {
	p := testPlane(t)
	oneBackend6(t, p)
	// A flow, so that conntrack entries exist for the addresses involved.
	run(t, p.Objects().FromPod, ipv6{src: client6, dst: vip6, proto: protoTCP, sport: 43000, dport: svcPort6, tcpFlags: tcpSYN}.bytes())
	target := vip6.As16()
	solicited := ipOf("ff02::1:ff00:100")
	pkts := map[string]ipv6{
		"neighbour-solicitation": icmp6Info(icmp6NS, client6, solicited, append(make([]byte, 4), target[:]...)),
		"neighbour-advert":       icmp6Info(icmp6NA, back6, client6, append([]byte{0x60, 0, 0, 0}, target[:]...)),
		"router-solicitation":    icmp6Info(icmp6RS, ipOf("fe80::2"), ipOf("ff02::2"), make([]byte, 4)),
		"router-advert":          icmp6Info(icmp6RA, ipOf("fe80::1"), ipOf("ff02::1"), make([]byte, 12)),
		"echo-to-clusterip":      icmp6Info(icmp6Echo, client6, vip6, []byte{0, 1, 0, 1, 'p', 'i', 'n', 'g'}),
		"echo-from-backend":      icmp6Info(icmp6Echo, back6, client6, []byte{0, 1, 0, 1}),
	}
	for name, pkt := range pkts {
		t.Run(name, func(t *testing.T) {
			in := pkt.bytes()
			for _, prog := range []string{"from_pod", "to_pod"} {
				ret, out := run(t, progByName(t, p, prog), in)
				mustUntouched(t, ret, in, out)
			}
		})
	}
}

func progByName(t *testing.T, p *dp.Plane, name string) *ebpf.Program {
	t.Helper()
	switch name {
	case "from_pod":
		return p.Objects().FromPod
	case "to_pod":
		return p.Objects().ToPod
	}
	t.Fatalf("no program %s", name)
	return nil
}

// Hostile IPv6 packets to the clusterIP: each is translated correctly or
// passed on untouched (to the stack), never misrouted; the counters say
// which.
func TestIPv6Hostile(t *testing.T) {
	p := testPlane(t)
	oneBackend6(t, p)
	syn := func(sport uint16, ext ...ext6) ipv6 {
		return ipv6{src: client6, dst: vip6, proto: protoTCP, sport: sport, dport: svcPort6, tcpFlags: tcpSYN, ext: ext, payload: []byte("x")}
	}
	translated := map[string]ipv6{
		"hop-by-hop":              syn(44001, pad6(nhHop, 1)),
		"three-extension-headers": syn(44002, pad6(nhHop, 1), pad6(nhDest, 2), routing6()),
		"four-at-the-bound":       syn(44003, pad6(nhHop, 1), pad6(nhDest, 1), routing6(), pad6(nhDest, 3)),
		"atomic-fragment":         syn(44004, frag6(0, false, 7)),
		"jumbogram":               func() ipv6 { j := syn(44005, jumbo6(0)); j.jumbo = true; return j }(),
		"udp-after-extensions":    {src: client6, dst: vip6, proto: protoUDP, sport: 44006, dport: svcPort6, ext: []ext6{pad6(nhHop, 1), pad6(nhDest, 1)}, payload: []byte("dgram")},
	}
	for name, pkt := range translated {
		t.Run(name, func(t *testing.T) {
			in := pkt.bytes()
			ret, out := run(t, p.Objects().FromPod, in)
			mustOK(t, ret)
			if len(out) != len(in) {
				t.Fatalf("length %d, want %d", len(out), len(in))
			}
			expect6(t, out, client6, pkt.sport, back6, backPort6)
			mustValid6(t, out)
		})
	}

	before := stats6(t, p)
	long := syn(44100, pad6(nhHop, 1), pad6(nhDest, 1), routing6(), pad6(nhDest, 1), pad6(nhDest, 1))
	whole := syn(44101, pad6(nhHop, 1)).bytes()
	tcpAt := len(whole) - 21 // the TCP header of whole
	untouched := map[string][]byte{
		"five-beyond-the-bound":     long.bytes(),
		"cut-in-the-ipv6-header":    whole[:ethLen+30],
		"cut-in-an-extension":       whole[:ethLen+40+4],
		"cut-in-the-tcp-header":     whole[:tcpAt+12],
		"authentication-header":     syn(44102, ext6{typ: nhAH, body: make([]byte, 15)}).bytes(),
		"later-fragment-never-seen": ipv6{src: client6, dst: vip6, proto: protoUDP, ext: []ext6{frag6(100, false, 99)}, noL4: true, payload: make([]byte, 16)}.bytes(),
		"not-version-6":             func() []byte { b := syn(44103).bytes(); b[ethLen] = 0x40; return b }(),
	}
	cutRuns := 0 // cut packets the programs saw
	for name, in := range untouched {
		t.Run(name, func(t *testing.T) {
			for _, prog := range []string{"from_pod", "to_pod"} {
				// The kernel refuses to test-run a frame shorter than the
				// IPv6 header (EINVAL before the program runs); if it
				// runs, the probe counts as a run.
				if len(in) < ethLen+40 {
					if _, _, err := progByName(t, p, prog).Test(in); errors.Is(err, unix.EINVAL) {
						t.Logf("%d-byte IPv6 frame: the kernel refuses to test-run it (EINVAL)", len(in))
						continue
					}
					cutRuns++
				}
				ret, out := run(t, progByName(t, p, prog), in)
				mustUntouched(t, ret, in, out)
				if strings.HasPrefix(name, "cut-") {
					cutRuns++
				}
			}
		})
	}
	after := stats6(t, p)
	if n := after.ExtHdrPass - before.ExtHdrPass; n != 2 {
		t.Errorf("exthdr_chain_passed rose by %d, want 2 (the five-header packet, through each program)", n)
	}
	if n := after.TruncPass - before.TruncPass; n != uint64(cutRuns) || cutRuns < 4 {
		t.Errorf("truncated_passed rose by %d, want %d (the runs of cut packets)", n, cutRuns)
	}
	if after.DNAT != before.DNAT || after.Errors != 0 {
		t.Errorf("stats %+v after %+v: nothing translated, no errors", after, before)
	}
}

// A fragmented UDP datagram to the clusterIP: the first fragment is
// translated (ports and checksum) and leaves its ports for the later one,
// whose addresses are translated; the backend's fragmented reply likewise.
func TestIPv6Fragments(t *testing.T) {
	p := testPlane(t)
	oneBackend6(t, p)
	const id = 0xabcd1234
	first := ipv6{src: client6, dst: vip6, proto: protoUDP, sport: 45000, dport: svcPort6, ext: []ext6{frag6(0, true, id)}, payload: make([]byte, 24)}
	ret, out := run(t, p.Objects().FromPod, first.bytes())
	mustOK(t, ret)
	expect6(t, out, client6, 45000, back6, backPort6)
	mustValid6(t, out)

	later := ipv6{src: client6, dst: vip6, proto: protoUDP, ext: []ext6{frag6(4, false, id)}, noL4: true, payload: []byte("the rest of it")}
	in := later.bytes()
	ret, out = run(t, p.Objects().FromPod, in)
	mustOK(t, ret)
	d, err := decode6(out)
	if err != nil || !d.later || d.src != client6 || d.dst != back6 || !bytes.Equal(out[len(out)-14:], in[len(in)-14:]) {
		t.Fatalf("later fragment: %+v %v: want client -> backend, payload as it was", d, err)
	}

	// Another datagram's later fragment (another id) is not this flow's.
	other := later
	other.ext = []ext6{frag6(4, false, id+1)}
	in = other.bytes()
	ret, out = run(t, p.Objects().FromPod, in)
	mustUntouched(t, ret, in, out)

	reply := ipv6{src: back6, dst: client6, proto: protoUDP, sport: backPort6, dport: 45000, ext: []ext6{frag6(0, true, 77)}, payload: make([]byte, 16)}
	ret, out = run(t, p.Objects().ToPod, reply.bytes())
	mustOK(t, ret)
	expect6(t, out, vip6, svcPort6, client6, 45000)
	mustValid6(t, out)
	replyLater := ipv6{src: back6, dst: client6, proto: protoUDP, ext: []ext6{frag6(2, false, 77)}, noL4: true, payload: []byte("tail")}
	_, out = run(t, p.Objects().ToPod, replyLater.bytes())
	if d, err := decode6(out); err != nil || d.src != vip6 || d.dst != client6 {
		t.Fatalf("reply's later fragment: %+v %v: want from the clusterIP", d, err)
	}
	if st := stats6(t, p); st.Frags != 2 {
		t.Fatalf("fragments %d, want 2", st.Frags)
	}
}

// quoted6 reads an ICMPv6 error's quoted addresses and ports.
func quoted6(t *testing.T, out []byte) (src netip.Addr, sport uint16, dst netip.Addr, dport uint16) {
	t.Helper()
	d, err := decode6(out)
	if err != nil || d.proto != protoICMP6 || len(d.l4) < 8+44 {
		t.Fatalf("not an ICMPv6 error with a quote: %+v %v", d, err)
	}
	q := d.l4[8:]
	return netip.AddrFrom16([16]byte(q[8:24])), binary.BigEndian.Uint16(q[40:]),
		netip.AddrFrom16([16]byte(q[24:40])), binary.BigEndian.Uint16(q[42:])
}

// ICMPv6 errors about a translated flow are translated back: the client
// hears of its clusterIP flow (quote and outer source), the backend of its
// reply. Errors quoting a cut-off packet, or no known flow, pass untouched.
func TestIPv6ICMPErrors(t *testing.T) {
	p := testPlane(t)
	oneBackend6(t, p)
	const sport = 46000
	_, out := run(t, p.Objects().FromPod, ipv6{src: client6, dst: vip6, proto: protoUDP, sport: sport, dport: svcPort6, payload: []byte("q")}.bytes())
	sent := ipv6{src: client6, dst: back6, proto: protoUDP, sport: sport, dport: backPort6, payload: []byte("q")} // as it left
	expect6(t, out, client6, sport, back6, backPort6)

	for _, typ := range []uint8{icmp6Unreach, icmp6TooBig} {
		// From the backend: port unreachable / packet too big, to the client.
		in := icmp6Error(typ, 4, back6, client6, sent, 1232).bytes()
		ret, out := run(t, p.Objects().ToPod, in)
		mustOK(t, ret)
		d, _ := decode6(out)
		if d.src != vip6 || d.dst != client6 {
			t.Fatalf("type %d: outer %s -> %s, want the clusterIP -> the client", typ, d.src, d.dst)
		}
		qs, qsp, qd, qdp := quoted6(t, out)
		if qs != client6 || qsp != sport || qd != vip6 || qdp != svcPort6 {
			t.Fatalf("type %d: quote [%s]:%d -> [%s]:%d, want the client -> the clusterIP", typ, qs, qsp, qd, qdp)
		}
		mustValid6(t, out)
	}

	// From a router on the way (outer source not the backend): quote only.
	router := ipOf("fd00:1::1")
	_, out = run(t, p.Objects().ToPod, icmp6Error(3, 0, router, client6, sent, 1232).bytes())
	if d, _ := decode6(out); d.src != router {
		t.Fatalf("time exceeded from a router: outer source %s, want the router's", d.src)
	}
	if _, _, qd, qdp := quoted6(t, out); qd != vip6 || qdp != svcPort6 {
		t.Fatalf("time exceeded: quoted destination [%s]:%d", qd, qdp)
	}
	mustValid6(t, out)

	// From the client, about a reply it got from the clusterIP: towards the backend.
	gotReply := ipv6{src: vip6, dst: client6, proto: protoUDP, sport: svcPort6, dport: sport, payload: []byte("r")}
	ret, out := run(t, p.Objects().FromPod, icmp6Error(icmp6Unreach, 4, client6, vip6, gotReply, 1232).bytes())
	mustOK(t, ret)
	if d, _ := decode6(out); d.dst != back6 {
		t.Fatalf("client's error: outer destination %s, want the backend", d.dst)
	}
	if qs, qsp, _, _ := quoted6(t, out); qs != back6 || qsp != backPort6 {
		t.Fatalf("client's error: quoted source [%s]:%d, want the backend", qs, qsp)
	}
	mustValid6(t, out)

	before := stats6(t, p)
	untouched := map[string][]byte{
		"quote-cut-before-ports": icmp6Error(icmp6Unreach, 4, back6, client6, sent, 40+2).bytes(),
		"quote-cut-in-header":    icmp6Error(icmp6Unreach, 4, back6, client6, sent, 20).bytes(),
		"quote-of-no-flow":       icmp6Error(icmp6Unreach, 4, back6, client6, ipv6{src: client6, dst: back6, proto: protoUDP, sport: 1, dport: backPort6}, 1232).bytes(),
	}
	for name, in := range untouched {
		t.Run(name, func(t *testing.T) {
			ret, out := run(t, p.Objects().ToPod, in)
			mustUntouched(t, ret, in, out)
		})
	}
	if after := stats6(t, p); after.ICMP != before.ICMP || after.TruncPass-before.TruncPass != 2 {
		t.Fatalf("stats %+v after %+v: want no ICMP translated, 2 cut quotes", after, before)
	}
}

// ICMPv6 errors of a hairpinned flow (a pod reaching itself through its
// Service) both leave the pod through from_pod and are translated, the
// hairpin address too: the pod's error about the request it got (sent to
// the hairpin address) comes back as an error from the clusterIP about pod
// -> clusterIP; its error about the reply it got goes back to itself from
// the hairpin address, quoting pod -> hairpin address, as its backend side
// saw the flow. Checksums right.
func TestIPv6HairpinICMPErrors(t *testing.T) {
	p := testPlane(t)
	oneBackend6(t, p)
	hairpin6 := ipOf(dp.HairpinIP6)
	const sport = 46100
	_, out := run(t, p.Objects().FromPod, ipv6{src: back6, dst: vip6, proto: protoUDP, sport: sport, dport: svcPort6, payload: []byte("q")}.bytes())
	expect6(t, out, hairpin6, sport, back6, backPort6)
	cases := []struct {
		name           string
		err            ipv6 // from the pod, leaving it
		src, dst       netip.Addr
		qs, qd         netip.Addr
		qsport, qdport uint16
	}{
		{"about the request (backend side)",
			icmp6Error(icmp6Unreach, 4, back6, hairpin6, ipv6{src: hairpin6, dst: back6, proto: protoUDP, sport: sport, dport: backPort6, payload: []byte("q")}, 1232),
			vip6, back6, back6, vip6, sport, svcPort6},
		{"about the reply (client side)",
			icmp6Error(icmp6Unreach, 4, back6, vip6, ipv6{src: vip6, dst: back6, proto: protoUDP, sport: svcPort6, dport: sport, payload: []byte("r")}, 1232),
			hairpin6, back6, back6, hairpin6, backPort6, sport},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ret, out := run(t, p.Objects().FromPod, c.err.bytes())
			mustOK(t, ret)
			if d, _ := decode6(out); d.src != c.src || d.dst != c.dst {
				t.Fatalf("outer %s -> %s, want %s -> %s", d.src, d.dst, c.src, c.dst)
			}
			if qs, qsp, qd, qdp := quoted6(t, out); qs != c.qs || qsp != c.qsport || qd != c.qd || qdp != c.qdport {
				t.Fatalf("quote [%s]:%d -> [%s]:%d, want [%s]:%d -> [%s]:%d", qs, qsp, qd, qdp, c.qs, c.qsport, c.qd, c.qdport)
			}
			mustValid6(t, out)
		})
	}
	if st := stats6(t, p); st.ICMP != 2 || st.Errors != 0 {
		t.Fatalf("stats %+v: want 2 ICMPv6 errors translated, no errors", st)
	}
}

// A UDP checksum that computes to 0 after translation is sent as 0xffff
// (0 would mean "none", illegal in IPv6).
func TestIPv6UDPChecksumNeverBecomesZero(t *testing.T) {
	p := testPlane(t)
	oneBackend6(t, p)
	for x := 0; x < 1<<16; x++ {
		pl := []byte{byte(x >> 8), byte(x)}
		after := ipv6{src: client6, dst: back6, proto: protoUDP, sport: 47000, dport: backPort6, payload: pl}.l4()
		binary.BigEndian.PutUint16(after[6:], 0)
		if csumFold(csumAdd(pseudo6(client6, back6, protoUDP, len(after)), after)) != 0 {
			continue
		}
		req := ipv6{src: client6, dst: vip6, proto: protoUDP, sport: 47000, dport: svcPort6, payload: pl}
		ret, out := run(t, p.Objects().FromPod, req.bytes())
		mustOK(t, ret)
		d := expect6(t, out, client6, 47000, back6, backPort6)
		if got := binary.BigEndian.Uint16(d.l4[6:]); got != 0xffff {
			t.Fatalf("checksum %#04x, want 0xffff", got)
		}
		mustValid6(t, out)
		return
	}
	t.Fatal("found no payload whose translated checksum folds to zero")
}

// A dual-stack Service is two entries, one per clusterIP, and the one
// reconciler (svcsync) writes, updates and deletes both on a real plane;
// the IPv6 one translates.
func TestDualStackServiceThroughSvcsync(t *testing.T) {
	p := testPlane(t)
	sy, err := svcsync.NewSyncer(p)
	if err != nil {
		t.Fatal(err)
	}
	k4 := svcsync.Key{VIP: vip, Port: svcPort6, Proto: dp.TCP}
	k6 := svcsync.Key{VIP: vip6, Port: svcPort6, Proto: dp.TCP}
	want := svcsync.Entries{
		k4: {{IP: podA, Port: backPort6}},
		k6: {{IP: back6, Port: backPort6}},
	}
	if ch, err := sy.Sync("default/web", want); err != nil || ch.Added != 2 {
		t.Fatalf("sync: %+v, %v: want 2 added", ch, err)
	}
	_, out := run(t, p.Objects().FromPod, ipv6{src: client6, dst: vip6, proto: protoTCP, sport: 48000, dport: svcPort6, tcpFlags: tcpSYN}.bytes())
	expect6(t, out, client6, 48000, back6, backPort6)
	other := ipOf("fd00:10::c")
	want[k6] = []dp.Backend{{IP: other, Port: backPort6}}
	if ch, err := sy.Sync("default/web", want); err != nil || ch.Updated != 1 || ch.Total() != 1 {
		t.Fatalf("resync: %+v, %v: want the IPv6 entry updated in place", ch, err)
	}
	list, err := p.ListServices()
	if err != nil || len(list) != 2 || list[1].VIP != vip6 || list[1].Backends[0].IP != other {
		t.Fatalf("ListServices = %+v, %v", list, err)
	}
	if ch, err := sy.Sync("default/web", nil); err != nil || ch.Deleted != 2 {
		t.Fatalf("delete: %+v, %v: want 2 deleted", ch, err)
	}
}
