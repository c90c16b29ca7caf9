package proxy_test

// NodePort Services on the real cluster: the client is a process in the
// cluster's control-plane namespace (10.250.0.1 on the nodes' bridge),
// outside every node, as an external client or load balancer would be.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/kube/proxy"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// peerPod is whoamiPod that also answers TCP 8082 with "NAME CLIENT:PORT".
func peerPod(name string, node int, labels map[string]string) *corev1.Pod {
	p := whoamiPod(name, node, labels)
	c := &p.Spec.Containers[0]
	c.Command = append(c.Command, "--tcp-peer", "8082")
	c.Ports = append(c.Ports, corev1.ContainerPort{Name: "peer", ContainerPort: 8082})
	return p
}

// nodeIPs reads the nodes' IPv4 InternalIPs (index 1 and 2).
func nodeIPs(t *testing.T, cs kubernetes.Interface) [3]string { return nodeIPsOf(t, cs, false) }

// nodeIPsOf reads the nodes' InternalIPs of one family (index 1 and 2).
func nodeIPsOf(t *testing.T, cs kubernetes.Interface, v6 bool) [3]string {
	t.Helper()
	var out [3]string
	for i := 1; i <= 2; i++ {
		n, err := cs.CoreV1().Nodes().Get(testCtx, nodeName(i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == corev1.NodeInternalIP && ip.Is6() == v6 {
				out[i] = a.Address
			}
		}
		if out[i] == "" {
			t.Fatalf("node %d has no InternalIP of the family (IPv6: %v): %v", i, v6, n.Status.Addresses)
		}
	}
	return out
}

// npService creates NodePort Service name (externalTrafficPolicy Cluster)
// of app=name's pods, port 80 -> 8082 (peerPod's answer) and UDP 53 ->
// 5353, SingleStack of family fam (none: the cluster's primary).
func npService(t *testing.T, cs kubernetes.Interface, ns, name string, fam ...corev1.IPFamily) *corev1.Service {
	t.Helper()
	spec := corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": name},
		ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
		Ports: []corev1.ServicePort{
			{Name: "peer", Port: 80, TargetPort: intstr.FromInt32(8082)},
			{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)},
		}}
	if len(fam) > 0 {
		single := corev1.IPFamilyPolicySingleStack
		spec.IPFamilyPolicy, spec.IPFamilies = &single, fam
	}
	svc, err := cs.CoreV1().Services(ns).Create(testCtx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// throughBothNodes asks a NodePort (policy Cluster, its one endpoint srv on
// node 2) from outside through both nodes' addresses nip, TCP and UDP:
// through node 2 the backend sees the client's own address, through node 1
// node 1's and a port of 61000-65535 (SNAT: its reply must come back
// through node 1).
func throughBothNodes(t *testing.T, nip [3]string, tcpNP, udpNP int, srv, client string) {
	t.Helper()
	for node := 1; node <= 2; node++ {
		got, err := whoWait(outside(), "tcp", hostport(nip[node], tcpNP), 10*time.Second)
		if err != nil {
			t.Fatalf("tcp %s from outside: %v", hostport(nip[node], tcpNP), err)
		}
		name, peer := peerOf(t, got)
		wantPeer := client // the backend is on this node
		if node == 1 {
			wantPeer = nip[1] // SNATed to node 1's address
		}
		if name != srv || peer.Addr().String() != wantPeer {
			t.Errorf("through node %d: answered %q, want %s seeing %s", node, got, srv, wantPeer)
		}
		if node == 1 && peer.Port() < 61000 {
			t.Errorf("through node 1: SNAT source port %d, want 61000-65535", peer.Port())
		}
		mustWho(t, outside(), "udp", hostport(nip[node], udpNP), srv, 10*time.Second)
	}
}

// outside is the control-plane namespace: the client outside the nodes.
func outside() string { return nsutil.Path(upState.Ext) }

// peerOf splits a --tcp-peer answer "NAME ADDR:PORT".
func peerOf(t *testing.T, answer string) (string, netip.AddrPort) {
	t.Helper()
	name, addr, ok := strings.Cut(answer, " ")
	ap, err := netip.ParseAddrPort(addr)
	if !ok || err != nil {
		t.Fatalf("answer %q: want NAME ADDR:PORT", answer)
	}
	return name, ap
}

// whoWait retries who until it answers (limit), returning the last answer.
func whoWait(ns, proto, addr string, limit time.Duration) (string, error) {
	var got string
	var err error
	_ = waitFor(limit, func() bool { got, err = who(ns, proto, addr); return err == nil })
	return got, err
}

func patchType(t *testing.T, cs kubernetes.Interface, ns, name string, typ corev1.ServiceType) *corev1.Service {
	t.Helper()
	s, err := cs.CoreV1().Services(ns).Patch(testCtx, name, types.MergePatchType, []byte(`{"spec":{"type":"`+string(typ)+`"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("type -> %s: %v", typ, err)
	}
	return s
}

func nodePortOf(s *corev1.Service, proto corev1.Protocol) int {
	for _, p := range s.Spec.Ports {
		if p.Protocol == proto {
			return int(p.NodePort)
		}
	}
	return 0
}

// externalTrafficPolicy Cluster, the only endpoint on node 2: the NodePort
// answers through both nodes' IPs, TCP and UDP; through node 1 the backend
// sees node 1's IP (SNAT: its reply must come back through node 1),
// through node 2 the client itself. Then the type changes live: NodePort ->
// ClusterIP (the node ports stop answering, the clusterIP entry keeps its
// id and keeps answering) -> NodePort again.
func TestNodePortClusterPolicy(t *testing.T) {
	cs := needCluster(t)
	ns := kns(t, cs)
	ips := runPods(t, cs, ns, peerPod("np-srv", 2, map[string]string{"app": "np"}), clientPod("cli", 1))
	nip := nodeIPs(t, cs)
	svc := npService(t, cs, ns, "np")
	tcpNP, udpNP := nodePortOf(svc, corev1.ProtocolTCP), nodePortOf(svc, corev1.ProtocolUDP)
	p1 := plane(t, 1)
	before, err := p1.NodePortStats()
	if err != nil {
		t.Fatal(err)
	}
	throughBothNodes(t, nip, tcpNP, udpNP, "np-srv", "10.250.0.1")
	// Connection cost from outside (connect, answer, close), through node 1
	// (DNAT + SNAT + two redirects) and node 2 (DNAT, the stack delivers):
	// reported, not judged (2 shared CPUs).
	for node := 1; node <= 2; node++ {
		const n = 200
		start := time.Now()
		for range n {
			if _, err := who(outside(), "tcp", hostport(nip[node], tcpNP)); err != nil {
				t.Fatalf("through node %d: %v", node, err)
			}
		}
		t.Logf("through node %d: %d connections in a row, %s each", node, n, (time.Since(start) / n).Round(time.Microsecond))
	}
	after, err := p1.NodePortStats()
	if err != nil {
		t.Fatal(err)
	}
	if after.SNAT < before.SNAT+2 || after.RNAT < before.RNAT+2 || after.Errors != before.Errors {
		t.Errorf("node 1's NodePort counters before %+v, after %+v: want 2 SNATed flows and their replies more", before, after)
	}

	// Live type changes; the clusterIP's entry (and so its flows) stays.
	cli := podNetns(t, ips["cli"])
	vip := svc.Spec.ClusterIP
	mustWho(t, cli, "udp", hostport(vip, 53), "np-srv", 10*time.Second)
	e0, _ := entry(t, p1, vip, 80, tcbpf.TCP)
	patchType(t, cs, ns, "np", corev1.ServiceTypeClusterIP)
	// Each node's proxy syncs on its own: both must have let the port go
	// before either is asked (node 2's answered once while only node 1's
	// maps were waited for).
	for node, p := range map[int]*tcbpf.Plane{1: p1, 2: plane(t, 2)} {
		if err := waitFor(10*time.Second, func() bool {
			_, ok := entry(t, p, nip[node], uint16(tcpNP), tcbpf.TCP)
			return !ok
		}); err != nil {
			t.Fatalf("NodePort -> ClusterIP: node %d's maps still hold the node port", node)
		}
	}
	for node := 1; node <= 2; node++ {
		if got, err := who(outside(), "tcp", hostport(nip[node], tcpNP)); err == nil {
			t.Errorf("after NodePort -> ClusterIP, %s:%d still answered %q", nip[node], tcpNP, got)
		}
	}
	mustWho(t, cli, "udp", hostport(vip, 53), "np-srv", time.Second)
	if e1, ok := entry(t, p1, vip, 80, tcbpf.TCP); !ok || e1.ID != e0.ID {
		t.Errorf("the clusterIP entry changed with the type (id %d -> %d, present %v): its flows would move", e0.ID, e1.ID, ok)
	}
	svc = patchType(t, cs, ns, "np", corev1.ServiceTypeNodePort)
	tcpNP = nodePortOf(svc, corev1.ProtocolTCP)
	if got, err := whoWait(outside(), "tcp", hostport(nip[1], tcpNP), 10*time.Second); err != nil || !strings.HasPrefix(got, "np-srv ") {
		t.Errorf("ClusterIP -> NodePort: %s:%d answered %q (%v)", nip[1], tcpNP, got, err)
	}
	if e2, ok := entry(t, p1, vip, 80, tcbpf.TCP); !ok || e2.ID != e0.ID {
		t.Errorf("the clusterIP entry changed with the type back (id %d -> %d)", e0.ID, e2.ID)
	}
}

// health asks a healthCheckNodePort from outside: status and localEndpoints.
// The connection is made on this goroutine's thread, inside the namespace
// (net/http's client would dial from another thread: another namespace).
func health(addr string) (int, float64, error) {
	var code int
	var n float64
	err := nsutil.DoPath(outside(), func() error {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.0\r\nHost: "+addr+"\r\n\r\n"); err != nil {
			return err
		}
		r, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		var m struct {
			LocalEndpoints float64 `json:"localEndpoints"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("status %d, body %q: %w", r.StatusCode, b, err)
		}
		code, n = r.StatusCode, m.LocalEndpoints
		return nil
	})
	return code, n, err
}

// externalTrafficPolicy Local (type LoadBalancer, for its
// healthCheckNodePort), the only endpoint on node 2: node 2 answers and
// its backend sees the client's own address; node 1 does not forward
// (dropped, counted); the health check says 200 / 1 on node 2 and
// 503 / 0 on node 1, and stops with the type change to ClusterIP.
func TestNodePortLocalPolicy(t *testing.T) {
	cs := needCluster(t)
	ns := kns(t, cs)
	runPods(t, cs, ns, peerPod("loc-srv", 2, map[string]string{"app": "loc"}))
	nip := nodeIPs(t, cs)
	svc, err := cs.CoreV1().Services(ns).Create(testCtx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "loc"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "loc"},
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Ports:                 []corev1.ServicePort{{Name: "peer", Port: 80, TargetPort: intstr.FromInt32(8082)}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	np, hc := nodePortOf(svc, corev1.ProtocolTCP), int(svc.Spec.HealthCheckNodePort)
	if np == 0 || hc == 0 {
		t.Fatalf("the API gave nodePort %d, healthCheckNodePort %d", np, hc)
	}
	got, err := whoWait(outside(), "tcp", hostport(nip[2], np), 10*time.Second)
	if err != nil {
		t.Fatalf("node 2 (has the endpoint) %s:%d: %v", nip[2], np, err)
	}
	if name, peer := peerOf(t, got); name != "loc-srv" || peer.Addr().String() != "10.250.0.1" {
		t.Errorf("through node 2: answered %q, want loc-srv seeing the client 10.250.0.1", got)
	}
	p1 := plane(t, 1)
	if err := waitFor(10*time.Second, func() bool { _, ok := entry(t, p1, nip[1], uint16(np), tcbpf.TCP); return ok }); err != nil {
		t.Fatal("node 1's maps never got the node port's entry")
	}
	before, _ := p1.NodePortStats()
	if got, err := who(outside(), "tcp", hostport(nip[1], np)); err == nil {
		t.Errorf("node 1 (no local endpoint) forwarded: answered %q", got)
	}
	if after, _ := p1.NodePortStats(); after.NoBackend <= before.NoBackend || after.DNAT != before.DNAT {
		t.Errorf("node 1's counters before %+v, after %+v: want drops, no DNAT", before, after)
	}
	var code int
	var n float64
	if waitFor(10*time.Second, func() bool { code, n, err = health(hostport(nip[2], hc)); return err == nil && code == 200 }) != nil || n != 1 {
		t.Errorf("health check on node 2: %d, localEndpoints %v (%v), want 200 and 1", code, n, err)
	}
	if waitFor(10*time.Second, func() bool { code, n, err = health(hostport(nip[1], hc)); return err == nil && code == 503 }) != nil || n != 0 {
		t.Errorf("health check on node 1: %d, localEndpoints %v (%v), want 503 and 0", code, n, err)
	}
	patchType(t, cs, ns, "loc", corev1.ServiceTypeClusterIP)
	if waitFor(10*time.Second, func() bool { _, _, err = health(hostport(nip[2], hc)); return err != nil }) != nil {
		t.Error("LoadBalancer -> ClusterIP: node 2's health server still answers")
	}
	p2 := plane(t, 2)
	if waitFor(10*time.Second, func() bool { _, ok := entry(t, p2, nip[2], uint16(np), tcbpf.TCP); return !ok }) != nil {
		t.Error("LoadBalancer -> ClusterIP: node 2's maps still hold the node port")
	}
}

// The proxy's own servers, as kube-proxy's: /healthz and /livez on every
// node's address port 10256, asked from outside the nodes (200, JSON with
// lastUpdated, currentTime, and for /healthz nodeEligible true), and
// /proxyMode on the node's loopback port 10249 (upstream's "Networking
// should check kube-proxy urls" asks both from a hostNetwork pod).
func TestProxyHealthServer(t *testing.T) {
	cs := needCluster(t)
	nip := nodeIPs(t, cs)
	get := func(ns, addr, path string) (int, []byte, error) {
		var code int
		var body []byte
		err := nsutil.DoPath(ns, func() error {
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				return err
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			if _, err := io.WriteString(c, "GET "+path+" HTTP/1.0\r\nHost: "+addr+"\r\n\r\n"); err != nil {
				return err
			}
			r, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return err
			}
			defer r.Body.Close()
			body, err = io.ReadAll(r.Body)
			code = r.StatusCode
			return err
		})
		return code, body, err
	}
	for i := 1; i <= 2; i++ {
		for _, path := range []string{"/healthz", "/livez"} {
			addr := net.JoinHostPort(nip[i], "10256")
			var code int
			var body []byte
			var err error
			var m map[string]any
			// The proxies may still be starting when the nodes are Ready.
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(500 * time.Millisecond) {
				if code, body, err = get(outside(), addr, path); err == nil {
					err = json.Unmarshal(body, &m)
				}
				if (err == nil && code == http.StatusOK) || time.Now().After(deadline) {
					break
				}
			}
			if err != nil || code != http.StatusOK || m["lastUpdated"] == nil || m["currentTime"] == nil || m["healthy"] != true {
				t.Fatalf("node %d %s%s: %d %q %v, want 200 with lastUpdated, currentTime, healthy", i, addr, path, code, body, err)
			}
			if eligible, ok := m["nodeEligible"]; (path == "/healthz") != ok || (ok && eligible != true) {
				t.Fatalf("node %d %s: nodeEligible %v (present %v), want true in /healthz's body only", i, path, eligible, ok)
			}
		}
		code, body, err := get(nsutil.Path(nodeNS(i)), "127.0.0.1:10249", "/proxyMode")
		if err != nil || code != http.StatusOK || string(body) != proxy.ModeEBPF {
			t.Fatalf("node %d /proxyMode: %d %q %v, want 200 %q", i, code, body, err, proxy.ModeEBPF)
		}
	}
}
