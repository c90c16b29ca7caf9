package netpol_test

import (
	"fmt"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol/netpoltest"
)

// BenchmarkPolicyAdd: one policy added (and, every other iteration,
// deleted again) while n others select the same pod: Compile of the whole
// world (full) against the Compiler's change (incremental), whose rules
// are the same.
//
//	go test -run XXX -bench PolicyAdd ./internal/datapath/netpol/
func BenchmarkPolicyAdd(b *testing.B) {
	for _, n := range []int{0, 1000, 10000} {
		b.Run(fmt.Sprintf("full/%d", n), func(b *testing.B) {
			w, allow := netpoltest.BenchWorld(n)
			base := w.Policies
			with := append(base[:n:n], *allow)
			b.ResetTimer()
			for i := range b.N {
				w.Policies = with
				if i%2 == 1 {
					w.Policies = base
				}
				_ = netpol.Compile(w)
			}
		})
		b.Run(fmt.Sprintf("incremental/%d", n), func(b *testing.B) {
			w, allow := netpoltest.BenchWorld(n)
			c := netpol.NewCompilerOf(w, nil)
			b.ResetTimer()
			for i := range b.N {
				if i%2 == 0 {
					c.SetPolicy(allow)
				} else {
					c.DeletePolicy(allow.Namespace, allow.Name)
				}
				// With others there, the pod stays isolated: its change is
				// a delta.
				if ch := c.Changes(); len(ch) != 1 || n > 0 && ch[0].Delta == nil {
					b.Fatal("one pod's rules should change, by a delta")
				}
			}
		})
	}
}

// BenchmarkPodRelabel: the pod n policies select gains a label (and,
// every other iteration, loses it again) that one more policy selects it
// by, as `kube converge --policy`'s label steps do: the Compiler's change.
//
//	go test -run XXX -bench PodRelabel ./internal/datapath/netpol/
func BenchmarkPodRelabel(b *testing.B) {
	for _, n := range []int{0, 1000, 10000} {
		b.Run(fmt.Sprintf("incremental/%d", n), func(b *testing.B) {
			w, allow := netpoltest.BenchWorld(n)
			allow.Spec.PodSelector.MatchLabels = map[string]string{"vnetlab.pod": "p0", "allowed": "yes"}
			w.Policies = append(w.Policies, *allow)
			c := netpol.NewCompilerOf(w, nil)
			plain := *c.Pod(netpol.PodKey{Namespace: "m", Name: "p0"})
			labelled := plain
			labelled.Labels = netpol.Labels{"vnetlab.pod": "p0", "allowed": "yes"}
			b.ResetTimer()
			for i := range b.N {
				if i%2 == 0 {
					c.SetPod(labelled)
				} else {
					c.SetPod(plain)
				}
				if ch := c.Changes(); len(ch) != 1 {
					b.Fatalf("one pod's rules should change, not %d", len(ch))
				}
			}
		})
	}
}
