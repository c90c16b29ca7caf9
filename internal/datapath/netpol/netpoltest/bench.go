package netpoltest

import (
	"fmt"
	"net/netip"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
)

// BenchWorld is the apply-latency runs' shape (policy converge, kube
// converge --policy): 20 pods in two namespaces and n policies selecting
// pod p0, each admitting one /32 of 198.18.0.0/15 that no pod has; allow
// is the policy added and deleted, admitting pod p1.
func BenchWorld(n int) (w *netpol.World, allow *networkingv1.NetworkPolicy) {
	w = &netpol.World{Namespaces: []netpol.Namespace{{Name: "m"}, {Name: "kube-system"}}}
	for i := range 20 {
		ns := "m"
		if i >= 10 {
			ns = "kube-system"
		}
		w.Pods = append(w.Pods, netpol.Pod{Name: fmt.Sprintf("p%d", i), Namespace: ns, Labels: netpol.Labels{"vnetlab.pod": fmt.Sprintf("p%d", i)},
			IPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 244, byte(i % 2), byte(10 + i)})}})
	}
	p0 := metav1.LabelSelector{MatchLabels: map[string]string{"vnetlab.pod": "p0"}}
	for i := range n {
		w.Policies = append(w.Policies, networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "m", Name: fmt.Sprintf("gen-%05d", i)},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: p0, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{
					CIDR: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18 + byte(i>>16), byte(i >> 8), byte(i)}), 32).String()}}}}}}})
	}
	allow = &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "m", Name: "allow"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: p0, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"vnetlab.pod": "p1"}}}}}}}}
	return w, allow
}
