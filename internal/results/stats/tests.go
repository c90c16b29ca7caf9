package stats

import (
	"errors"
	"math"

	mstats "github.com/aclements/go-moremath/stats"
)

// Test names, as written in the results file (results.Comparison.Test).
const (
	TestMannWhitney = "mann-whitney-u"
	TestWelchT      = "welch-t"
)

// TestResult is a two-sided two-sample test of "x and base come from the same
// population".
type TestResult struct {
	Statistic float64 // U (pairs with x > base, ties count 1/2) or t
	DoF       float64 // Welch only
	P         float64 // two-sided p-value
}

// Significant says whether p is below Alpha.
func (r TestResult) Significant() bool { return r.P < Alpha }

// MannWhitney is the two-sided Mann-Whitney U test (go-moremath, as
// benchstat uses it): exact U distribution up to 50 values per side (25 with
// ties), normal approximation beyond. Identical samples give p = 1.
func MannWhitney(x, base []float64) (TestResult, error) {
	r, err := mstats.MannWhitneyUTest(x, base, mstats.LocationDiffers)
	if errors.Is(err, mstats.ErrSamplesEqual) {
		return TestResult{Statistic: float64(len(x)*len(base)) / 2, P: 1}, nil
	}
	if err != nil {
		return TestResult{}, err
	}
	return TestResult{Statistic: r.U, P: r.P}, nil
}

// MinMannWhitneyP is the smallest two-sided p-value the exact Mann-Whitney
// test can give for n1 and n2 values, reached when the samples do not
// overlap at all: 2 / C(n1+n2, n1). With 3 and 3 it is 2/20 = 0.10, so no
// difference can ever be called significant at 0.05; 4 and 4 give 2/70 ≈ 0.029.
func MinMannWhitneyP(n1, n2 int) float64 {
	if n1 < 1 || n2 < 1 {
		return 1
	}
	// C(n1+n2, n1) as a float: exact enough for the sizes used here.
	c := 1.0
	for i := 1; i <= n1; i++ {
		c = c * float64(n2+i) / float64(i)
	}
	return math.Min(1, 2/c)
}

// WelchT is the two-sided Welch t test (unequal variances) on the means.
func WelchT(x, base []float64) (TestResult, error) {
	r, err := mstats.TwoSampleWelchTTest(mstats.Sample{Xs: x}, mstats.Sample{Xs: base}, mstats.LocationDiffers)
	if errors.Is(err, mstats.ErrZeroVariance) && Mean(x) == Mean(base) {
		return TestResult{P: 1}, nil
	}
	if err != nil {
		return TestResult{}, err
	}
	return TestResult{Statistic: r.T, DoF: r.DoF, P: r.P}, nil
}
