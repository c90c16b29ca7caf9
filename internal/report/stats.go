package report

// The statistics report and compare need, from internal/stats (the same
// methods and seed as `run`, so a report agrees with the run's own table).

import (
	"math"

	"github.com/vnetlab/vnetlab/internal/stats"
)

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	return stats.Median(v)
}

// MedianCI is the bootstrap (percentile) 95% CI of the median; ok is false
// with fewer than 3 values, where an interval would mean nothing.
func MedianCI(v []float64) (lo, hi float64, ok bool) {
	if len(v) < 3 {
		return 0, 0, false
	}
	return stats.BootstrapMedianCI(v)
}

// RatioCI is the bootstrap (percentile) 95% CI of median(num)/median(den);
// ok is false when either side has fewer than 2 values or a zero median shows up.
func RatioCI(num, den []float64) (lo, hi float64, ok bool) {
	if len(num) < 2 || len(den) < 2 {
		return 0, 0, false
	}
	return stats.RatioOfMediansCI(num, den)
}

// Significance is a two-sided Mann-Whitney U test of "the two sets come from
// the same distribution". p is NaN when the test cannot run (too few values);
// identical sets give p = 1.
func Significance(a, b []float64) (p float64) {
	if len(a) == 0 || len(b) == 0 {
		return math.NaN()
	}
	r, err := stats.MannWhitney(a, b)
	if err != nil {
		return math.NaN()
	}
	return r.P
}

// alpha is the significance level (95% intervals, p < 0.05).
const alpha = stats.Alpha

// minSamplesForSignificance: with 3 against 3 values the smallest possible
// two-sided Mann-Whitney p is 0.1, so nothing can be significant at 0.05;
// 4 against 4 reaches 0.029 (stats.MinMannWhitneyP).
const minSamplesForSignificance = 4
