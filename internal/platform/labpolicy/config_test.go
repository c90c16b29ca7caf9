package labpolicy

import (
	"encoding/json"
	"net/netip"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
)

// TestCloneIsDeep: a clone writes to JSON as its original does, and no
// change to the clone, down to a label or a selector, reaches the
// original (the old side of a change must stay as it was).
func TestCloneIsDeep(t *testing.T) {
	c := &Config{Provider: EBPF, Installed: true, LoadSeconds: 0.5,
		Namespaces: []netpol.Namespace{{Name: "ns-a", Labels: netpol.Labels{"team": "a"}}},
		Pods: []netpol.Pod{{Name: "pod-a", Namespace: "ns-a", Labels: netpol.Labels{"app": "web"},
			IPs: []netip.Addr{netip.MustParseAddr("192.168.10.10")}, Ports: []netpol.NamedPort{{Name: "http", Proto: netpol.TCP, Port: 80}}}},
		Policies: []networkingv1.NetworkPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns-a"},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}},
	}
	want, _ := json.Marshal(c)
	n := c.Clone()
	if got, _ := json.Marshal(n); string(got) != string(want) {
		t.Fatalf("clone writes\n%s\nwant\n%s", got, want)
	}
	n.Namespaces[0].Labels["team"] = "b"
	n.Pods[0].Labels["app"] = "db"
	n.Pods[0].IPs[0] = netip.MustParseAddr("192.168.10.99")
	n.Pods[0].Ports[0].Port = 81
	n.Policies[0].Spec.PodSelector.MatchLabels["app"] = "db"
	n.Policies = append(n.Policies[:0], networkingv1.NetworkPolicy{})
	if got, _ := json.Marshal(c); string(got) != string(want) {
		t.Errorf("changing the clone changed the original:\n%s\nwant\n%s", got, want)
	}
	empty, _ := json.Marshal(&Config{})
	if got, _ := json.Marshal((&Config{}).Clone()); string(got) != string(empty) {
		t.Errorf("a clone of an empty config writes %s, want %s", got, empty)
	}
}

// TestMergeKeysPolicies: a policy without a namespace and one in namespace
// default of the same name are one policy (the compiler's key), replaced
// in place; another name is added after.
func TestMergeKeysPolicies(t *testing.T) {
	pol := func(ns, name, app string) networkingv1.NetworkPolicy {
		return networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
	}
	c := &Config{Policies: []networkingv1.NetworkPolicy{pol("", "p", "a"), pol("shop", "q", "a")}}
	c.Merge(netpol.Doc{Policies: []networkingv1.NetworkPolicy{pol(netpol.DefaultNamespace, "p", "b"), pol("shop", "r", "c")}})
	var got []string
	for _, p := range c.Policies {
		got = append(got, netpol.PolicyKey(&p)+"="+p.Spec.PodSelector.MatchLabels["app"])
	}
	if want := []string{"default/p=b", "shop/q=a", "shop/r=c"}; !slices.Equal(got, want) {
		t.Errorf("merged %v, want %v", got, want)
	}
}

// TestMergeReplacesByName: a policy of the same namespace and name, a
// namespace or a pod of the same name replaces the one there, in its place;
// the others are appended in the file's order.
func TestMergeReplacesByName(t *testing.T) {
	pol := func(ns, name, app string) networkingv1.NetworkPolicy {
		return networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
	}
	c := &Config{
		Policies:   []networkingv1.NetworkPolicy{pol("a", "p", "old"), pol("b", "p", "old")},
		Namespaces: []netpol.Namespace{{Name: "a", Labels: netpol.Labels{"v": "old"}}},
		Pods:       []netpol.Pod{{Name: "pod-a", Namespace: "a"}, {Name: "pod-b", Namespace: "a"}},
	}
	c.Merge(netpol.Doc{
		Policies:   []networkingv1.NetworkPolicy{pol("b", "p", "new"), pol("a", "q", "new"), pol("b", "q", "new")},
		Namespaces: []netpol.Namespace{{Name: "c"}, {Name: "a", Labels: netpol.Labels{"v": "new"}}},
		Pods:       []netpol.Pod{{Name: "pod-b", Namespace: "c"}, {Name: "pod-c", Namespace: "a"}},
	})
	var pols []string
	for _, p := range c.Policies {
		pols = append(pols, p.Namespace+"/"+p.Name+"="+p.Spec.PodSelector.MatchLabels["app"])
	}
	var nss, pods []string
	for _, n := range c.Namespaces {
		nss = append(nss, n.Name+"="+n.Labels["v"])
	}
	for _, p := range c.Pods {
		pods = append(pods, p.Name+"@"+p.Namespace)
	}
	for _, g := range []struct{ got, want []string }{
		{pols, []string{"a/p=old", "b/p=new", "a/q=new", "b/q=new"}},
		{nss, []string{"a=new", "c="}},
		{pods, []string{"pod-a@a", "pod-b@c", "pod-c@a"}},
	} {
		if !slices.Equal(g.got, g.want) {
			t.Errorf("after Merge: %q, want %q", g.got, g.want)
		}
	}
}
