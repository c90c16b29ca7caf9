package tcbpf_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	dp "github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/platform/testnet"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// A Service without backends refuses at once on a real (dual-stack) lab,
// in each placement (and with checksums completed in software on the
// node's veths): a TCP connect and a connected UDP socket get ECONNREFUSED
// from the programs' ICMP or ICMPv6 port unreachable, not a timeout.
func TestNoBackendsRefusedOnLab(t *testing.T) {
	tl := upLabFamily(t, "brj", false, family.Dual)
	p := openPlane(t, tl)
	for _, proto := range []dp.Proto{dp.TCP, dp.UDP} {
		for _, v := range []netip.Addr{vip, vip6} {
			if err := p.AddService(dp.Service{VIP: v, Port: testPort, Proto: proto}); err != nil {
				t.Fatal(err)
			}
		}
	}
	svc6 := netip.AddrPortFrom(vip6, testPort).String()
	b := tl.pod("pod-b")
	for _, c := range []struct {
		name  string
		pl    dp.Placement
		txOff bool
	}{{"pod", dp.InPod, false}, {"node", dp.NodeSide, false}, {"node-tx-checksum-off", dp.NodeSide, true}} {
		t.Run(c.name, func(t *testing.T) {
			attach(t, tl, p, "pod-b", c.pl)
			defer func() {
				ns, ifn := tl.endpoint("pod-b", c.pl)
				if err := p.DetachEndpoint(ns, ifn); err != nil {
					t.Error(err)
				}
			}()
			if c.txOff {
				if err := modes.SetTxChecksum(tl.st.Nodes[0].NS, tl.hostIf("pod-b"), false); err != nil {
					t.Fatal(err)
				}
				defer func() { _ = modes.SetTxChecksum(tl.st.Nodes[0].NS, tl.hostIf("pod-b"), true) }()
			}
			before, _ := p.Stats()
			before6, _ := p.Stats6()
			for _, c := range []struct{ proto, addr string }{{"tcp4", svcAddr}, {"udp4", svcAddr}, {"tcp6", svc6}, {"udp6", svc6}} {
				proto := c.proto
				took, err := refused(b.NS, proto, c.addr)
				if err != nil {
					t.Fatalf("%s to a Service without backends: %v (after %s), want connection refused", proto, err, took)
				}
				if limit := refusedWithin(proto); took > limit {
					t.Fatalf("%s refused after %s, want within %s", proto, took, limit)
				}
				t.Logf("%s: connection refused after %s", proto, took.Round(time.Microsecond))
			}
			after, _ := p.Stats()
			if after.Rejects < before.Rejects+2 || after.Errors != 0 {
				t.Fatalf("stats %+v after %+v: want 2 more rejects, no errors", after, before)
			}
			after6, _ := p.Stats6()
			if after6.Rejects < before6.Rejects+2 || after6.Errors != 0 {
				t.Fatalf("IPv6 stats %+v after %+v: want 2 more rejects, no errors", after6, before6)
			}
		})
	}
}

// The same on a veth-ebpf lab: host_from_pod passes the reject's redirect
// on (the pod's own veth, out of the node end it came in on).
func TestNoBackendsRefusedVethEBPF(t *testing.T) {
	tl := upModeLab(t, "brv", modes.VethEBPF)
	p := openPlane(t, tl)
	for _, proto := range []dp.Proto{dp.TCP, dp.UDP} {
		if err := p.AddService(dp.Service{VIP: vip, Port: testPort, Proto: proto}); err != nil {
			t.Fatal(err)
		}
	}
	for _, proto := range []string{"tcp4", "udp4"} {
		took, err := refused(tl.pod("pod-b").NS, proto, svcAddr)
		if err != nil || took > time.Second {
			t.Fatalf("%s to a Service without backends: %v after %s, want connection refused at once", proto, err, took)
		}
		t.Logf("%s: connection refused after %s", proto, took.Round(time.Microsecond))
	}
	if st, _ := p.Stats(); st.Rejects != 2 || st.Errors != 0 {
		t.Fatalf("stats %+v: want 2 rejects", st)
	}
}

// refused: testnet.RefusedAfter from namespace ns.
func refused(ns, proto, addr string) (time.Duration, error) {
	return testnet.RefusedAfter(func(f func() error) error { return nsutil.Do(ns, f) }, proto, addr)
}

// refusedWithin is how soon a client of a Service without backends must be
// refused: at once (the programs answer the first packet), except a tcp6
// connect, refused by the SYN's first retransmission (1 s). The answer to
// the first SYN comes back within the connect call, while it holds the
// socket's lock, and the kernel drops an ICMP error then
// (TcpExtLockDroppedIcmps); netfilter's REJECT, kube-proxy's, does the
// same on a same-node path (docs/services.md).
func refusedWithin(proto string) time.Duration {
	if proto == "tcp6" {
		return 2500 * time.Millisecond
	}
	return time.Second
}
