package proxy_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/system/cgroup"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// vnetlab-ebpf --socket-lb (this file's tests run last: the cluster is
// replaced once more). A pod's TCP connections to a Service are
// translated at connect() by the socket programs on the node's cgroup:
// their counter rises and the tc programs translate no packet of them;
// hairpin works. What only the tc programs do as Kubernetes defines it
// stays theirs: a connected UDP socket (its flow must be able to move
// when its backend goes), a Service without endpoints refuses with
// ECONNREFUSED from the ICMP port unreachable of kube-proxy's REJECT,
// sessionAffinity ClientIP pins a client to one backend.
func TestSocketLB(t *testing.T) {
	cs := needProxy(t, modeSocketLB)
	ns := kns(t, cs)
	ips := runPods(t, cs, ns, whoamiPod("srv", 2, map[string]string{"app": "srv"}), clientPod("cli", 1))
	vip := whoamiService(t, cs, ns, "srv")
	cli := podNetns(t, ips["cli"])
	tcStats := func() tcbpf.Stats {
		t.Helper()
		st, err := plane(t, 1).Stats()
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	sockBefore, tcBefore := sockStats(t, 1), tcStats()
	mustWho(t, cli, "tcp", hostport(vip, 80), "srv", 10*time.Second)
	mustWho(t, podNetns(t, ips["srv"]), "tcp", hostport(vip, 81), "srv", 10*time.Second) // hairpin (node 2)
	sockAfter, tcAfter := sockStats(t, 1), tcStats()
	if sockAfter.Connects < sockBefore.Connects+1 {
		t.Errorf("node 1's socket programs translated %d connects of pod cli (TCP), want >= 1", sockAfter.Connects-sockBefore.Connects)
	}
	if tcAfter.DNAT != tcBefore.DNAT {
		t.Errorf("node 1's tc programs translated %d packets of connections the socket programs had translated", tcAfter.DNAT-tcBefore.DNAT)
	}
	// A connected UDP socket is tc's: its flow can then move to a live
	// backend when its own goes (kube-proxy's conntrack cleanup).
	mustWho(t, cli, "udp", hostport(vip, 80), "srv", 10*time.Second)
	if st := sockStats(t, 1); st.Connects != sockAfter.Connects {
		t.Errorf("node 1's socket programs translated %d connects of a connected UDP socket, want none", st.Connects-sockAfter.Connects)
	}
	if st := tcStats(); st.DNAT <= tcAfter.DNAT {
		t.Errorf("node 1's tc programs translated no packet of pod cli's connected UDP socket")
	}
	sockAfter, tcAfter = sockStats(t, 1), tcStats()

	nobody := whoamiService(t, cs, ns, "nobody")
	if err := waitFor(10*time.Second, func() bool { _, ok := entry(t, plane(t, 1), nobody, 80, tcbpf.TCP); return ok }); err != nil {
		t.Fatal("the Service without endpoints never reached node 1's maps")
	}
	start := time.Now()
	if got, err := who(cli, "tcp", hostport(nobody, 80)); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("pod cli -> a Service without endpoints: %q, %v; want connection refused (the tc programs' reject)", got, err)
	}
	t.Logf("a Service without endpoints: refused after %s (including the client process's start)", time.Since(start).Round(time.Millisecond))
	if st := sockStats(t, 1); st.NoBackend != sockAfter.NoBackend {
		t.Errorf("the socket programs refused %d connects: a pod's Service without endpoints is the tc programs'", st.NoBackend-sockAfter.NoBackend)
	}
	if st := tcStats(); st.Rejects <= tcAfter.Rejects {
		t.Errorf("node 1's tc programs rejected nothing (%d before, %d after)", tcAfter.Rejects, st.Rejects)
	}

	tcBefore = tcStats()
	sessionAffinityClientIP(t, cs, "")
	if st := tcStats(); st.NewFlows < tcBefore.NewFlows+20 {
		t.Errorf("node 1's tc programs picked a backend for %d flows during the sessionAffinity test, want >= 20 (its affinity connections are theirs)", st.NewFlows-tcBefore.NewFlows)
	}
}

// --socket-lb and a backend leaving: a pod's connected UDP socket is tc's,
// whose conntrack entry the proxy forgets; the outside client's flow is
// the NodePort programs'. Both move to the live backend.
func TestUDPFlowMovesWithSocketLB(t *testing.T) {
	udpFlowMoves(t, needProxy(t, modeSocketLB), true)
}

// --socket-lb on its dual-stack cluster: IPv6 Services through the socket
// programs, and none of those connections translated again by tc's IPv6
// programs.
func TestSocketLBIPv6(t *testing.T) {
	cs := needProxy(t, modeSocketLB)
	before, err := plane(t, 1).Stats6()
	if err != nil {
		t.Fatal(err)
	}
	ipv6ThroughSockets(t, cs)
	after, err := plane(t, 1).Stats6()
	if err != nil {
		t.Fatal(err)
	}
	if after.DNAT != before.DNAT {
		t.Errorf("node 1's tc IPv6 programs translated %d packets of connections the socket programs had translated", after.DNAT-before.DNAT)
	}
}

// Topology-aware routing holds in both planes and both families: on the
// socket-LB cluster, its 2 nodes in zones zone-1 and zone-2, a dual-stack
// Service with trafficDistribution PreferSameZone and a backend in each
// zone is answered, from a pod on each node, by its own zone's backend
// only: through the socket programs (a process in the pod's cgroup:
// connect4/connect6 translate) and through the tc programs (this test's
// thread in the pod's namespace, outside the node's cgroup: the pod's
// veth translates), over IPv4 and IPv6. The proxy narrows the endpoints
// once per node, so each node's map entry holds the one backend both
// planes read.
func TestTopologyInBothPlanes(t *testing.T) {
	cs := needProxy(t, modeSocketLB)
	ns := kns(t, cs)
	near := map[string]string{"app": "near"}
	ips := runPods(t, cs, ns, whoamiPod("srv1", 1, near), whoamiPod("srv2", 2, near), clientPod("cli1", 1), clientPod("cli2", 2))
	dual, prefer := corev1.IPFamilyPolicyRequireDualStack, corev1.ServiceTrafficDistributionPreferSameZone
	svc, err := cs.CoreV1().Services(ns).Create(testCtx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "near"},
		Spec: corev1.ServiceSpec{Selector: near, IPFamilyPolicy: &dual, TrafficDistribution: &prefer,
			Ports: []corev1.ServicePort{{Name: "web", Port: 80, TargetPort: intstr.FromString("http")}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.ClusterIPs) != 2 {
		t.Fatalf("Service near: clusterIPs %v, want one per family", svc.Spec.ClusterIPs)
	}
	// The EndpointSlice controller hints each endpoint with its zone.
	if err := waitFor(time.Minute, func() bool { return zoneHinted(cs, ns, "near") == 4 }); err != nil {
		t.Fatalf("the Service's 4 endpoints (2 per family) never all got zone hints: %d did", zoneHinted(cs, ns, "near"))
	}
	for node := 1; node <= 2; node++ {
		cli := podNetns(t, ips[fmt.Sprintf("cli%d", node)])
		cg, err := cgroup.PodOf(cli)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("srv%d", node)
		for _, vip := range svc.Spec.ClusterIPs {
			v6 := netip.MustParseAddr(vip).Is6()
			addr := hostport(vip, 80)
			if err := waitFor(10*time.Second, func() bool {
				s, ok := entry(t, plane(t, node), vip, 80, tcbpf.TCP)
				return ok && len(s.Backends) == 1
			}); err != nil {
				s, _ := entry(t, plane(t, node), vip, 80, tcbpf.TCP)
				t.Fatalf("node %d's entry of %s: backends %v, want its zone's one", node, addr, s.Backends)
			}
			sockBefore, tcBefore := sockStats(t, node), tcDNAT(t, node, v6)
			const asks = 12 // unnarrowed, all 12 on one of 2 backends: 1 in 4096
			for range asks {
				if got, err := whoIn(cli, cg, "tcp", addr, 0); err != nil || got != want {
					t.Fatalf("node %d, socket programs: %s answered %q (%v), want %s (its zone's)", node, addr, got, err, want)
				}
			}
			if st := sockStats(t, node); st.Connects < sockBefore.Connects+asks {
				t.Errorf("node %d's socket programs translated %d connects to %s, want %d", node, st.Connects-sockBefore.Connects, addr, asks)
			}
			for range asks {
				var got string
				err := nsutil.DoPath(cli, func() (err error) { got, err = ask("tcp", addr); return err })
				if err != nil || got != want {
					t.Fatalf("node %d, tc programs: %s answered %q (%v), want %s (its zone's)", node, addr, got, err, want)
				}
			}
			if n := tcDNAT(t, node, v6); n < tcBefore+asks {
				t.Errorf("node %d's tc programs translated %d packets to %s, want >= %d (one per connection's first)", node, n-tcBefore, addr, asks)
			}
		}
	}
}

// zoneHinted counts the endpoints of Service name's slices that have zone
// hints.
func zoneHinted(cs kubernetes.Interface, ns, name string) int {
	l, err := cs.DiscoveryV1().EndpointSlices(ns).List(testCtx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		return 0
	}
	n := 0
	for _, es := range l.Items {
		for _, e := range es.Endpoints {
			if e.Hints != nil && len(e.Hints.ForZones) > 0 {
				n++
			}
		}
	}
	return n
}

// tcDNAT is node i's tc programs' clusterIP -> backend packet count of one
// family.
func tcDNAT(t *testing.T, node int, v6 bool) uint64 {
	t.Helper()
	p := plane(t, node)
	if v6 {
		st, err := p.Stats6()
		if err != nil {
			t.Fatal(err)
		}
		return st.DNAT
	}
	st, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st.DNAT
}
