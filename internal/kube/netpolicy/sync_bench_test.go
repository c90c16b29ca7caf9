package netpolicy

import (
	"fmt"
	"net/netip"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/polbpf"
	"github.com/vnetlab/vnetlab/internal/datapath/polnft"
)

// benchSync is BenchmarkSync's n: one policy added or deleted per sync,
// or (relabel) the pod given and taken the label it selects the pod by.
func benchSync(b *testing.B, n int, relabel bool, be *fakeBackend) {
	c := NewController(here, be, map[netpol.Proto]string{netpol.SCTP: "no sctp"}, nil, nil)
	add(c.NamespaceHandler(), testNS("m", nil))
	add(c.NamespaceHandler(), testNS("kube-system", nil))
	for i := range 20 {
		node := here
		if i%2 == 1 {
			node = "n2"
		}
		ns := "m"
		if i >= 10 {
			ns = "kube-system"
		}
		add(c.PodHandler(), testPod(ns, fmt.Sprintf("p%d", i), node, fmt.Sprintf("10.244.%d.%d", i%2, 10+i), map[string]string{"vnetlab.pod": fmt.Sprintf("p%d", i)}))
	}
	for i := range n {
		p := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "m", Name: fmt.Sprintf("gen-%d", i), UID: types.UID(fmt.Sprint(i)), Generation: 1},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"vnetlab.pod": "p0"}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), 32).String()}}}}}}}
		add(c.PolicyHandler(), p)
	}
	allow := allowFrom("m", "allow", map[string]string{"vnetlab.pod": "p0"}, map[string]string{"vnetlab.pod": "p1"}, "8080", "UDP")
	p0 := testPod("m", "p0", here, "10.244.0.10", map[string]string{"vnetlab.pod": "p0"})
	labelled := p0.DeepCopy()
	if relabel {
		allow.Spec.PodSelector.MatchLabels["allowed"] = "yes"
		labelled.Labels["allowed"] = "yes"
		add(c.PolicyHandler(), allow)
	}
	if _, err := c.Sync(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		switch {
		case relabel && i%2 == 0:
			update(c.PodHandler(), labelled)
		case relabel:
			update(c.PodHandler(), p0)
		case i%2 == 0:
			add(c.PolicyHandler(), allow)
		default:
			del(c.PolicyHandler(), allow)
		}
		if _, err := c.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSync: what one Sync costs a node when one policy comes and goes
// while n others select the same pod (kube converge --policy's shape: each
// admits one ipBlock address), or when the pod's labels move it in and out
// of one more policy (relabel), with no backend work (nop), with the
// nftables backend's delta from the last Sync made (nft) and with the eBPF backend's map
// entries made for every pod (bpf); the data path's own write is not in it
// (internal/datapath/polbpf's TestLoadAtScale logs that one).
//
//	go test -run XXX -bench Sync ./internal/kube/netpolicy/
func BenchmarkSync(b *testing.B) {
	for _, n := range []int{0, 1000, 10000} {
		b.Run(fmt.Sprintf("nop/%d", n), func(b *testing.B) { benchSync(b, n, false, &fakeBackend{work: func(*netpol.Rules) {}}) })
		b.Run(fmt.Sprintf("relabel/%d", n), func(b *testing.B) { benchSync(b, n, true, &fakeBackend{work: func(*netpol.Rules) {}}) })
		b.Run(fmt.Sprintf("nft/%d", n), func(b *testing.B) {
			last := &netpol.Rules{}
			benchSync(b, n, false, &fakeBackend{work: func(r *netpol.Rules) {
				_ = polnft.Delta(netpol.Diff(last, r))
				last = r
			}})
		})
		b.Run(fmt.Sprintf("bpf/%d", n), func(b *testing.B) {
			benchSync(b, n, false, &fakeBackend{everywhere: true, work: func(r *netpol.Rules) { _ = polbpf.Compile(r) }})
		})
	}
}
