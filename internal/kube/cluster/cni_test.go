package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/vnetlab/vnetlab/internal/cni"
	"github.com/vnetlab/vnetlab/internal/dataplane/ebpf"
	"github.com/vnetlab/vnetlab/internal/kube/image"
	"github.com/vnetlab/vnetlab/internal/lab"
	"github.com/vnetlab/vnetlab/internal/nsutil"
	"github.com/vnetlab/vnetlab/internal/topo"
)

func TestSpecValidateCNI(t *testing.T) {
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{CNI: "flannel"}, `--cni "flannel"`},
		{Spec{CNIMode: topo.VethRouted}, "add --cni vnetlab"},
		{Spec{CNI: CNIVnetlab, CNIMode: "macvlan"}, `--cni-mode "macvlan"`},
	} {
		c.spec.Name, c.spec.Nodes, c.spec.Proxy = "k", 2, "iptables"
		if err := c.spec.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error containing %q", c.spec, err, c.want)
		}
	}
	both := Spec{Name: "k", Nodes: 2, Proxy: "vnetlab-ebpf", CNI: CNIVnetlab}
	if err := both.Validate(); err == nil || !strings.Contains(err.Error(), "--cni bridge only") {
		t.Errorf("%+v: %v, want an error saying the proxy needs --cni bridge", both, err)
	}
	ok := Spec{Name: "k", Nodes: 2, Proxy: "iptables", CNI: CNIVnetlab}
	if err := ok.Validate(); err != nil {
		t.Errorf("%+v: %v", ok, err)
	}
}

// A second cluster, its pods wired by vnetlab's CNI plugin in mode
// veth-routed: pods get addresses from their node's range, reach each other
// on the same node and across nodes, reach a ClusterIP through kube-proxy;
// deleting the pods unwires them (kubelet's DEL), and `kube down` leaves
// nothing.
func TestVnetlabCNICluster(t *testing.T) {
	needCluster(t)
	const name = "vkc"
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	st, err := Up(ctx, Spec{Name: name, Nodes: 2, Proxy: "iptables", CNI: CNIVnetlab, CNIMode: topo.VethRouted}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kube up --cni vnetlab --cni-mode veth-routed: %s", time.Since(start).Round(100*time.Millisecond))
	defer func() {
		start := time.Now()
		if err := Down(name, nil); err != nil {
			t.Errorf("kube down: %v", err)
		}
		t.Logf("kube down: %s", time.Since(start).Round(100*time.Millisecond))
		if msg := Leftovers(st, nil); msg != "" {
			t.Errorf("kube down left: %s", msg)
		}
		for i := range st.Nodes {
			if _, err := os.Stat(ebpf.PinDir(NodePlane(name, i+1))); err == nil {
				t.Errorf("kube down left %s", ebpf.PinDir(NodePlane(name, i+1)))
			}
		}
	}()
	if st.Facts[FactCNI] != "vnetlab veth-routed + host-local" {
		t.Errorf("fact cni = %q", st.Facts[FactCNI])
	}
	cs, err := Client(st.Facts[FactKubeconfig])
	if err != nil {
		t.Fatal(err)
	}
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cni-test"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	img := st.Facts[FactImage]
	pod := func(name, node string, restart corev1.RestartPolicy, args ...string) *corev1.Pod {
		zero := int64(0)
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{NodeSelector: map[string]string{"kubernetes.io/hostname": node}, RestartPolicy: restart, TerminationGracePeriodSeconds: &zero,
				Containers: []corev1.Container{{Name: "c", Image: img, ImagePullPolicy: corev1.PullNever, Command: append([]string{image.VnetlabPath}, args...)}}}}
	}
	n1, n2 := st.Nodes[0].Name, st.Nodes[1].Name
	servers := map[string]string{"srv1": n1, "srv2": n2}
	for s, node := range servers {
		if _, err := cs.CoreV1().Pods(ns.Name).Create(ctx, pod(s, node, corev1.RestartPolicyAlways, "rr-server", "--proto", "tcp", "--port", "7001"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := cs.CoreV1().Services(ns.Name).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "srv2"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "srv2"}, Ports: []corev1.ServicePort{{Port: 7001, TargetPort: intstr.FromInt32(7001)}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ips := map[string]string{}
	for s, node := range servers {
		p := waitPod(ctx, t, cs, ns.Name, s, corev1.PodRunning)
		want := podCIDR(1)
		if node == n2 {
			want = podCIDR(2)
		}
		if !want.Contains(net.ParseIP(p.Status.PodIP)) {
			t.Fatalf("%s on %s has IP %s, want one of %s", s, node, p.Status.PodIP, want)
		}
		ips[s] = p.Status.PodIP
	}
	// kube-proxy programs the Service a moment after its endpoint is ready.
	if err := waitFor(ctx, time.Minute, "the Service from node 1", func() bool {
		return nsutil.Do(st.Nodes[0].NS, func() error {
			c, err := net.DialTimeout("tcp", net.JoinHostPort(svc.Spec.ClusterIP, "7001"), 3*time.Second)
			if err == nil {
				c.Close()
			}
			return err
		}) == nil
	}); err != nil {
		t.Fatal(err)
	}
	clients := map[string][2]string{
		"same-node-podip":  {n1, ips["srv1"]},
		"cross-node-podip": {n1, ips["srv2"]},
		"cross-clusterip":  {n1, svc.Spec.ClusterIP},
		"same-clusterip":   {n2, svc.Spec.ClusterIP},
	}
	for c, to := range clients {
		if _, err := cs.CoreV1().Pods(ns.Name).Create(ctx, pod(c, to[0], corev1.RestartPolicyNever, "rr-client", "--proto", "tcp", "--addr", net.JoinHostPort(to[1], "7001"), "--duration", "1s"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for c, to := range clients {
		if p := waitPod(ctx, t, cs, ns.Name, c, corev1.PodSucceeded); p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("%s: client on %s to %s ended %s", c, to[0], to[1], p.Status.Phase)
		}
	}
	// Deleting the pods runs the plugin's DEL: no pod link stays on the nodes
	// (CoreDNS's pods are scaled away too).
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().Deployments(dnsNamespace).Patch(ctx, dnsName, types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, 2*time.Minute, "the pods' links to go from the nodes", func() bool {
		return podLinks(st) == ""
	}); err != nil {
		t.Errorf("%v: %s", err, podLinks(st))
	}
}

// waitPod waits until a pod is in phase want (or has failed) and returns it.
func waitPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string, want corev1.PodPhase) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	err := waitFor(ctx, 2*time.Minute, "pod "+name+" to be "+string(want), func() bool {
		var err error
		p, err = cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && (p.Status.Phase == want || p.Status.Phase == corev1.PodFailed) && (want != corev1.PodRunning || p.Status.PodIP != "")
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// podLinks lists the plugin's pod links still in the nodes ("" = none).
func podLinks(st *lab.State) string {
	var left []string
	for _, n := range st.Nodes {
		h, err := nsutil.Handle(n.NS)
		if err != nil {
			continue
		}
		ls, _ := h.LinkList()
		h.Close()
		for _, l := range ls {
			if strings.HasPrefix(l.Attrs().Name, "vnl") && len(l.Attrs().Name) == len(cni.HostIfname("x", "eth0")) {
				left = append(left, fmt.Sprintf("%s in %s", l.Attrs().Name, n.Name))
			}
		}
	}
	return strings.Join(left, ", ")
}
