package proxy_test

// UDP flows and their backend's departure, as the upstream [sig-network]
// Conntrack specs check them: a client keeps sending from one source port
// (a new socket each time, as `nc -u -p`), so every datagram is the same
// flow for a conntrack. kube-proxy deletes the conntrack entries of UDP
// flows whose endpoint went away; vnetlab's proxy forgets them in its own
// conntrack (tcbpf.Plane.ForgetUDPFlows), so the next datagram gets a live
// backend. The same functions run on the socket clusters
// (sock_cluster_test.go, socketlb_cluster_test.go).

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/vnetlab/vnetlab/internal/kube/proxy"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// The client ports of the flows (fixed, as the upstream specs' 12345).
const (
	podFlowPort     = 12345
	outsideFlowPort = 12346
)

// mustWhoFrom waits (up to limit) until addr, asked from local port lport,
// is answered by want.
func mustWhoFrom(t *testing.T, ns, proto, addr string, lport int, want string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var got string
	var err error
	if waitFor(limit, func() bool { got, err = whoFrom(ns, proto, addr, lport); return err == nil && got == want }) != nil {
		t.Fatalf("%s %s from %s port %d: answered %q (%v), want %q", proto, addr, ns, lport, got, err, want)
	}
	return time.Since(start)
}

func TestUDPFlowMovesWhenBackendGoes(t *testing.T) { udpFlowMoves(t, needCluster(t), true) }

// udpFlowMoves: a UDP NodePort Service with one backend (srv-a, node 2);
// a pod on node 1 sends to its clusterIP and a client outside the nodes to
// node 2's node port, each from its fixed port. A second backend comes:
// with a conntrack (pinned) the flows stay on srv-a. srv-a is deleted:
// both flows are answered by srv-b within seconds, where without the
// cleanup they would stay on the deleted pod (the upstream failure:
// "Failed to connect to backend 2"). pinned: the pod's flow goes through a
// conntrack (not the socket plane, where each socket picks anew).
func udpFlowMoves(t *testing.T, cs kubernetes.Interface, pinned bool) {
	ns := kns(t, cs)
	lbl := map[string]string{"app": "udp-cycle"}
	ips := runPods(t, cs, ns, whoamiPod("srv-a", 2, lbl), clientPod("cli", 1))
	nip := nodeIPs(t, cs)
	svc, err := cs.CoreV1().Services(ns).Create(testCtx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "udp-cycle"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: lbl,
			Ports: []corev1.ServicePort{{Name: "udp", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("dns")}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cli := podNetns(t, ips["cli"])
	clusterIP := hostport(svc.Spec.ClusterIP, 53)
	nodePort := hostport(nip[2], nodePortOf(svc, corev1.ProtocolUDP))
	type flow struct {
		ns, addr string
		port     int
	}
	flows := []flow{{cli, clusterIP, podFlowPort}, {outside(), nodePort, outsideFlowPort}}
	for _, q := range flows {
		mustWhoFrom(t, q.ns, "udp", q.addr, q.port, "srv-a", 10*time.Second)
	}

	runPods(t, cs, ns, whoamiPod("srv-b", 2, lbl))
	if pinned {
		// Let the proxies see srv-b, then check the flows did not move.
		time.Sleep(2 * time.Second)
		for i := 0; i < 5; i++ {
			for _, q := range flows {
				if got, err := whoFrom(q.ns, "udp", q.addr, q.port); err != nil || got != "srv-a" {
					t.Fatalf("a backend was added: the flow to %s from port %d answered %q (%v), want it kept on srv-a", q.addr, q.port, got, err)
				}
			}
		}
	}
	zero := int64(0)
	if err := cs.CoreV1().Pods(ns).Delete(testCtx, "srv-a", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	for _, q := range flows {
		took := mustWhoFrom(t, q.ns, "udp", q.addr, q.port, "srv-b", 30*time.Second)
		t.Logf("srv-a deleted: the flow to %s from port %d answered by srv-b after %s", q.addr, q.port, took.Round(time.Millisecond))
	}
}

func TestUDPTargetPortChange(t *testing.T) { udpTargetPortChange(t, needCluster(t)) }

// udpTargetPortChange (the upstream "cleanup conntrack entries when UDP
// service target port changes"): one backend answering UDP 5355 and 5356
// with its name and the port; a NodePort Service targets 5355; the flows
// of a pod (clusterIP) and of a client outside (node port) from fixed
// ports are answered on 5355; the targetPort becomes 5356: the same flows
// are answered on 5356.
func udpTargetPortChange(t *testing.T, cs kubernetes.Interface) {
	ns := kns(t, cs)
	lbl := map[string]string{"app": "udp-port"}
	srv := whoamiPod("srv", 2, lbl)
	srv.Spec.Containers[0].Command = append(srv.Spec.Containers[0].Command, "--udp-port", "5355", "--udp-port", "5356")
	ips := runPods(t, cs, ns, srv, clientPod("cli", 1))
	nip := nodeIPs(t, cs)
	svc, err := cs.CoreV1().Services(ns).Create(testCtx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "udp-port"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: lbl,
			Ports: []corev1.ServicePort{{Name: "udp", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(5355)}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cli := podNetns(t, ips["cli"])
	clusterIP := hostport(svc.Spec.ClusterIP, 53)
	nodePort := hostport(nip[2], nodePortOf(svc, corev1.ProtocolUDP))
	mustWhoFrom(t, cli, "udp", clusterIP, podFlowPort, "srv 5355", 10*time.Second)
	mustWhoFrom(t, outside(), "udp", nodePort, outsideFlowPort, "srv 5355", 10*time.Second)
	patch := `{"spec":{"ports":[{"name":"udp","port":53,"protocol":"UDP","targetPort":5356}]}}`
	if _, err := cs.CoreV1().Services(ns).Patch(testCtx, "udp-port", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	took := mustWhoFrom(t, cli, "udp", clusterIP, podFlowPort, "srv 5356", 30*time.Second)
	t.Logf("targetPort 5355 -> 5356: the pod's flow answered on 5356 after %s", took.Round(time.Millisecond))
	mustWhoFrom(t, outside(), "udp", nodePort, outsideFlowPort, "srv 5356", 30*time.Second)
	if got, err := whoFrom(cli, "udp", clusterIP, podFlowPort); err != nil || !strings.HasSuffix(got, " 5356") {
		t.Errorf("after the change: %q, %v", got, err)
	}
}

// Every node's namespace has kube-proxy's CLOSE_WAIT timeout, set by its
// proxy (the upstream spec `KubeProxy should set TCP CLOSE_WAIT timeout`
// reads it from a connection's conntrack entry); the root namespace keeps
// the value it had before the cluster came up.
func TestNodesCloseWaitTimeout(t *testing.T) {
	needCluster(t)
	const key = "net.netfilter.nf_conntrack_tcp_timeout_close_wait"
	want := fmt.Sprint(int(proxy.DefaultTCPCloseWaitTimeout.Seconds()))
	for i := 1; i <= len(upState.Nodes); i++ {
		if got, err := nsutil.ReadSysctl(nodeNS(i), key); err != nil || got != want {
			t.Errorf("node %d: %s = %q (%v), want %s", i, key, got, err, want)
		}
	}
	if got, err := nsutil.CurrentSysctl(key); err != nil || got != rootCloseWait {
		t.Errorf("the root namespace: %s = %q (%v), was %q before the cluster", key, got, err, rootCloseWait)
	}
}
