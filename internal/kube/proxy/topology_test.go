package proxy

import (
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vnetlab/vnetlab/internal/datapath/svcsync"
)

// hint is an endpoint of a topology case: its last address octet, node,
// readiness, and the hints the EndpointSlice controller would write.
type hint struct {
	ip           string
	node         string
	ready        bool
	zones, nodes []string
}

// hintedSlice is one IPv4 slice of port 80 with the endpoints' hints.
func hintedSlice(hs ...hint) *discoveryv1.EndpointSlice {
	var eps []ep
	for _, h := range hs {
		e := ep{ip: h.ip, node: h.node, ready: b(h.ready)}
		if !h.ready {
			e.serving, e.terminating = b(true), b(true)
		}
		eps = append(eps, e)
	}
	es := sliceOf("a", []discoveryv1.EndpointPort{eport("", 80, corev1.ProtocolTCP)}, eps...)
	for i, h := range hs {
		if h.zones == nil && h.nodes == nil {
			continue
		}
		es.Endpoints[i].Hints = &discoveryv1.EndpointHints{}
		for _, z := range h.zones {
			es.Endpoints[i].Hints.ForZones = append(es.Endpoints[i].Hints.ForZones, discoveryv1.ForZone{Name: z})
		}
		for _, n := range h.nodes {
			es.Endpoints[i].Hints.ForNodes = append(es.Endpoints[i].Hints.ForNodes, discoveryv1.ForNode{Name: n})
		}
	}
	return es
}

// Topology-aware routing as kube-proxy's CategorizeEndpoints: the hints of
// the ready endpoints narrow the clusterIP's (and a node port's) backends
// to this node's or this zone's when every ready endpoint has such hints
// and one matches; else every endpoint. internalTrafficPolicy Local and
// externalTrafficPolicy Local's external entry take this node's endpoints,
// hints or not.
func TestTopologyHints(t *testing.T) {
	const (
		a = "10.244.1.5" // node me, zone z1
		c = "10.244.2.7" // node n2, zone z2
		d = "10.244.3.9" // node n3, zone z3
	)
	me := Node{Name: "me", Zone: "z1"}
	cases := []struct {
		name string
		at   Node
		eps  []hint
		itp  corev1.ServiceInternalTrafficPolicy
		want []string
	}{{
		name: "no hints: every endpoint",
		at:   me,
		eps:  []hint{{ip: a, node: "me", ready: true}, {ip: c, node: "n2", ready: true}},
		want: []string{a, c},
	}, {
		name: "zone hints (PreferSameZone, PreferClose, topology-mode Auto): this zone's",
		at:   me,
		eps:  []hint{{ip: a, node: "me", ready: true, zones: []string{"z1"}}, {ip: c, node: "n2", ready: true, zones: []string{"z2"}}, {ip: d, node: "n3", ready: true, zones: []string{"z3"}}},
		want: []string{a},
	}, {
		name: "an endpoint hinted for two zones serves both",
		at:   Node{Name: "n2", Zone: "z2"},
		eps:  []hint{{ip: a, node: "me", ready: true, zones: []string{"z1", "z2"}}, {ip: d, node: "n3", ready: true, zones: []string{"z3"}}},
		want: []string{a},
	}, {
		name: "one ready endpoint without a zone hint: every endpoint",
		at:   me,
		eps:  []hint{{ip: a, node: "me", ready: true, zones: []string{"z1"}}, {ip: c, node: "n2", ready: true}},
		want: []string{a, c},
	}, {
		name: "a terminating endpoint without hints does not count",
		at:   me,
		eps:  []hint{{ip: a, node: "me", ready: true, zones: []string{"z1"}}, {ip: c, node: "n2", ready: true, zones: []string{"z2"}}, {ip: d, node: "n3"}},
		want: []string{a},
	}, {
		name: "no endpoint hinted for this zone: every endpoint",
		at:   Node{Name: "n9", Zone: "z9"},
		eps:  []hint{{ip: a, node: "me", ready: true, zones: []string{"z1"}}, {ip: c, node: "n2", ready: true, zones: []string{"z2"}}},
		want: []string{a, c},
	}, {
		name: "a node without a zone label: every endpoint",
		at:   Node{Name: "me"},
		eps:  []hint{{ip: a, node: "me", ready: true, zones: []string{"z1"}}, {ip: c, node: "n2", ready: true, zones: []string{"z2"}}},
		want: []string{a, c},
	}, {
		name: "node hints (PreferSameNode): this node's",
		at:   me,
		eps: []hint{{ip: a, node: "me", ready: true, zones: []string{"z1"}, nodes: []string{"me"}}, {ip: c, node: "n2", ready: true, zones: []string{"z1"}, nodes: []string{"n2"}},
			{ip: d, node: "n3", ready: true, zones: []string{"z3"}, nodes: []string{"n3"}}},
		want: []string{a},
	}, {
		name: "node hints, none for this node: the zone hints",
		at:   Node{Name: "n4", Zone: "z1"},
		eps: []hint{{ip: a, node: "me", ready: true, zones: []string{"z1"}, nodes: []string{"me"}}, {ip: c, node: "n2", ready: true, zones: []string{"z1"}, nodes: []string{"n2"}},
			{ip: d, node: "n3", ready: true, zones: []string{"z3"}, nodes: []string{"n3"}}},
		want: []string{a, c},
	}, {
		name: "node hints on some endpoints only: the zone hints",
		at:   me,
		eps:  []hint{{ip: a, node: "me", ready: true, zones: []string{"z1"}, nodes: []string{"me"}}, {ip: c, node: "n2", ready: true, zones: []string{"z1"}}, {ip: d, node: "n3", ready: true, zones: []string{"z3"}}},
		want: []string{a, c},
	}, {
		name: "no ready endpoint: the serving terminating ones, hints ignored",
		at:   me,
		eps:  []hint{{ip: c, node: "n2", zones: []string{"z2"}}, {ip: d, node: "n3", zones: []string{"z3"}}},
		want: []string{c, d},
	}, {
		name: "internalTrafficPolicy Local: this node's endpoints, not its zone's",
		at:   me,
		itp:  corev1.ServiceInternalTrafficPolicyLocal,
		eps:  []hint{{ip: a, node: "me", ready: true, zones: []string{"z2"}}, {ip: c, node: "n2", ready: true, zones: []string{"z1"}}},
		want: []string{a},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc := svcOf("10.96.0.10", sport("", 80, corev1.ProtocolTCP, intstr.FromInt32(80)))
			if tc.itp != "" {
				svc.Spec.InternalTrafficPolicy = &tc.itp
			}
			got, _ := Translate(svc, []*discoveryv1.EndpointSlice{hintedSlice(tc.eps...)}, tc.at)
			var want []string
			for _, w := range tc.want {
				want = append(want, w+":80")
			}
			if g := got[key("10.96.0.10:80/tcp")]; !reflect.DeepEqual(g, bes(want...)) {
				t.Errorf("backends %v, want %v", g, want)
			}
		})
	}
}

// A node port with externalTrafficPolicy Local: the entry pods and node
// processes use takes the hinted endpoints, as the clusterIP's; the
// external entry this node's, whatever the hints (kube-proxy's local
// endpoints).
func TestTopologyHintsNodePort(t *testing.T) {
	svc := svcOf("10.96.0.10", sport("", 80, corev1.ProtocolTCP, intstr.FromInt32(80)))
	svc.Spec.Type = corev1.ServiceTypeNodePort
	svc.Spec.Ports[0].NodePort = 30080
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	es := hintedSlice(hint{ip: "10.244.1.5", node: "me", ready: true, zones: []string{"z2"}}, hint{ip: "10.244.2.7", node: "n2", ready: true, zones: []string{"z1"}})
	got, _ := TranslateExternal(svc, []*discoveryv1.EndpointSlice{es}, Node{Name: "me", Zone: "z1"}, []netip.Addr{netip.MustParseAddr("10.250.0.2")})
	want := svcsync.Entries{
		key("10.250.0.2:30080/tcp"):            bes("10.244.2.7:80"),
		key("10.250.0.2:30080/tcp (external)"): bes("10.244.1.5:80"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("entries:\n got %v\nwant %v", got, want)
	}
}

// The proxier follows its Node's zone: a zone label that appears or
// changes syncs every Service again with the new zone's endpoints.
func TestProxierFollowsNodeZone(t *testing.T) {
	f := newFakePlane()
	p, _ := newTestProxier(t, f)
	addObj(p, svcOf("10.96.0.10", sport("", 80, corev1.ProtocolTCP, intstr.FromInt32(80))))
	addObj(p, hintedSlice(hint{ip: "10.244.1.5", node: "me", ready: true, zones: []string{"z1"}}, hint{ip: "10.244.2.7", node: "n2", ready: true, zones: []string{"z2"}}))
	mustSync(t, p, f)
	backends := func() []netip.AddrPort {
		t.Helper()
		var out []netip.AddrPort
		for _, b := range f.m[key("10.96.0.10:80/tcp")] {
			out = append(out, netip.AddrPortFrom(b.IP, b.Port))
		}
		return out
	}
	all := []netip.AddrPort{netip.MustParseAddrPort("10.244.1.5:80"), netip.MustParseAddrPort("10.244.2.7:80")}
	if got := backends(); !reflect.DeepEqual(got, all) {
		t.Fatalf("no zone label yet: %v, want every endpoint %v", got, all)
	}
	node := &corev1.Node{}
	node.Name, node.Labels = "me", map[string]string{corev1.LabelTopologyZone: "z2"}
	p.NodeHandler().OnAdd(node, false)
	mustSync(t, p, f)
	if got, want := backends(), all[1:]; !reflect.DeepEqual(got, want) {
		t.Fatalf("zone z2: %v, want %v", got, want)
	}
	node = node.DeepCopy()
	node.Labels[corev1.LabelTopologyZone] = "z1"
	p.NodeHandler().OnUpdate(nil, node)
	mustSync(t, p, f)
	if got, want := backends(), all[:1]; !reflect.DeepEqual(got, want) {
		t.Fatalf("zone z1: %v, want %v", got, want)
	}
	other := node.DeepCopy()
	other.Name, other.Labels[corev1.LabelTopologyZone] = "n2", "z2"
	p.NodeHandler().OnUpdate(nil, other) // another node's: not the proxy's
	if calls := mustSync(t, p, f); len(calls) != 0 {
		t.Fatalf("another node's zone changed this node's entries: %v", calls)
	}
}
