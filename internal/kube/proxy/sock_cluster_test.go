package proxy_test

// The socket programs in a real cluster: the node's own processes reaching
// a clusterIP with vnetlab-ebpf (socket programs for the node's network
// namespace only, pods left to tc), then the whole cluster with
// vnetlab-sock (socket programs for every socket of the node's cgroup, no
// tc program). This file's tests run after cluster_test.go's: the first
// one that needs vnetlab-sock replaces the vnetlab-ebpf cluster.

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf/link"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/vnetlab/vnetlab/internal/datapath/sock"
	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/kube/proxy"
	"github.com/vnetlab/vnetlab/internal/system/cgroup"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// whoEnv makes this test binary a client (TestMain): "PROTO ADDR LOCALPORT".
const whoEnv = "VNETLAB_TEST_WHO"

// whoChild is the client process: ask, print the answer.
func whoChild(proto, addr, lport string) int {
	port, _ := strconv.Atoi(lport)
	out, err := askFrom(proto, addr, port)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(out)
	return 0
}

// whoIn asks addr which pod answers from a process of this test binary
// started in network namespace ns (a name or path) and cgroup cg.
func whoIn(ns, cg, proto, addr string, lport int) (string, error) {
	ctx, cancel := context.WithTimeout(testCtx, 10*time.Second)
	defer cancel()
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	c := proc.Command(ctx, ns, exe)
	c.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %d", whoEnv, proto, addr, lport))
	if err := c.InCgroup(cg); err != nil {
		return "", err
	}
	out, err := c.Output()
	return strings.TrimSpace(string(out)), err
}

// nodeWho asks from one of node i's own processes (its namespace and cgroup).
func nodeWho(i int, proto, addr string) (string, error) {
	cg, err := cluster.NodeCgroup(nodeName(i))
	if err != nil {
		return "", err
	}
	return whoIn(nodeNS(i), cg, proto, addr, 0)
}

// nodeCgroupLinks lists the bpf links attached to the cluster's node cgroups.
func nodeCgroupLinks() []link.ID {
	ids := map[uint64]bool{}
	for _, n := range upState.Nodes {
		if cg, err := cluster.NodeCgroup(n.Name); err == nil {
			if st, err := os.Stat(cg); err == nil {
				ids[cgroupID(st)] = true
			}
		}
	}
	var out []link.ID
	it := new(link.Iterator)
	for it.Next() {
		if info, err := it.Link.Info(); err == nil && info.Cgroup() != nil && ids[info.Cgroup().CgroupId] {
			out = append(out, it.ID)
		}
	}
	return out
}

// sockStats reads node i's socket programs' counters (pinned by its proxy).
func sockStats(t *testing.T, node int) sock.Stats {
	t.Helper()
	p, err := sock.Open(cluster.ProxyPlane(testCluster, nodeName(node)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	st, err := p.SockStats()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// whoamiService is a Service on app=LABEL: TCP and UDP on port 80 (named
// targetPorts "http", "dns"), port 81 -> 8081.
func whoamiService(t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	svc, err := cs.CoreV1().Services(ns).Create(testCtx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{
			{Name: "web", Port: 80, TargetPort: intstr.FromString("http")},
			{Name: "web-udp", Port: 80, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("dns")},
			{Name: "alt", Port: 81, TargetPort: intstr.FromInt32(8081)},
		}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc.Spec.ClusterIP
}

// With vnetlab-ebpf, the node's own processes (kube-proxy's OUTPUT chain
// territory) reach a clusterIP through the socket programs on the node's
// cgroup, same-node and cross-node; a pod's connection is still the tc
// programs' alone: the socket programs leave sockets of other namespaces
// (the pods') untouched, so nothing is translated twice.
func TestNodeToClusterIPThroughEBPF(t *testing.T) {
	cs := needCluster(t)
	ns := kns(t, cs)
	ips := runPods(t, cs, ns, whoamiPod("srv", 2, map[string]string{"app": "srv"}), clientPod("cli", 1))
	vip := whoamiService(t, cs, ns, "srv")
	before := sockStats(t, 1)
	bothNodesAnswer(t, hostport(vip, 80), "srv")
	mid := sockStats(t, 1)
	if mid.Connects < before.Connects+2 {
		t.Errorf("node 1's socket programs translated %d connects for its own TCP and UDP clients, want >= 2", mid.Connects-before.Connects)
	}
	cliNS := podNetns(t, ips["cli"])
	cg, err := cgroup.PodOf(cliNS)
	if err != nil {
		t.Fatal(err)
	}
	tcBefore, err := plane(t, 1).Stats()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := whoIn(cliNS, cg, "tcp", hostport(vip, 80), 0); err != nil || got != "srv" {
		t.Fatalf("pod cli (a process in its cgroup) -> %s: %q (%v), want srv", hostport(vip, 80), got, err)
	}
	tcAfter, err := plane(t, 1).Stats()
	if err != nil {
		t.Fatal(err)
	}
	if after := sockStats(t, 1); after.Connects != mid.Connects {
		t.Errorf("a pod's connect() was translated by the socket programs (%d): with vnetlab-ebpf it is the tc programs'", after.Connects-mid.Connects)
	}
	if tcAfter.DNAT <= tcBefore.DNAT {
		t.Errorf("the pod's connection did not go through node 1's tc programs (DNAT %d -> %d)", tcBefore.DNAT, tcAfter.DNAT)
	}
}

// vnetlab-sock: TCP and UDP on one port, a second port, a named
// targetPort; pods on both nodes, hairpin and a node's own process; proof it is the
// socket plane (its counters, the entries in both nodes' maps, no tc
// program on any pod veth, no kube-proxy).
func TestClusterIPThroughSock(t *testing.T) {
	cs := needProxy(t, proxy.ModeSock)
	ns := kns(t, cs)
	ips := runPods(t, cs, ns, whoamiPod("srv", 2, map[string]string{"app": "srv"}), clientPod("cli1", 1), clientPod("cli2", 2))
	vip := whoamiService(t, cs, ns, "srv")
	before := sockStats(t, 1)
	for i, cli := range []string{"cli1", "cli2"} {
		ns := podNetns(t, ips[cli])
		mustWho(t, ns, "tcp", hostport(vip, 80), "srv", 10*time.Second)
		mustWho(t, ns, "udp", hostport(vip, 80), "srv", 10*time.Second)
		mustWho(t, ns, "tcp", hostport(vip, 81), "srv", 10*time.Second)
		if _, err := who(ns, "tcp", hostport(vip, 8080)); err == nil {
			t.Errorf("client %d: %s:8080 answered: only the Service's ports may be translated", i+1, vip)
		}
	}
	// Hairpin: natural with sockets (the pod connects to its own address).
	mustWho(t, podNetns(t, ips["srv"]), "tcp", hostport(vip, 80), "srv", 10*time.Second)
	for node := 1; node <= 2; node++ {
		if got, err := nodeWho(node, "tcp", hostport(vip, 81)); err != nil || got != "srv" {
			t.Errorf("node %d's process -> %s: %q (%v), want srv", node, hostport(vip, 81), got, err)
		}
	}
	after := sockStats(t, 1)
	if after.Connects < before.Connects+3 {
		t.Errorf("node 1's socket programs translated %d connects, want >= 3 (cli1's TCP 80, UDP 80, TCP 81)", after.Connects-before.Connects)
	}
	srv := tcbpf.Backend{IP: mustAddr(ips["srv"]), Port: 8080}
	for node := 1; node <= 2; node++ {
		p := plane(t, node)
		if s, ok := entry(t, p, vip, 80, tcbpf.TCP); !ok || len(s.Backends) != 1 || s.Backends[0] != srv {
			t.Errorf("node %d's maps: %s:80/tcp = %v (present %v), want %v", node, vip, s.Backends, ok, srv)
		}
		eps, err := p.ListEndpoints()
		if err != nil {
			t.Fatal(err)
		}
		if len(eps) != 0 {
			t.Errorf("node %d has tc programs on %d pod veths: vnetlab-sock attaches none", node, len(eps))
		}
		if st, err := p.Stats(); err != nil || st.DNAT != 0 {
			t.Errorf("node %d's tc counters: DNAT %d (%v), want 0", node, st.DNAT, err)
		}
	}
	noKubeProxy(t, vip)
}

// vnetlab-sock follows endpoint changes (the test of cluster_test.go).
func TestEndpointRemovedThroughSock(t *testing.T) {
	endpointRemovedTrafficMoves(t, needProxy(t, proxy.ModeSock))
}

// A Service without a ready endpoint: the socket programs refuse connect()
// at once with ECONNREFUSED, as kube-proxy's REJECT makes it fail.
func TestNoEndpointRefusedThroughSock(t *testing.T) {
	cs := needProxy(t, proxy.ModeSock)
	ns := kns(t, cs)
	ips := runPods(t, cs, ns, clientPod("cli", 1))
	vip := whoamiService(t, cs, ns, "nobody")
	if err := waitFor(10*time.Second, func() bool { _, ok := entry(t, plane(t, 1), vip, 80, tcbpf.TCP); return ok }); err != nil {
		t.Fatal("the Service never reached node 1's maps")
	}
	start := time.Now()
	_, err := who(podNetns(t, ips["cli"]), "tcp", hostport(vip, 80))
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("connect to a Service without endpoints: %v, want ECONNREFUSED", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the refusal took %s", took)
	}
}

// cgroupID is a cgroup v2 directory's id (its inode number), as bpf link info gives it.
func cgroupID(st os.FileInfo) uint64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return s.Ino
	}
	return 0
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// vnetlab-sock and a backend leaving: each question of the pod is a new
// socket whose connect() picks among the live backends, so its flow from a
// fixed port moves by itself; the outside client's flow to node 2's node
// port is the uplink's NodePort programs', whose conntrack entry the proxy
// forgets as vnetlab-ebpf's.
func TestUDPFlowMovesThroughSock(t *testing.T) {
	udpFlowMoves(t, needProxy(t, proxy.ModeSock), false)
}

// vnetlab-sock and a changed target port: the next connect() takes the new
// one; the outside client's flow through the uplink's programs moves too.
func TestUDPTargetPortChangeThroughSock(t *testing.T) {
	udpTargetPortChange(t, needProxy(t, proxy.ModeSock))
}

// vnetlab-sock and sessionAffinity ClientIP: the socket programs keep a
// client (a pod: its network namespace) on one backend (sock_affinity).
func TestSessionAffinityThroughSock(t *testing.T) {
	sessionAffinityClientIP(t, needProxy(t, proxy.ModeSock), "")
}

// The same over IPv6, on its dual-stack cluster (sock6_affinity).
func TestSessionAffinity6ThroughSock(t *testing.T) {
	sessionAffinityClientIP(t, needProxy(t, proxy.ModeSock), corev1.IPv6Protocol)
}

// vnetlab-sock on its dual-stack cluster: IPv6 Services through the
// socket programs (ipv6ThroughSockets).
func TestIPv6ThroughSock(t *testing.T) {
	cs := needProxy(t, proxy.ModeSock)
	ipv6ThroughSockets(t, cs)
}

// ipv6ThroughSockets: a SingleStack IPv6 Service answers TCP and UDP from a
// pod on the other node (its connect6/sendmsg6 translated: the socket
// programs' counter rises) and from both nodes' own processes, whose
// sockets only the socket programs can translate.
func ipv6ThroughSockets(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	ns := kns(t, cs)
	ips := runPods(t, cs, ns, whoamiPod("srv6", 2, map[string]string{"app": "srv6"}), clientPod("cli6", 1))
	single := corev1.IPFamilyPolicySingleStack
	svc, err := cs.CoreV1().Services(ns).Create(testCtx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "srv6"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "srv6"}, IPFamilyPolicy: &single, IPFamilies: []corev1.IPFamily{corev1.IPv6Protocol},
			Ports: []corev1.ServicePort{
				{Name: "web", Port: 80, TargetPort: intstr.FromString("http")},
				{Name: "web-udp", Port: 80, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("dns")},
			}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vip := svc.Spec.ClusterIP
	if !netip.MustParseAddr(vip).Is6() {
		t.Fatalf("Service srv6: clusterIP %s, want an IPv6 one", vip)
	}
	before := sockStats(t, 1)
	cli := podNetns(t, ips["cli6"])
	mustWho(t, cli, "tcp", hostport(vip, 80), "srv6", 10*time.Second)
	if st := sockStats(t, 1); st.Connects < before.Connects+1 {
		t.Errorf("node 1's socket programs translated %d connects of pod cli6 to [%s]:80, want >= 1", st.Connects-before.Connects, vip)
	}
	bothNodesAnswer(t, hostport(vip, 80), "srv6")
}

// bothNodesAnswer: a process of each node's own (its cgroup and namespace)
// reaches addr over TCP and UDP and is answered by want.
func bothNodesAnswer(t *testing.T, addr, want string) {
	t.Helper()
	for node := 1; node <= 2; node++ {
		for _, proto := range []string{"tcp", "udp"} {
			var got string
			var err error
			if waitFor(10*time.Second, func() bool { got, err = nodeWho(node, proto, addr); return err == nil && got == want }) != nil {
				t.Errorf("node %d's process -> %s %s: %q (%v), want %s", node, proto, addr, got, err, want)
			}
		}
	}
}
