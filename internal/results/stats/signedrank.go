package stats

import (
	"math"
	"sort"
	"sync"

	"gonum.org/v1/gonum/stat/distuv"
)

// TestSignedRank is the paired test's name, as written in the results
// file (results.Comparison.Test).
const TestSignedRank = "wilcoxon-signed-rank"

// exactSignedRankMax is the most pairs whose signed-rank distribution is
// computed exactly (an O(n³) recurrence, 2 ms at 300); beyond it the
// normal approximation is closer than the Monte Carlo error of any
// bootstrap vnetlab runs.
const exactSignedRankMax = 300

// cdfs are the computed distributions, by n (a precision run asks for
// every n from its first look to its last, for every comparison).
var cdfs sync.Map

// signedRankCDF is P(T+ <= t) for t = 0..n(n+1)/2 under "symmetric about
// 0", with n pairs and no ties: T+ is a sum of distinct ranks 1..n, each
// present with probability 1/2.
func signedRankCDF(n int) []float64 {
	if p, ok := cdfs.Load(n); ok {
		return p.([]float64)
	}
	m := n * (n + 1) / 2
	p := make([]float64, m+1)
	p[0] = 1
	top := 0
	for k := 1; k <= n; k++ {
		top += k
		for t := top; t >= k; t-- {
			p[t] = (p[t] + p[t-k]) / 2
		}
		for t := k - 1; t >= 0; t-- {
			p[t] /= 2
		}
	}
	for t := 1; t <= m; t++ {
		p[t] += p[t-1]
	}
	cdfs.Store(n, p)
	return p
}

// MinSignedRankP is the smallest two-sided p-value the exact signed-rank
// test can give with n pairs: every pair on one side, 2/2^n. With 5 pairs
// it is 0.0625, so no difference can be significant at 0.05; 6 pairs give
// 0.031.
func MinSignedRankP(n int) float64 {
	if n < 1 {
		return 1
	}
	return math.Min(1, 2/math.Pow(2, float64(n)))
}

// nonZero is d without its zeros and NaNs: a pair that did not differ
// at all tells neither side (Wilcoxon's convention, kept alike by the test
// and the interval so that they agree).
func nonZero(d []float64) []float64 {
	var out []float64
	for _, v := range d {
		if v != 0 && !math.IsNaN(v) {
			out = append(out, v)
		}
	}
	return out
}

// SignedRank is the two-sided Wilcoxon signed-rank test of "d is
// symmetric about 0" (d: the paired differences; zeros dropped, nonZero).
// The null distribution is exact up to exactSignedRankMax pairs, ties in
// |d| too (their mid-ranks, doubled to integers); the normal
// approximation, with the ties' variance correction and a continuity
// correction, beyond. The statistic is T+, the sum of the positive
// differences' ranks.
func SignedRank(d []float64) (TestResult, error) {
	d = nonZero(d)
	var abs []float64
	for _, v := range d {
		abs = append(abs, math.Abs(v))
	}
	n := len(abs)
	if n == 0 {
		return TestResult{P: 1}, nil
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return abs[idx[a]] < abs[idx[b]] })
	ranks2 := make([]int, n) // doubled mid-ranks, 1-based
	ties := false
	for i := 0; i < n; {
		j := i
		for j+1 < n && abs[idx[j+1]] == abs[idx[i]] {
			j++
		}
		for k := i; k <= j; k++ {
			ranks2[idx[k]] = i + j + 2
		}
		ties = ties || j > i
		i = j + 1
	}
	weights := ranks2 // each difference's doubled rank
	t2 := 0           // 2·T+
	for i, v := range d {
		if v > 0 {
			t2 += ranks2[i]
		}
	}
	tplus := float64(t2) / 2
	if len(weights) <= exactSignedRankMax {
		var lower, upper float64 // P(T2 <= t2), P(T2 >= t2)
		if !ties {
			cdf := signedRankCDF(n)
			t := t2 / 2
			lower = cdf[t]
			upper = 1
			if t > 0 {
				upper = 1 - cdf[t-1]
			}
		} else {
			lower, upper = weightedTails(weights, t2)
		}
		return TestResult{Statistic: tplus, P: math.Min(1, 2*math.Min(lower, upper))}, nil
	}
	mean, variance := 0.0, 0.0
	for _, w := range weights {
		mean += float64(w) / 4
		variance += float64(w) * float64(w) / 16
	}
	sd := math.Sqrt(variance)
	if sd == 0 {
		return TestResult{Statistic: tplus, P: 1}, nil
	}
	z := (math.Abs(tplus-mean) - 0.5) / sd
	if z < 0 {
		z = 0
	}
	return TestResult{Statistic: tplus, P: math.Min(1, 2*distuv.UnitNormal.Survival(z))}, nil
}

// weightedTails are P(S <= t) and P(S >= t) for S the sum of a subset of
// weights, each in it with probability 1/2 (the signed-rank statistic's
// null distribution with tied or zero differences, in doubled ranks).
func weightedTails(weights []int, t int) (lower, upper float64) {
	total := 0
	for _, w := range weights {
		total += w
	}
	p := make([]float64, total+1)
	p[0] = 1
	top := 0
	for _, w := range weights {
		top += w
		for s := top; s >= 0; s-- {
			v := p[s] / 2
			if s >= w {
				v += p[s-w] / 2
			}
			p[s] = v
		}
	}
	for s, v := range p {
		if s <= t {
			lower += v
		}
		if s >= t {
			upper += v
		}
	}
	return lower, upper
}

// HodgesLehmann is the paired differences' location (zeros dropped, as
// SignedRank drops them) with its confidence interval at level conf, both
// from the signed-rank test: the estimate is
// the median of the n(n+1)/2 Walsh averages (d_i+d_j)/2, i <= j, and the
// interval runs between the Walsh averages the test's critical value
// names, so it holds exactly the shifts the test at 1-conf would not
// reject (coverage at least conf for a continuous distribution symmetric
// about its centre, whatever its shape). ok is false when n is too small
// for any interval at that level (fewer than 6 pairs at 95%).
func HodgesLehmann(d []float64, conf float64) (est, lo, hi float64, ok bool) {
	d = nonZero(d)
	n := len(d)
	if n == 0 {
		return 0, 0, 0, false
	}
	walsh := make([]float64, 0, n*(n+1)/2)
	for i := range d {
		for j := i; j < n; j++ {
			walsh = append(walsh, (d[i]+d[j])/2)
		}
	}
	sort.Float64s(walsh)
	est = quantileSorted(walsh, 0.5)
	c := signedRankCritical(n, (1-conf)/2)
	if c < 0 {
		return est, 0, 0, false
	}
	m := len(walsh)
	return est, walsh[c], walsh[m-1-c], true
}

// signedRankCritical is the largest c with P(T+ <= c) <= a for n pairs
// (-1 when even P(T+ = 0) = 2^-n is above a): the interval
// [W_(c+1), W_(M-c)] of the sorted Walsh averages has coverage
// 1 - 2·P(T+ <= c) >= 1 - 2a.
func signedRankCritical(n int, a float64) int {
	if n <= exactSignedRankMax {
		cdf := signedRankCDF(n)
		c := -1
		for t, p := range cdf {
			if p > a {
				break
			}
			c = t
		}
		return c
	}
	mean := float64(n*(n+1)) / 4
	sd := math.Sqrt(float64(n*(n+1)*(2*n+1)) / 24)
	return int(math.Floor(mean - distuv.UnitNormal.Quantile(1-a)*sd - 0.5))
}
