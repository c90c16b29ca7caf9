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
				if got := podFlow(f.vip, protoUDP, 0); got != gone.IP {
					t.Fatalf("before forgetting, the UDP flow moved to %s: the conntrack should still pin it", got)
				}
				n, err := p.ForgetUDPFlows(map[netip.AddrPort][]dp.Backend{
					netip.AddrPortFrom(f.vip, 80):  {stays},
					netip.AddrPortFrom(f.node, 80): {stays},
				})
				if err != nil || n != 2 {
					t.Fatalf("ForgetUDPFlows: %d, %v; want 2 flows (one pod's, one from outside)", n, err)
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
