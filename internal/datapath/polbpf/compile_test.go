package polbpf

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
)

// TestPortPrefixes: a range becomes the aligned blocks that cover it
// exactly, every port of a protocol one prefix of no port bits.
func TestPortPrefixes(t *testing.T) {
	for _, c := range []struct {
		first, last uint16
		want        []string
	}{
		{8080, 8090, []string{"8080/13", "8088/15", "8090/16"}},
		{0, 65535, []string{"0/0"}},
		{80, 80, []string{"80/16"}},
		{1, 7, []string{"1/16", "2/15", "4/14"}},
		{65534, 65535, []string{"65534/15"}},
	} {
		var got []string
		for _, k := range portPrefixes(&netpol.Allow{Ports: []netpol.PortRange{{Proto: netpol.TCP, First: c.first, Last: c.last}}}) {
			port := k.Port>>8 | k.Port<<8
			got = append(got, fmt.Sprintf("%d/%d", port, k.Prefixlen-ruleFixedBits))
			if k.Proto != 6 {
				t.Errorf("%d-%d: protocol %d", c.first, c.last, k.Proto)
			}
		}
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%d-%d: %v, want %v", c.first, c.last, got, c.want)
		}
	}
	if k := portPrefixes(&netpol.Allow{AnyPort: true}); len(k) != 1 || k[0].Prefixlen != ruleAnyBits {
		t.Errorf("any port: %+v", k)
	}
}

// TestBlockIdentities: a block allows the identities of the prefixes inside
// it (pods included) and inside none of its excepts; a pod's address named
// as a block is the pod's identity.
func TestBlockIdentities(t *testing.T) {
	pfx := netip.MustParsePrefix
	a, b := netip.MustParseAddr("10.0.1.1"), netip.MustParseAddr("10.0.2.1")
	r := &netpol.Rules{Pods: []netpol.PodRules{
		{Pod: "a", IPs: []netip.Addr{a}, Ingress: netpol.Side{Isolated: true, Allow: []*netpol.Allow{
			{Blocks: []netpol.Block{{CIDR: pfx("10.0.0.0/16"), Except: []netip.Prefix{pfx("10.0.2.0/24")}}}, AnyPort: true},
			{Blocks: []netpol.Block{{CIDR: pfx("10.0.2.1/32")}, {CIDR: pfx("10.0.3.0/24")}}, AnyPort: true},
		}}},
		{Pod: "b", IPs: []netip.Addr{b}},
	}}
	e := Compile(r)
	id := func(p string) uint32 {
		q := pfx(p)
		v, ok := e.Ipcache4[lpmKey4{uint32(q.Bits()), q.Addr().As4()}]
		if !ok {
			t.Fatalf("no identity for %s", p)
		}
		return v
	}
	if id("10.0.2.1/32") != e.EPs4[b.As4()].ID {
		t.Errorf("block 10.0.2.1/32 is not pod b's identity")
	}
	if len(e.Ipcache4) != 5 { // a, b, 10.0.0.0/16, 10.0.2.0/24, 10.0.3.0/24
		t.Errorf("%d prefixes: %v", len(e.Ipcache4), e.Ipcache4)
	}
	allowed := map[uint32]bool{}
	for k := range e.Rules {
		allowed[k.Peer] = true
	}
	for p, want := range map[string]bool{"10.0.0.0/16": true, "10.0.1.1/32": true, "10.0.3.0/24": true, "10.0.2.1/32": true, "10.0.2.0/24": false} {
		if allowed[id(p)] != want {
			t.Errorf("identity of %s allowed %v, want %v", p, allowed[id(p)], want)
		}
	}
}
