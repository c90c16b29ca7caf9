package polbpf

import (
	"fmt"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol/netpoltest"
)

// BenchmarkTrackerPolicyAdd: the tracker's part of one policy added (and,
// every other iteration, deleted again) while n others select the same
// pod (the apply-latency runs' shape), after the Compiler's.
//
//	go test -run XXX -bench TrackerPolicyAdd ./internal/datapath/polbpf/
func BenchmarkTrackerPolicyAdd(b *testing.B) {
	for _, n := range []int{0, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			w, allow := netpoltest.BenchWorld(n)
			c := netpol.NewCompilerOf(w, nil)
			t := newTracker()
			r := c.Rules()
			c.Changes()
			t.update(&r, nil)
			b.ResetTimer()
			for i := range b.N {
				if i%2 == 0 {
					c.SetPolicy(allow)
				} else {
					c.DeletePolicy(allow.Namespace, allow.Name)
				}
				r := c.Rules()
				if t.update(&r, c.Changes()) != 1 {
					b.Fatal("one pod's keys should be made again")
				}
			}
		})
	}
}
