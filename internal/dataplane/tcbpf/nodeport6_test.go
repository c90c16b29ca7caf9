package tcbpf_test

// BPF_PROG_TEST_RUN of the NodePort programs over IPv6 (bpf/nodeport6.h),
// in a scratch namespace laid out as nodeport_test.go's node but in IPv6:
// the uplink up0 (fd00:250::2/64), this node's pods behind pods0
// (fd00:244:1::/64), the other node's pods through fd00:250::3 on up0.

import (
	"bytes"
	"net"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	dp "github.com/vnetlab/vnetlab/internal/dataplane/tcbpf"
	"github.com/vnetlab/vnetlab/internal/nsutil"
)

var (
	nodeIP6    = ipOf("fd00:250::2")
	client6Out = ipOf("fd00:250::1")
	localPod6  = ipOf("fd00:244:1::5")
	remotePod6 = ipOf("fd00:244:2::7")
)

// inNode6 runs fn in a scratch namespace laid out as above; fn gets up0's
// ifindex. Addresses skip DAD, so the FIB has them at once.
func inNode6(t *testing.T, fn func(up0 int)) {
	t.Helper()
	err := nsutil.Scratch(func() error {
		for _, k := range []string{"net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"} {
			if err := nsutil.WriteSysctl(k, "0"); err != nil {
				return err
			}
		}
		if err := nsutil.WriteSysctl("net.ipv6.conf.all.forwarding", "1"); err != nil {
			return err
		}
		idx := map[string]int{}
		for name, cidr := range map[string]string{"up0": "fd00:250::2/64", "pods0": "fd00:244:1::1/64"} {
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
		_, other, _ := net.ParseCIDR("fd00:244:2::/64")
		if err := netlink.RouteAdd(&netlink.Route{Dst: other, Gw: net.ParseIP("fd00:250::3"), LinkIndex: idx["up0"]}); err != nil {
			return err
		}
		fn(idx["up0"])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// nodePort6 adds [nodeIP6]:30080 tcp and udp -> backends.
func nodePort6(t *testing.T, p *dp.Plane, bs ...dp.Backend) {
	t.Helper()
	for _, proto := range []dp.Proto{dp.TCP, dp.UDP} {
		if err := p.AddService(dp.Service{VIP: nodeIP6, Port: 30080, Proto: proto, Backends: bs}); err != nil {
			t.Fatal(err)
		}
	}
}

// A backend on this node: DNAT only, the client's address kept; the reply
// is translated back at egress.
func TestNodePort6LocalBackend(t *testing.T) {
	p := testPlane(t)
	nodePort6(t, p, dp.Backend{IP: localPod6, Port: 8080})
	inNode6(t, func(up0 int) {
		for i, proto := range []uint8{protoTCP, protoUDP} {
			sport := uint16(40000 + i)
			req := ipv6{src: client6Out, dst: nodeIP6, proto: proto, sport: sport, dport: 30080, tcpFlags: tcpSYN, payload: []byte("hi")}
			ret, out := runOn(t, p.Objects().NodeportIn, up0, req.bytes())
			mustOK(t, ret)
			expect6(t, out, client6Out, sport, localPod6, 8080)
			mustValid6(t, out)
			rep := ipv6{src: localPod6, dst: client6Out, proto: proto, sport: 8080, dport: sport, tcpFlags: tcpSYN | tcpACK, payload: []byte("yo")}
			ret, out = runOn(t, p.Objects().NodeportOut, up0, rep.bytes())
			mustOK(t, ret)
			expect6(t, out, nodeIP6, 30080, client6Out, sport)
			mustValid6(t, out)
		}
	})
	if st := npStats(t, p); st.DNAT != 2 || st.RNAT != 2 || st.NewFlows != 2 || st.SNAT != 0 || st.Errors != 0 {
		t.Fatalf("stats %+v: want 2 DNAT, 2 RNAT, 2 new flows, no SNAT", st)
	}
}

// A backend on another node: DNAT + SNAT to the node's IPv6 address (set
// with SetNodeIP, here the address the client reached) and a port of
// 61000-65535, redirected out of the uplink; the reply arrives there and
// leaves translated back; a RST ends the flow.
func TestNodePort6SNAT(t *testing.T) {
	p := testPlane(t)
	if err := p.SetNodeIP(nodeIP6); err != nil {
		t.Fatal(err)
	}
	nodePort6(t, p, dp.Backend{IP: remotePod6, Port: 8080})
	inNode6(t, func(up0 int) {
		for i, proto := range []uint8{protoTCP, protoUDP} {
			sport := uint16(41000 + i)
			req := ipv6{src: client6Out, dst: nodeIP6, proto: proto, sport: sport, dport: 30080, tcpFlags: tcpSYN, payload: []byte("hi")}
			ret, out := runOn(t, p.Objects().NodeportIn, up0, req.bytes())
			if ret != actRedirect {
				t.Fatalf("%d: return code %d, want TC_ACT_REDIRECT (sent out of the uplink)", proto, int32(ret))
			}
			mustValid6(t, out)
			d, err := decode6(out)
			if err != nil {
				t.Fatal(err)
			}
			if d.src != nodeIP6 || d.dst != remotePod6 || d.dport != 8080 || d.sport < 61000 || d.sport == sport {
				t.Fatalf("%d: got [%s]:%d -> [%s]:%d, want [%s]:(61000-65535) -> [%s]:8080", proto, d.src, d.sport, d.dst, d.dport, nodeIP6, remotePod6)
			}
			snat := d.sport
			req.tcpFlags = tcpACK
			ret, out = runOn(t, p.Objects().NodeportIn, up0, req.bytes())
			if d, _ := decode6(out); ret != actRedirect || d.sport != snat {
				t.Fatalf("%d: second packet: ret %d, source port %d, want %d", proto, int32(ret), d.sport, snat)
			}
			rep := ipv6{src: remotePod6, dst: nodeIP6, proto: proto, sport: 8080, dport: snat, tcpFlags: tcpSYN | tcpACK, payload: []byte("yo")}
			ret, out = runOn(t, p.Objects().NodeportIn, up0, rep.bytes())
			if ret != actRedirect {
				t.Fatalf("%d: reply: return code %d, want TC_ACT_REDIRECT", proto, int32(ret))
			}
			expect6(t, out, nodeIP6, 30080, client6Out, sport)
			mustValid6(t, out)
			ret, out = runOn(t, p.Objects().NodeportOut, up0, rep.bytes())
			mustOK(t, ret)
			if !bytes.Equal(out, rep.bytes()) {
				t.Fatalf("%d: egress touched a SNATed flow's reply", proto)
			}
			if proto == protoTCP {
				req.tcpFlags = tcpRST
				if ret, _ = runOn(t, p.Objects().NodeportIn, up0, req.bytes()); ret != actRedirect {
					t.Fatalf("RST: return code %d", int32(ret))
				}
				ret, out = runOn(t, p.Objects().NodeportIn, up0, rep.bytes())
				if ret != actOK || !bytes.Equal(out, rep.bytes()) {
					t.Fatal("a reply after the client's RST was still translated: the flow outlived it")
				}
			}
		}
	})
	if st := npStats(t, p); st.SNAT != 2 || st.NewFlows != 2 || st.RNAT != 2 || st.Errors != 0 || st.NoPort != 0 {
		t.Fatalf("stats %+v: want 2 SNATed flows, 2 new, 2 RNAT", st)
	}
}

// NDP, packets to addresses that are no node port, and a node port without
// endpoints: the first two pass byte for byte, the last is dropped (as
// kube-proxy drops for policy Local).
func TestNodePort6Untouched(t *testing.T) {
	p := testPlane(t)
	nodePort6(t, p, dp.Backend{IP: localPod6, Port: 8080})
	if err := p.AddService(dp.Service{VIP: nodeIP6, Port: 30081, Proto: dp.TCP}); err != nil {
		t.Fatal(err)
	}
	inNode6(t, func(up0 int) {
		target := nodeIP6.As16()
		for name, pkt := range map[string]ipv6{
			"neighbour-solicitation": icmp6Info(icmp6NS, client6Out, ipOf("ff02::1:ff00:2"), append(make([]byte, 4), target[:]...)),
			"other-port":             {src: client6Out, dst: nodeIP6, proto: protoTCP, sport: 40000, dport: 22, tcpFlags: tcpSYN},
			"other-address":          {src: client6Out, dst: localPod6, proto: protoTCP, sport: 40000, dport: 30080, tcpFlags: tcpSYN},
		} {
			in := pkt.bytes()
			ret, out := runOn(t, p.Objects().NodeportIn, up0, in)
			if ret != actOK || !bytes.Equal(in, out) {
				t.Fatalf("%s: ret %d, changed %v: want passed untouched", name, int32(ret), !bytes.Equal(in, out))
			}
		}
		empty := ipv6{src: client6Out, dst: nodeIP6, proto: protoTCP, sport: 40000, dport: 30081, tcpFlags: tcpSYN}
		if ret, _ := runOn(t, p.Objects().NodeportIn, up0, empty.bytes()); ret != actShot {
			t.Fatalf("no endpoints: ret %d, want TC_ACT_SHOT", int32(ret))
		}
	})
	if st := npStats(t, p); st.DNAT != 0 || st.NoBackend != 1 {
		t.Fatalf("stats %+v: want no DNAT, 1 no-backend drop", st)
	}
}

// A backend at the node's own address (a hostNetwork endpoint on this
// node): local, DNAT only, handed to the stack. A direct lookup of the main
// table would find up0's prefix route and send the flow out of up0 to the
// node's own address, SNATed: IPv6 keeps its local table apart.
func TestNodePort6HostNetworkBackend(t *testing.T) {
	p := testPlane(t)
	nodePort6(t, p, dp.Backend{IP: nodeIP6, Port: 8080})
	inNode6(t, func(up0 int) {
		req := ipv6{src: client6Out, dst: nodeIP6, proto: protoTCP, sport: 42000, dport: 30080, tcpFlags: tcpSYN, payload: []byte("hi")}
		ret, out := runOn(t, p.Objects().NodeportIn, up0, req.bytes())
		mustOK(t, ret)
		expect6(t, out, client6Out, 42000, nodeIP6, 8080)
		mustValid6(t, out)
	})
	if st := npStats(t, p); st.DNAT != 1 || st.SNAT != 0 {
		t.Fatalf("stats %+v: want 1 DNAT, no SNAT", st)
	}
}
