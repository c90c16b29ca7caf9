package analysis

import (
	"fmt"
	"math"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/stats"
)

// How two cells were set side by side (Comparison.Method, the results
// file's method).
const (
	// MethodPaired: one ratio per round, from the round's two samples; a
	// drift of the machine that both samples of a round share cancels out.
	MethodPaired = "paired-rounds"
	// MethodUnpaired: each cell's samples as an independent sample
	// (cells of two runs, files without rounds, or too few rounds).
	MethodUnpaired = "unpaired"
)

// MinPairs is the fewest aligned rounds a paired comparison is made from:
// below 6 the signed-rank test can never reach p < 0.05 (its smallest p is
// 2/2^n: 0.0625 with 5) and there is no 95% interval, while 5 against 5
// unpaired values can (2/C(10,5) = 0.008): fewer rounds are compared
// unpaired.
const MinPairs = 6

// Pairs are the values of c and b taken in the same measured rounds (both
// valid), in round order; nil when either cell's samples carry no round
// (a file written before rounds were recorded) or a round twice, or when
// the rounds are not one run's: each sample of c must start after b's
// sample of the round before and before b's of the round after (kube run
// measures its configurations one after another, each numbering its
// rounds from 1).
func Pairs(c, b *results.Cell) (x, base []float64) { return pairsUpTo(c, b, 0) }

// pairsUpTo is Pairs of the rounds up to rounds (0: all).
func pairsUpTo(c, b *results.Cell, rounds int) (x, base []float64) {
	if c.NotApplied != "" || b.NotApplied != "" {
		return nil, nil
	}
	bs, ok := byRound(b)
	if _, ok2 := byRound(c); !ok || !ok2 {
		return nil, nil
	}
	for _, s := range c.Samples {
		before, ok1 := bs[s.RoundIndex-1]
		after, ok2 := bs[s.RoundIndex+1]
		if ok1 && !s.Start.After(before.Start) || ok2 && !s.Start.Before(after.Start) {
			return nil, nil
		}
	}
	for _, s := range c.Samples {
		if o, ok := bs[s.RoundIndex]; ok && o.Valid && s.Valid && (rounds == 0 || s.RoundIndex <= rounds) {
			x, base = append(x, s.Value), append(base, o.Value)
		}
	}
	return x, base
}

// byRound is c's measured samples by round; false when one has no round
// or shares one with another.
func byRound(c *results.Cell) (map[int]results.Sample, bool) {
	out := map[int]results.Sample{}
	for _, s := range c.Samples {
		if _, seen := out[s.RoundIndex]; s.RoundIndex == 0 || seen {
			return nil, false
		}
		out[s.RoundIndex] = s
	}
	return out, true
}

// CompareCells sets cell c beside cell b of the same run: paired by round
// when they share MinPairs or more rounds, unpaired otherwise (Method
// says which). Cells of two runs are never paired: use Compare on their
// values.
func CompareCells(c, b *results.Cell, higherBetter bool) Comparison {
	return compareAt(c, b, higherBetter, look{})
}

// compareAt is CompareCells on the rounds up to at's (0: all), a paired
// comparison at at's confidence (an unpaired one is always at 95%). A
// round with a value that is not positive has no ratio: such cells are
// compared unpaired.
func compareAt(c, b *results.Cell, higherBetter bool, at look) Comparison {
	if x, base := pairsUpTo(c, b, at.rounds); len(x) >= MinPairs && allPositive(x) && allPositive(base) {
		return comparePaired(x, base, higherBetter, at.alpha())
	}
	return Compare(c.Values(), b.Values(), higherBetter)
}

// allPositive: every value is above 0 (and none is NaN).
func allPositive(v []float64) bool {
	for _, x := range v {
		if !(x > 0) {
			return false
		}
	}
	return true
}

// ComparePaired sets x beside base round by round (x[i] and base[i] were
// measured in one round). The per-round log ratios d_i = ln(x_i/base_i)
// make the comparison: the ratio is exp of their Hodges-Lehmann estimate
// (the median of the Walsh averages), its 95% interval the signed-rank
// test's inversion, and the verdict the two-sided Wilcoxon signed-rank
// test at p < 0.05, so the interval excludes 1 exactly when the test is
// significant (up to the exact distribution's steps). Nothing is
// resampled: the same pairs always give the same answer.
func ComparePaired(x, base []float64, higherBetter bool) Comparison {
	return comparePaired(x, base, higherBetter, stats.Alpha)
}

// comparePaired is ComparePaired at confidence 1-alpha: its interval at
// that level, significant at p < alpha.
func comparePaired(x, base []float64, higherBetter bool, alpha float64) Comparison {
	n := min(len(x), len(base))
	c := Comparison{P: math.NaN(), WelchP: math.NaN(), MinP: stats.MinSignedRankP(n), Method: MethodPaired, Pairs: n, Alpha: alpha}
	d := make([]float64, 0, n)
	same := true // every round's two values equal
	for i := range n {
		if !(x[i] > 0) || !(base[i] > 0) {
			c.Note = fmt.Sprintf("round %d: a value of 0 or less has no ratio", i+1)
			return c
		}
		d = append(d, math.Log(x[i]/base[i]))
		same = same && d[i] == 0
	}
	if n == 0 {
		c.Note = "no round with a valid sample on both sides"
		return c
	}
	est, lo, hi, ok := stats.HodgesLehmann(d, 1-alpha)
	if same { // no round differed: the ratio is 1, exactly
		est, lo, hi, ok = 0, 0, 0, true
	}
	c.Ratio = math.Exp(est)
	if ok {
		c.RatioCI, c.HasCI = [2]float64{math.Exp(lo), math.Exp(hi)}, true
	}
	sr, err := stats.SignedRank(d)
	if err != nil {
		c.Note = fmt.Sprintf("signed-rank: %v", err)
		return c
	}
	c.P = sr.P
	c.Verdict = verdict(c.Significant(), c.Ratio, higherBetter)
	return c
}

// verdict is a significant difference's direction, in the unit's sense.
func verdict(significant bool, ratio float64, higherBetter bool) Verdict {
	switch {
	case !significant || ratio == 1:
		return Same
	case (ratio > 1) == higherBetter:
		return Better
	}
	return Worse
}

// HalfWidth is the comparison's interval half-width as a share of its
// ratio ((hi-lo)/2/ratio; the interval at the comparison's confidence);
// +Inf without an interval or a positive ratio.
func (c Comparison) HalfWidth() float64 {
	if !c.HasCI || !(c.Ratio > 0) {
		return math.Inf(1)
	}
	return (c.RatioCI[1] - c.RatioCI[0]) / 2 / c.Ratio
}
