package polbpf

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
)

// scaleWorld: pods a, b, c in namespace default; n policies select pod-a,
// each allowing ingress from an ipBlock /32 in 10.0.0.0/8 on one TCP port
// (none of them pod-b's flow), plus one allowing pod-b on TCP 8080; blocks
// more ipBlock peers in one policy of their own.
func scaleWorld(n, blocks int) *netpol.World {
	w := &netpol.World{}
	for i, name := range []string{"pod-a", "pod-b", "pod-c"} {
		w.Pods = append(w.Pods, netpol.Pod{Name: name, Namespace: netpol.DefaultNamespace, Labels: netpol.Labels{"pod": name},
			IPs: []netip.Addr{netip.AddrFrom4([4]byte{192, 168, 10, byte(10 + i)})}})
	}
	sel := metav1.LabelSelector{MatchLabels: map[string]string{"pod": "pod-a"}}
	tcp := corev1.ProtocolTCP
	policy := func(name string, peers []networkingv1.NetworkPolicyPeer, port int) networkingv1.NetworkPolicy {
		p := intstr.FromInt32(int32(port))
		return networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: netpol.DefaultNamespace},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: sel, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{From: peers, Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p}}}}}}
	}
	block := func(i int) networkingv1.NetworkPolicyPeer {
		return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: fmt.Sprintf("10.%d.%d.%d/32", i>>16&0xff, i>>8&0xff, i&0xff)}}
	}
	for i := 0; i < n; i++ {
		w.Policies = append(w.Policies, policy(fmt.Sprintf("p%d", i), []networkingv1.NetworkPolicyPeer{block(i)}, 1000+i%50000))
	}
	if blocks > 0 {
		var peers []networkingv1.NetworkPolicyPeer
		for i := 0; i < blocks; i++ {
			peers = append(peers, block(i))
		}
		w.Policies = append(w.Policies, policy("blocks", peers, 9999))
	}
	w.Policies = append(w.Policies, policy("allow-b", []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pod": "pod-b"}}}}, 8080))
	return w
}

// TestLoadAtScale loads 10k policies and 100k ipBlocks and checks the
// decisions at pod-a still come out right; it logs how long compiling and
// loading took, and what a decision costs in the kernel (BPF_PROG_TEST_RUN's
// average over repeats of a denied packet: every repeat decides again) at 1,
// 10k policies and 100k blocks. Logged, not asserted: a busy machine's
// times prove nothing (the numbers in docs/policies.md come from here).
func TestLoadAtScale(t *testing.T) {
	p := testPlane(t)
	a, b, c := netip.MustParseAddr("192.168.10.10"), netip.MustParseAddr("192.168.10.11"), netip.MustParseAddr("192.168.10.12")
	for _, sc := range []struct {
		name            string
		policies, block int
	}{{"1 policy", 0, 0}, {"10k policies", 10000, 0}, {"100k ipBlocks", 0, 100000}, {"10k policies again (an update)", 10000, 0}} {
		w := scaleWorld(sc.policies, sc.block)
		start := time.Now()
		if err := netpol.Check(w); err != nil {
			t.Fatal(err)
		}
		r := netpol.Compile(w)
		model := time.Since(start)
		st, err := p.Load(&r)
		if err != nil {
			t.Fatal(err)
		}
		n, err := p.Objects()
		if err != nil {
			t.Fatal(err)
		}
		if n != st.Entries {
			t.Errorf("%s: read back %d entries, wrote %d", sc.name, n, st.Entries)
		}
		checkVerdicts(t, p, []verdictCase{
			{sc.name + ": pod-b on 8080", false, frame{src: b, dst: a, proto: protoTCP, sport: 45000, dport: 8080}, true},
			{sc.name + ": pod-c on 8080", false, frame{src: c, dst: a, proto: protoTCP, sport: 45001, dport: 8080}, false},
			{sc.name + ": pod-b on 8081", false, frame{src: b, dst: a, proto: protoTCP, sport: 45002, dport: 8081}, false},
		})
		if sc.policies > 0 {
			checkVerdicts(t, p, []verdictCase{
				{sc.name + ": the last policy's block on its port", false, frame{src: netip.MustParseAddr(fmt.Sprintf("10.0.%d.%d", (sc.policies-1)>>8, (sc.policies-1)&0xff)), dst: a, proto: protoTCP, sport: 45003, dport: uint16(1000 + (sc.policies-1)%50000)}, true},
			})
		}
		if sc.block > 0 {
			checkVerdicts(t, p, []verdictCase{
				{sc.name + ": the last block", false, frame{src: netip.MustParseAddr("10.1.134.159"), dst: a, proto: protoTCP, sport: 45004, dport: 9999}, true},
				{sc.name + ": past the last block", false, frame{src: netip.MustParseAddr("10.1.134.160"), dst: a, proto: protoTCP, sport: 45005, dport: 9999}, false},
			})
		}
		ret, per, err := p.progs.PolIngress.Benchmark(frame{src: c, dst: a, proto: protoTCP, sport: 45006, dport: 8080}.bytes(), 20000, nil)
		if err != nil || int32(ret) != tcActShot {
			t.Fatalf("%s: benchmark run: %d, %v", sc.name, ret, err)
		}
		t.Logf("%s: %d map entries; model checked and compiled %v, entries compiled %v, written and swapped in %v; a denied packet's decision %v",
			sc.name, st.Entries, model.Round(time.Millisecond), st.Compile.Round(time.Millisecond), st.Write.Round(time.Millisecond), per)
	}
}
