package proxy_test

// IPv6 and dual-stack Services through vnetlab's eBPF proxy, on a
// dual-stack cluster of its own (needProxy(modeDual)).

import (
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/kube/proxy"
)

// Services of each ipFamilyPolicy (SingleStack IPv6, PreferDualStack,
// RequireDualStack) answer on each of their clusterIPs, TCP and UDP, from
// a client pod on the backend's node and from one on the other node; each
// clusterIP's entry holds the backend's address of its own family; the
// IPv6 programs translated the flows (their counters rise). The backend
// reaches itself through its IPv6 clusterIP (hairpin). An IPv6
// Service without endpoints is refused by the programs' ICMPv6 port
// unreachable (tcp6 within 2.5 s: the kernel takes the first SYN's error
// late, docs/services.md), and its neighbours keep working. A SingleStack
// IPv6 Service with sessionAffinity ClientIP sends one client's
// connections to one of its two backends.
func TestDualStackServicesThroughEBPF(t *testing.T) {
	cs := needProxy(t, modeDual)
	ns := kns(t, cs)
	lbl := map[string]string{"app": "srv6"}
	sticky := map[string]string{"app": "sticky6"}
	ips := runPods(t, cs, ns, peerPod("srv", 2, lbl), clientPod("cli1", 1), clientPod("cli2", 2),
		whoamiPod("sticky-a", 1, sticky), whoamiPod("sticky-b", 2, sticky))
	srv, err := cs.CoreV1().Pods(ns).Get(testCtx, "srv", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srvIPs := map[bool]netip.Addr{} // by IPv6
	for _, a := range srv.Status.PodIPs {
		ip := netip.MustParseAddr(a.IP)
		srvIPs[ip.Is6()] = ip
	}
	if !srvIPs[false].IsValid() || !srvIPs[true].IsValid() {
		t.Fatalf("backend podIPs %v: want one of each family (the cluster is dual-stack)", srv.Status.PodIPs)
	}
	ports := []corev1.ServicePort{
		{Name: "web", Port: 80, TargetPort: intstr.FromString("http")},
		{Name: "web-udp", Port: 80, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("dns")},
	}
	single, prefer, require := corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack
	services := []struct {
		name     string
		policy   *corev1.IPFamilyPolicy
		families []corev1.IPFamily
		selector map[string]string
		vips     int
	}{
		{"single6", &single, []corev1.IPFamily{corev1.IPv6Protocol}, lbl, 1},
		{"prefer", &prefer, nil, lbl, 2},
		{"require6", &require, []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}, lbl, 2},
		{"nobody6", &single, []corev1.IPFamily{corev1.IPv6Protocol}, map[string]string{"app": "nobody"}, 1},
		{"sticky6", &single, []corev1.IPFamily{corev1.IPv6Protocol}, sticky, 1},
	}
	vips := map[string][]string{}
	for _, s := range services {
		spec := corev1.ServiceSpec{Selector: s.selector, IPFamilyPolicy: s.policy, IPFamilies: s.families, Ports: ports}
		if s.name == "sticky6" {
			spec.SessionAffinity = corev1.ServiceAffinityClientIP
		}
		svc, err := cs.CoreV1().Services(ns).Create(testCtx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: s.name}, Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(svc.Spec.ClusterIPs) != s.vips {
			t.Fatalf("Service %s (%s %v): clusterIPs %v, want %d", s.name, *s.policy, s.families, svc.Spec.ClusterIPs, s.vips)
		}
		vips[s.name] = svc.Spec.ClusterIPs
	}
	p1 := plane(t, 1)
	before, err := p1.Stats6()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"single6", "prefer", "require6"} {
		for _, vip := range vips[name] {
			want := tcbpf.Backend{IP: srvIPs[netip.MustParseAddr(vip).Is6()], Port: 8080}
			if err := waitFor(30*time.Second, func() bool {
				s, ok := entry(t, p1, vip, 80, tcbpf.TCP)
				return ok && len(s.Backends) == 1 && s.Backends[0] == want
			}); err != nil {
				s, _ := entry(t, p1, vip, 80, tcbpf.TCP)
				t.Fatalf("Service %s: node 1's entry for %s:80/tcp has backends %v, want %s", name, vip, s.Backends, want)
			}
			for _, cli := range []string{"cli1", "cli2"} {
				cns := podNetns(t, ips[cli])
				mustWho(t, cns, "tcp", hostport(vip, 80), "srv", 10*time.Second)
				mustWho(t, cns, "udp", hostport(vip, 80), "srv", 10*time.Second)
			}
		}
	}
	after, err := p1.Stats6()
	if err != nil {
		t.Fatal(err)
	}
	// Hairpin: the backend reaching itself through its IPv6 clusterIP (its
	// source becomes tcbpf.HairpinIP6, the reply is translated back).
	self := podNetns(t, ips["srv"])
	mustWho(t, self, "tcp", hostport(vips["single6"][0], 80), "srv", 10*time.Second)
	mustWho(t, self, "udp", hostport(vips["single6"][0], 80), "srv", 10*time.Second)
	// cli1 asked the three IPv6 clusterIPs over TCP and UDP from node 1.
	if after.DNAT < before.DNAT+6 || after.RNAT < before.RNAT+6 {
		t.Errorf("node 1's IPv6 programs translated %d packets and %d replies: the IPv6 clusterIPs did not go through them", after.DNAT-before.DNAT, after.RNAT-before.RNAT)
	}

	nobody := vips["nobody6"][0]
	if err := waitFor(30*time.Second, func() bool {
		s, ok := entry(t, p1, nobody, 80, tcbpf.TCP)
		return ok && len(s.Backends) == 0
	}); err != nil {
		t.Fatalf("the IPv6 Service without endpoints never reached node 1's maps")
	}
	cli := podNetns(t, ips["cli1"])
	for _, c := range []struct {
		proto string
		limit time.Duration
	}{{"tcp", 2500 * time.Millisecond}, {"udp", time.Second}} {
		took, err := refused(cli, c.proto, hostport(nobody, 80))
		if err != nil || took > c.limit {
			t.Errorf("%s %s without endpoints: %v after %s, want connection refused within %s", c.proto, nobody, err, took, c.limit)
		}
		t.Logf("%s [%s]:80: connection refused after %s", c.proto, nobody, took.Round(time.Microsecond))
	}
	if s, _ := p1.Stats6(); s.Rejects < after.Rejects+2 {
		t.Errorf("node 1's IPv6 programs rejected %d packets, want at least 2: the refusals did not come from them", s.Rejects-after.Rejects)
	}
	// The neighbours of the empty Service still answer.
	mustWho(t, cli, "tcp", hostport(vips["single6"][0], 80), "srv", 10*time.Second)

	// sessionAffinity ClientIP over IPv6: the entry has it, and 10
	// connections from one client reach one of the two backends.
	stickyVIP := vips["sticky6"][0]
	if err := waitFor(30*time.Second, func() bool {
		s, ok := entry(t, p1, stickyVIP, 80, tcbpf.TCP)
		return ok && len(s.Backends) == 2 && s.Affinity == proxy.DefaultAffinityTimeout
	}); err != nil {
		s, _ := entry(t, p1, stickyVIP, 80, tcbpf.TCP)
		t.Fatalf("node 1's entry for the IPv6 Service with sessionAffinity: %+v, want 2 backends and affinity %d s", s, proxy.DefaultAffinityTimeout)
	}
	seen := map[string]int{}
	for range 10 {
		w, err := who(cli, "tcp", hostport(stickyVIP, 80))
		if err != nil {
			w = "error: " + err.Error()
		}
		seen[w]++
	}
	if len(seen) != 1 {
		t.Errorf("10 connections to [%s]:80 with sessionAffinity ClientIP: %v, want one backend", stickyVIP, seen)
	}
}

// An IPv6 NodePort (SingleStack IPv6, externalTrafficPolicy Cluster, the
// only endpoint on node 2) answers from outside the nodes on both nodes'
// IPv6 InternalIPs, TCP and UDP: through node 2 the backend sees the
// client's own address, through node 1 node 1's IPv6 address and a port of
// 61000-65535 (nodeport6.h's SNAT, so the reply comes back through node 1).
func TestDualStackNodePortIPv6(t *testing.T) {
	cs := needProxy(t, modeDual)
	ns := kns(t, cs)
	runPods(t, cs, ns, peerPod("np6-srv", 2, map[string]string{"app": "np6"}))
	svc := npService(t, cs, ns, "np6", corev1.IPv6Protocol)
	p1 := plane(t, 1)
	before, err := p1.NodePortStats()
	if err != nil {
		t.Fatal(err)
	}
	throughBothNodes(t, nodeIPsOf(t, cs, true), nodePortOf(svc, corev1.ProtocolTCP), nodePortOf(svc, corev1.ProtocolUDP), "np6-srv", "fd00:10:250::1")
	after, err := p1.NodePortStats()
	if err != nil {
		t.Fatal(err)
	}
	if after.SNAT < before.SNAT+2 || after.RNAT < before.RNAT+2 {
		t.Errorf("node 1's NodePort programs: %d SNATed flows, %d replies translated: want at least 2 each (tcp and udp through node 1)", after.SNAT-before.SNAT, after.RNAT-before.RNAT)
	}
}
