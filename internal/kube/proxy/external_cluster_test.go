package proxy_test

// Traffic from outside the cluster beyond plain NodePorts, on the real
// cluster (the client outside is the control-plane namespace, 10.250.0.1):
// external IPs, externalTrafficPolicy changes on a live Service (the
// upstream "NodePort and HealthCheckNodePort ... ExternalTrafficPolicy
// changes"), sessionAffinity for outside clients.

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// testExternalIP is the upstream spec's address: reserved for
// documentation (RFC 5737), nobody's, assigned to no node.
const testExternalIP = "203.0.113.250"

// routeOutside points the outside namespace's route to dst at gw (a node):
// how a router in front of the nodes would send an external IP's traffic.
// The route goes at the test's end.
func routeOutside(t *testing.T, dst, gw string) {
	t.Helper()
	_, n, _ := net.ParseCIDR(dst + "/32")
	r := &netlink.Route{Dst: n, Gw: net.ParseIP(gw)}
	if err := nsutil.DoPath(outside(), func() error { return netlink.RouteReplace(r) }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nsutil.DoPath(outside(), func() error { return netlink.RouteDel(r) }) })
}

// spec.externalIPs, the address assigned to no node: a pod (another node
// than the backend's) reaches it over TCP and UDP, so does a node's own
// process; from outside, routed to node 2 (the backend is on node 1) it is
// SNATed to node 2's IP and answered as the external IP; routed to node 1
// the backend sees the client itself.
func TestExternalIP(t *testing.T) {
	cs := needCluster(t)
	ns := kns(t, cs)
	lbl := map[string]string{"app": "ext"}
	ips := runPods(t, cs, ns, peerPod("ext-srv", 1, lbl), clientPod("cli", 2))
	nip := nodeIPs(t, cs)
	if _, err := cs.CoreV1().Services(ns).Create(testCtx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext"},
		Spec: corev1.ServiceSpec{Selector: lbl, ExternalIPs: []string{testExternalIP}, Ports: []corev1.ServicePort{
			{Name: "peer", Port: 80, TargetPort: intstr.FromInt32(8082)},
			{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)},
		}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tcp, udp := hostport(testExternalIP, 80), hostport(testExternalIP, 53)
	cli := podNetns(t, ips["cli"])
	if got, err := whoWait(cli, "tcp", tcp, 10*time.Second); err != nil || !strings.HasPrefix(got, "ext-srv ") {
		t.Fatalf("pod on node 2 -> %s: %q, %v", tcp, got, err)
	}
	mustWho(t, cli, "udp", udp, "ext-srv", 10*time.Second)
	if got, err := nodeWho(2, "tcp", tcp); err != nil || !strings.HasPrefix(got, "ext-srv ") {
		t.Errorf("node 2's own process -> %s: %q, %v", tcp, got, err)
	}

	for _, via := range []struct {
		node     int
		seenFrom string
	}{{2, nip[2]}, {1, "10.250.0.1"}} {
		routeOutside(t, testExternalIP, nip[via.node])
		got, err := whoWait(outside(), "tcp", tcp, 10*time.Second)
		if err != nil {
			t.Fatalf("outside -> %s via node %d: %v", tcp, via.node, err)
		}
		if name, peer := peerOf(t, got); name != "ext-srv" || peer.Addr().String() != via.seenFrom {
			t.Errorf("outside -> %s via node %d: answered %q, want ext-srv seeing %s", tcp, via.node, got, via.seenFrom)
		}
		if got, err := whoWait(outside(), "udp", udp, 10*time.Second); err != nil || got != "ext-srv" {
			t.Errorf("outside -> %s via node %d: %q, %v", udp, via.node, got, err)
		}
	}
}

// externalTrafficPolicy changes on a live LoadBalancer Service whose one
// endpoint is on node 2, as the upstream spec walks them: Local (node 2
// answers keeping the client's address, node 1 drops outside clients but
// answers its own processes and pods, the health check says 200 on node 2
// and 503 on node 1) -> Cluster (both answer outside clients, no health
// server) -> Local again with the same healthCheckNodePort.
func TestExternalTrafficPolicyChanges(t *testing.T) {
	cs := needCluster(t)
	ns := kns(t, cs)
	lbl := map[string]string{"app": "etp"}
	ips := runPods(t, cs, ns, peerPod("etp-srv", 2, lbl), clientPod("cli", 1))
	nip := nodeIPs(t, cs)
	svc, err := cs.CoreV1().Services(ns).Create(testCtx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "etp"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: lbl,
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Ports:                 []corev1.ServicePort{{Name: "peer", Port: 80, TargetPort: intstr.FromInt32(8082)}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	np, hc := nodePortOf(svc, corev1.ProtocolTCP), int(svc.Spec.HealthCheckNodePort)
	cli := podNetns(t, ips["cli"])
	local := func(step string) {
		t.Helper()
		got, err := whoWait(outside(), "tcp", hostport(nip[2], np), 10*time.Second)
		if name, peer := peerOf(t, got); err != nil || name != "etp-srv" || peer.Addr().String() != "10.250.0.1" {
			t.Errorf("%s: outside -> node 2: %q (%v), want etp-srv seeing the client 10.250.0.1", step, got, err)
		}
		if waitFor(10*time.Second, func() bool { _, err := who(outside(), "tcp", hostport(nip[1], np)); return err != nil }) != nil {
			t.Errorf("%s: node 1 (no endpoint) still answers outside clients", step)
		}
		// kube-proxy's short-circuit: the node itself and its pods reach
		// any endpoint through a Local node port.
		if got, err := nodeWho(1, "tcp", hostport(nip[1], np)); err != nil || !strings.HasPrefix(got, "etp-srv ") {
			t.Errorf("%s: node 1's own process -> its node port: %q, %v", step, got, err)
		}
		if got, err := whoWait(cli, "tcp", hostport(nip[1], np), 10*time.Second); err != nil || !strings.HasPrefix(got, "etp-srv ") {
			t.Errorf("%s: pod on node 1 -> node 1's node port: %q, %v", step, got, err)
		}
		for node, want := range map[int]int{2: 200, 1: 503} {
			var code int
			if waitFor(10*time.Second, func() bool { code, _, err = health(hostport(nip[node], hc)); return err == nil && code == want }) != nil {
				t.Errorf("%s: health check on node %d: %d (%v), want %d", step, node, code, err, want)
			}
		}
	}
	local("Local")

	patch := func(body string) {
		t.Helper()
		if _, err := cs.CoreV1().Services(ns).Patch(testCtx, "etp", types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch(`{"spec":{"externalTrafficPolicy":"Cluster","healthCheckNodePort":null}}`)
	for node := 1; node <= 2; node++ {
		if got, err := whoWait(outside(), "tcp", hostport(nip[node], np), 10*time.Second); err != nil || !strings.HasPrefix(got, "etp-srv ") {
			t.Errorf("Cluster: outside -> node %d: %q, %v", node, got, err)
		}
		if waitFor(10*time.Second, func() bool { _, _, err := health(hostport(nip[node], hc)); return err != nil }) != nil {
			t.Errorf("Cluster: node %d's health server still answers", node)
		}
	}
	patch(`{"spec":{"externalTrafficPolicy":"Local","healthCheckNodePort":` + strconv.Itoa(hc) + `}}`)
	local("Local again")
}

// sessionAffinity ClientIP for clients outside the node (the upstream
// "session affinity timeout work for NodePort service" reaches a node port
// from a pod of another node): three backends; 20 connections of one
// outside client through node 1's node port all reach one backend; with
// affinity None they spread.
func TestNodePortAffinityFromOutside(t *testing.T) {
	cs := needCluster(t)
	ns := kns(t, cs)
	lbl := map[string]string{"app": "aff"}
	runPods(t, cs, ns, whoamiPod("aff-a", 1, lbl), whoamiPod("aff-b", 2, lbl), whoamiPod("aff-c", 2, lbl))
	nip := nodeIPs(t, cs)
	timeout := int32(60)
	svc, err := cs.CoreV1().Services(ns).Create(testCtx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "aff"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: lbl,
			SessionAffinity:       corev1.ServiceAffinityClientIP,
			SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &timeout}},
			Ports:                 []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	addr := hostport(nip[1], nodePortOf(svc, corev1.ProtocolTCP))
	answers := func() map[string]int {
		seen := map[string]int{}
		for i := 0; i < 20; i++ {
			got, err := who(outside(), "tcp", addr)
			if err != nil {
				got = "error: " + err.Error()
			}
			seen[got]++
		}
		return seen
	}
	if _, err := whoWait(outside(), "tcp", addr, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := answers(); len(got) != 1 || strings.HasPrefix(firstKey(got), "error") {
		t.Fatalf("sessionAffinity ClientIP: 20 connections from outside reached %v, want one backend", got)
	}
	if _, err := cs.CoreV1().Services(ns).Patch(testCtx, "aff", types.MergePatchType, []byte(`{"spec":{"sessionAffinity":"None"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if waitFor(20*time.Second, func() bool { return len(answers()) > 1 }) != nil {
		t.Errorf("sessionAffinity None: 20 connections from outside still reach one backend")
	}
}

func firstKey(m map[string]int) string {
	for k := range m {
		return k
	}
	return ""
}
