package polnft

import (
	"fmt"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol/netpoltest"
)

func BenchmarkTmpDelta(b *testing.B) {
	for _, n := range []int{0, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			w, allow := netpoltest.BenchWorld(n)
			c := netpol.NewCompilerOf(w, nil)
			for i := range b.N {
				if i%2 == 0 {
					c.SetPolicy(allow)
				} else {
					c.DeletePolicy(allow.Namespace, allow.Name)
				}
				ch := c.Changes()
				b.StartTimer()
				d := Delta(ch)
				b.StopTimer()
				if i < 2 {
					b.Log(len(d))
				}
			}
		})
	}
}
