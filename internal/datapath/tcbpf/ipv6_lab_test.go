package tcbpf_test

import (
	"net/netip"
	"strings"
	"testing"

	dp "github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// TestClusterIPv6OnLab: a dual-stack veth-routed lab with an IPv6 and an
// IPv4 Service side by side. TCP and UDP through the IPv6 clusterIP reach
// the backend, which sees the client's own address, and the answers come
// back from the clusterIP; a connected UDP socket hears ICMPv6 port
// unreachable from a backend port where nothing listens (the error
// translated back), also the backend's own (hairpin). Traffic from local sockets is CHECKSUM_PARTIAL: the
// programs' partial-checksum branch on the wire.
func TestClusterIPv6OnLab(t *testing.T) {
	tl := upLabFamily(t, "bp6", true, family.Dual)
	p := openPlane(t, tl)
	a4, a6 := tl.addr("pod-a"), netip.MustParseAddr(tl.pod("pod-a").IP6)
	for _, proto := range []dp.Proto{dp.TCP, dp.UDP} {
		for _, s := range []dp.Service{
			{VIP: vip6, Port: testPort, Proto: proto, Backends: []dp.Backend{{IP: a6, Port: testPort}}},
			{VIP: vip, Port: testPort, Proto: proto, Backends: []dp.Backend{{IP: a4, Port: testPort}}},
		} {
			if err := p.AddService(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := p.AddService(dp.Service{VIP: vip6, Port: 5301, Proto: dp.UDP, Backends: []dp.Backend{{IP: a6, Port: 5399}}}); err != nil {
		t.Fatal(err)
	}
	svc6 := netip.AddrPortFrom(vip6, testPort).String()
	closed6 := netip.AddrPortFrom(vip6, 5301).String()
	for _, pl := range []dp.Placement{dp.InPod, dp.NodeSide} {
		t.Run(string(pl), func(t *testing.T) {
			for _, pod := range []string{"pod-a", "pod-b"} {
				attach(t, tl, p, pod, pl)
			}
			defer func() {
				for _, pod := range []string{"pod-a", "pod-b"} {
					ns, ifn := tl.endpoint(pod, pl)
					if err := p.DetachEndpoint(ns, ifn); err != nil {
						t.Errorf("detach: %v", err)
					}
				}
			}()
			b := tl.pod("pod-b")
			ans, err := tcpOnce(b.NS, svc6)
			if err != nil {
				t.Fatalf("tcp via the IPv6 clusterIP: %v", err)
			}
			if want := "[" + b.IP6 + "]:"; ans.pod != "pod-a" || !strings.HasPrefix(ans.peer, want) {
				t.Fatalf("tcp: answer %+v, want pod-a seeing %s", ans, want)
			}
			ans, from, err := udpOnce(b.NS, svc6)
			if err != nil {
				t.Fatalf("udp via the IPv6 clusterIP: %v", err)
			}
			if ans.pod != "pod-a" || from != svc6 {
				t.Fatalf("udp: answer %+v from %s, want pod-a from %s", ans, from, svc6)
			}
			if ok, err := udpRefused(b.NS, closed6); err != nil || !ok {
				t.Fatalf("udp to a closed backend port: refused=%v, %v (ICMPv6 error not translated?)", ok, err)
			}
			// Hairpin: pod-a's own error about its own flow, translated both ways.
			if ok, err := udpRefused(tl.pod("pod-a").NS, closed6); err != nil || !ok {
				t.Fatalf("hairpin udp to a closed backend port: refused=%v, %v (ICMPv6 error of a hairpinned flow not translated?)", ok, err)
			}
			// The IPv4 Service beside it.
			if ans, err := tcpOnce(b.NS, svcAddr); err != nil || ans.pod != "pod-a" {
				t.Fatalf("tcp via the IPv4 clusterIP: %+v, %v", ans, err)
			}
		})
	}
	st, err := p.Stats6()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("IPv6 stats: %+v", st)
	if st.Errors != 0 || st.DNAT == 0 || st.RNAT == 0 || st.ICMP < 2 {
		t.Fatalf("IPv6 stats %+v: want translations both ways, ICMPv6 errors translated, no errors", st)
	}
}
