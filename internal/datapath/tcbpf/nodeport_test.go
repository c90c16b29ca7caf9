package tcbpf_test

// BPF_PROG_TEST_RUN of the NodePort programs (bpf/nodeport.h) on crafted
// frames, inside a scratch network namespace laid out like a cluster node:
// the uplink up0 (10.250.0.2/24, where the frames "arrive"), this node's
// pods behind pods0 (10.244.1.0/24), the other node's pods through
// 10.250.0.3 on up0. The programs ask that namespace's FIB whether a
// backend is local (DNAT only) or elsewhere (DNAT + SNAT, redirected out).

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	dp "github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

var (
	nodeIP    = ipOf("10.250.0.2")
	client    = ipOf("10.250.0.1")
	localPod  = ipOf("10.244.1.5")
	remotePod = ipOf("10.244.2.7")
)

// inNode runs fn in a scratch namespace laid out as above (veths: this
// kernel has no dummy interfaces); fn gets up0's ifindex.
func inNode(t *testing.T, fn func(up0 int)) {
	t.Helper()
	inNodeLayout(t, "10.250.0.2/24", "10.244.1.1/24", "10.244.2.0/24", "10.250.0.3", map[string]string{"net.ipv4.ip_forward": "1"}, fn)
}

// inNodeLayout builds a node namespace: up0 and pods0 with those
// addresses (no DAD: the FIB has them at once), the other node's pods
// through gw on up0, the sysctls set first; fn gets up0's ifindex.
func inNodeLayout(t *testing.T, up0, pods0, other, gw string, sysctls map[string]string, fn func(up0 int)) {
	t.Helper()
	err := nsutil.Scratch(func() error {
		for k, v := range sysctls {
			if err := nsutil.WriteSysctl(k, v); err != nil {
				return err
			}
		}
		idx := map[string]int{}
		for name, cidr := range map[string]string{"up0": up0, "pods0": pods0} {
			l := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}
			if err := netlink.LinkAdd(l); err != nil {
				return err
			}
			peer, err := netlink.LinkByName(name + "p")
			if err != nil {
				return err
			}
			if err := netlink.LinkSetUp(peer); err != nil {
				return err
			}
			a, _ := netlink.ParseAddr(cidr)
			a.Flags = unix.IFA_F_NODAD
			if err := netlink.AddrAdd(l, a); err != nil {
				return err
			}
			if err := netlink.LinkSetUp(l); err != nil {
				return err
			}
			idx[name] = l.Attrs().Index
		}
		_, dst, _ := net.ParseCIDR(other)
		if err := netlink.RouteAdd(&netlink.Route{Dst: dst, Gw: net.ParseIP(gw), LinkIndex: idx["up0"]}); err != nil {
			return err
		}
		for _, cidr := range []string{up0, pods0} {
			if err := waitLocal(cidr); err != nil {
				return err
			}
		}
		fn(idx["up0"])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitLocal waits until cidr's address is one of the namespace's own (its
// local route is there): an IPv6 address becomes so only once IPv6 has
// seen its link's carrier, which the kernel reports a moment after the
// link is set up (linkwatch). A program's FIB lookup before that forwards
// the packet instead of passing it up (TestNodePort6HostNetworkBackend read
// TC_ACT_REDIRECT once so).
func waitLocal(cidr string) error {
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		rs, err := netlink.RouteGet(a.IP)
		if err == nil && len(rs) > 0 && rs[0].Type == unix.RTN_LOCAL {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s is not a local address 5 s after it was added (route %v, %v)", a.IP, rs, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runOn runs prog on frame in as if it came through interface ifindex.
func runOn(t *testing.T, prog *ebpf.Program, ifindex int, in []byte) (uint32, []byte) {
	t.Helper()
	ctx := make([]byte, 44) // struct __sk_buff up to ifindex (offset 40)
	binary.NativeEndian.PutUint32(ctx[40:], uint32(ifindex))
	out := make([]byte, len(in)+256)
	opts := &ebpf.RunOptions{Data: in, DataOut: out, Context: ctx}
	ret, err := prog.Run(opts)
	if err != nil {
		t.Fatalf("BPF_PROG_TEST_RUN: %v", err)
	}
	return ret, out[:len(opts.DataOut)]
}

// nodePort adds nodeIP:30080 tcp and udp -> backends.
func nodePort(t *testing.T, p *dp.Plane, bs ...dp.Backend) { nodePortOn(t, p, nodeIP, bs...) }

// nodePortOn adds node:30080 tcp and udp -> backends.
func nodePortOn(t *testing.T, p *dp.Plane, node netip.Addr, bs ...dp.Backend) {
	t.Helper()
	for _, proto := range []dp.Proto{dp.TCP, dp.UDP} {
		if err := p.AddService(dp.Service{VIP: node, Port: 30080, Proto: proto, Backends: bs}); err != nil {
			t.Fatal(err)
		}
	}
}

func npStats(t *testing.T, p *dp.Plane) dp.NodePortStats {
	t.Helper()
	st, err := p.NodePortStats()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// npFamily is one family's side of the NodePort tests: its node layout,
// addresses and frames, so that one test body checks nodeport.h and
// nodeport6.h alike.
type npFamily struct {
	name                        string
	inNode                      func(*testing.T, func(up0 int))
	node, client, local, remote netip.Addr
	frame                       func(src, dst netip.Addr, proto uint8, sport, dport uint16, flags uint8, payload string) []byte
	decode                      func(t *testing.T, out []byte) (src, dst netip.AddrPort)
	valid                       func(*testing.T, []byte)

	// For the tests of pods' flows too: a clusterIP and another, a client
	// pod and a second backend on this node.
	vip, otherVIP, pod, stays netip.Addr
}

var npFamilies = []npFamily{{
	name: "ipv4", inNode: inNode, node: nodeIP, client: client, local: localPod, remote: remotePod, valid: mustValid,
	vip: vip, otherVIP: ipOf("10.96.0.101"), pod: podB, stays: ipOf("10.244.1.6"),
	frame: func(src, dst netip.Addr, proto uint8, sport, dport uint16, flags uint8, payload string) []byte {
		return ipv4{src: src, dst: dst, proto: proto, sport: sport, dport: dport, tcpFlags: flags, payload: []byte(payload), id: 1}.bytes()
	},
	decode: func(t *testing.T, out []byte) (netip.AddrPort, netip.AddrPort) {
		d, err := decode(out)
		if err != nil {
			t.Fatal(err)
		}
		return netip.AddrPortFrom(d.src, d.sport), netip.AddrPortFrom(d.dst, d.dport)
	},
}, {
	name: "ipv6", inNode: inNode6, node: nodeIP6, client: client6Out, local: localPod6, remote: remotePod6, valid: mustValid6,
	vip: vip6, otherVIP: ipOf("fd00:96::101"), pod: ipOf("fd00:244:1::b"), stays: ipOf("fd00:244:1::6"),
	frame: func(src, dst netip.Addr, proto uint8, sport, dport uint16, flags uint8, payload string) []byte {
		return ipv6{src: src, dst: dst, proto: proto, sport: sport, dport: dport, tcpFlags: flags, payload: []byte(payload)}.bytes()
	},
	decode: func(t *testing.T, out []byte) (netip.AddrPort, netip.AddrPort) {
		d, err := decode6(out)
		if err != nil {
			t.Fatal(err)
		}
		return netip.AddrPortFrom(d.src, d.sport), netip.AddrPortFrom(d.dst, d.dport)
	},
}}

// expect checks that out goes from src:sport to dst:dport, checksums valid.
func (f npFamily) expect(t *testing.T, out []byte, src netip.Addr, sport uint16, dst netip.Addr, dport uint16) {
	t.Helper()
	s, d := f.decode(t, out)
	if s != netip.AddrPortFrom(src, sport) || d != netip.AddrPortFrom(dst, dport) {
		t.Fatalf("got %s -> %s, want %s -> %s", s, d, netip.AddrPortFrom(src, sport), netip.AddrPortFrom(dst, dport))
	}
	f.valid(t, out)
}

// A backend on this node: DNAT only (the client's address stays: policy
// Local keeps it), the stack delivers; the reply is translated back at egress.
func TestNodePortLocalBackend(t *testing.T) {
	for _, f := range npFamilies {
		t.Run(f.name, func(t *testing.T) {
			p := testPlane(t)
			nodePortOn(t, p, f.node, dp.Backend{IP: f.local, Port: 8080})
			f.inNode(t, func(up0 int) {
				for i, proto := range []uint8{protoTCP, protoUDP} {
					sport := uint16(40000 + i)
					ret, out := runOn(t, p.Objects().NodeportIn, up0, f.frame(f.client, f.node, proto, sport, 30080, tcpSYN, "hi"))
					mustOK(t, ret)
					f.expect(t, out, f.client, sport, f.local, 8080)
					ret, out = runOn(t, p.Objects().NodeportOut, up0, f.frame(f.local, f.client, proto, 8080, sport, tcpSYN|tcpACK, "yo"))
					mustOK(t, ret)
					f.expect(t, out, f.node, 30080, f.client, sport)
				}
			})
			if st := npStats(t, p); st.DNAT != 2 || st.RNAT != 2 || st.NewFlows != 2 || st.SNAT != 0 || st.Errors != 0 {
				t.Fatalf("stats %+v: want 2 DNAT, 2 RNAT, 2 new flows, no SNAT", st)
			}
		})
	}
}

// A backend on another node (policy Cluster): DNAT + SNAT to the node's
// address of the family and a port of 61000-65535, sent straight out of
// the uplink (redirect); the reply arrives at the uplink and leaves the
// same way, translated back to nodeIP:nodePort -> client. Later packets
// keep the SNAT port; a RST ends the flow.
func TestNodePortSNAT(t *testing.T) {
	for _, f := range npFamilies {
		t.Run(f.name, func(t *testing.T) {
			p := testPlane(t)
			if err := p.SetNodeIP(f.node); err != nil {
				t.Fatal(err)
			}
			nodePortOn(t, p, f.node, dp.Backend{IP: f.remote, Port: 8080})
			f.inNode(t, func(up0 int) {
				for i, proto := range []uint8{protoTCP, protoUDP} {
					sport := uint16(41000 + i)
					ret, out := runOn(t, p.Objects().NodeportIn, up0, f.frame(f.client, f.node, proto, sport, 30080, tcpSYN, "hi"))
					if ret != actRedirect {
						t.Fatalf("%d: return code %d, want TC_ACT_REDIRECT (sent out of the uplink)", proto, int32(ret))
					}
					f.valid(t, out)
					src, dst := f.decode(t, out)
					if src.Addr() != f.node || dst != netip.AddrPortFrom(f.remote, 8080) || src.Port() < 61000 || src.Port() == sport {
						t.Fatalf("%d: got %s -> %s, want %s:(61000-65535) -> %s:8080", proto, src, dst, f.node, f.remote)
					}
					snat := src.Port()
					// The next packet of the flow keeps its port.
					ret, out = runOn(t, p.Objects().NodeportIn, up0, f.frame(f.client, f.node, proto, sport, 30080, tcpACK, "hi"))
					if src, _ := f.decode(t, out); ret != actRedirect || src.Port() != snat {
						t.Fatalf("%d: second packet: ret %d, source port %d, want %d", proto, int32(ret), src.Port(), snat)
					}
					// The reply from the other node.
					rep := f.frame(f.remote, f.node, proto, 8080, snat, tcpSYN|tcpACK, "yo")
					ret, out = runOn(t, p.Objects().NodeportIn, up0, rep)
					if ret != actRedirect {
						t.Fatalf("%d: reply: return code %d, want TC_ACT_REDIRECT", proto, int32(ret))
					}
					f.expect(t, out, f.node, 30080, f.client, sport)
					// Egress leaves SNATed flows alone (their replies never pass there).
					ret, out = runOn(t, p.Objects().NodeportOut, up0, rep)
					mustOK(t, ret)
					if !bytes.Equal(out, rep) {
						t.Fatalf("%d: egress touched a SNATed flow's reply", proto)
					}
					if proto == protoTCP {
						if ret, _ = runOn(t, p.Objects().NodeportIn, up0, f.frame(f.client, f.node, proto, sport, 30080, tcpRST, "")); ret != actRedirect {
							t.Fatalf("RST: return code %d", int32(ret))
						}
						ret, out = runOn(t, p.Objects().NodeportIn, up0, rep)
						if ret != actOK || !bytes.Equal(out, rep) {
							t.Fatal("a reply after the client's RST was still translated: the flow outlived it")
						}
					}
				}
			})
			if st := npStats(t, p); st.SNAT != 2 || st.NewFlows != 2 || st.RNAT != 2 || st.Errors != 0 || st.NoPort != 0 {
				t.Fatalf("stats %+v: want 2 SNATed flows, 2 new, 2 RNAT", st)
			}
		})
	}
}

// lbHash mirrors lb.h's lb_hash (the SNAT port's first candidate derives from it).
func lbHash(src, dst netip.Addr, sport, dport uint16, proto uint8) uint32 {
	n32 := func(a netip.Addr) uint32 { b := a.As4(); return binary.NativeEndian.Uint32(b[:]) }
	n16 := func(v uint16) uint32 {
		var b [2]byte
		binary.BigEndian.PutUint16(b[:], v)
		return uint32(binary.NativeEndian.Uint16(b[:]))
	}
	h := n32(src) ^ (n32(dst) * 0x9e3779b1) ^ (n16(sport)<<16 | n16(dport)) ^ uint32(proto)
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

func snatCandidate(h uint32, i int) uint16 { return uint16(61000 + (h+uint32(i)*1031)%4536) }

// SNAT port collisions: a taken candidate is skipped for the next one;
// when all NP_SNAT_TRIES (8) are taken the packet is dropped and counted.
func TestNodePortSNATPortCollision(t *testing.T) {
	p := testPlane(t)
	nodePort(t, p, dp.Backend{IP: remotePod, Port: 8080})
	take := func(port uint16) {
		k := dp.CtKey{Saddr: n32(remotePod), Daddr: n32(nodeIP), Sport: n16(8080), Dport: n16(port), Proto: protoTCP, Dir: 2}
		v := dp.NpCt{Flags: 1, Addr: n32(nodeIP), Port: n16(30080), Client: n32(ipOf("10.250.0.9")), Cport: n16(1)}
		if err := p.Objects().NpConntrack.Put(&k, &v); err != nil {
			t.Fatal(err)
		}
	}
	inNode(t, func(up0 int) {
		const sport = 42000
		h := lbHash(client, nodeIP, sport, 30080, protoTCP)
		take(snatCandidate(h, 0))
		req := ipv4{src: client, dst: nodeIP, proto: protoTCP, sport: sport, dport: 30080, tcpFlags: tcpSYN, id: 1}
		ret, out := runOn(t, p.Objects().NodeportIn, up0, req.bytes())
		if d, _ := decode(out); ret != actRedirect || d.sport != snatCandidate(h, 1) {
			t.Fatalf("first candidate taken: ret %d, port %d, want the second candidate %d", int32(ret), d.sport, snatCandidate(h, 1))
		}
		const sport2 = 42001
		h = lbHash(client, nodeIP, sport2, 30080, protoTCP)
		for i := range 8 {
			take(snatCandidate(h, i))
		}
		req.sport = sport2
		ret, _ = runOn(t, p.Objects().NodeportIn, up0, req.bytes())
		if ret != actShot {
			t.Fatalf("every candidate taken: return code %d, want TC_ACT_SHOT", int32(ret))
		}
	})
	if st := npStats(t, p); st.NoPort != 1 || st.SNAT != 1 {
		t.Fatalf("stats %+v: want 1 SNATed flow and 1 drop for want of a port", st)
	}
}

func n32(a netip.Addr) uint32 { b := a.As4(); return binary.NativeEndian.Uint32(b[:]) }
func n16(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}

// Policy Local on a node without a local endpoint: an entry without
// backends, and its packets are dropped (kube-proxy drops them too).
func TestNodePortNoEndpointDrops(t *testing.T) {
	p := testPlane(t)
	nodePort(t, p)
	inNode(t, func(up0 int) {
		req := ipv4{src: client, dst: nodeIP, proto: protoTCP, sport: 43000, dport: 30080, tcpFlags: tcpSYN, id: 1}
		if ret, _ := runOn(t, p.Objects().NodeportIn, up0, req.bytes()); ret != actShot {
			t.Fatalf("return code %d, want TC_ACT_SHOT", int32(ret))
		}
	})
	if st := npStats(t, p); st.NoBackend != 1 || st.DNAT != 0 {
		t.Fatalf("stats %+v: want one no-backend drop", st)
	}
}

// What is not a NodePort packet passes untouched: another port of the node,
// ICMP, a TCP header cut short, a later fragment, not IPv4, a reply-like
// packet to a SNAT port without a flow.
func TestNodePortUntouched(t *testing.T) {
	p := testPlane(t)
	nodePort(t, p, dp.Backend{IP: remotePod, Port: 8080})
	short := ipv4{src: client, dst: nodeIP, proto: protoTCP, sport: 44000, dport: 30080, tcpFlags: tcpSYN}.bytes()
	short = short[:len(short)-8]
	binary.BigEndian.PutUint16(short[ethLen+2:], uint16(len(short)-ethLen))
	binary.BigEndian.PutUint16(short[ethLen+10:], 0)
	binary.BigEndian.PutUint16(short[ethLen+10:], checksum(short[ethLen:ethLen+20]))
	arp := append([]byte(nil), ipv4{src: client, dst: nodeIP, proto: protoUDP, sport: 1, dport: 30080}.bytes()...)
	binary.BigEndian.PutUint16(arp[12:], 0x0806)
	frames := map[string][]byte{
		"other-port":      ipv4{src: client, dst: nodeIP, proto: protoTCP, sport: 44000, dport: 22, tcpFlags: tcpSYN}.bytes(),
		"icmp-echo":       ipv4{src: client, dst: nodeIP, proto: protoICM, raw: []byte{8, 0, 0, 0, 0, 1, 0, 1}}.bytes(),
		"tcp-cut-short":   short,
		"later-fragment":  ipv4{src: client, dst: nodeIP, proto: protoUDP, id: 7, frag: 10, noL4: true, payload: []byte("fragment")}.bytes(),
		"not-ipv4":        arp,
		"stray-snat-port": ipv4{src: remotePod, dst: nodeIP, proto: protoTCP, sport: 8080, dport: 62000, tcpFlags: tcpACK}.bytes(),
	}
	inNode(t, func(up0 int) {
		for name, in := range frames {
			for _, prog := range []*ebpf.Program{p.Objects().NodeportIn, p.Objects().NodeportOut} {
				ret, out := runOn(t, prog, up0, in)
				if ret != actOK || !bytes.Equal(out, in) {
					t.Errorf("%s through %s: return code %d, changed %v: want passed untouched", name, prog, int32(ret), !bytes.Equal(out, in))
				}
			}
		}
	})
	if st := npStats(t, p); st != (dp.NodePortStats{}) {
		t.Fatalf("stats %+v: nothing should have been counted", st)
	}
}
