package measure

import (
	"math"
	"time"
)

// growingETA estimates the time left to make Services when each one costs
// the API server more the more there are. kube-apiserver 1.37's ClusterIP
// allocator lists every IPAddress object twice per allocation, for a
// metric (ipallocator.Allocator.Used): 79% of its CPU with 21,000 Services
// here. So the time per Service grows about linearly with the count n,
// t(n) = a + b·n, and a rate held constant promises 100,000 Services in a
// third of the time they take. The line is fitted through the first
// interval measured and the latest one.
type growingETA struct {
	n0, t0 float64 // the first interval: Services present at its middle, seconds per Service
	ok     bool
}

// left is the time to go from n Services present to total, given the
// latest interval's seconds per Service at n; it is 0 when unknown.
func (g *growingETA) left(n, total, perService float64) time.Duration {
	if perService <= 0 || math.IsInf(perService, 0) || n >= total {
		return 0
	}
	if !g.ok {
		g.n0, g.t0, g.ok = n, perService, true
	}
	b := 0.0
	if n > g.n0 {
		b = max(0, (perService-g.t0)/(n-g.n0))
	}
	a := perService - b*n
	secs := a*(total-n) + b*(total*total-n*n)/2
	return time.Duration(secs * float64(time.Second))
}
