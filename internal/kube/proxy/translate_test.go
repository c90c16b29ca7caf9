package proxy

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vnetlab/vnetlab/internal/datapath/svcsync"
	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
)

// Builders in the style of kube-proxy's own table tests.

func svcOf(ip string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip}, Ports: ports}}
}

func sport(name string, port int32, proto corev1.Protocol, target intstr.IntOrString) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, Protocol: proto, TargetPort: target}
}

type ep struct {
	ip                          string
	node                        string
	ready, serving, terminating *bool
}

func b(v bool) *bool { return &v }

func sliceOf(name string, ports []discoveryv1.EndpointPort, eps ...ep) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: "s"}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: ports}
	for _, e := range eps {
		x := discoveryv1.Endpoint{Addresses: []string{e.ip}, Conditions: discoveryv1.EndpointConditions{Ready: e.ready, Serving: e.serving, Terminating: e.terminating}}
		if e.node != "" {
			x.NodeName = &e.node
		}
		es.Endpoints = append(es.Endpoints, x)
	}
	return es
}

// slice6 is sliceOf with addressType IPv6.
func slice6(name string, ports []discoveryv1.EndpointPort, eps ...ep) *discoveryv1.EndpointSlice {
	es := sliceOf(name, ports, eps...)
	es.AddressType = discoveryv1.AddressTypeIPv6
	return es
}

func eport(name string, port int32, proto corev1.Protocol) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: &name, Port: &port, Protocol: &proto}
}

// key reads Key.String's form: "10.96.0.1:80/tcp", with " (external)"
// after an External entry's.
func key(s string) svcsync.Key {
	s, ext := strings.CutSuffix(s, " (external)")
	ap, proto, _ := strings.Cut(s, "/")
	a := netip.MustParseAddrPort(ap)
	p, _ := tcbpf.ParseProto(proto)
	return svcsync.Key{VIP: a.Addr(), Port: a.Port(), Proto: p, External: ext}
}

// bes reads backends "10.244.1.5:80"; "~10.244.1.5:80" is a Draining one.
func bes(ss ...string) []tcbpf.Backend {
	var out []tcbpf.Backend
	for _, s := range ss {
		s, draining := strings.CutPrefix(s, "~")
		a := netip.MustParseAddrPort(s)
		out = append(out, tcbpf.Backend{IP: a.Addr(), Port: a.Port(), Draining: draining})
	}
	return out
}

func TestTranslate(t *testing.T) {
	local := corev1.ServiceInternalTrafficPolicyLocal
	cases := []struct {
		name   string
		svc    *corev1.Service
		slices []*discoveryv1.EndpointSlice
		want   map[string][]string
		notes  int
	}{{
		name:   "one port, one ready endpoint",
		svc:    svcOf("10.96.0.10", sport("", 80, corev1.ProtocolTCP, intstr.FromInt32(8080))),
		slices: []*discoveryv1.EndpointSlice{sliceOf("a", []discoveryv1.EndpointPort{eport("", 8080, corev1.ProtocolTCP)}, ep{ip: "10.244.1.5", ready: b(true)})},
		want:   map[string][]string{"10.96.0.10:80/tcp": {"10.244.1.5:8080"}},
	}, {
		name: "TCP and UDP on the same port number",
		svc:  svcOf("10.96.0.10", sport("dns-tcp", 53, corev1.ProtocolTCP, intstr.FromInt32(5353)), sport("dns", 53, corev1.ProtocolUDP, intstr.FromInt32(5353))),
		slices: []*discoveryv1.EndpointSlice{sliceOf("a", []discoveryv1.EndpointPort{eport("dns-tcp", 5353, corev1.ProtocolTCP), eport("dns", 5353, corev1.ProtocolUDP)},
			ep{ip: "10.244.1.5"}, ep{ip: "10.244.2.7", ready: b(true)})},
		want: map[string][]string{"10.96.0.10:53/tcp": {"10.244.1.5:5353", "10.244.2.7:5353"}, "10.96.0.10:53/udp": {"10.244.1.5:5353", "10.244.2.7:5353"}},
	}, {
		name: "several ports map to their own target ports",
		svc:  svcOf("10.96.0.10", sport("http", 80, corev1.ProtocolTCP, intstr.FromInt32(8080)), sport("https", 443, corev1.ProtocolTCP, intstr.FromInt32(8443))),
		slices: []*discoveryv1.EndpointSlice{sliceOf("a", []discoveryv1.EndpointPort{eport("http", 8080, corev1.ProtocolTCP), eport("https", 8443, corev1.ProtocolTCP)},
			ep{ip: "10.244.1.5", ready: b(true)})},
		want: map[string][]string{"10.96.0.10:80/tcp": {"10.244.1.5:8080"}, "10.96.0.10:443/tcp": {"10.244.1.5:8443"}},
	}, {
		name: "named targetPort resolved per endpoint: two slices, two numbers",
		svc:  svcOf("10.96.0.10", sport("web", 80, corev1.ProtocolTCP, intstr.FromString("http"))),
		slices: []*discoveryv1.EndpointSlice{
			sliceOf("a", []discoveryv1.EndpointPort{eport("web", 8080, corev1.ProtocolTCP)}, ep{ip: "10.244.1.5", ready: b(true)}),
			sliceOf("b", []discoveryv1.EndpointPort{eport("web", 9090, corev1.ProtocolTCP)}, ep{ip: "10.244.2.7", ready: b(true)}),
		},
		want: map[string][]string{"10.96.0.10:80/tcp": {"10.244.1.5:8080", "10.244.2.7:9090"}},
	}, {
		name: "only ready endpoints",
		svc:  svcOf("10.96.0.10", sport("", 80, corev1.ProtocolTCP, intstr.FromInt32(80))),
		slices: []*discoveryv1.EndpointSlice{sliceOf("a", []discoveryv1.EndpointPort{eport("", 80, corev1.ProtocolTCP)},
			ep{ip: "10.244.1.5", ready: b(true)}, ep{ip: "10.244.1.6", ready: b(false)},
			ep{ip: "10.244.1.7", ready: b(false), serving: b(true), terminating: b(true)})},
		want: map[string][]string{"10.96.0.10:80/tcp": {"10.244.1.5:80"}},
	}, {
		name: "no ready endpoint: serving terminating ones (kube-proxy's fallback)",
		svc:  svcOf("10.96.0.10", sport("", 80, corev1.ProtocolTCP, intstr.FromInt32(80))),
		slices: []*discoveryv1.EndpointSlice{sliceOf("a", []discoveryv1.EndpointPort{eport("", 80, corev1.ProtocolTCP)},
			ep{ip: "10.244.1.6", ready: b(false), serving: b(false), terminating: b(true)},
			ep{ip: "10.244.1.7", ready: b(false), serving: b(true), terminating: b(true)})},
		want: map[string][]string{"10.96.0.10:80/tcp": {"10.244.1.7:80"}},
	}, {
		name: "UDP: a terminating endpoint still serving keeps its flows (Draining), beside the ready ones",
		svc:  svcOf("10.96.0.10", sport("", 53, corev1.ProtocolUDP, intstr.FromInt32(5353))),
		slices: []*discoveryv1.EndpointSlice{sliceOf("a", []discoveryv1.EndpointPort{eport("", 5353, corev1.ProtocolUDP)},
			ep{ip: "10.244.1.5", ready: b(true)}, ep{ip: "10.244.1.6", ready: b(false), serving: b(false), terminating: b(true)},
			ep{ip: "10.244.1.7", ready: b(false), serving: b(true), terminating: b(true)})},
		want: map[string][]string{"10.96.0.10:53/udp": {"10.244.1.5:5353", "~10.244.1.7:5353"}},
	}, {
		name: "no endpoints: the entry without backends (clients refused, not passed on)",
		svc:  svcOf("10.96.0.10", sport("", 80, corev1.ProtocolTCP, intstr.FromInt32(80))),
		want: map[string][]string{"10.96.0.10:80/tcp": nil},
	}, {
		name: "internalTrafficPolicy Local keeps this node's endpoints",
		svc: func() *corev1.Service {
			s := svcOf("10.96.0.10", sport("", 80, corev1.ProtocolTCP, intstr.FromInt32(80)))
			s.Spec.InternalTrafficPolicy = &local
			return s
		}(),
		slices: []*discoveryv1.EndpointSlice{sliceOf("a", []discoveryv1.EndpointPort{eport("", 80, corev1.ProtocolTCP)},
			ep{ip: "10.244.1.5", node: "me", ready: b(true)}, ep{ip: "10.244.2.5", node: "other", ready: b(true)}, ep{ip: "10.244.2.6", ready: b(true)})},
		want: map[string][]string{"10.96.0.10:80/tcp": {"10.244.1.5:80"}},
	}, {
		name: "internalTrafficPolicy Local, no local endpoint: no backends",
		svc: func() *corev1.Service {
			s := svcOf("10.96.0.10", sport("", 80, corev1.ProtocolTCP, intstr.FromInt32(80)))
			s.Spec.InternalTrafficPolicy = &local
			return s
		}(),
		slices: []*discoveryv1.EndpointSlice{sliceOf("a", []discoveryv1.EndpointPort{eport("", 80, corev1.ProtocolTCP)}, ep{ip: "10.244.2.5", node: "other", ready: b(true)})},
		want:   map[string][]string{"10.96.0.10:80/tcp": nil},
	}, {
		name: "a backend in two slices counts once; unnamed ports match unnamed",
		svc:  svcOf("10.96.0.10", sport("", 80, corev1.ProtocolTCP, intstr.FromInt32(80))),
		slices: []*discoveryv1.EndpointSlice{
			sliceOf("a", []discoveryv1.EndpointPort{eport("", 80, corev1.ProtocolTCP)}, ep{ip: "10.244.1.5", ready: b(true)}),
			sliceOf("b", []discoveryv1.EndpointPort{eport("", 80, corev1.ProtocolTCP)}, ep{ip: "10.244.1.5", ready: b(true)}),
			sliceOf("c", []discoveryv1.EndpointPort{eport("other", 80, corev1.ProtocolTCP)}, ep{ip: "10.244.1.9", ready: b(true)}),
		},
		want: map[string][]string{"10.96.0.10:80/tcp": {"10.244.1.5:80"}},
	}, {
		name:   "UDP Service port does not take TCP slice ports",
		svc:    svcOf("10.96.0.10", sport("", 53, corev1.ProtocolUDP, intstr.FromInt32(53))),
		slices: []*discoveryv1.EndpointSlice{sliceOf("a", []discoveryv1.EndpointPort{eport("", 53, corev1.ProtocolTCP)}, ep{ip: "10.244.1.5", ready: b(true)})},
		want:   map[string][]string{"10.96.0.10:53/udp": nil},
	}, {
		name:  "SCTP skipped with a note",
		svc:   svcOf("10.96.0.10", sport("", 80, corev1.ProtocolSCTP, intstr.FromInt32(80))),
		want:  map[string][]string{},
		notes: 1,
	}, {
		name: "headless: nothing",
		svc:  svcOf("None", sport("", 80, corev1.ProtocolTCP, intstr.FromInt32(80))),
	}, {
		name: "ExternalName: nothing",
		svc: func() *corev1.Service {
			s := svcOf("", sport("", 80, corev1.ProtocolTCP, intstr.FromInt32(80)))
			s.Spec.Type = corev1.ServiceTypeExternalName
			return s
		}(),
	}, {
		name: "dual-stack: each clusterIP gets the endpoints of its own family",
		svc: func() *corev1.Service {
			s := svcOf("10.96.0.10", sport("", 80, corev1.ProtocolTCP, intstr.FromInt32(80)))
			s.Spec.ClusterIPs = append(s.Spec.ClusterIPs, "fd00::10")
			return s
		}(),
		slices: []*discoveryv1.EndpointSlice{
			sliceOf("a4", []discoveryv1.EndpointPort{eport("", 80, corev1.ProtocolTCP)}, ep{ip: "10.244.1.5", ready: b(true)}),
			slice6("a6", []discoveryv1.EndpointPort{eport("", 80, corev1.ProtocolTCP)}, ep{ip: "fd00::5", ready: b(true)}),
		},
		want: map[string][]string{"10.96.0.10:80/tcp": {"10.244.1.5:80"}, "[fd00::10]:80/tcp": {"[fd00::5]:80"}},
	}, {
		name: "IPv6 single-stack: no IPv6 endpoint yet is an entry without backends",
		svc:  svcOf("fd00::10", sport("", 80, corev1.ProtocolTCP, intstr.FromInt32(80))),
		slices: []*discoveryv1.EndpointSlice{
			sliceOf("a4", []discoveryv1.EndpointPort{eport("", 80, corev1.ProtocolTCP)}, ep{ip: "10.244.1.5", ready: b(true)}),
		},
		want: map[string][]string{"[fd00::10]:80/tcp": nil},
	}, {
		name: "malformed endpoint addresses and clusterIPs: skipped with one note each, the rest served",
		svc: func() *corev1.Service {
			s := svcOf("10.96.0.10", sport("", 80, corev1.ProtocolTCP, intstr.FromInt32(80)))
			s.Spec.ClusterIPs = append(s.Spec.ClusterIPs, "fd00::zz")
			return s
		}(),
		slices: []*discoveryv1.EndpointSlice{
			sliceOf("a4", []discoveryv1.EndpointPort{eport("", 80, corev1.ProtocolTCP)},
				ep{ip: "10.244.1.5", ready: b(true)}, ep{ip: "10.244.1.999", ready: b(true)}, ep{ip: "fd00::7", ready: b(true)}),
			slice6("a6", []discoveryv1.EndpointPort{eport("", 80, corev1.ProtocolTCP)}, ep{ip: "10.244.1.6", ready: b(true)}),
		},
		want:  map[string][]string{"10.96.0.10:80/tcp": {"10.244.1.5:80"}},
		notes: 3,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, notes := Translate(c.svc, c.slices, Node{Name: "me"})
			var want svcsync.Entries
			if c.want != nil {
				want = svcsync.Entries{}
				for k, v := range c.want {
					want[key(k)] = bes(v...)
				}
			}
			if len(got) == 0 && len(want) == 0 {
				got, want = nil, nil
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("entries:\n got %v\nwant %v", got, want)
			}
			if len(notes) != c.notes {
				t.Errorf("notes %q, want %d", notes, c.notes)
			}
		})
	}
}

func TestSessionAffinity(t *testing.T) {
	secs := func(v int32) *corev1.SessionAffinityConfig {
		return &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &v}}
	}
	for _, c := range []struct {
		name     string
		affinity corev1.ServiceAffinity
		config   *corev1.SessionAffinityConfig
		want     uint32
	}{
		{"unset", "", nil, 0},
		{"None", corev1.ServiceAffinityNone, nil, 0},
		{"None ignores a config", corev1.ServiceAffinityNone, secs(60), 0},
		{"ClientIP, no config: the default 3 hours", corev1.ServiceAffinityClientIP, nil, 10800},
		{"ClientIP, config without clientIP", corev1.ServiceAffinityClientIP, &corev1.SessionAffinityConfig{}, 10800},
		{"ClientIP, 2 s", corev1.ServiceAffinityClientIP, secs(2), 2},
		{"ClientIP, a day", corev1.ServiceAffinityClientIP, secs(86400), 86400},
		{"ClientIP, over a day: clamped", corev1.ServiceAffinityClientIP, secs(100000), 86400},
		{"ClientIP, 0: clamped to 1", corev1.ServiceAffinityClientIP, secs(0), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := svcOf("10.96.0.10", sport("", 80, corev1.ProtocolTCP, intstr.FromInt32(80)))
			s.Spec.SessionAffinity, s.Spec.SessionAffinityConfig = c.affinity, c.config
			if got := SessionAffinity(s); got != c.want {
				t.Errorf("affinity %d, want %d", got, c.want)
			}
		})
	}
}
