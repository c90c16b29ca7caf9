package stats

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The bootstrap CI of a quantile on synthetic data whose quantiles are
// known: exponential latencies of mean 1 have their q quantile
// at -ln(1-q). Over independent draws the 95% interval holds the true
// quantile about 95% of the time, and it narrows as the draw grows.
//
// Tolerance: 40 draws of a 95% interval hold it 38 times on average
// (binomial sd 1.4); the percentile bootstrap of a quantile undercovers a
// little at these sizes, so 33 or more (82%) passes and a CI that is
// wrong (a point, or the median's interval used for p90) fails: those hold
// it in under half the draws. The draws are seeded: the test gives the same
// answer on every run.
func TestBootstrapQuantileCIHoldsKnownQuantile(t *testing.T) {
	const draws, n = 40, 100
	r := rand.New(rand.NewPCG(46, 46))
	for _, q := range []float64{0.5, 0.9} {
		truth := -math.Log(1 - q)
		held, width := 0, 0.0
		for range draws {
			xs := make([]float64, n)
			for i := range xs {
				xs[i] = r.ExpFloat64()
			}
			lo, hi, ok := BootstrapQuantileCI(xs, q)
			if !ok || lo > hi {
				t.Fatalf("p%g: interval [%g, %g] ok=%v", 100*q, lo, hi, ok)
			}
			if v := EmpiricalQuantile(xs, q); v < lo || v > hi {
				t.Errorf("p%g: the estimate %g lies outside its own interval [%g, %g]", 100*q, v, lo, hi)
			}
			if lo <= truth && truth <= hi {
				held++
			}
			width += hi - lo
		}
		t.Logf("p%g (true %.3f): the 95%% CI held it in %d of %d draws of %d, mean width %.3f", 100*q, truth, held, draws, n, width/draws)
		if held < 33 {
			t.Errorf("p%g: the 95%% CI held the true quantile %.3f in %d of %d draws, want 33 or more", 100*q, truth, held, draws)
		}
		// Four times the values: the interval about halves (its width goes
		// as 1/sqrt(n)).
		big := make([]float64, 4*n)
		for i := range big {
			big[i] = r.ExpFloat64()
		}
		lo, hi, _ := BootstrapQuantileCI(big, q)
		if w := hi - lo; w > 0.75*width/draws {
			t.Errorf("p%g: %d values give an interval %.3f wide, want well under the %.3f of %d", 100*q, 4*n, w, width/draws, n)
		}
	}
}
