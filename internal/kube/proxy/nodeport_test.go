package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vnetlab/vnetlab/internal/datapath/svcsync"
)

// npSvc is a Service of type typ with port 80 (nodePort 30080) and UDP 53
// (nodePort 30053), policy pol, health check port hc.
func npSvc(typ corev1.ServiceType, pol corev1.ServiceExternalTrafficPolicy, hc int32) *corev1.Service {
	s := svcOf("10.96.0.10", sport("web", 80, corev1.ProtocolTCP, intstr.FromInt32(8080)), sport("dns", 53, corev1.ProtocolUDP, intstr.FromInt32(5353)))
	s.Spec.Type = typ
	s.Spec.ExternalTrafficPolicy = pol
	s.Spec.HealthCheckNodePort = hc
	if typ != corev1.ServiceTypeClusterIP {
		s.Spec.Ports[0].NodePort = 30080
		s.Spec.Ports[1].NodePort = 30053
	}
	return s
}

func TestTranslateExternal(t *testing.T) {
	cluster, local := corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal
	ports := []discoveryv1.EndpointPort{eport("web", 8080, corev1.ProtocolTCP), eport("dns", 5353, corev1.ProtocolUDP)}
	twoNodes := []*discoveryv1.EndpointSlice{sliceOf("a", ports,
		ep{ip: "10.244.1.5", node: "me", ready: b(true)}, ep{ip: "10.244.2.5", node: "other", ready: b(true)},
		ep{ip: "10.244.1.6", node: "me", ready: b(false)})}
	elsewhere := []*discoveryv1.EndpointSlice{sliceOf("a", ports, ep{ip: "10.244.2.5", node: "other", ready: b(true)})}
	dual := append([]*discoveryv1.EndpointSlice{slice6("b", ports,
		ep{ip: "fd00:10:244:1::5", node: "me", ready: b(true)}, ep{ip: "fd00:10:244:2::5", node: "other", ready: b(true)})}, twoNodes...)
	sctp := npSvc(corev1.ServiceTypeNodePort, cluster, 0)
	sctp.Spec.Ports[1].Protocol = corev1.ProtocolSCTP
	withIPs := func(s *corev1.Service, ips ...string) *corev1.Service { s.Spec.ExternalIPs = ips; return s }
	itpLocal := npSvc(corev1.ServiceTypeNodePort, cluster, 0)
	itpLocal.Spec.InternalTrafficPolicy = new(corev1.ServiceInternalTrafficPolicyLocal)
	headless := withIPs(npSvc(corev1.ServiceTypeClusterIP, "", 0), "203.0.113.250")
	headless.Spec.ClusterIP, headless.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
	cases := []struct {
		name   string
		svc    *corev1.Service
		slices []*discoveryv1.EndpointSlice
		nodeIP string
		want   map[string][]string
		notes  int
	}{{
		name: "ClusterIP: no node ports", svc: npSvc(corev1.ServiceTypeClusterIP, "", 0), slices: twoNodes, nodeIP: "10.250.0.2",
		want: map[string][]string{},
	}, {
		name: "NodePort, policy Cluster: every ready endpoint", svc: npSvc(corev1.ServiceTypeNodePort, cluster, 0), slices: twoNodes, nodeIP: "10.250.0.2",
		want: map[string][]string{"10.250.0.2:30080/tcp": {"10.244.1.5:8080", "10.244.2.5:8080"}, "10.250.0.2:30053/udp": {"10.244.1.5:5353", "10.244.2.5:5353"}},
	}, {
		name: "NodePort, policy Local: every endpoint for pods and the node, this node's ready ones for outside", svc: npSvc(corev1.ServiceTypeNodePort, local, 0), slices: twoNodes, nodeIP: "10.250.0.2",
		want: map[string][]string{
			"10.250.0.2:30080/tcp": {"10.244.1.5:8080", "10.244.2.5:8080"}, "10.250.0.2:30053/udp": {"10.244.1.5:5353", "10.244.2.5:5353"},
			"10.250.0.2:30080/tcp (external)": {"10.244.1.5:8080"}, "10.250.0.2:30053/udp (external)": {"10.244.1.5:5353"}},
	}, {
		name: "policy Local, no endpoint here: external entries without backends (dropped)", svc: npSvc(corev1.ServiceTypeNodePort, local, 0), slices: elsewhere, nodeIP: "10.250.0.2",
		want: map[string][]string{"10.250.0.2:30080/tcp": {"10.244.2.5:8080"}, "10.250.0.2:30053/udp": {"10.244.2.5:5353"},
			"10.250.0.2:30080/tcp (external)": nil, "10.250.0.2:30053/udp (external)": nil},
	}, {
		name: "LoadBalancer: its node ports too", svc: npSvc(corev1.ServiceTypeLoadBalancer, cluster, 0), slices: twoNodes, nodeIP: "10.250.0.3",
		want: map[string][]string{"10.250.0.3:30080/tcp": {"10.244.1.5:8080", "10.244.2.5:8080"}, "10.250.0.3:30053/udp": {"10.244.1.5:5353", "10.244.2.5:5353"}},
	}, {
		name: "internalTrafficPolicy Local does not apply to node ports", svc: itpLocal, slices: twoNodes, nodeIP: "10.250.0.2",
		want: map[string][]string{"10.250.0.2:30080/tcp": {"10.244.1.5:8080", "10.244.2.5:8080"}, "10.250.0.2:30053/udp": {"10.244.1.5:5353", "10.244.2.5:5353"}},
	}, {
		name: "SCTP node port skipped with a note", svc: sctp, slices: twoNodes, nodeIP: "10.250.0.2",
		want: map[string][]string{"10.250.0.2:30080/tcp": {"10.244.1.5:8080", "10.244.2.5:8080"}}, notes: 1,
	}, {
		name: "no node address: no node ports", svc: npSvc(corev1.ServiceTypeNodePort, cluster, 0), slices: twoNodes, nodeIP: "",
		want: map[string][]string{},
	}, {
		name: "external IPs of a ClusterIP Service: the Service's ports there, each with its family's endpoints, a malformed one skipped with a note", svc: withIPs(npSvc(corev1.ServiceTypeClusterIP, "", 0), "203.0.113.250", "2001:db8::1", "nope"), slices: twoNodes, nodeIP: "10.250.0.2",
		want: map[string][]string{"203.0.113.250:80/tcp": {"10.244.1.5:8080", "10.244.2.5:8080"}, "203.0.113.250:53/udp": {"10.244.1.5:5353", "10.244.2.5:5353"},
			"[2001:db8::1]:80/tcp": nil, "[2001:db8::1]:53/udp": nil}, notes: 1,
	}, {
		name: "a dual-stack node, policy Local: node ports on both addresses, each with its family's endpoints", svc: npSvc(corev1.ServiceTypeNodePort, local, 0), slices: dual, nodeIP: "10.250.0.2,fd00:10:250::2",
		want: map[string][]string{
			"10.250.0.2:30080/tcp": {"10.244.1.5:8080", "10.244.2.5:8080"}, "10.250.0.2:30053/udp": {"10.244.1.5:5353", "10.244.2.5:5353"},
			"10.250.0.2:30080/tcp (external)": {"10.244.1.5:8080"}, "10.250.0.2:30053/udp (external)": {"10.244.1.5:5353"},
			"[fd00:10:250::2]:30080/tcp": {"[fd00:10:244:1::5]:8080", "[fd00:10:244:2::5]:8080"}, "[fd00:10:250::2]:30053/udp": {"[fd00:10:244:1::5]:5353", "[fd00:10:244:2::5]:5353"},
			"[fd00:10:250::2]:30080/tcp (external)": {"[fd00:10:244:1::5]:8080"}, "[fd00:10:250::2]:30053/udp (external)": {"[fd00:10:244:1::5]:5353"}},
	}, {
		name: "an IPv6-only node: node ports on its IPv6 address", svc: npSvc(corev1.ServiceTypeNodePort, cluster, 0), slices: dual, nodeIP: "fd00:10:250::2",
		want: map[string][]string{"[fd00:10:250::2]:30080/tcp": {"[fd00:10:244:1::5]:8080", "[fd00:10:244:2::5]:8080"}, "[fd00:10:250::2]:30053/udp": {"[fd00:10:244:1::5]:5353", "[fd00:10:244:2::5]:5353"}},
	}, {
		name: "external IPs and node ports, policy Local", svc: withIPs(npSvc(corev1.ServiceTypeNodePort, local, 0), "203.0.113.7"), slices: twoNodes, nodeIP: "10.250.0.2",
		want: map[string][]string{
			"10.250.0.2:30080/tcp": {"10.244.1.5:8080", "10.244.2.5:8080"}, "10.250.0.2:30053/udp": {"10.244.1.5:5353", "10.244.2.5:5353"},
			"10.250.0.2:30080/tcp (external)": {"10.244.1.5:8080"}, "10.250.0.2:30053/udp (external)": {"10.244.1.5:5353"},
			"203.0.113.7:80/tcp": {"10.244.1.5:8080", "10.244.2.5:8080"}, "203.0.113.7:53/udp": {"10.244.1.5:5353", "10.244.2.5:5353"},
			"203.0.113.7:80/tcp (external)": {"10.244.1.5:8080"}, "203.0.113.7:53/udp (external)": {"10.244.1.5:5353"}},
	}, {
		name: "headless: no external IPs either (kube-proxy skips the Service)", svc: headless, slices: twoNodes, nodeIP: "10.250.0.2",
		want: map[string][]string{},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var ips []netip.Addr
			if c.nodeIP != "" {
				var err error
				if ips, err = nodeIPsOf(strings.Split(c.nodeIP, ",")); err != nil {
					t.Fatal(err)
				}
			}
			got, notes := TranslateExternal(c.svc, c.slices, Node{Name: "me"}, ips)
			want := svcsync.Entries{}
			for k, v := range c.want {
				want[key(k)] = bes(v...)
			}
			if len(got) != len(want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			for k, v := range want {
				if g, ok := got[k]; !ok || !reflect.DeepEqual(g, v) {
					t.Errorf("%s: got %v (present %v), want %v", k, g, ok, v)
				}
			}
			if len(notes) != c.notes {
				t.Errorf("notes %q, want %d", notes, c.notes)
			}
		})
	}
}

func TestHealthCheck(t *testing.T) {
	local := corev1.ServiceExternalTrafficPolicyLocal
	ports := []discoveryv1.EndpointPort{eport("web", 8080, corev1.ProtocolTCP)}
	slices := []*discoveryv1.EndpointSlice{
		sliceOf("a", ports, ep{ip: "10.244.1.5", node: "me", ready: b(true)}, ep{ip: "10.244.1.6", node: "me"}, ep{ip: "10.244.1.7", node: "me", ready: b(false)}),
		sliceOf("b", ports, ep{ip: "10.244.1.5", node: "me", ready: b(true)}, ep{ip: "10.244.2.5", node: "other", ready: b(true)}),
	}
	for _, c := range []struct {
		name        string
		svc         *corev1.Service
		port, count int
	}{
		{"LoadBalancer, Local: two ready here (one in two slices)", npSvc(corev1.ServiceTypeLoadBalancer, local, 32000), 32000, 2},
		{"policy Cluster: no health check", npSvc(corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyCluster, 32000), 0, 0},
		{"ClusterIP: none", npSvc(corev1.ServiceTypeClusterIP, "", 0), 0, 0},
	} {
		port, n := HealthCheck(c.svc, slices, "me")
		if int(port) != c.port || n != c.count {
			t.Errorf("%s: port %d, %d local endpoints; want %d, %d", c.name, port, n, c.port, c.count)
		}
	}
}

// The health server answers 200 with the count while there are local
// endpoints, 503 without; moves with its port; stops when told.
func TestHealthServers(t *testing.T) {
	h := newHealthServers(t.Logf)
	h.host = "127.0.0.1" // this test runs in the machine's namespace: loopback only
	defer h.Close()
	get := func(port uint16) (int, map[string]any, error) {
		c := http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}} // loopback, never a proxy
		r, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
		if err != nil {
			return 0, nil, err
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return r.StatusCode, nil, fmt.Errorf("body %q: %w", b, err)
		}
		if r.Header.Get("Content-Type") != "application/json" {
			return r.StatusCode, m, fmt.Errorf("content type %q", r.Header.Get("Content-Type"))
		}
		return r.StatusCode, m, nil
	}
	port := serveOnFreePort(t, h, "ns/web", 2)
	code, m, err := get(port)
	if err != nil || code != 200 || m["localEndpoints"] != float64(2) || m["service"].(map[string]any)["name"] != "web" {
		t.Fatalf("2 local endpoints: %d %v %v, want 200 with localEndpoints 2", code, m, err)
	}
	if err := h.Set("ns/web", port, 0); err != nil {
		t.Fatal(err)
	}
	if code, m, err = get(port); err != nil || code != 503 || m["localEndpoints"] != float64(0) {
		t.Fatalf("no local endpoint: %d %v %v, want 503 with localEndpoints 0", code, m, err)
	}
	if err := h.Set("ns/web", 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err = get(port); err == nil {
		t.Fatal("the health server still answers after its Service lost its healthCheckNodePort")
	}
}
