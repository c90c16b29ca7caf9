package report

// The few statistics report and compare need. They sit behind these small
// functions so that the run's own statistics package (internal/stats) can
// replace them later without touching the callers.

import (
	"errors"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/aclements/go-moremath/stats"
)

// bootstrapRounds is the number of resamples behind every bootstrap CI.
const bootstrapRounds = 2000

// alpha is the significance level (95% intervals, p < 0.05).
const alpha = 0.05

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// rngFor returns a generator seeded from a name, so that the same input
// always gives the same intervals (reports are diffable, golden tests stable).
func rngFor(name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	s := h.Sum64()
	return rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
}

func resampleMedian(r *rand.Rand, v, buf []float64) float64 {
	for i := range buf {
		buf[i] = v[r.IntN(len(v))]
	}
	sort.Float64s(buf)
	n := len(buf)
	if n%2 == 1 {
		return buf[n/2]
	}
	return (buf[n/2-1] + buf[n/2]) / 2
}

// percentileInterval returns the central 95% of sorted bootstrap estimates.
func percentileInterval(est []float64) (lo, hi float64) {
	sort.Float64s(est)
	n := len(est)
	return est[int(math.Floor(float64(n)*alpha/2))], est[int(math.Ceil(float64(n)*(1-alpha/2)))-1]
}

// MedianCI is the bootstrap (percentile) 95% CI of the median; ok is false
// with fewer than 3 values, where an interval would mean nothing.
func MedianCI(v []float64, seed string) (lo, hi float64, ok bool) {
	if len(v) < 3 {
		return 0, 0, false
	}
	r := rngFor(seed)
	buf := make([]float64, len(v))
	est := make([]float64, bootstrapRounds)
	for i := range est {
		est[i] = resampleMedian(r, v, buf)
	}
	lo, hi = percentileInterval(est)
	return lo, hi, true
}

// RatioCI is the bootstrap (percentile) 95% CI of median(num)/median(den),
// resampling both sides independently; ok is false when either side has
// fewer than 2 values or a zero median shows up.
func RatioCI(num, den []float64, seed string) (lo, hi float64, ok bool) {
	if len(num) < 2 || len(den) < 2 {
		return 0, 0, false
	}
	r := rngFor(seed)
	bn, bd := make([]float64, len(num)), make([]float64, len(den))
	est := make([]float64, bootstrapRounds)
	for i := range est {
		d := resampleMedian(r, den, bd)
		if d == 0 {
			return 0, 0, false
		}
		est[i] = resampleMedian(r, num, bn) / d
	}
	lo, hi = percentileInterval(est)
	return lo, hi, true
}

// Significance is a two-sided Mann-Whitney U test of "the two sets come from
// the same distribution". p is NaN when the test cannot run (too few values);
// identical sets give p = 1.
func Significance(a, b []float64) (p float64) {
	if len(a) == 0 || len(b) == 0 {
		return math.NaN()
	}
	res, err := stats.MannWhitneyUTest(a, b, stats.LocationDiffers)
	if errors.Is(err, stats.ErrSamplesEqual) {
		return 1
	}
	if err != nil {
		return math.NaN()
	}
	return res.P
}

// minSamplesForSignificance: with 3 against 3 values the smallest possible
// two-sided Mann-Whitney p is 0.1, so nothing can be significant at 0.05;
// 4 against 4 reaches 0.029.
const minSamplesForSignificance = 4
