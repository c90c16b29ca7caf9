package netpolicy

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
)

// The controller without a cluster: the handlers are fed objects as the
// informers would, and a fake backend keeps what each Sync applied. The
// cluster tests (internal/kube/cluster: policy_cluster_test.go) send real
// traffic.

type fakeBackend struct {
	applied []netpol.Rules
	// everywhere is what Everywhere says; work, when set, gets each Apply's
	// rules instead of applied (BenchmarkSync: a backend's own work).
	everywhere bool
	work       func(*netpol.Rules)
}

func (*fakeBackend) Name() string       { return "fake" }
func (b *fakeBackend) Everywhere() bool { return b.everywhere }
func (b *fakeBackend) Apply(r *netpol.Rules, _ []netpol.PodChange, _ map[string]bool) error {
	if b.work != nil {
		b.work(r)
		return nil
	}
	b.applied = append(b.applied, *r)
	return nil
}

func (b *fakeBackend) last() *netpol.Rules { return &b.applied[len(b.applied)-1] }

const here = "n1"

func testPod(ns, name, node, ip string, labels map[string]string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, UID: types.UID(ns + name), CreationTimestamp: metav1.Now()},
		Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if ip != "" {
		p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	}
	return p
}

func testNS(name string, labels map[string]string) *corev1.Namespace {
	l := map[string]string{"kubernetes.io/metadata.name": name}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

// allowFrom isolates ns's pods selected by sel for ingress, letting in
// pods labelled from on port (a name or a number).
func allowFrom(ns, name string, sel, from map[string]string, port string, proto corev1.Protocol) *networkingv1.NetworkPolicy {
	p := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + name), Generation: 1},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: sel}, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	r := networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: from}}}}
	if port != "" {
		pp := networkingv1.NetworkPolicyPort{Protocol: &proto}
		v := intstrOf(port)
		pp.Port = &v
		r.Ports = []networkingv1.NetworkPolicyPort{pp}
	}
	p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{r}
	return p
}

func add(h cache.ResourceEventHandler, obj any)    { h.OnAdd(obj, false) }
func update(h cache.ResourceEventHandler, obj any) { h.OnUpdate(nil, obj) }
func del(h cache.ResourceEventHandler, obj any)    { h.OnDelete(obj) }

func syncOnce(t *testing.T, c *Controller) Stats {
	t.Helper()
	st, err := c.Sync()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func allowed(r *netpol.Rules, src, dst string, port uint16) bool {
	return r.Allowed(netip.MustParseAddr(src), netip.MustParseAddr(dst), netpol.TCP, port)
}

// Pods created before and after a policy are both covered; a pod's
// identity follows its labels; a deleted policy opens the pod again; only
// the node's own pods get rules, with peers from every node; a pod of the
// host's network, a finished one and one without an address are none of
// the model's; a named port resolves on the pod.
func TestControllerSync(t *testing.T) {
	b := &fakeBackend{}
	c := NewController(here, b, nil, nil, t.Logf)
	add(c.NamespaceHandler(), testNS("x", nil))
	server := testPod("x", "server", here, "10.0.1.10", map[string]string{"app": "server"})
	friend := testPod("x", "friend", "n2", "10.0.2.20", map[string]string{"role": "friend"})
	other := testPod("x", "other", here, "10.0.1.30", map[string]string{"role": "other"})
	host := testPod("x", "host", here, "10.250.0.11", map[string]string{"role": "friend"})
	host.Spec.HostNetwork = true
	done := testPod("x", "done", here, "10.0.1.40", map[string]string{"role": "friend"})
	done.Status.Phase = corev1.PodSucceeded
	for _, p := range []*corev1.Pod{server, friend, other, host, done} {
		add(c.PodHandler(), p)
	}
	pol := allowFrom("x", "allow-friend", map[string]string{"app": "server"}, map[string]string{"role": "friend"}, "http", corev1.ProtocolTCP)
	add(c.PolicyHandler(), pol)
	st := syncOnce(t, c)
	if st.Pods != 3 || st.Local != 2 || st.Isolated != 1 {
		t.Errorf("stats %+v: want 3 pods of the model (no hostNetwork, no finished pod), 2 here, 1 isolated", st)
	}
	r := b.last()
	if len(r.Pods) != 2 {
		t.Fatalf("rules of %d pods, want this node's 2: %+v", len(r.Pods), r.Pods)
	}
	if !allowed(r, "10.0.2.20", "10.0.1.10", 8080) || allowed(r, "10.0.2.20", "10.0.1.10", 80) || allowed(r, "10.0.1.30", "10.0.1.10", 8080) {
		t.Error("the friend on another node must reach the server on its named port http (8080) only, the other pod not at all")
	}
	// A pod created after the policy, without an address first.
	late := testPod("x", "late", here, "", map[string]string{"role": "friend"})
	add(c.PodHandler(), late)
	syncOnce(t, c)
	if allowed(b.last(), "10.0.1.50", "10.0.1.10", 8080) {
		t.Error("an address no pod has yet reached the server")
	}
	late = late.DeepCopy()
	late.Status.PodIPs = []corev1.PodIP{{IP: "10.0.1.50"}}
	update(c.PodHandler(), late)
	syncOnce(t, c)
	if !allowed(b.last(), "10.0.1.50", "10.0.1.10", 8080) {
		t.Error("a friend created after the policy cannot reach the server")
	}
	// The other pod becomes a friend; the server loses its label.
	other = other.DeepCopy()
	other.Labels = map[string]string{"role": "friend"}
	update(c.PodHandler(), other)
	syncOnce(t, c)
	if !allowed(b.last(), "10.0.1.30", "10.0.1.10", 8080) {
		t.Error("a pod relabelled friend cannot reach the server")
	}
	server = server.DeepCopy()
	server.Labels = nil
	update(c.PodHandler(), server)
	syncOnce(t, c)
	if !allowed(b.last(), "10.0.2.20", "10.0.1.10", 80) {
		t.Error("a server that lost its label is still isolated")
	}
	server = server.DeepCopy()
	server.Labels = map[string]string{"app": "server"}
	update(c.PodHandler(), server)
	syncOnce(t, c)
	if allowed(b.last(), "10.0.2.20", "10.0.1.10", 80) {
		t.Error("a server labelled again is not isolated again")
	}
	del(c.PolicyHandler(), pol)
	syncOnce(t, c)
	if !allowed(b.last(), "10.0.1.30", "10.0.1.10", 80) {
		t.Error("the policy is deleted, the server is still isolated")
	}
	n := len(b.applied)
	if st := syncOnce(t, c); st.Took != 0 || len(b.applied) != n {
		t.Error("a sync with nothing recorded applied rules")
	}
}

// Two pods on one address (the old one's object not yet gone): the newer
// one that is not being deleted is the address's pod.
func TestControllerAddressTakenAgain(t *testing.T) {
	b := &fakeBackend{}
	c := NewController(here, b, nil, nil, t.Logf)
	old := testPod("x", "old", here, "10.0.1.10", map[string]string{"app": "server"})
	old.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour))
	now := metav1.Now()
	old.DeletionTimestamp = &now
	add(c.PodHandler(), old)
	add(c.PodHandler(), testPod("x", "new", here, "10.0.1.10", map[string]string{"app": "client"}))
	add(c.PolicyHandler(), allowFrom("x", "p", map[string]string{"app": "server"}, map[string]string{"none": "x"}, "", ""))
	syncOnce(t, c)
	r := b.last()
	if len(r.Pods) != 1 || r.Pods[0].Pod != "new" || r.Pods[0].Ingress.Isolated {
		t.Errorf("rules %+v: want the new pod alone, not isolated", r.Pods)
	}
}

// A policy port of a protocol the node cannot enforce (SCTP here) gets one
// Warning Event naming the field, per generation; the pod stays isolated
// and TCP on that port is not let through.
func TestControllerUnsupportedProtocol(t *testing.T) {
	b := &fakeBackend{}
	var events []string
	warn := func(p *networkingv1.NetworkPolicy, reason, msg string) {
		events = append(events, p.Name+" "+reason+" "+msg)
	}
	c := NewController(here, b, map[netpol.Proto]string{netpol.SCTP: "kernel has no sctp support (CONFIG_IP_SCTP)"}, warn, t.Logf)
	add(c.PodHandler(), testPod("x", "server", here, "10.0.1.10", map[string]string{"app": "server"}))
	add(c.PodHandler(), testPod("x", "client", here, "10.0.1.11", map[string]string{"app": "client"}))
	pol := allowFrom("x", "sctp", map[string]string{"app": "server"}, map[string]string{"app": "client"}, "80", corev1.ProtocolSCTP)
	add(c.PolicyHandler(), pol)
	syncOnce(t, c)
	if allowed(b.last(), "10.0.1.11", "10.0.1.10", 80) {
		t.Error("a policy allowing SCTP 80 lets TCP 80 through")
	}
	if len(events) != 1 || !strings.Contains(events[0], "sctp UnsupportedProtocol spec.ingress[0].ports[0]: protocol SCTP cannot be enforced on node n1 (kernel has no sctp support (CONFIG_IP_SCTP))") {
		t.Errorf("events %q: want one naming the field", events)
	}
	update(c.PodHandler(), testPod("x", "client", here, "10.0.1.11", map[string]string{"app": "client", "v": "2"}))
	syncOnce(t, c)
	if len(events) != 1 {
		t.Errorf("the same policy generation warned again: %q", events)
	}
	// The policy's next object is enforced anew (the node keeps each
	// policy's enforced form only while its object is the same).
	tcp := allowFrom("x", "sctp", map[string]string{"app": "server"}, map[string]string{"app": "client"}, "80", corev1.ProtocolTCP)
	tcp.Generation = 2
	update(c.PolicyHandler(), tcp)
	syncOnce(t, c)
	if !allowed(b.last(), "10.0.1.11", "10.0.1.10", 80) || len(events) != 1 {
		t.Errorf("after the policy changed to TCP 80: TCP 80 allowed %v, events %q; want allowed, no new event", allowed(b.last(), "10.0.1.11", "10.0.1.10", 80), events)
	}
	del(c.PolicyHandler(), tcp)
	syncOnce(t, c)
	if len(c.enforced) != 0 || b.last().At(netip.MustParseAddr("10.0.1.10")).Ingress.Isolated {
		t.Errorf("after the policy went: %d policies kept enforced, server isolated %v", len(c.enforced), b.last().At(netip.MustParseAddr("10.0.1.10")).Ingress.Isolated)
	}
}
