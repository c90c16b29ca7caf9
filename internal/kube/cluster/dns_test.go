package cluster

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vnetlab/vnetlab/internal/kube/image"
	"github.com/vnetlab/vnetlab/internal/kube/measure"
)

// kube up leaves CoreDNS serving as the kube-dns Service at its fixed
// ClusterIP, and a pod on each node resolves, through its resolv.conf and
// over UDP, the kubernetes Service and a Service the test creates (by full
// name and by the search list) to their ClusterIPs; a name that does not
// exist is not resolved.
func TestClusterDNS(t *testing.T) {
	cs := needCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dns, err := cs.CoreV1().Services(dnsNamespace).Get(ctx, dnsService, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ports []string
	for _, p := range dns.Spec.Ports {
		ports = append(ports, fmt.Sprintf("%s/%d", p.Protocol, p.Port))
	}
	if dnsIP := (addrPlan{}).dnsIP(); dns.Spec.ClusterIP != dnsIP.String() || !slices.Contains(ports, "UDP/53") || !slices.Contains(ports, "TCP/53") {
		t.Fatalf("kube-dns Service at %s with ports %v, want %s with UDP/53 and TCP/53", dns.Spec.ClusterIP, ports, dnsIP)
	}
	apiSvc, err := cs.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "vkt-dns-"}}
	ns, err = cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	// A ClusterIP Service has a name in DNS whether or not it has endpoints.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
		Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}}}
	if svc, err = cs.CoreV1().Services(ns.Name).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods []string
	for i, n := range testState.Nodes {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("resolver%d", i+1)},
			Spec: corev1.PodSpec{NodeSelector: map[string]string{"kubernetes.io/hostname": n.Name},
				Containers: []corev1.Container{{Name: "resolver", Image: testState.Facts[FactImage], ImagePullPolicy: corev1.PullNever}}}}
		if _, err := cs.CoreV1().Pods(ns.Name).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, pod.Name)
	}
	for _, p := range pods {
		if err := waitFor(ctx, 2*time.Minute, "pod "+p+" to run", func() bool {
			got, err := cs.CoreV1().Pods(ns.Name).Get(ctx, p, metav1.GetOptions{})
			return err == nil && got.Status.Phase == corev1.PodRunning
		}); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", testState.Facts[FactKubeconfig])
	if err != nil {
		t.Fatal(err)
	}
	ex := &measure.Exec{Client: cs, Config: cfg, Namespace: ns.Name}
	resolve := func(pod, name string) (string, error) {
		out, err := ex.Command(ctx, pod, image.VnetlabPath, "kube", "resolve", name).Output()
		return strings.TrimSpace(string(out)), err
	}
	want := map[string]string{
		"kubernetes.default.svc." + ClusterDomain:  apiSvc.Spec.ClusterIP,
		"web." + ns.Name + ".svc." + ClusterDomain: svc.Spec.ClusterIP,
		"web": svc.Spec.ClusterIP, // the pod's search list
	}
	for _, pod := range pods {
		for name, ip := range want {
			got, err := resolve(pod, name)
			if err != nil || net.ParseIP(got) == nil || got != ip {
				t.Errorf("pod %s resolved %s to %q (%v), want %s", pod, name, got, err, ip)
			}
		}
		if got, err := resolve(pod, "nosuch."+ns.Name+".svc."+ClusterDomain); err == nil {
			t.Errorf("pod %s resolved a Service that does not exist to %q", pod, got)
		}
	}
}
