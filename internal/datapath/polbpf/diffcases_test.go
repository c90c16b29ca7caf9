package polbpf

import (
	"net/netip"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol/netpoltest"
)

// The differential's findings, each a small fixed world whose probes the
// enforcer once decided otherwise than the model; the model's verdicts
// (checked by upstream's API docs) are written out.

type diffCase struct {
	name     string
	policies string // YAML
	probes   []diffProbe
}

type diffProbe struct {
	src, dst string // addresses
	proto    netpol.Proto
	port     uint16
	allowed  bool
}

// diffPods: pods a and b in namespace default, each with an IPv4 and an
// IPv6 address.
var diffPods = []netpol.Pod{
	{Name: "a", Namespace: netpol.DefaultNamespace, Labels: netpol.Labels{"pod": "a"},
		IPs: []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")}},
	{Name: "b", Namespace: netpol.DefaultNamespace, Labels: netpol.Labels{"pod": "b"},
		IPs: []netip.Addr{netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("fd00::2")}},
}

var diffCases = []diffCase{{
	// A pod had one identity for both its addresses, so an ipBlock holding
	// its IPv4 address allowed its IPv6 packets too (and the other way):
	// an ipBlock matches addresses, a CIDR of one family none of the other.
	name: "an ipBlock of one family does not match a pod's address of the other",
	policies: `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: b-from-a4}
spec:
  podSelector: {matchLabels: {pod: b}}
  ingress: [{from: [{ipBlock: {cidr: 10.0.0.1/32}}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: a-to-b6}
spec:
  podSelector: {matchLabels: {pod: a}}
  policyTypes: [Egress]
  egress: [{to: [{ipBlock: {cidr: "fd00::/120", except: ["fd00::1/128"]}}]}]
`,
	probes: []diffProbe{
		{"10.0.0.1", "10.0.0.2", netpol.TCP, 80, false}, // a's egress: IPv6 only
		{"fd00::1", "fd00::2", netpol.TCP, 80, false},   // b's ingress: a's IPv4 only
		{"fd00::1", "fd00::9", netpol.UDP, 53, true},    // a's egress to the IPv6 block
		{"10.0.0.9", "10.0.0.2", netpol.TCP, 80, false},
		{"10.0.0.1", "10.0.0.9", netpol.SCTP, 9, false},
	},
}}

func TestDifferentialCases(t *testing.T) {
	p := testPlane(t)
	for _, c := range diffCases {
		doc, err := netpol.Parse([]byte(c.policies))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		w := &netpol.World{Pods: diffPods, Policies: doc.Policies}
		if err := netpol.Check(w); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		r := netpol.Compile(w)
		if _, err := p.Load(&r); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, dp := range c.probes {
			pr := netpoltest.Probe{Src: netip.MustParseAddr(dp.src), Dst: netip.MustParseAddr(dp.dst), Proto: dp.proto, Port: dp.port}
			model, got := w.Allowed(pr.Src, pr.Dst, pr.Proto, pr.Port), enforced(t, p, w, pr)
			if model != dp.allowed || got != dp.allowed {
				t.Errorf("%s: probe %v: the model says %s, the enforcer %s, want %s", c.name, pr, netpoltest.Verdict(model), netpoltest.Verdict(got), netpoltest.Verdict(dp.allowed))
			}
		}
	}
}
