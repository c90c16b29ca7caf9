package polnft

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// TestDeltaAtScale: what nft takes, in a namespace of the test's, to load
// the whole table and one policy's delta (added, then deleted) when n
// policies select one pod, each allowing its ingress from one /32 (the
// policies knob's generated set, docs/policies-cost.md), at n = 0, 1,000
// and 10,000; each load timed from the nft call to its return, the table
// read back after each delta. Alternately, the compiler's changes written
// by Apply (through netlink, as a lab's or a node's change is), timed from
// Apply's plan to its return. Logged, not asserted: a busy machine's times
// prove nothing. Set VNETLAB_POLNFT_SCALE=1 (root):
//
//	VNETLAB_POLNFT_SCALE=1 flock /run/vnetlab-dev.lock go test -count=1 -v -run TestDeltaAtScale ./internal/datapath/polnft/
func TestDeltaAtScale(t *testing.T) {
	if os.Getenv("VNETLAB_POLNFT_SCALE") == "" {
		t.Skip("set VNETLAB_POLNFT_SCALE=1 to measure")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: it creates a network namespace")
	}
	ns := "vnl-polnft-scale"
	if nsutil.Exists(ns) {
		_ = nsutil.Delete(ns)
	}
	if err := nsutil.Create(ns, "vnetlab polnft scale test"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nsutil.Delete(ns) })
	applied := func(changes []netpol.PodChange, r *netpol.Rules) time.Duration {
		t.Helper()
		start := time.Now()
		if err := Apply(changes, r)(ns); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	timed := func(script string) time.Duration {
		t.Helper()
		start := time.Now()
		if err := Load(ns, script); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	for _, n := range []int{0, 1000, 10000} {
		w := scaleWorld(n)
		c := netpol.NewCompilerOf(w, nil)
		r := c.Rules()
		c.Changes() // those of making the world
		var whole, added, deleted, applyAdded, applyDeleted, made []time.Duration
		for range 5 {
			whole = append(whole, timed(Script(&r)))
		}
		extra := generated(w.Pods[0], n)
		lines := 0
		for i := range 40 {
			// Alternately a delta loaded by nft and the compiler's
			// changes written as Apply writes them (through netlink).
			c.SetPolicy(&extra)
			more, changes := c.Rules(), c.Changes()
			if i%2 == 1 {
				applyAdded = append(applyAdded, applied(changes, &more))
			} else {
				start := time.Now()
				d := Delta(netpol.Diff(&r, &more))
				made = append(made, time.Since(start))
				lines = strings.Count(d, "\n")
				added = append(added, timed(d))
			}
			c.DeletePolicy(extra.Namespace, extra.Name)
			back, changes := c.Rules(), c.Changes()
			if i%2 == 1 {
				applyDeleted = append(applyDeleted, applied(changes, &back))
			} else {
				deleted = append(deleted, timed(Delta(netpol.Diff(&more, &back))))
			}
			r = back
		}
		h, err := Read(ns)
		if err != nil {
			t.Fatal(err)
		}
		if want := Objects(Script(&r)); h.Objects != want {
			t.Errorf("%d policies: the table holds %d objects after the deltas, the rules make %d", n, h.Objects, want)
		}
		t.Logf("%5d policies: whole table %s; one policy added %s, deleted %s (a delta of %d commands, made in %s); through Apply (planned and written) added %s, deleted %s",
			n, spread(whole), spread(added), spread(deleted), lines, spread(made), spread(applyAdded), spread(applyDeleted))
	}
}

// spread is the median and the maximum of d.
func spread(d []time.Duration) string {
	slices.Sort(d)
	ms := func(x time.Duration) float64 { return float64(x) / float64(time.Millisecond) }
	return fmt.Sprintf("p50 %.1f ms max %.1f ms", ms(d[len(d)/2]), ms(d[len(d)-1]))
}

// scaleWorld is a server pod, a client pod, n generated policies selecting
// the server and the policy that allows the client.
func scaleWorld(n int) *netpol.World {
	server := netpol.Pod{Name: "server", Namespace: "default", Labels: netpol.Labels{"app": "server"}, IPs: []netip.Addr{netip.MustParseAddr("10.244.0.2")}}
	client := netpol.Pod{Name: "client", Namespace: "default", Labels: netpol.Labels{"app": "client"}, IPs: []netip.Addr{netip.MustParseAddr("10.244.0.3")}}
	w := &netpol.World{Namespaces: []netpol.Namespace{{Name: "default", Labels: netpol.Labels{corev1.LabelMetadataName: "default"}}},
		Pods: []netpol.Pod{server, client}}
	for i := range n {
		w.Policies = append(w.Policies, generated(server, i))
	}
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(5201)
	w.Policies = append(w.Policies, networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow", Namespace: "default"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: server.Labels},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: client.Labels}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}}}}}})
	return w
}

// generated is the i-th generated policy: selecting server, allowing
// ingress from the i-th address of 198.18.0.0/15.
func generated(server netpol.Pod, i int) networkingv1.NetworkPolicy {
	peer := netip.AddrFrom4([4]byte{198, 18 + byte(i>>16), byte(i >> 8), byte(i)})
	return networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gen-%d", i), Namespace: server.Namespace},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: server.Labels},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: peer.String() + "/32"}}}}}}}
}
