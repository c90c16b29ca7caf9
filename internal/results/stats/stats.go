// Package stats is the arithmetic behind "how sure are we": medians, means,
// 95% confidence intervals (bootstrap of the median, Student t of the mean),
// coefficient of variation, and two-sample tests (Mann-Whitney U, Welch t).
// It works on plain float64 slices; internal/runner applies it to cells.
package stats

import (
	"math"
	"slices"
	"sort"
)

// Confidence is the level of every interval this package returns.
const Confidence = 0.95

// Alpha is the significance level of the two-sample tests.
const Alpha = 0.05

// sorted returns a sorted copy, leaving the caller's slice alone.
func sorted(xs []float64) []float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s
}

// Median of xs (mean of the two middle values for an even count); NaN when empty.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return medianSorted(sorted(xs))
}

func medianSorted(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Mean of xs; NaN when empty.
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// StdDev is the sample standard deviation (n-1 denominator); 0 below 2 values.
func StdDev(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	m := Mean(xs)
	ss := 0.0
	for _, x := range xs {
		ss += (x - m) * (x - m)
	}
	return math.Sqrt(ss / float64(len(xs)-1))
}

// CV is the coefficient of variation, stddev/mean; 0 below 2 values or for a
// zero mean.
func CV(xs []float64) float64 {
	m := Mean(xs)
	if len(xs) < 2 || m == 0 {
		return 0
	}
	return StdDev(xs) / math.Abs(m)
}

// EmpiricalQuantile is xs's q quantile (quantileSorted: no interpolation,
// so a p99 is a value that was measured); 0 for an empty xs.
func EmpiricalQuantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return quantileSorted(s, q)
}

// quantileSorted is the empirical (inverse-CDF) quantile: the smallest value
// whose cumulative share is at least q. This is the definition the bootstrap
// percentile method uses.
func quantileSorted(s []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(s)))) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i]
}
