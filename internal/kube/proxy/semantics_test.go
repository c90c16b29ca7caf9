package proxy_test

// Service semantics on the wire through vnetlab's eBPF proxy: no ready
// endpoint -> refused at once, sessionAffinity ClientIP, hairpin.

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/platform/testnet"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// A Service whose selector matches no pod: its entries are in the node's
// maps without backends, and a client pod's TCP connect and connected UDP
// socket get "connection refused" at once (the programs' ICMP port
// unreachable), not a timeout, as with kube-proxy's REJECT.
func TestNoEndpointRefused(t *testing.T) {
	cs := needCluster(t)
	ns := kns(t, cs)
	ips := runPods(t, cs, ns, clientPod("cli", 1))
	svc, err := cs.CoreV1().Services(ns).Create(testCtx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "nobody"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "nobody"}, Ports: []corev1.ServicePort{
			{Name: "t", Port: 80, TargetPort: intstr.FromInt32(8080)},
			{Name: "u", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)},
		}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vip := svc.Spec.ClusterIP
	p1 := plane(t, 1)
	if err := waitFor(30*time.Second, func() bool {
		tcp, ok1 := entry(t, p1, vip, 80, tcbpf.TCP)
		udp, ok2 := entry(t, p1, vip, 53, tcbpf.UDP)
		return ok1 && ok2 && len(tcp.Backends) == 0 && len(udp.Backends) == 0
	}); err != nil {
		t.Fatal("the Service's entries never reached node 1's maps")
	}
	before, _ := p1.Stats()
	cli := podNetns(t, ips["cli"])
	for _, c := range []struct{ proto, addr string }{{"tcp", hostport(vip, 80)}, {"udp", hostport(vip, 53)}} {
		for i := 0; i < 3; i++ {
			took, err := refused(cli, c.proto, c.addr)
			if err != nil {
				t.Fatalf("%s %s without endpoints: %v after %s, want connection refused", c.proto, c.addr, err, took)
			}
			if took > time.Second {
				t.Fatalf("%s %s refused after %s, want within 1 s", c.proto, c.addr, took)
			}
			t.Logf("%s %s: connection refused after %s", c.proto, c.addr, took.Round(time.Microsecond))
		}
	}
	after, _ := p1.Stats()
	if after.Rejects < before.Rejects+6 {
		t.Errorf("node 1 rejected %d packets, want 6: the refusals did not come from its programs", after.Rejects-before.Rejects)
	}
}

// sessionAffinity ClientIP with three backends: 20 connections from one
// client pod all reach the same backend; the Service set back to None,
// they spread again.
func TestSessionAffinityClientIP(t *testing.T) { sessionAffinityClientIP(t, needCluster(t), "") }

// sessionAffinityClientIP: a Service of family fam ("": the cluster's
// first) with sessionAffinity ClientIP.
func sessionAffinityClientIP(t *testing.T, cs kubernetes.Interface, fam corev1.IPFamily) {
	ns := kns(t, cs)
	lbl := map[string]string{"app": "sticky"}
	ips := runPods(t, cs, ns, whoamiPod("srv-a", 1, lbl), whoamiPod("srv-b", 2, lbl), whoamiPod("srv-c", 2, lbl), clientPod("cli", 1))
	spec := corev1.ServiceSpec{Selector: lbl, SessionAffinity: corev1.ServiceAffinityClientIP,
		Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}}
	if fam != "" {
		single := corev1.IPFamilyPolicySingleStack
		spec.IPFamilyPolicy, spec.IPFamilies = &single, []corev1.IPFamily{fam}
	}
	svc, err := cs.CoreV1().Services(ns).Create(testCtx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "sticky"}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vip := svc.Spec.ClusterIP
	if fam == corev1.IPv6Protocol && !netip.MustParseAddr(vip).Is6() {
		t.Fatalf("Service sticky: clusterIP %s, want an IPv6 one", vip)
	}
	p1 := plane(t, 1)
	settled := func(affinity uint32) func() bool {
		return func() bool {
			s, ok := entry(t, p1, vip, 80, tcbpf.TCP)
			return ok && len(s.Backends) == 3 && s.Affinity == affinity
		}
	}
	if err := waitFor(30*time.Second, settled(10800)); err != nil {
		s, _ := entry(t, p1, vip, 80, tcbpf.TCP)
		t.Fatalf("node 1's entry %+v: want 3 backends, affinity 10800 s (the default)", s)
	}
	cli := podNetns(t, ips["cli"])
	answers := func(n int) map[string]int {
		seen := map[string]int{}
		for range n {
			w, err := who(cli, "tcp", hostport(vip, 80))
			if err != nil {
				w = "error: " + err.Error()
			}
			seen[w]++
		}
		return seen
	}
	if got := answers(20); len(got) != 1 {
		t.Fatalf("20 connections with sessionAffinity ClientIP: %v, want one backend", got)
	} else {
		t.Logf("sessionAffinity ClientIP: %v", got)
	}
	patch := []byte(`{"spec":{"sessionAffinity":"None","sessionAffinityConfig":null}}`)
	if _, err := cs.CoreV1().Services(ns).Patch(testCtx, "sticky", "application/strategic-merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(30*time.Second, settled(0)); err != nil {
		t.Fatal("node 1's entry kept its affinity after the Service went back to None")
	}
	got := answers(20)
	if len(got) < 2 || got["srv-a"]+got["srv-b"]+got["srv-c"] != 20 {
		t.Fatalf("sessionAffinity None: %v, want 20 answers from more than one backend", got)
	}
	t.Logf("sessionAffinity None: %v", got)
}

// An established flow keeps its backend while the Service's other
// endpoints change around it (one joins, another leaves): a connected UDP
// socket in a client pod is answered by the same pod throughout, as with
// kube-proxy, whose conntrack entries of remaining endpoints stay.
func TestEstablishedFlowKeepsItsBackend(t *testing.T) {
	cs := needCluster(t)
	ns := kns(t, cs)
	lbl := map[string]string{"app": "keep"}
	ips := runPods(t, cs, ns, whoamiPod("keep-a", 1, lbl), whoamiPod("keep-b", 2, lbl), clientPod("cli", 1))
	svc, err := cs.CoreV1().Services(ns).Create(testCtx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "keep"},
		Spec: corev1.ServiceSpec{Selector: lbl, Ports: []corev1.ServicePort{{Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("dns")}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vip := svc.Spec.ClusterIP
	p1 := plane(t, 1)
	backends := func(n int) func() bool {
		return func() bool { s, ok := entry(t, p1, vip, 53, tcbpf.UDP); return ok && len(s.Backends) == n }
	}
	if err := waitFor(30*time.Second, backends(2)); err != nil {
		t.Fatal("node 1's entry never got the 2 backends")
	}
	var c net.Conn
	if err := nsutil.DoPath(podNetns(t, ips["cli"]), func() (err error) {
		c, err = net.Dial("udp4", hostport(vip, 53))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// ask sends one datagram on the flow and returns who answered (a lost
	// datagram is asked again, up to 10 s).
	ask := func() string {
		t.Helper()
		buf := make([]byte, 256)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			if _, err := c.Write([]byte("?")); err != nil && !errors.Is(err, syscall.EINTR) {
				t.Fatal(err)
			}
			n, err := c.Read(buf)
			if err == nil {
				return strings.TrimSpace(string(buf[:n]))
			}
		}
		t.Fatal("the flow got no answer in 10 s")
		return ""
	}
	kept := ask()
	other := map[string]string{"keep-a": "keep-b", "keep-b": "keep-a"}[kept]
	if other == "" {
		t.Fatalf("answered by %q, not a backend", kept)
	}
	runPods(t, cs, ns, whoamiPod("keep-c", 2, lbl))
	if err := waitFor(30*time.Second, backends(3)); err != nil {
		t.Fatal("node 1's entry never got the third backend")
	}
	unlabel := []byte(`{"metadata":{"labels":{"app":"gone"}}}`)
	if _, err := cs.CoreV1().Pods(ns).Patch(testCtx, other, "application/strategic-merge-patch+json", unlabel, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(30*time.Second, backends(2)); err != nil {
		t.Fatalf("node 1's entry kept %s after its label went", other)
	}
	for i := range 20 {
		if got := ask(); got != kept {
			t.Fatalf("datagram %d of the flow answered by %s, not its %s, after the endpoints changed", i, got, kept)
		}
	}
}

// Hairpin: a pod reaching its own Service's clusterIP, the only endpoint
// being itself, is answered by itself (TCP, on the wire).
func TestHairpinThroughService(t *testing.T) {
	cs := needCluster(t)
	ns := kns(t, cs)
	lbl := map[string]string{"app": "self"}
	ips := runPods(t, cs, ns, whoamiPod("self", 1, lbl))
	svc, err := cs.CoreV1().Services(ns).Create(testCtx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "self"},
		Spec: corev1.ServiceSpec{Selector: lbl, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p1 := plane(t, 1)
	before, _ := p1.Stats()
	mustWho(t, podNetns(t, ips["self"]), "tcp", hostport(svc.Spec.ClusterIP, 80), "self", 30*time.Second)
	if after, _ := p1.Stats(); after.Hairpin <= before.Hairpin {
		t.Errorf("node 1 counted no hairpin flow (%d before, %d after)", before.Hairpin, after.Hairpin)
	}
}

// refused: testnet.RefusedAfter from namespace ns.
func refused(ns, proto, addr string) (time.Duration, error) {
	return testnet.RefusedAfter(func(f func() error) error { return nsutil.DoPath(ns, f) }, proto, addr)
}
