package analysis

import (
	"math"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/stats"
)

// A precision run (run --precision) measures rounds until every
// comparison's interval is as narrow as asked, and looks at its
// comparisons at most len(LookAlphas) times. Stopping when an interval is
// narrow selects intervals that are narrow by chance: looked at after
// every round with 95% intervals, 5.8-7.3% of A/A comparisons came out
// significant. So the 5% error is spent over the looks: the interval of
// look k is at confidence 1-LookAlphas[k], and the shares add up to 5%.
// Were each look's interval at its level whatever came before, the chance
// that any look's interval misses the true ratio would be at most 5%
// whenever the run stops (the union bound); the rounds a look plans
// depend on the spread seen so far, so that is an approximation, measured
// at 2.6-3.2% false positives (paired_test.go: TestSequentialFalsePositives). Most
// of it goes to the second look, the one planned to meet the target.
var LookAlphas = []float64{0.005, 0.035, 0.01}

// FirstLook is the fewest measured rounds a precision run takes before
// its first look (more with a larger --repeat): enough for a signed-rank
// interval at 99.5% and a first estimate of the spread.
const FirstLook = 10

// lookMargin pads the rounds a look plans for the target: the spread is
// an estimate from the rounds so far.
const lookMargin = 1.2

// look is a point a comparison is made at: the first rounds measured
// rounds (0: all), at confidence 1-a (0: stats.Alpha, a run of fixed
// rounds).
type look struct {
	rounds int
	a      float64
}

func (l look) alpha() float64 {
	if l.a == 0 {
		return stats.Alpha
	}
	return l.a
}

// lookAt is look i of a precision run (its rounds as o.Looks says); the
// fixed-rounds look of every other run.
func (o Options) lookAt(i int) look {
	if o.Precision == 0 || i < 0 || i >= len(o.Looks) || i >= len(LookAlphas) {
		return look{}
	}
	return look{rounds: o.Looks[i], a: LookAlphas[i]}
}

// NextLook is a precision run's decision at its latest look (o.Looks:
// the measured rounds at every look so far): stop (every comparison met
// o.Precision at this look's confidence, this was the last look, or no
// more rounds fit), or measure up to next rounds and look again. The
// rounds planned are what the widest comparison's 95% interval says the
// target needs at the next look's confidence, padded, at most maxRounds
// (what the time left allows). The cells' comparisons are left as at
// this look.
func NextLook(cells []*results.Cell, o Options, maxRounds int) (next int, stop bool) {
	o = o.withDefaults()
	i := len(o.Looks) - 1
	at := o.lookAt(i)
	// The spread, from 95% intervals (a 99.5% one of few rounds is mostly
	// the exact distribution's steps), then the look itself.
	compareAll(cells, o, look{rounds: at.rounds})
	w95 := widestOf(cells)
	compareAll(cells, o, at)
	if widestOf(cells) <= o.Precision || i+1 >= len(LookAlphas) {
		return 0, true
	}
	need := roundsFor(w95, at.rounds, o.Precision, LookAlphas[i+1])
	if math.IsInf(w95, 1) || math.IsNaN(need) || need > float64(maxRounds) {
		need = float64(maxRounds)
	}
	// At least half again as many rounds: a 95% interval already narrow
	// enough says little about the next look's, which is wider.
	next = min(max(int(math.Ceil(need)), at.rounds+max(1, at.rounds/2)), maxRounds)
	if next <= at.rounds { // only the time left stops it here
		return 0, true
	}
	return next, false
}

// widestOf is the widest half-width of the cells' comparisons that a
// precision target applies to (precise).
func widestOf(cells []*results.Cell) float64 {
	w := 0.0
	for _, c := range cells {
		for _, cmp := range c.Comparisons() {
			if !precise(cmp) {
				continue
			}
			hw := math.Inf(1)
			if len(cmp.RatioCI95) == 2 {
				hw = cmp.HalfWidth
			}
			w = math.Max(w, hw)
		}
	}
	return w
}

// precise says whether a precision target applies to a comparison: a
// paired one with a verdict. One that is not paired has too few rounds on
// a side or a failed cell, one without a verdict values that have no
// ratio: more rounds make neither narrower.
func precise(cmp *results.Comparison) bool {
	if cmp == nil || cmp.Method != MethodPaired {
		return false
	}
	v := ParseVerdict(cmp.Verdict)
	return v != Baseline && v != NoVerdict
}

// compareRun fills every comparison of a run's cells as its last look
// saw them and, in a precision run, records on each whether it met the
// target and at which look's rounds it first did.
func (o Options) compareRun(cells []*results.Cell) {
	if o.Precision == 0 || len(o.Looks) == 0 {
		compareAll(cells, o, o.lookAt(len(o.Looks)-1))
		return
	}
	met := map[*results.Cell][2]int{} // the rounds at which each of a cell's comparisons first met it
	for i := range o.Looks {
		compareAll(cells, o, o.lookAt(i))
		for _, c := range cells {
			m := met[c]
			for k, cmp := range c.Comparisons() {
				if metTarget(cmp, o.Precision) && m[k] == 0 {
					m[k] = o.Looks[i]
				}
			}
			met[c] = m
		}
	}
	for _, c := range cells { // the last look's comparisons, as the loop left them
		for k, cmp := range c.Comparisons() {
			if !precise(cmp) {
				continue
			}
			ok := metTarget(cmp, o.Precision)
			cmp.PrecisionMet = &ok
			if ok {
				cmp.MetAtRound = met[c][k]
			}
		}
	}
}

// z is the standard normal quantile of a two-sided test at alpha.
func z(alpha float64) float64 { return distuv.UnitNormal.Quantile(1 - alpha/2) }

// roundsFor is about how many rounds bring a comparison whose 95%
// interval after n rounds is ±hw to ±target at confidence 1-alpha (the
// width shrinks with √rounds and grows with the quantile), padded by
// lookMargin.
func roundsFor(hw float64, n int, target, alpha float64) float64 {
	return float64(n) * math.Pow(hw/target*z(alpha)/z(stats.Alpha), 2) * lookMargin
}

// RoundsFor is about how many rounds a precision run needs for a
// comparison of n rounds whose 95% interval has half-width hw to reach
// target at its planned look; at least FirstLook.
func RoundsFor(hw float64, n int, target float64) int {
	return max(FirstLook, int(math.Ceil(roundsFor(hw, n, target, LookAlphas[1]))))
}

// RoundsForSpread is RoundsFor when each round's ratio of two cells
// spreads by sd (its logarithm's standard deviation): one round's 95%
// Hodges-Lehmann interval is about ±1.96·sd·1.05 (within 5% of a t
// interval's for normal spreads).
func RoundsForSpread(sd, target float64) int {
	return RoundsFor(z(stats.Alpha)*sd*1.05, 1, target)
}

// metTarget: a precise comparison whose interval is within target.
func metTarget(cmp *results.Comparison, target float64) bool {
	return precise(cmp) && len(cmp.RatioCI95) == 2 && cmp.HalfWidth <= target
}
