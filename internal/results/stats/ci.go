package stats

import (
	"math"
	"math/rand/v2"
	"sort"

	"gonum.org/v1/gonum/stat/distuv"
)

// CI methods, as written in the results file (results.Cell.CIMethod).
const (
	MethodBootstrapMedian = "bootstrap-median" // percentile bootstrap of the median
	MethodStudentTMean    = "student-t-mean"   // Student t interval of the mean
)

// Resamples is the number of bootstrap resamples. 10000 keeps the Monte Carlo
// error of a 2.5% percentile well under the spread of 3-20 samples.
const Resamples = 10000

// Seed makes every bootstrap reproducible: the same samples always give the
// same interval, so two reports of one results file agree.
const Seed = 0x766e65746c6162 // "vnetlab"

func newRand() *rand.Rand { return rand.New(rand.NewPCG(Seed, Seed)) }

// resampleStat draws len(s) values from s with replacement into buf and
// returns stat of them, sorted (buf is reused to keep the loop
// allocation-free).
func resampleStat(r *rand.Rand, s, buf []float64, stat func(sorted []float64) float64) float64 {
	for i := range buf {
		buf[i] = s[r.IntN(len(s))]
	}
	sort.Float64s(buf)
	return stat(buf)
}

// bootstrapCI is the 95% percentile-bootstrap interval of stat: resample xs
// with replacement Resamples times, take each resample's stat, and return
// the 2.5% and 97.5% empirical quantiles of those. ok is false for an empty
// sample.
func bootstrapCI(xs []float64, stat func(sorted []float64) float64) (lo, hi float64, ok bool) {
	if len(xs) == 0 {
		return 0, 0, false
	}
	r := newRand()
	buf := make([]float64, len(xs))
	vals := make([]float64, Resamples)
	for i := range vals {
		vals[i] = resampleStat(r, xs, buf, stat)
	}
	sort.Float64s(vals)
	a := (1 - Confidence) / 2
	return quantileSorted(vals, a), quantileSorted(vals, 1-a), true
}

// BootstrapMedianCI is the 95% percentile-bootstrap interval of the median
// (bootstrapCI). With few samples the interval is wide (often [min, max]):
// that is the honest answer. ok is false for an empty sample.
func BootstrapMedianCI(xs []float64) (lo, hi float64, ok bool) {
	return bootstrapCI(xs, medianSorted)
}

// BootstrapQuantileCI is the 95% percentile-bootstrap interval of the q
// quantile (0 < q < 1; the empirical quantile, EmpiricalQuantile). A high quantile of
// few samples is mostly the largest value: its interval says so.
func BootstrapQuantileCI(xs []float64, q float64) (lo, hi float64, ok bool) {
	return bootstrapCI(xs, func(sorted []float64) float64 { return quantileSorted(sorted, q) })
}

// StudentTMeanCI is the 95% Student t interval of the mean:
// mean ± t(0.975, n-1) · s/√n, with gonum's Student t quantile. ok is false
// below 2 values (no spread to estimate).
func StudentTMeanCI(xs []float64) (lo, hi float64, ok bool) {
	n := len(xs)
	if n < 2 {
		return 0, 0, false
	}
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 1)}.Quantile(1 - (1-Confidence)/2)
	half := t * StdDev(xs) / math.Sqrt(float64(n))
	m := Mean(xs)
	return m - half, m + half, true
}

// RatioOfMediansCI is the 95% percentile-bootstrap interval of
// median(x)/median(base): both samples are resampled independently (they are
// independent measurements), Resamples times. ok is false when either side is
// empty or a resampled baseline median is zero.
func RatioOfMediansCI(x, base []float64) (lo, hi float64, ok bool) {
	if len(x) == 0 || len(base) == 0 {
		return 0, 0, false
	}
	r := newRand()
	bx, bb := make([]float64, len(x)), make([]float64, len(base))
	ratios := make([]float64, Resamples)
	for i := range ratios {
		mx := resampleStat(r, x, bx, medianSorted)
		mb := resampleStat(r, base, bb, medianSorted)
		if mb == 0 {
			return 0, 0, false
		}
		ratios[i] = mx / mb
	}
	sort.Float64s(ratios)
	a := (1 - Confidence) / 2
	return quantileSorted(ratios, a), quantileSorted(ratios, 1-a), true
}
