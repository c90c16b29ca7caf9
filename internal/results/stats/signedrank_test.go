package stats

import (
	"math"
	"testing"
)

// The exact signed-rank distribution against hand-checked values: with 6
// pairs all positive T+ = 21 and p = 2/2^6; n = 10's two-sided 5% critical
// value is 8 (P(T+ <= 8) = 25/1024 = 0.0244, P(T+ <= 9) = 0.0322).
func TestSignedRankByHand(t *testing.T) {
	r, err := SignedRank([]float64{1, 2, 3, 4, 5, 6})
	if err != nil || r.Statistic != 21 || math.Abs(r.P-2.0/64) > 1e-12 {
		t.Errorf("six positive: %+v %v, want T+ 21, p 0.03125", r, err)
	}
	if MinSignedRankP(6) != 2.0/64 || MinSignedRankP(5) < 0.05 {
		t.Errorf("min p: 6 pairs %g, 5 pairs %g", MinSignedRankP(6), MinSignedRankP(5))
	}
	cdf := signedRankCDF(10)
	if math.Abs(cdf[8]-25.0/1024) > 1e-12 || math.Abs(cdf[len(cdf)-1]-1) > 1e-12 {
		t.Errorf("n=10: P(T+<=8) %g, want 25/1024; total %g", cdf[8], cdf[len(cdf)-1])
	}
	if c := signedRankCritical(10, 0.025); c != 8 {
		t.Errorf("n=10 critical value %d, want 8", c)
	}
	if c := signedRankCritical(5, 0.025); c != -1 {
		t.Errorf("n=5 has no 95%% interval, got critical value %d", c)
	}
	// Symmetric differences: T+ is its mean, p = 1.
	if r, _ := SignedRank([]float64{-3, -2, -1, 1, 2, 3}); r.P != 1 {
		t.Errorf("symmetric: p %g, want 1", r.P)
	}
	// Zeros are dropped; all zeros: p = 1.
	if r, _ := SignedRank([]float64{0, 0, 0}); r.P != 1 {
		t.Errorf("all zero: p %g", r.P)
	}
	// Beyond the exact range, the normal approximation agrees with the exact
	// tail where both apply: 60 pairs, ranks 1..60 with the 20 smallest negative.
	var d []float64
	for i := 1; i <= 60; i++ {
		v := float64(i)
		if i <= 20 {
			v = -v
		}
		d = append(d, v)
	}
	exact, _ := SignedRank(d)
	d[0] = -2 // a tie in |d|: the normal approximation with the ties' correction
	approx, _ := SignedRank(d)
	if exact.P <= 0 || math.Abs(exact.P-approx.P) > 0.01 {
		t.Errorf("60 pairs: exact p %g, normal approximation %g", exact.P, approx.P)
	}
}

// The Hodges-Lehmann estimate is the median of the Walsh averages, and its
// interval holds it.
func TestHodgesLehmann(t *testing.T) {
	est, lo, hi, ok := HodgesLehmann([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 100}, 0.95)
	// Walsh averages of 1..9 and 100: the outlier moves the median little.
	if !ok || est < 5 || est > 6.5 || lo > est || hi < est || hi > 54 {
		t.Errorf("estimate %g [%g, %g] ok %v", est, lo, hi, ok)
	}
	if _, _, _, ok := HodgesLehmann([]float64{1, 2, 3, 4, 5}, 0.95); ok {
		t.Error("5 pairs cannot have a 95% interval")
	}
}

// Zeros and ties: three rounds that did not differ and six that moved one
// way give the exact p of six pairs (2/64), and the interval agrees with
// the test (it leaves out 0); tied magnitudes are exact too.
func TestSignedRankZerosAndTies(t *testing.T) {
	d := []float64{0, 0, 0, 1, 1, 1, 1, 1, 1}
	r, _ := SignedRank(d)
	if math.Abs(r.P-2.0/64) > 1e-12 {
		t.Errorf("three zeros, six +1: p %g, want 2/64", r.P)
	}
	if _, lo, _, ok := HodgesLehmann(d, 0.95); !ok || lo <= 0 {
		t.Errorf("the interval holds 0 (lo %g, ok %v) while the test is significant", lo, ok)
	}
	r, _ = SignedRank([]float64{1, 1, 2, 2, 3, 3})
	if math.Abs(r.P-2.0/64) > 1e-12 {
		t.Errorf("tied positives: p %g, want 2/64", r.P)
	}
	// {-1, 1, 2, 2}: doubled ranks 3, 3, 7, 7; T2 = 17 of 20; P(T2 >= 17) =
	// P(every positive but one of the rank-3 pair) = 3/16 -> p = 6/16.
	r, _ = SignedRank([]float64{-1, 1, 2, 2})
	if math.Abs(r.P-6.0/16) > 1e-12 {
		t.Errorf("{-1, 1, 2, 2}: p %g, want 6/16", r.P)
	}
	if r, _ := SignedRank([]float64{math.NaN(), 1, 2, 3, 4, 5, 6}); math.Abs(r.P-2.0/64) > 1e-12 {
		t.Errorf("a NaN is dropped: p %g", r.P)
	}
}
