package stats

import (
	"math"
	"testing"
)

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.6f, want %.6f (±%g)", what, got, want, tol)
	}
}

func TestMedianMeanCV(t *testing.T) {
	x := []float64{14, 10, 12, 13, 11}
	near(t, "median odd", Median(x), 12, 0)
	near(t, "median even", Median([]float64{4, 1, 3, 2}), 2.5, 0)
	near(t, "mean", Mean(x), 12, 1e-12)
	// deviations -2,-1,0,1,2: sum of squares 10, variance 10/4 = 2.5,
	// stddev 1.581139, CV = 1.581139/12 = 0.131762.
	near(t, "stddev", StdDev(x), 1.581139, 1e-6)
	near(t, "cv", CV(x), 0.131762, 1e-6)
	if x[0] != 14 {
		t.Errorf("Median sorted the caller's slice")
	}
	if !math.IsNaN(Median(nil)) || CV([]float64{5}) != 0 {
		t.Errorf("empty/one-value edge cases wrong")
	}
}

// A t-interval by hand, 5 values {10, 11, 12, 13, 14}:
//
//	mean = 12, s = sqrt(10/4) = 1.581139, s/sqrt(5) = 0.707107
//	t(0.975, df=4) = 2.776445 (any t table)
//	half width = 2.776445 * 0.707107 = 1.963243
//	95% CI = [10.036757, 13.963243]
func TestStudentTMeanCIByHand(t *testing.T) {
	lo, hi, ok := StudentTMeanCI([]float64{10, 11, 12, 13, 14})
	if !ok {
		t.Fatal("no interval for 5 values")
	}
	near(t, "t low", lo, 10.036757, 1e-5)
	near(t, "t high", hi, 13.963243, 1e-5)
	if _, _, ok := StudentTMeanCI([]float64{1}); ok {
		t.Error("one value must give no t interval")
	}
}

// Bootstrap of the median by hand, 11 values {1..11}: a resample's median is
// its 6th smallest value, so P(median <= k) = P(Binomial(11, k/11) >= 6):
//
//	k=2: 0.00721   k=3: 0.05125   ...   k=8: 0.94875   k=9: 0.99279
//
// The 2.5% quantile is the first k with P >= 0.025, i.e. 3; the 97.5% quantile
// the first k with P >= 0.975, i.e. 9. Both are far from the cut, so 10000
// resamples land there: CI = [3, 9].
func TestBootstrapMedianCIByHand(t *testing.T) {
	x := []float64{7, 1, 11, 2, 10, 3, 9, 4, 8, 5, 6}
	lo, hi, ok := BootstrapMedianCI(x)
	if !ok || lo != 3 || hi != 9 {
		t.Errorf("bootstrap CI of 1..11 = [%g, %g] ok=%v, want [3, 9]", lo, hi, ok)
	}
	// Three values {1,2,3}: P(median = 1) = P(>= 2 of 3 draws are 1) = 7/27 = 0.26,
	// far above 0.025, so the interval is the whole range [1, 3].
	lo, hi, _ = BootstrapMedianCI([]float64{2, 3, 1})
	if lo != 1 || hi != 3 {
		t.Errorf("bootstrap CI of 1,2,3 = [%g, %g], want [1, 3]", lo, hi)
	}
	lo2, hi2, _ := BootstrapMedianCI([]float64{2, 3, 1})
	if lo2 != lo || hi2 != hi {
		t.Error("bootstrap is not reproducible (fixed seed)")
	}
	if _, _, ok := BootstrapMedianCI(nil); ok {
		t.Error("empty sample must give no interval")
	}
}

func TestRatioOfMediansCI(t *testing.T) {
	base := []float64{10, 11, 12, 13, 14}
	x := []float64{20, 22, 24, 26, 28} // exactly 2 × base
	lo, hi, ok := RatioOfMediansCI(x, base)
	if !ok {
		t.Fatal("no ratio interval")
	}
	// The true ratio (2) must be inside, and the interval cannot be wider
	// than min(x)/max(base) .. max(x)/min(base) = 1.4286 .. 2.8.
	if lo > 2 || hi < 2 || lo < 20.0/14-1e-9 || hi > 28.0/10+1e-9 {
		t.Errorf("ratio CI [%g, %g] does not bracket 2 inside [1.43, 2.8]", lo, hi)
	}
	lo2, hi2, _ := RatioOfMediansCI(x, base)
	if lo2 != lo || hi2 != hi {
		t.Error("ratio bootstrap is not reproducible")
	}
	if _, _, ok := RatioOfMediansCI(x, []float64{0, 0, 0}); ok {
		t.Error("a zero baseline median must give no ratio interval")
	}
}

// Mann-Whitney verdicts checked against the table of critical U values
// (two-tailed, alpha 0.05): n1=n2=4 -> U <= 0 is significant; n1=n2=5 -> U <= 2;
// n1=n2=3 -> no U is significant (the table has "-").
// Exact p = 2 * (#arrangements with U <= u) / C(n1+n2, n1):
//
//	{1,2,3,4} vs {5,6,7,8}: U=0, p = 2*1/70 = 0.0286 -> significant
//	{1,2,3,5} vs {4,6,7,8}: U=1, p = 2*2/70 = 0.0571 -> not significant
//	{1,2,3} vs {4,5,6}:     U=0, p = 2*1/20 = 0.10   -> not significant
//
// For 5 vs 5 the number of arrangements with U = 0,1,2,3,4 is 1,1,2,3,5
// (partitions of U into at most 5 parts of at most 5), out of C(10,5) = 252:
//
//	{1,2,3,5,6} vs {4,7,8,9,10}: pairs x>y: 5>4, 6>4 -> U=2, p = 2*4/252 = 0.0317 -> significant
//	{1,2,4,5,6} vs {3,7,8,9,10}: 4>3, 5>3, 6>3     -> U=3, p = 2*7/252 = 0.0556 -> not significant
//	{1,2,3,6,7} vs {4,5,8,9,10}: 6>4,6>5,7>4,7>5   -> U=4, p = 2*12/252 = 0.0952 -> not significant
func TestMannWhitneyByTable(t *testing.T) {
	cases := []struct {
		x, y []float64
		u, p float64
		sig  bool
	}{
		{[]float64{1, 2, 3, 4}, []float64{5, 6, 7, 8}, 0, 2.0 / 70, true},
		{[]float64{1, 2, 3, 5}, []float64{4, 6, 7, 8}, 1, 4.0 / 70, false},
		{[]float64{1, 2, 3}, []float64{4, 5, 6}, 0, 2.0 / 20, false},
		{[]float64{1, 2, 3, 6, 7}, []float64{4, 5, 8, 9, 10}, 4, 24.0 / 252, false},
		{[]float64{1, 2, 4, 5, 6}, []float64{3, 7, 8, 9, 10}, 3, 14.0 / 252, false},
		{[]float64{1, 2, 3, 5, 6}, []float64{4, 7, 8, 9, 10}, 2, 8.0 / 252, true},
	}
	for _, c := range cases {
		r, err := MannWhitney(c.x, c.y)
		if err != nil {
			t.Fatalf("%v vs %v: %v", c.x, c.y, err)
		}
		near(t, "U", r.Statistic, c.u, 0)
		near(t, "p", r.P, c.p, 1e-9)
		if r.Significant() != c.sig {
			t.Errorf("%v vs %v: significant=%v, want %v", c.x, c.y, r.Significant(), c.sig)
		}
	}
	r, err := MannWhitney([]float64{5, 5, 5}, []float64{5, 5, 5})
	if err != nil || r.P != 1 {
		t.Errorf("identical samples: p=%g err=%v, want p=1", r.P, err)
	}
}

func TestMinMannWhitneyP(t *testing.T) {
	near(t, "3v3", MinMannWhitneyP(3, 3), 0.1, 1e-12)
	near(t, "4v4", MinMannWhitneyP(4, 4), 2.0/70, 1e-12)
	near(t, "3v5", MinMannWhitneyP(3, 5), 2.0/56, 1e-12)
	near(t, "1v1", MinMannWhitneyP(1, 1), 1, 0)
	// The minimum must agree with the test itself on non-overlapping samples.
	r, _ := MannWhitney([]float64{1, 2, 3}, []float64{4, 5, 6, 7, 8})
	near(t, "3v5 test", r.P, MinMannWhitneyP(3, 5), 1e-12)
}

// Welch by hand: x = {10..14}, y = {15..19}: both means differ by 5, both
// variances 2.5, so SE = sqrt(2.5/5 + 2.5/5) = 1, t = -5, and
// df = (0.5+0.5)^2 / (0.5^2/4 + 0.5^2/4) = 8. t(0.995, 8) = 3.355 < 5, so
// p < 0.01 (table); t(0.9995, 8) = 5.041 > 5, so p > 0.001.
func TestWelchTByHand(t *testing.T) {
	r, err := WelchT([]float64{10, 11, 12, 13, 14}, []float64{15, 16, 17, 18, 19})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "t", r.Statistic, -5, 1e-12)
	near(t, "df", r.DoF, 8, 1e-12)
	if r.P >= 0.01 || r.P <= 0.001 || !r.Significant() {
		t.Errorf("welch p = %g, want 0.001 < p < 0.01", r.P)
	}
	r, err = WelchT([]float64{10, 11, 12}, []float64{11, 12, 10})
	if err != nil || r.P < 0.99 {
		t.Errorf("same values: p=%g err=%v, want p≈1", r.P, err)
	}
}
