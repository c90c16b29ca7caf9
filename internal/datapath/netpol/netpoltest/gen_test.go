package netpoltest

import (
	"net/netip"
	"os"
	"strconv"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// A seed gives one world and one list of probes, whatever was drawn
// before; two seeds give two worlds.
func TestDeterministic(t *testing.T) {
	a, b := New(7), New(7)
	if a.String() != b.String() {
		t.Fatalf("seed 7 drew two worlds:\n%s\n%s", a, b)
	}
	pa, pb := a.Probes(50), b.Probes(50)
	for i := range pa {
		if pa[i] != pb[i] {
			t.Fatalf("seed 7's probe %d: %v and %v", i, pa[i], pb[i])
		}
	}
	if New(8).String() == a.String() {
		t.Errorf("seeds 7 and 8 drew the same world:\n%s", a)
	}
}

// Every world passes netpol.Check, its pods have their PodAddr, and its
// probes' ends are its own: a pod and another pod, or a pod and an address
// of no pod, in one family.
func TestWorldsValid(t *testing.T) {
	for seed := range uint64(2000) {
		g := New(seed)
		if err := netpol.Check(g.World); err != nil {
			t.Fatalf("%v\n%s", err, g)
		}
		if len(g.World.Pods) > MaxPods {
			t.Fatalf("seed %d: %d pods, more than MaxPods", seed, len(g.World.Pods))
		}
		for i, p := range g.World.Pods {
			for _, a := range p.IPs {
				if a != PodAddr(i, a.Is6()) || !PodNet(a.Is6()).Contains(a) {
					t.Fatalf("seed %d: pod %d has %s, not its PodAddr in PodNet", seed, i, a)
				}
			}
		}
		for _, p := range g.Probes(20) {
			sp, dp := g.World.PodAt(p.Src), g.World.PodAt(p.Dst)
			if sp == nil && dp == nil || sp == dp || p.Src.Is4() != p.Dst.Is4() || p.Port == 0 {
				t.Fatalf("seed %d: probe %v", seed, p)
			}
		}
	}
}

// The worlds hold every feature the generator promises, each in some of
// 1000 worlds.
func TestCoverage(t *testing.T) {
	seen := map[string]int{}
	sel := func(where string, s *metav1.LabelSelector) {
		switch {
		case s == nil:
			seen[where+" absent"]++
		case len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0:
			seen[where+" empty"]++
		}
		if s == nil {
			return
		}
		if len(s.MatchLabels) > 0 {
			seen[where+" matchLabels"]++
		}
		for _, e := range s.MatchExpressions {
			seen[where+" "+string(e.Operator)]++
		}
	}
	rule := func(dir string, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) {
		if len(peers) == 0 {
			seen[dir+" every peer"]++
		}
		if len(ports) == 0 {
			seen[dir+" every port"]++
		}
		for _, p := range peers {
			if p.IPBlock != nil {
				seen["ipBlock"]++
				if c := netip.MustParsePrefix(p.IPBlock.CIDR); c != c.Masked() {
					seen["cidr with host bits"]++
				}
				if len(p.IPBlock.Except) > 0 {
					seen["except"]++
				}
				continue
			}
			sel("peer podSelector", p.PodSelector)
			sel("peer namespaceSelector", p.NamespaceSelector)
		}
		for _, pp := range ports {
			seen["protocol "+string(protoOf(pp))]++
			switch {
			case pp.Port == nil:
				seen["every port of a protocol"]++
			case pp.Port.Type == intstr.String:
				seen[dir+" named port"]++
			case pp.EndPort != nil:
				seen["endPort"]++
			default:
				seen["port"]++
			}
		}
	}
	for seed := range uint64(1000) {
		g := New(seed)
		seen["family "+string(g.Family)]++
		if len(g.World.Pods) > 6 {
			seen["more than 6 pods"]++
		}
		for _, p := range g.World.Policies {
			sel("podSelector", &p.Spec.PodSelector)
			in, eg := netpol.Types(&p)
			seen[map[[2]bool]string{{true, false}: "ingress only", {false, true}: "egress only", {true, true}: "both types"}[[2]bool{in, eg}]]++
			if len(p.Spec.PolicyTypes) == 0 {
				seen["policyTypes absent"]++
			}
			for _, r := range p.Spec.Ingress {
				rule("ingress", r.From, r.Ports)
			}
			for _, r := range p.Spec.Egress {
				rule("egress", r.To, r.Ports)
			}
		}
	}
	for _, want := range []string{"family " + string(family.IPv4), "family " + string(family.IPv6), "family " + string(family.Dual), "podSelector empty", "podSelector matchLabels",
		"podSelector In", "podSelector NotIn", "podSelector Exists", "podSelector DoesNotExist",
		"peer podSelector absent", "peer podSelector empty", "peer namespaceSelector absent", "peer namespaceSelector empty",
		"peer namespaceSelector matchLabels", "peer namespaceSelector In", "peer namespaceSelector NotIn",
		"ingress only", "egress only", "both types", "policyTypes absent",
		"ingress every peer", "egress every peer", "ingress every port", "egress every port",
		"more than 6 pods", "ipBlock", "cidr with host bits", "except", "protocol TCP", "protocol UDP", "protocol SCTP",
		"every port of a protocol", "ingress named port", "egress named port", "endPort", "port"} {
		if seen[want] == 0 {
			t.Errorf("no world of 1000 has %s", want)
		}
	}
	t.Logf("features in 1000 worlds: %v", seen)
}

func protoOf(pp networkingv1.NetworkPolicyPort) netpol.Proto {
	if pp.Protocol == nil {
		return netpol.TCP
	}
	return netpol.Proto(*pp.Protocol)
}

// The compiled rules (what every provider realises) decide each probe as
// the reference model does: on 500 worlds, or VNETLAB_DIFF_WORLDS.
func TestCompiledAgreesWithModel(t *testing.T) {
	worlds := uint64(500)
	if s := os.Getenv("VNETLAB_DIFF_WORLDS"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("VNETLAB_DIFF_WORLDS=%q: give a whole number", s)
		}
		worlds = n
	}
	for seed := range worlds {
		g := New(seed)
		r := netpol.Compile(g.World)
		for _, p := range g.Probes(200) {
			want := g.World.Allowed(p.Src, p.Dst, p.Proto, p.Port)
			if got := r.Allowed(p.Src, p.Dst, p.Proto, p.Port); got != want {
				t.Fatalf("seed %d: probe %v: compiled rules say %v, the model %v\n%s", seed, p, got, want, g)
			}
		}
	}
}
