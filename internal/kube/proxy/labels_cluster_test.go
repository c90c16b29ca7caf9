package proxy_test

// The labels that take a Service away from the proxy, as kube-proxy reads
// them (the upstream "should implement service.kubernetes.io/service-proxy-name"
// and "... service.kubernetes.io/headless"): the informers watch only
// objects without them, so a label added is a delete for the proxy and a
// label removed an add.

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
)

// A Service labelled for another proxy is never in the maps; one that
// gains the label leaves them (and stops answering), and comes back when
// the label goes.
func TestServiceProxyNameLabel(t *testing.T) {
	cs := needCluster(t)
	ns := kns(t, cs)
	lbl := map[string]string{"app": "named"}
	ips := runPods(t, cs, ns, whoamiPod("srv", 2, lbl), clientPod("cli", 1))
	mk := func(name string, labels map[string]string) string {
		svc, err := cs.CoreV1().Services(ns).Create(testCtx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: corev1.ServiceSpec{Selector: lbl, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return svc.Spec.ClusterIP
	}
	other := map[string]string{"service.kubernetes.io/service-proxy-name": "foo-bar"}
	disabled := mk("disabled", other)
	toggled := mk("toggled", nil)
	cli := podNetns(t, ips["cli"])
	mustWho(t, cli, "tcp", hostport(toggled, 80), "srv", 10*time.Second)
	p1 := plane(t, 1)
	present := func(vip string) bool { _, ok := entry(t, p1, vip, 80, tcbpf.TCP); return ok }
	if present(disabled) {
		t.Fatal("a Service labelled for another proxy is in node 1's maps")
	}
	if got, err := who(cli, "tcp", hostport(disabled, 80)); err == nil {
		t.Fatalf("a Service labelled for another proxy answered %q", got)
	}
	setLabels := func(labels string) {
		t.Helper()
		if _, err := cs.CoreV1().Services(ns).Patch(testCtx, "toggled", types.MergePatchType, []byte(`{"metadata":{"labels":`+labels+`}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setLabels(`{"service.kubernetes.io/service-proxy-name":"foo-bar"}`)
	if waitFor(10*time.Second, func() bool { return !present(toggled) }) != nil {
		t.Fatal("the label added: the Service is still in node 1's maps")
	}
	if got, err := who(cli, "tcp", hostport(toggled, 80)); err == nil {
		t.Errorf("the label added: the Service still answered %q", got)
	}
	setLabels(`{"service.kubernetes.io/service-proxy-name":null}`)
	mustWho(t, cli, "tcp", hostport(toggled, 80), "srv", 10*time.Second)
	if present(disabled) {
		t.Error("the other Service came into node 1's maps meanwhile")
	}
}

// A selectorless Service with a slice made by hand: it answers; the slice
// gains service.kubernetes.io/headless: its endpoint leaves the maps (the
// entry stays, without backends: refused).
func TestHeadlessLabelOnSlice(t *testing.T) {
	cs := needCluster(t)
	ns := kns(t, cs)
	ips := runPods(t, cs, ns, whoamiPod("srv", 2, nil), clientPod("cli", 1))
	svc, err := cs.CoreV1().Services(ns).Create(testCtx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "custom"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "port80", Port: 80}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	name, tcp, port := "port80", corev1.ProtocolTCP, int32(8080)
	ready := true
	es, err := cs.DiscoveryV1().EndpointSlices(ns).Create(testCtx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "custom-1", Labels: map[string]string{discoveryv1.LabelServiceName: "custom", discoveryv1.LabelManagedBy: "vnetlab-test"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ips["srv"]}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Protocol: &tcp, Port: &port}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cli := podNetns(t, ips["cli"])
	addr := hostport(svc.Spec.ClusterIP, 80)
	mustWho(t, cli, "tcp", addr, "srv", 10*time.Second)
	es.Labels[corev1.IsHeadlessService] = ""
	if _, err := cs.DiscoveryV1().EndpointSlices(ns).Update(testCtx, es, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p1 := plane(t, 1)
	if waitFor(10*time.Second, func() bool {
		e, ok := entry(t, p1, svc.Spec.ClusterIP, 80, tcbpf.TCP)
		return ok && len(e.Backends) == 0
	}) != nil {
		t.Fatal("the slice labelled headless: its endpoint is still in node 1's maps")
	}
	if _, err := refused(cli, "tcp", addr); err != nil {
		t.Errorf("the slice labelled headless: %v, want the Service refused (no endpoint)", err)
	}
}
