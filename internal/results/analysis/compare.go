package analysis

import (
	"fmt"
	"math"
	"strings"

	"github.com/vnetlab/vnetlab/internal/results/stats"
)

// Verdict is what a comparison concludes.
type Verdict int

const (
	NoVerdict Verdict = iota // the samples cannot be compared (Comparison.Note says why)
	Baseline                 // the cell is its own reference
	Same                     // no significant difference ("~")
	Better                   // significantly better in the unit's direction
	Worse                    // significantly worse in the unit's direction
)

// String is the verdict as compare prints it.
func (v Verdict) String() string {
	switch v {
	case Baseline:
		return "baseline"
	case Same:
		return "~"
	case Better:
		return "better"
	case Worse:
		return "worse"
	}
	return "n/a"
}

// The results file's spelling (results.Comparison.Verdict, schema 1): a
// better cell is "faster" (a higher rate, or a lower latency).
var resultsWords = map[Verdict]string{NoVerdict: "n/a", Baseline: "baseline", Same: "~", Better: "faster", Worse: "slower"}

// ResultsWord is the verdict as the results file writes it.
func (v Verdict) ResultsWord() string { return resultsWords[v] }

// ParseVerdict reads a results file's verdict ("" in old files means "~").
func ParseVerdict(s string) Verdict {
	if s == "" {
		return Same
	}
	for v, w := range resultsWords {
		if w == s {
			return v
		}
	}
	return NoVerdict
}

// HigherIsBetter tells a unit's direction: rates (Gbit/s, trans/s, conn/s)
// up, times (latency) down.
func HigherIsBetter(unit string) bool {
	switch strings.ToLower(unit) {
	case "us", "µs", "ms", "s", "ns":
		return false
	}
	return true
}

// Comparison is a sample x beside a reference sample base.
type Comparison struct {
	Ratio   float64    // median(x) / median(base)
	RatioCI [2]float64 // 95% bootstrap interval of Ratio, when HasCI
	HasCI   bool
	P       float64 // two-sided p-value (Mann-Whitney U, or signed-rank when paired); NaN when not computed
	MinP    float64 // the smallest p these sample counts allow (stats.MinMannWhitneyP, stats.MinSignedRankP)
	WelchP  float64 // Welch t on the means, for reference; NaN when not computed
	Verdict Verdict
	Note    string  // why Verdict is NoVerdict
	Method  string  // MethodPaired or MethodUnpaired
	Pairs   int     // the rounds a paired comparison is made from
	Alpha   float64 // its interval is at 1-Alpha, significant below it (0: stats.Alpha)
}

// Significant says p < Alpha (stats.Alpha, 0.05, unless a precision run's
// look spent another share of it).
func (c Comparison) Significant() bool { return !math.IsNaN(c.P) && c.P < c.alpha() }

func (c Comparison) alpha() float64 {
	if c.Alpha == 0 {
		return stats.Alpha
	}
	return c.Alpha
}

// TooFew says no difference could be significant with these sample counts
// (3 against 3 values: the smallest possible p is 0.10).
func (c Comparison) TooFew() bool { return c.MinP >= c.alpha() }

// Compare sets x beside base, unpaired (CompareCells pairs the cells of
// one run by round). The verdict comes from the two-sided
// Mann-Whitney U test at p < 0.05 alone (the ratio's interval does not vote);
// higherBetter turns "higher" into Better or Worse. The ratio's interval
// needs 2 or more values a side: from one value it would only resample the
// other side and look surer than it is.
func Compare(x, base []float64, higherBetter bool) Comparison {
	c := Comparison{P: math.NaN(), WelchP: math.NaN(), MinP: stats.MinMannWhitneyP(len(x), len(base)), Method: MethodUnpaired}
	if len(x) == 0 || len(base) == 0 {
		c.Note = "no valid samples on one side"
		return c
	}
	mb := stats.Median(base)
	if mb == 0 {
		c.Note = "baseline median is 0"
		return c
	}
	c.Ratio = stats.Median(x) / mb
	if len(x) >= 2 && len(base) >= 2 {
		if lo, hi, ok := stats.RatioOfMediansCI(x, base); ok {
			c.RatioCI, c.HasCI = [2]float64{lo, hi}, true
		}
	}
	mw, err := stats.MannWhitney(x, base)
	if err != nil {
		c.Note = fmt.Sprintf("mann-whitney: %v", err)
		return c
	}
	c.P = mw.P
	if w, err := stats.WelchT(x, base); err == nil {
		c.WelchP = w.P
	}
	c.Verdict = verdict(c.Significant(), c.Ratio, higherBetter)
	return c
}

// Itself is a cell compared with itself: the baseline row.
func Itself(n int) Comparison {
	return Comparison{Ratio: 1, RatioCI: [2]float64{1, 1}, HasCI: true, P: 1, MinP: stats.MinMannWhitneyP(n, n), WelchP: math.NaN(), Verdict: Baseline, Method: MethodUnpaired}
}
