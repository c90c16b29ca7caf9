package tcbpf_test

// BPF_PROG_TEST_RUN of what nodeport_in does beyond plain NodePorts
// (bpf/nodeport.h): externalTrafficPolicy Local's External entries, external
// IPs (SNAT to the node's own IP, not the address the client reached),
// sessionAffinity for clients outside the node; and ForgetUDPFlows on the
// flows the programs made (kube-proxy's UDP conntrack cleanup). The
// scratch namespace of nodeport_test.go makes localPod local and remotePod
// remote.

import (
	"net/netip"
	"os"
	"slices"
	"testing"

	dp "github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
)

var extIP = ipOf("203.0.113.250")

// policy Local: outside clients get the External entry (this node's
// endpoint, their address kept); pods reaching the same node port through
// from_pod get the entry for every client (kube-proxy's short-circuit). An
// External entry without backends drops outside clients only.
func TestNodePortExternalEntry(t *testing.T) {
	p := testPlane(t)
	all := []dp.Backend{{IP: remotePod, Port: 8080}}
	if err := p.AddService(dp.Service{VIP: nodeIP, Port: 30080, Proto: dp.TCP, External: true, Backends: []dp.Backend{{IP: localPod, Port: 8080}}}); err != nil {
		t.Fatal(err)
	}
	if err := p.AddService(dp.Service{VIP: nodeIP, Port: 30080, Proto: dp.TCP, HasExternal: true, Backends: all}); err != nil {
		t.Fatal(err)
	}
	ss, err := p.ListServices()
	if err != nil || len(ss) != 2 || ss[0].External || !ss[0].HasExternal || !ss[1].External {
		t.Fatalf("ListServices: %+v, %v: want the entry for every client (marked), then the External one", ss, err)
	}
	inNode(t, func(up0 int) {
		req := ipv4{src: client, dst: nodeIP, proto: protoTCP, sport: 45000, dport: 30080, tcpFlags: tcpSYN, id: 1}
		ret, out := runOn(t, p.Objects().NodeportIn, up0, req.bytes())
		mustOK(t, ret)
		expect(t, out, client, 45000, localPod, 8080)
		// A pod of this node: every endpoint (the remote one here).
		ret, out = run(t, p.Objects().FromPod, ipv4{src: podB, dst: nodeIP, proto: protoTCP, sport: 45001, dport: 30080, tcpFlags: tcpSYN}.bytes())
		mustOK(t, ret)
		expect(t, out, podB, 45001, remotePod, 8080)
		// No endpoint here: outside clients are dropped, pods still served.
		if err := p.UpdateService(dp.Service{VIP: nodeIP, Port: 30080, Proto: dp.TCP, External: true}); err != nil {
			t.Fatal(err)
		}
		req.sport = 45002
		if ret, _ := runOn(t, p.Objects().NodeportIn, up0, req.bytes()); ret != actShot {
			t.Fatalf("external entry without backends: return code %d, want TC_ACT_SHOT", int32(ret))
		}
		ret, out = run(t, p.Objects().FromPod, ipv4{src: podB, dst: nodeIP, proto: protoTCP, sport: 45003, dport: 30080, tcpFlags: tcpSYN}.bytes())
		mustOK(t, ret)
		expect(t, out, podB, 45003, remotePod, 8080)
	})
	if st := npStats(t, p); st.NoBackend != 1 || st.NewFlows != 1 {
		t.Fatalf("stats %+v: want one flow and one no-backend drop", st)
	}
}

// An external IP from outside: a local backend is reached with the
// client's address kept and answered as the external IP; a remote one is
// SNATed to the node's own IP (np_node), whose reply comes back there and
// is turned into externalIP -> client.
func TestExternalIPFromOutside(t *testing.T) {
	p := testPlane(t)
	if err := p.SetNodeIP(nodeIP); err != nil {
		t.Fatal(err)
	}
	for i, be := range []netip.Addr{localPod, remotePod} {
		port := uint16(80 + i)
		if err := p.AddService(dp.Service{VIP: extIP, Port: port, Proto: dp.UDP, Backends: []dp.Backend{{IP: be, Port: 8080}}}); err != nil {
			t.Fatal(err)
		}
	}
	inNode(t, func(up0 int) {
		req := ipv4{src: client, dst: extIP, proto: protoUDP, sport: 46000, dport: 80, payload: []byte("hi"), id: 1}
		ret, out := runOn(t, p.Objects().NodeportIn, up0, req.bytes())
		mustOK(t, ret)
		expect(t, out, client, 46000, localPod, 8080)
		ret, out = runOn(t, p.Objects().NodeportOut, up0, ipv4{src: localPod, dst: client, proto: protoUDP, sport: 8080, dport: 46000, payload: []byte("yo")}.bytes())
		mustOK(t, ret)
		expect(t, out, extIP, 80, client, 46000)
		mustValid(t, out)

		req.dport = 81
		ret, out = runOn(t, p.Objects().NodeportIn, up0, req.bytes())
		if ret != actRedirect {
			t.Fatalf("remote backend: return code %d, want TC_ACT_REDIRECT", int32(ret))
		}
		d, _ := decode(out)
		if d.src != nodeIP || d.dst != remotePod || d.sport < 61000 {
			t.Fatalf("remote backend: %s:%d -> %s:%d, want the node's IP %s:(61000-65535) -> %s:8080", d.src, d.sport, d.dst, d.dport, nodeIP, remotePod)
		}
		ret, out = runOn(t, p.Objects().NodeportIn, up0, ipv4{src: remotePod, dst: nodeIP, proto: protoUDP, sport: 8080, dport: d.sport, payload: []byte("yo")}.bytes())
		if ret != actRedirect {
			t.Fatalf("reply: return code %d, want TC_ACT_REDIRECT", int32(ret))
		}
		expect(t, out, extIP, 81, client, 46000)
		mustValid(t, out)
	})
}

// sessionAffinity for clients outside the node: their new flows (other
// source ports) keep the backend of their first while it lasts; without
// affinity they spread.
func TestNodePortSessionAffinity(t *testing.T) {
	p := testPlane(t)
	bs := []dp.Backend{{IP: localPod, Port: 8080}, {IP: ipOf("10.244.1.6"), Port: 8080}, {IP: ipOf("10.244.1.7"), Port: 8080}}
	s := dp.Service{VIP: nodeIP, Port: 30080, Proto: dp.TCP, Backends: bs}
	if err := p.AddService(s); err != nil {
		t.Fatal(err)
	}
	inNode(t, func(up0 int) {
		sport := uint16(47000)
		spread := func() map[netip.Addr]int {
			seen := map[netip.Addr]int{}
			for range 20 {
				sport++
				ret, out := runOn(t, p.Objects().NodeportIn, up0, ipv4{src: client, dst: nodeIP, proto: protoTCP, sport: sport, dport: 30080, tcpFlags: tcpSYN, id: 1}.bytes())
				mustOK(t, ret)
				d, _ := decode(out)
				seen[d.dst]++
			}
			return seen
		}
		if got := spread(); len(got) < 2 {
			t.Fatalf("without affinity 20 flows went to %v, want them spread", got)
		}
		s.Affinity = 60
		if err := p.UpdateService(s); err != nil {
			t.Fatal(err)
		}
		if got := spread(); len(got) != 1 {
			t.Fatalf("with affinity 20 flows from one client went to %v, want one backend", got)
		}
	})
}

// ForgetUDPFlows, in each family: the UDP flows to a frontend whose
// backend left are forgotten (both directions, pods' and outside clients'),
// so their next datagram gets a live backend; flows to a backend that
// stays, TCP flows and other frontends' flows are kept.
func TestForgetUDPFlows(t *testing.T) {
	for _, f := range npFamilies {
		t.Run(f.name, func(t *testing.T) {
			p := testPlane(t)
			gone, stays := dp.Backend{IP: f.local, Port: 8080}, dp.Backend{IP: f.stays, Port: 8080}
			for _, proto := range []dp.Proto{dp.TCP, dp.UDP} {
				for _, fe := range []netip.Addr{f.vip, f.node} {
					if err := p.AddService(dp.Service{VIP: fe, Port: 80, Proto: proto, Backends: []dp.Backend{gone}}); err != nil {
						t.Fatal(err)
					}
				}
			}
			other := dp.Service{VIP: f.otherVIP, Port: 80, Proto: dp.UDP, Backends: []dp.Backend{gone}}
			if err := p.AddService(other); err != nil {
				t.Fatal(err)
			}
			f.inNode(t, func(up0 int) {
				// pod flows (from_pod) to the clusterIP, UDP and TCP, and to the
				// other Service; an outside flow to the node port.
				podFlow := func(dst netip.Addr, proto uint8, flags uint8) netip.Addr {
					sport := uint16(48000)
					if dst == other.VIP {
						sport = 48002 // its reverse entry must not be the first flow's
					}
					ret, out := run(t, p.Objects().FromPod, f.frame(f.pod, dst, proto, sport, 80, flags, "x"))
					mustOK(t, ret)
					_, d := f.decode(t, out)
					return d.Addr()
				}
				outsideFlow := func() netip.Addr {
					ret, out := runOn(t, p.Objects().NodeportIn, up0, f.frame(f.client, f.node, protoUDP, 48001, 80, 0, "x"))
					mustOK(t, ret)
					_, d := f.decode(t, out)
					return d.Addr()
				}
				podFlow(f.vip, protoUDP, 0)
				podFlow(f.vip, protoTCP, tcpSYN)
				podFlow(other.VIP, protoUDP, 0)
				outsideFlow()
				// The backend leaves both frontends (the Go side updates in place:
				// the flows stay pinned until forgotten).
				for _, proto := range []dp.Proto{dp.TCP, dp.UDP} {
					for _, fe := range []netip.Addr{f.vip, f.node} {
						if err := p.UpdateService(dp.Service{VIP: fe, Port: 80, Proto: proto, Backends: []dp.Backend{stays}}); err != nil {
							t.Fatal(err)
						}
					}
				}
				// A pod's UDP flow moves at its next datagram, before any
				// forgetting (from_pod checks its backend is still the
				// Service's: TestUDPFlowLeavesRemovedBackend); an outside one
				// stays pinned until forgotten.
				if got := podFlow(f.vip, protoUDP, 0); got != stays.IP {
					t.Fatalf("before forgetting, the pod's UDP flow went to %s, want %s", got, stays.IP)
				}
				n, err := p.ForgetUDPFlows(map[netip.AddrPort][]dp.Backend{
					netip.AddrPortFrom(f.vip, 80):  {stays},
					netip.AddrPortFrom(f.node, 80): {stays},
				})
				if err != nil || n != 1 {
					t.Fatalf("ForgetUDPFlows: %d, %v; want 1 flow (the one from outside; the pod's moved already)", n, err)
				}
				if got := podFlow(f.vip, protoUDP, 0); got != stays.IP {
					t.Errorf("pod's UDP flow after forgetting: %s, want %s", got, stays.IP)
				}
				if got := outsideFlow(); got != stays.IP {
					t.Errorf("outside UDP flow after forgetting: %s, want %s", got, stays.IP)
				}
				if got := podFlow(f.vip, protoTCP, tcpACK); got != gone.IP {
					t.Errorf("TCP flow: moved to %s, want it kept on %s (kube-proxy keeps TCP flows)", got, gone.IP)
				}
				if got := podFlow(other.VIP, protoUDP, 0); got != gone.IP {
					t.Errorf("another frontend's UDP flow: moved to %s", got)
				}
			})
			// The reverse entries went with the forward ones: a reply from the
			// backend that left is no longer turned into the clusterIP's.
			ret, out := run(t, p.Objects().ToPod, f.frame(f.local, f.pod, protoUDP, 8080, 48000, 0, "late"))
			mustOK(t, ret)
			f.expect(t, out, f.local, 8080, f.pod, 48000)
		})
	}
}

// A removed backend's UDP flows leave it without any walk of the
// conntrack: the Service's backend set is written (UpdateService, as a
// proxy's sync writes it) and ForgetUDPFlows is never called. The next
// datagram of a flow pinned to the backend that left goes to a remaining
// one and its entry is rewritten (the old reverse entry gone with it);
// flows to remaining backends stay where they are, the one whose backend
// moved into the freed slot too; an established TCP connection to the
// backend that left still reaches it (kube-proxy keeps TCP flows). Both
// families, through from_pod and to_pod.
func TestUDPFlowLeavesRemovedBackend(t *testing.T) {
	for _, f := range npFamilies {
		t.Run(f.name, func(t *testing.T) {
			p := testPlane(t)
			be := func(i int) dp.Backend {
				ip := netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x32, 15: byte(i)})
				if f.vip.Is4() {
					ip = netip.AddrFrom4([4]byte{192, 168, 32, byte(i)})
				}
				return dp.Backend{IP: ip, Port: 5353}
			}
			all := []dp.Backend{be(1), be(2), be(3)}
			for _, proto := range []dp.Proto{dp.UDP, dp.TCP} {
				if err := p.AddService(dp.Service{VIP: f.vip, Port: 53, Proto: proto, Backends: all}); err != nil {
					t.Fatal(err)
				}
			}
			send := func(proto uint8, sport uint16, flags uint8) netip.AddrPort {
				t.Helper()
				ret, out := run(t, p.Objects().FromPod, f.frame(f.pod, f.vip, proto, sport, 53, flags, "q"))
				mustOK(t, ret)
				f.valid(t, out)
				_, dst := f.decode(t, out)
				return dst
			}
			// One UDP flow per backend (their source ports), and a TCP
			// connection to the first backend.
			udp := map[netip.AddrPort]uint16{}
			for sport := uint16(40000); sport < 40200 && len(udp) < 3; sport++ {
				if b := send(protoUDP, sport, 0); udp[b] == 0 {
					udp[b] = sport
				}
			}
			if len(udp) != 3 {
				t.Fatalf("200 UDP flows reached %d backends, want 3: %v", len(udp), udp)
			}
			gone := netip.AddrPortFrom(all[0].IP, all[0].Port)
			var tcpPort uint16
			for sport := uint16(41000); sport < 41200 && tcpPort == 0; sport++ {
				if send(protoTCP, sport, tcpSYN) == gone {
					tcpPort = sport
				}
			}
			if tcpPort == 0 {
				t.Fatalf("no TCP connection of 200 reached %s", gone)
			}
			// The first backend leaves: the third moves into its slot.
			rest := all[1:]
			for _, proto := range []dp.Proto{dp.UDP, dp.TCP} {
				if err := p.UpdateService(dp.Service{VIP: f.vip, Port: 53, Proto: proto, Backends: rest}); err != nil {
					t.Fatal(err)
				}
			}
			before, err := p.Flows(0)
			if err != nil {
				t.Fatal(err)
			}
			sport := udp[gone]
			now := send(protoUDP, sport, 0)
			if now == gone {
				t.Fatalf("the UDP flow of port %d still went to %s, which left the Service", sport, gone)
			}
			if !slices.Contains(rest, dp.Backend{IP: now.Addr(), Port: now.Port()}) {
				t.Fatalf("the UDP flow of port %d went to %s, not a backend of the Service", sport, now)
			}
			// Its entry was rewritten: the flow keeps its new backend.
			after, err := p.Flows(0)
			if err != nil {
				t.Fatal(err)
			}
			entry := func(fl []dp.Flow, proto dp.Proto, sport uint16) netip.AddrPort {
				for _, x := range fl {
					if x.Proto == proto && x.Client == netip.AddrPortFrom(f.pod, sport) {
						return x.Backend
					}
				}
				return netip.AddrPort{}
			}
			if e0, e1 := entry(before, dp.UDP, sport), entry(after, dp.UDP, sport); e0 != gone || e1 != now {
				t.Fatalf("the flow's conntrack entry: %s before the datagram, %s after; want %s then %s", e0, e1, gone, now)
			}
			for range 3 {
				if b := send(protoUDP, sport, 0); b != now {
					t.Fatalf("the moved flow went on to %s, want %s", b, now)
				}
			}
			// Replies: the new backend's are translated back to the
			// clusterIP; the old backend's reverse entry is gone.
			ret, out := run(t, p.Objects().ToPod, f.frame(now.Addr(), f.pod, protoUDP, now.Port(), sport, 0, "a"))
			mustOK(t, ret)
			f.expect(t, out, f.vip, 53, f.pod, sport)
			ret, out = run(t, p.Objects().ToPod, f.frame(gone.Addr(), f.pod, protoUDP, gone.Port(), sport, 0, "late"))
			mustOK(t, ret)
			f.expect(t, out, gone.Addr(), gone.Port(), f.pod, sport)
			// The flows to the backends that stay do not move.
			for _, b := range rest {
				want := netip.AddrPortFrom(b.IP, b.Port)
				if got := send(protoUDP, udp[want], 0); got != want {
					t.Errorf("the UDP flow of port %d on %s moved to %s", udp[want], want, got)
				}
			}
			// The established TCP connection keeps the backend that left.
			if got := send(protoTCP, tcpPort, tcpACK); got != gone {
				t.Errorf("the established TCP connection went to %s, want %s (kube-proxy keeps TCP flows)", got, gone)
			}
		})
	}
}

// What the check of an established UDP flow's backend costs from_pod, per
// packet (BPF_PROG_TEST_RUN with repeat): a benchmark, not a test.
//
//	VNETLAB_BENCH=1 go test -count=1 -run TestBenchUDPEstablished -v ./internal/datapath/tcbpf/
//
// The Service's backend is the clusterIP:port itself, so the rewrite
// leaves the packet as it was and every repeat is the same established
// flow's datagram (one conntrack hit).
func TestBenchUDPEstablished(t *testing.T) {
	if os.Getenv("VNETLAB_BENCH") == "" {
		t.Skip("benchmark: set VNETLAB_BENCH=1")
	}
	for _, f := range npFamilies {
		t.Run(f.name, func(t *testing.T) {
			p := testPlane(t)
			self := dp.Backend{IP: f.vip, Port: 53}
			others := []dp.Backend{{IP: f.stays, Port: 53}, {IP: f.local, Port: 53}}
			if err := p.AddService(dp.Service{VIP: f.vip, Port: 53, Proto: dp.UDP, Backends: append([]dp.Backend{self}, others...)}); err != nil {
				t.Fatal(err)
			}
			var pkt []byte
			for sport := uint16(40000); sport < 40200 && pkt == nil; sport++ {
				in := f.frame(f.pod, f.vip, protoUDP, sport, 53, 0, "q")
				ret, out := run(t, p.Objects().FromPod, in)
				mustOK(t, ret)
				if _, dst := f.decode(t, out); dst == netip.AddrPortFrom(self.IP, self.Port) {
					pkt = in
				}
			}
			if pkt == nil {
				t.Fatal("no flow of 200 reached the self backend")
			}
			newFlows := func() uint64 {
				if f.vip.Is4() {
					s, err := p.Stats()
					if err != nil {
						t.Fatal(err)
					}
					return s.NewFlows
				}
				return stats6(t, p).NewFlows
			}
			n0 := newFlows()
			const repeat = 200000
			var per []float64
			for range 7 {
				ret, d, err := p.Objects().FromPod.Benchmark(pkt, repeat, nil)
				if err != nil || ret != actOK {
					t.Fatalf("benchmark: ret %d, %v", int32(ret), err)
				}
				per = append(per, float64(d.Nanoseconds()))
			}
			n1 := newFlows()
			slices.Sort(per)
			t.Logf("%s: from_pod, an established UDP flow's datagram: median %.0f ns per run (min %.0f, max %.0f; 7 x %d runs); new flows during the runs: %d",
				f.name, per[len(per)/2], per[0], per[len(per)-1], repeat, n1-n0)
			if n1 != n0 {
				t.Fatalf("the runs made %d new flows: not the established path", n1-n0)
			}
		})
	}
}
