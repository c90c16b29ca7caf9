package proxy

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
)

// The proxier's sync without a cluster: objects go through the same
// handlers the informers call, the maps are a fakePlane.

// fakeHealth records the health servers the proxier asks for.
type fakeHealth map[string][2]int // Service -> {port, local endpoints}

func (h fakeHealth) Set(name string, port uint16, local int) error {
	if port == 0 {
		delete(h, name)
		return nil
	}
	h[name] = [2]int{int(port), local}
	return nil
}

var testNodeIPs = []netip.Addr{netip.MustParseAddr("10.250.0.2")}

func newTestProxier(t *testing.T, f *fakePlane) (*Proxier, fakeHealth) {
	t.Helper()
	h := fakeHealth{}
	p, err := NewProxier("me", testNodeIPs, f, f, h, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	return p, h
}

func addObj(p *Proxier, obj any) {
	if _, ok := obj.(*corev1.Service); ok {
		p.ServiceHandler().OnAdd(obj, false)
	} else {
		p.SliceHandler().OnAdd(obj, false)
	}
}

func updateObj(p *Proxier, obj any) {
	if _, ok := obj.(*corev1.Service); ok {
		p.ServiceHandler().OnUpdate(nil, obj)
	} else {
		p.SliceHandler().OnUpdate(nil, obj)
	}
}

func mustSync(t *testing.T, p *Proxier, f *fakePlane) []string {
	t.Helper()
	f.calls = nil
	if _, err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	// The stale UDP flows the sync noted, forgotten now (Loop's goroutine
	// does it after the sync).
	if err := p.CleanUDP(); err != nil {
		t.Fatal(err)
	}
	if len(f.broken) > 0 {
		t.Fatalf("the programs would have followed a mark to nothing: %v", f.broken)
	}
	return sorted(f.calls)
}

// udpSvc: ns/s, clusterIP 10.96.0.10, UDP 53 -> 5353 and TCP 80 -> 8080.
func udpSvc() *corev1.Service {
	return svcOf("10.96.0.10", sport("dns", 53, corev1.ProtocolUDP, intstr.FromInt32(5353)), sport("web", 80, corev1.ProtocolTCP, intstr.FromInt32(8080)))
}

var udpPorts = []discoveryv1.EndpointPort{eport("dns", 5353, corev1.ProtocolUDP), eport("web", 8080, corev1.ProtocolTCP)}

// The handlers only record; Sync applies, once per Service whatever the
// number of changes; a Sync with nothing recorded touches nothing.
func TestProxierSyncAppliesRecordedChanges(t *testing.T) {
	f := newFakePlane()
	p, _ := newTestProxier(t, f)
	addObj(p, udpSvc())
	addObj(p, sliceOf("s-1", udpPorts, ep{ip: "10.244.1.5", node: "me", ready: b(true)}))
	if len(f.calls) != 0 {
		t.Fatalf("the handlers wrote the maps: %v", f.calls)
	}
	got := mustSync(t, p, f)
	if want := []string{"add 10.96.0.10:53/udp", "add 10.96.0.10:80/tcp"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("first sync: %v, want %v", got, want)
	}
	if got := mustSync(t, p, f); len(got) != 0 {
		t.Fatalf("nothing recorded, yet: %v", got)
	}
	// Three changes of the slice, one sync: the last state.
	updateObj(p, sliceOf("s-1", udpPorts, ep{ip: "10.244.1.5", ready: b(true)}, ep{ip: "10.244.2.5", ready: b(true)}))
	updateObj(p, sliceOf("s-1", udpPorts, ep{ip: "10.244.2.5", ready: b(true)}))
	updateObj(p, sliceOf("s-1", udpPorts, ep{ip: "10.244.2.6", ready: b(true)}))
	if got, want := mustSync(t, p, f), []string{"update 10.96.0.10:53/udp", "update 10.96.0.10:80/tcp"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after three slice changes: %v, want %v", got, want)
	}
	if got := f.m[key("10.96.0.10:80/tcp")]; !reflect.DeepEqual(got, bes("10.244.2.6:8080")) {
		t.Fatalf("backends %v, want the last state only", got)
	}
	// A second slice of the same Service adds to it; its deletion (as an
	// informer reports a lost delete) takes it away again.
	extra := sliceOf("s-2", udpPorts, ep{ip: "10.244.3.7", ready: b(true)})
	addObj(p, extra)
	mustSync(t, p, f)
	if got := f.m[key("10.96.0.10:80/tcp")]; len(got) != 2 {
		t.Fatalf("two slices: backends %v", got)
	}
	p.SliceHandler().OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/s-2", Obj: extra})
	mustSync(t, p, f)
	if got := f.m[key("10.96.0.10:80/tcp")]; !reflect.DeepEqual(got, bes("10.244.2.6:8080")) {
		t.Fatalf("slice s-2 deleted: backends %v", got)
	}
	p.ServiceHandler().OnDelete(udpSvc())
	if got, want := mustSync(t, p, f), []string{"del 10.96.0.10:53/udp", "del 10.96.0.10:80/tcp"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Service deleted: %v, want %v", got, want)
	}
}

// A dual-stack Service (RequireDualStack: a clusterIP per family) gets an
// entry per family, each with its own family's endpoints, and its
// sessionAffinity on both. A slice with a malformed address and a clusterIP that
// is no address each get one line; the rest of the Service, and the
// other Services, are served.
func TestProxierDualStackAndBadInput(t *testing.T) {
	f := newFakePlane()
	var logged []string
	p, err := NewProxier("me", testNodeIPs, f, f, fakeHealth{}, func(format string, a ...any) {
		logged = append(logged, fmt.Sprintf(format, a...))
	})
	if err != nil {
		t.Fatal(err)
	}
	web := []discoveryv1.EndpointPort{eport("web", 8080, corev1.ProtocolTCP)}
	dual := svcOf("10.96.0.10", sport("web", 80, corev1.ProtocolTCP, intstr.FromInt32(8080)))
	dual.Spec.ClusterIPs = append(dual.Spec.ClusterIPs, "fd00:10:96::10")
	dual.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	policy := corev1.IPFamilyPolicyRequireDualStack
	dual.Spec.IPFamilyPolicy = &policy
	dual.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	addObj(p, dual)
	addObj(p, sliceOf("s-4", web, ep{ip: "10.244.1.5", ready: b(true)}, ep{ip: "10.244.1.300", ready: b(true)}))
	addObj(p, slice6("s-6", web, ep{ip: "fd00:10:244:1::5", ready: b(true)}))
	other := svcOf("fd00:10:96::20", sport("web", 80, corev1.ProtocolTCP, intstr.FromInt32(8080)))
	other.Name = "t"
	other.Spec.ClusterIPs = append(other.Spec.ClusterIPs, "fd00::zz")
	addObj(p, other)
	tSlice := slice6("t-6", web, ep{ip: "fd00:10:244:1::7", ready: b(true)})
	tSlice.Labels[discoveryv1.LabelServiceName] = "t"
	addObj(p, tSlice)
	mustSync(t, p, f)
	want := map[string][]tcbpf.Backend{
		"10.96.0.10:80/tcp":       bes("10.244.1.5:8080"),
		"[fd00:10:96::10]:80/tcp": bes("[fd00:10:244:1::5]:8080"),
		"[fd00:10:96::20]:80/tcp": bes("[fd00:10:244:1::7]:8080"),
	}
	for k, bs := range want {
		if got := f.m[key(k)]; !reflect.DeepEqual(got, bs) {
			t.Errorf("%s: backends %v, want %v", k, got, bs)
		}
	}
	if len(f.m) != len(want) {
		t.Errorf("entries %v, want %d", f.m, len(want))
	}
	if f.aff[key("10.96.0.10:80/tcp")] != DefaultAffinityTimeout || f.aff[key("[fd00:10:96::10]:80/tcp")] != DefaultAffinityTimeout {
		t.Errorf("affinity %v: want both families' entries to have it", f.aff)
	}
	for _, w := range []string{
		`service ns/s: EndpointSlice s-4: endpoint address "10.244.1.300" skipped`,
		`service ns/t: clusterIP "fd00::zz" skipped`,
	} {
		if !slices.ContainsFunc(logged, func(l string) bool { return strings.HasPrefix(l, w) }) {
			t.Errorf("no log line %q in %q", w, logged)
		}
	}
}

// UDP flows to a backend that left are forgotten (kube-proxy's conntrack
// cleanup), for every frontend of the port (clusterIP, node port, external
// IP), with the backends that stay; TCP flows are never touched, nor UDP
// flows when a backend is only added. A changed target port is a backend
// that left. The first sync asks for every UDP frontend (a restarted
// proxy's stale flows).
func TestProxierForgetsStaleUDPFlows(t *testing.T) {
	f := newFakePlane()
	p, _ := newTestProxier(t, f)
	svc := udpSvc()
	svc.Spec.Type = corev1.ServiceTypeNodePort
	svc.Spec.Ports[0].NodePort, svc.Spec.Ports[1].NodePort = 30053, 30080
	svc.Spec.ExternalIPs = []string{"203.0.113.250"}
	addObj(p, svc)
	addObj(p, sliceOf("s-1", udpPorts, ep{ip: "10.244.1.5", ready: b(true)}, ep{ip: "10.244.2.5", ready: b(false), serving: b(true), terminating: b(true)}))
	mustSync(t, p, f)
	frontends := func(bs ...string) map[netip.AddrPort][]tcbpf.Backend {
		m := map[netip.AddrPort][]tcbpf.Backend{}
		for _, fe := range []string{"10.96.0.10:53", "10.250.0.2:30053", "203.0.113.250:53"} {
			m[netip.MustParseAddrPort(fe)] = bes(bs...)
		}
		return m
	}
	// A terminating but serving endpoint keeps its flows (kube-proxy keeps them).
	if len(f.forgot) != 1 || !reflect.DeepEqual(f.forgot[0], frontends("10.244.1.5:5353", "10.244.2.5:5353")) {
		t.Fatalf("first sync: forgot %v, want every UDP frontend with both serving backends", f.forgot)
	}
	steps := []struct {
		name  string
		slice *discoveryv1.EndpointSlice
		want  map[netip.AddrPort][]tcbpf.Backend // nil: no call
	}{
		{"a backend added", sliceOf("s-1", udpPorts, ep{ip: "10.244.1.5", ready: b(true)}, ep{ip: "10.244.2.5", serving: b(true), ready: b(false), terminating: b(true)}, ep{ip: "10.244.3.5", ready: b(true)}), nil},
		{"the terminating one gone", sliceOf("s-1", udpPorts, ep{ip: "10.244.1.5", ready: b(true)}, ep{ip: "10.244.3.5", ready: b(true)}), frontends("10.244.1.5:5353", "10.244.3.5:5353")},
		{"no longer serving", sliceOf("s-1", udpPorts, ep{ip: "10.244.1.5", ready: b(true)}, ep{ip: "10.244.3.5", ready: b(false), serving: b(false)}), frontends("10.244.1.5:5353")},
		{"the target port changed", sliceOf("s-1", []discoveryv1.EndpointPort{eport("dns", 9090, corev1.ProtocolUDP), eport("web", 8080, corev1.ProtocolTCP)}, ep{ip: "10.244.1.5", ready: b(true)}), frontends("10.244.1.5:9090")},
		{"no endpoint left: every flow goes", sliceOf("s-1", udpPorts), frontends()},
	}
	for _, st := range steps {
		f.forgot = nil
		updateObj(p, st.slice)
		mustSync(t, p, f)
		switch {
		case st.want == nil && len(f.forgot) != 0:
			t.Errorf("%s: forgot %v, want no call", st.name, f.forgot)
		case st.want != nil && (len(f.forgot) != 1 || !reflect.DeepEqual(f.forgot[0], st.want)):
			t.Errorf("%s: forgot %v, want %v", st.name, f.forgot, st.want)
		}
	}
	// TCP only: an endpoint leaving forgets nothing.
	f.forgot = nil
	tcp := svcOf("10.96.0.11", sport("web", 80, corev1.ProtocolTCP, intstr.FromInt32(8080)))
	tcp.Name = "t"
	tslice := func(eps ...ep) *discoveryv1.EndpointSlice {
		s := sliceOf("t-1", []discoveryv1.EndpointPort{eport("web", 8080, corev1.ProtocolTCP)}, eps...)
		s.Labels[discoveryv1.LabelServiceName] = "t"
		return s
	}
	addObj(p, tcp)
	addObj(p, tslice(ep{ip: "10.244.1.5", ready: b(true)}, ep{ip: "10.244.2.5", ready: b(true)}))
	mustSync(t, p, f)
	updateObj(p, tslice(ep{ip: "10.244.1.5", ready: b(true)}))
	mustSync(t, p, f)
	if len(f.forgot) != 0 {
		t.Errorf("a TCP endpoint left: forgot %v, want no call", f.forgot)
	}
}

// externalTrafficPolicy changes on a live NodePort Service: Local adds the
// External entries (written before the marks that point to them) and the
// health server; Cluster takes them away (marks cleared first); back to
// Local brings them back. The entries for pods and the node keep every
// endpoint throughout.
func TestProxierExternalTrafficPolicyChanges(t *testing.T) {
	f := newFakePlane()
	p, h := newTestProxier(t, f)
	svc := npSvc(corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal, 32000)
	svc.Name = "s"
	addObj(p, svc)
	addObj(p, sliceOf("s-1", []discoveryv1.EndpointPort{eport("web", 8080, corev1.ProtocolTCP), eport("dns", 5353, corev1.ProtocolUDP)},
		ep{ip: "10.244.2.5", node: "other", ready: b(true)}))
	all := bes("10.244.2.5:8080")
	check := func(step string, external bool, health [2]int) {
		t.Helper()
		if got := f.m[key("10.250.0.2:30080/tcp")]; !reflect.DeepEqual(got, all) {
			t.Errorf("%s: node port for pods and the node %v, want every endpoint %v", step, got, all)
		}
		ext, ok := f.m[key("10.250.0.2:30080/tcp (external)")]
		if ok != external || len(ext) != 0 || f.marked[key("10.250.0.2:30080/tcp")] != external {
			t.Errorf("%s: external entry present %v (%v), marked %v; want %v and no backend here", step, ok, ext, f.marked[key("10.250.0.2:30080/tcp")], external)
		}
		if h["ns/s"] != health {
			t.Errorf("%s: health server %v, want %v", step, h["ns/s"], health)
		}
	}
	mustSync(t, p, f)
	check("Local", true, [2]int{32000, 0})
	cl := svc.DeepCopy()
	cl.Spec.ExternalTrafficPolicy, cl.Spec.HealthCheckNodePort = corev1.ServiceExternalTrafficPolicyCluster, 0
	updateObj(p, cl)
	got := mustSync(t, p, f)
	check("Cluster", false, [2]int{})
	want := []string{"del 10.250.0.2:30053/udp (external)", "del 10.250.0.2:30080/tcp (external)", "update 10.250.0.2:30053/udp", "update 10.250.0.2:30080/tcp"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Local -> Cluster: %v, want %v", got, want)
	}
	updateObj(p, svc)
	mustSync(t, p, f)
	check("Local again", true, [2]int{32000, 0})
	updateObj(p, sliceOf("s-1", []discoveryv1.EndpointPort{eport("web", 8080, corev1.ProtocolTCP), eport("dns", 5353, corev1.ProtocolUDP)},
		ep{ip: "10.244.2.5", node: "other", ready: b(true)}, ep{ip: "10.244.1.5", node: "me", ready: b(true)}))
	mustSync(t, p, f)
	if got := f.m[key("10.250.0.2:30080/tcp (external)")]; !reflect.DeepEqual(got, bes("10.244.1.5:8080")) || h["ns/s"] != [2]int{32000, 1} {
		t.Errorf("an endpoint here: external entry %v, health %v; want it alone and 200/1", got, h["ns/s"])
	}
	p.ServiceHandler().OnDelete(svc)
	mustSync(t, p, f)
	if len(f.m) != 0 || len(h) != 0 {
		t.Errorf("Service deleted: maps %v, health %v left", f.m, h)
	}
}

// A restarted proxy: the first Sync changes what differs, prunes what no
// Service claims (an External entry after the mark pointing to it).
func TestProxierFirstSyncPrunes(t *testing.T) {
	f := newFakePlane()
	f.set(key("10.96.0.10:80/tcp"), tcbpf.Service{Backends: bes("10.244.1.5:8080")})
	f.set(key("10.250.0.2:30080/tcp (external)"), tcbpf.Service{})
	f.set(key("10.250.0.2:30080/tcp"), tcbpf.Service{HasExternal: true, Backends: bes("10.244.9.9:8080")})
	p, _ := newTestProxier(t, f)
	addObj(p, svcOf("10.96.0.10", sport("web", 80, corev1.ProtocolTCP, intstr.FromInt32(8080))))
	addObj(p, sliceOf("s-1", []discoveryv1.EndpointPort{eport("web", 8080, corev1.ProtocolTCP)}, ep{ip: "10.244.1.5", ready: b(true)}))
	got := mustSync(t, p, f)
	if want := []string{"del 10.250.0.2:30080/tcp", "del 10.250.0.2:30080/tcp (external)"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("first sync: %v, want only the prune, %v", got, want)
	}
}

// A failed write is retried by the next Sync without a new change.
func TestProxierRetriesFailedSync(t *testing.T) {
	f := &failingPlane{fakePlane: newFakePlane(), fail: 1}
	p, err := NewProxier("me", testNodeIPs, f, nil, fakeHealth{}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	addObj(p, svcOf("10.96.0.10", sport("web", 80, corev1.ProtocolTCP, intstr.FromInt32(8080))))
	if _, err := p.Sync(); err == nil {
		t.Fatal("the failing add was not reported")
	}
	if _, err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.m[key("10.96.0.10:80/tcp")]; !ok {
		t.Fatal("the Service was not synced again after its failure")
	}
}

type failingPlane struct {
	*fakePlane
	fail int
}

func (f *failingPlane) AddService(s tcbpf.Service) error {
	if f.fail > 0 {
		f.fail--
		return errors.New("injected failure")
	}
	return f.fakePlane.AddService(s)
}

// The informers' label selector: kube-proxy's (no other proxy's Service,
// no headless Service's slice).
func TestLabelSelector(t *testing.T) {
	sel := LabelSelector()
	for _, c := range []struct {
		labels map[string]string
		served bool
	}{
		{nil, true},
		{map[string]string{"app": "x", discoveryv1.LabelServiceName: "s"}, true},
		{map[string]string{proxyNameLabel: "foo-bar"}, false},
		{map[string]string{proxyNameLabel: ""}, false},
		{map[string]string{corev1.IsHeadlessService: ""}, false},
	} {
		if got := sel.Matches(labels.Set(c.labels)); got != c.served {
			t.Errorf("labels %v: served %v, want %v", c.labels, got, c.served)
		}
	}
	if s := sel.String(); s != fmt.Sprintf("!%s,!%s", corev1.IsHeadlessService, proxyNameLabel) && s != fmt.Sprintf("!%s,!%s", proxyNameLabel, corev1.IsHeadlessService) {
		t.Errorf("selector %q", s)
	}
}

// guardedCleaner is a FlowCleaner whose "walk" finds the given flows, runs
// between the walk and the deletes what a concurrent sync would (during),
// then deletes, under the guard's lock, those the guard still says left
// (as tcbpf.ForgetUDPFlowsGuarded does).
type guardedCleaner struct {
	found   map[netip.AddrPort][]tcbpf.Backend // per frontend, the backends of the flows found
	during  func()
	keep    map[netip.AddrPort][]tcbpf.Backend // what the cleanup was asked to keep
	deleted map[netip.AddrPort][]tcbpf.Backend
}

func (c *guardedCleaner) ForgetUDPFlows(keep map[netip.AddrPort][]tcbpf.Backend, g tcbpf.FlowGuard) (int, error) {
	c.keep = maps.Clone(keep)
	stale := map[netip.AddrPort][]tcbpf.Backend{}
	for fe, bs := range c.found {
		for _, b := range bs {
			if ks, ok := keep[fe]; ok && !slices.Contains(ks, b) {
				stale[fe] = append(stale[fe], b)
			}
		}
	}
	c.during()
	g.Lock()
	defer g.Unlock()
	c.deleted = map[netip.AddrPort][]tcbpf.Backend{}
	n := 0
	for fe, bs := range stale {
		now, ok := g.Backends(fe)
		for _, b := range bs {
			if !ok || !slices.Contains(now, b) {
				c.deleted[fe] = append(c.deleted[fe], b)
				n++
			}
		}
	}
	return n, nil
}

// The cleanup runs after the sync, and a sync that gives a frontend its
// backend back while the cleanup walks is never undone by it: the flows
// the walk found to that backend are not deleted; those to a backend still
// gone are.
func TestProxierCleanupNeverDeletesReaddedBackend(t *testing.T) {
	f := newFakePlane()
	c := &guardedCleaner{during: func() {}}
	p, err := NewProxier("me", testNodeIPs, f, c, fakeHealth{}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	fe := netip.MustParseAddrPort("10.96.0.10:53")
	a, bk := bes("10.244.1.5:5353")[0], bes("10.244.2.5:5353")[0]
	never := bes("10.244.9.9:5353")[0] // a flow to a backend nobody has
	both := sliceOf("s-1", udpPorts, ep{ip: "10.244.1.5", ready: b(true)}, ep{ip: "10.244.2.5", ready: b(true)})
	addObj(p, udpSvc())
	addObj(p, both)
	if _, err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := p.CleanUDP(); err != nil { // the first sync's cleanup: nothing stale yet
		t.Fatal(err)
	}
	// b leaves: the sync writes the maps and only notes the cleanup.
	updateObj(p, sliceOf("s-1", udpPorts, ep{ip: "10.244.1.5", ready: b(true)}))
	c.keep = nil
	if _, err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	if c.keep != nil {
		t.Fatalf("the sync forgot flows itself (%v): the cleanup must run after it", c.keep)
	}
	// The cleanup walks and finds flows to b and to never; meanwhile b is back.
	c.found = map[netip.AddrPort][]tcbpf.Backend{fe: {a, bk, never}}
	c.during = func() {
		updateObj(p, both)
		if _, err := p.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.CleanUDP(); err != nil {
		t.Fatal(err)
	}
	if got := c.keep[fe]; !reflect.DeepEqual(got, []tcbpf.Backend{a}) {
		t.Fatalf("the cleanup was asked to keep %v for %s, want [%s]", got, fe, a)
	}
	if got := c.deleted[fe]; !reflect.DeepEqual(got, []tcbpf.Backend{never}) {
		t.Errorf("the cleanup deleted the flows of %s to %v, want only those to %s (%s came back during the walk)", fe, got, never, bk)
	}
}
