package tcbpf_test

// BPF_PROG_TEST_RUN of the NodePort programs over IPv6 (bpf/nodeport6.h),
// in a scratch namespace laid out as nodeport_test.go's node but in IPv6:
// the uplink up0 (fd00:250::2/64), this node's pods behind pods0
// (fd00:244:1::/64), the other node's pods through fd00:250::3 on up0.

import (
	"bytes"
	"testing"

	dp "github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
)

var (
	nodeIP6    = ipOf("fd00:250::2")
	client6Out = ipOf("fd00:250::1")
	localPod6  = ipOf("fd00:244:1::5")
	remotePod6 = ipOf("fd00:244:2::7")
)

// inNode6 runs fn in a scratch namespace laid out as above; fn gets up0's
// ifindex.
func inNode6(t *testing.T, fn func(up0 int)) {
	t.Helper()
	inNodeLayout(t, "fd00:250::2/64", "fd00:244:1::1/64", "fd00:244:2::/64", "fd00:250::3", map[string]string{
		"net.ipv6.conf.all.disable_ipv6": "0", "net.ipv6.conf.default.disable_ipv6": "0", "net.ipv6.conf.all.forwarding": "1"}, fn)
}

// NDP, packets to addresses that are no node port, and a node port without
// endpoints: the first two pass byte for byte, the last is dropped (as
// kube-proxy drops for policy Local).
func TestNodePort6Untouched(t *testing.T) {
	p := testPlane(t)
	nodePortOn(t, p, nodeIP6, dp.Backend{IP: localPod6, Port: 8080})
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
	nodePortOn(t, p, nodeIP6, dp.Backend{IP: nodeIP6, Port: 8080})
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
