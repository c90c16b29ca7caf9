package stats

import (
	"errors"
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

// ErrNoPairs: every difference was 0 (or there were none).
var ErrNoPairs = errors.New("no non-zero paired differences")

// SignedRank is the two-sided Wilcoxon signed-rank test of "d is
// symmetric about 0" (d: the paired differences). Zeros are dropped
// (Wilcoxon's convention). Exact distribution up to exactSignedRankMax
// pairs without ties in |d|; the normal approximation, with the ties'
// variance correction and a continuity correction, otherwise. The
// statistic is T+, the sum of the positive differences' ranks.
func SignedRank(d []float64) (TestResult, error) {
	abs := make([]float64, 0, len(d))
	pos := make([]bool, 0, len(d))
	for _, v := range d {
		if v != 0 && !math.IsNaN(v) {
			abs = append(abs, math.Abs(v))
			pos = append(pos, v > 0)
		}
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
	ranks := make([]float64, n)
	ties := 0.0 // sum of t³-t over groups of tied |d|
	for i := 0; i < n; {
		j := i
		for j+1 < n && abs[idx[j+1]] == abs[idx[i]] {
			j++
		}
		for k := i; k <= j; k++ {
			ranks[idx[k]] = float64(i+j+2) / 2
		}
		if t := float64(j - i + 1); t > 1 {
			ties += t*t*t - t
		}
		i = j + 1
	}
	tplus := 0.0
	for i, r := range ranks {
		if pos[i] {
			tplus += r
		}
	}
	m := float64(n*(n+1)) / 2
	if ties == 0 && n <= exactSignedRankMax {
		cdf := signedRankCDF(n)
		t := int(tplus)
		lower := cdf[t]
		upper := 1.0 // P(T+ >= t)
		if t > 0 {
			upper = 1 - cdf[t-1]
		}
		return TestResult{Statistic: tplus, P: math.Min(1, 2*math.Min(lower, upper))}, nil
	}
	mean := m / 2
	sd := math.Sqrt(float64(n*(n+1)*(2*n+1))/24 - ties/48)
	if sd == 0 {
		return TestResult{Statistic: tplus, P: 1}, nil
	}
	z := (math.Abs(tplus-mean) - 0.5) / sd
	if z < 0 {
		z = 0
	}
	return TestResult{Statistic: tplus, P: math.Min(1, 2*distuv.UnitNormal.Survival(z))}, nil
}

// HodgesLehmann is the paired differences' location with its confidence
// interval at level conf, both from the signed-rank test: the estimate is
// the median of the n(n+1)/2 Walsh averages (d_i+d_j)/2, i <= j, and the
// interval runs between the Walsh averages the test's critical value
// names, so it holds exactly the shifts the test at 1-conf would not
// reject (coverage at least conf for a continuous distribution symmetric
// about its centre, whatever its shape). ok is false when n is too small
// for any interval at that level (fewer than 6 pairs at 95%).
func HodgesLehmann(d []float64, conf float64) (est, lo, hi float64, ok bool) {
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
