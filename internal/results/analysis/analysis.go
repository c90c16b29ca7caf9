// Package analysis is where vnetlab turns samples into conclusions, once, for
// run, report and compare alike:
//
//   - summarize.go: a cell's median, mean, min/max, 95% CI, CV, noisy flag,
//     latency percentiles and CPU cost (Summarize);
//   - compare.go: two sets of samples side by side, the ratio of medians with
//     its CI, Mann-Whitney U and a typed Verdict that knows which way is
//     better (Compare), applied to a run's baseline and pod cells (Analyze);
//   - diff.go: the same cells in two results files (Diff, for compare);
//   - status.go: whether a cell's failure was predicted (StatusOf, Problems);
//   - converge.go: a convergence file's rows, and what its report reads
//     (ConvergeRows, AfterWrite, SplitByGap, Disturbed).
//
// The arithmetic on float slices (medians, bootstrap, tests) is internal/results/stats.
package analysis

import (
	"slices"

	"github.com/vnetlab/vnetlab/internal/results/stats"
)

// DefaultCVThreshold flags a cell as noisy above 10% coefficient of variation.
const DefaultCVThreshold = 0.10

// CIMethods lists the accepted Options.CIMethod values, the default first.
var CIMethods = []string{stats.MethodBootstrapMedian, stats.MethodStudentTMean}

// Options say how cells are summarised and compared.
type Options struct {
	CVThreshold float64 // 0 = DefaultCVThreshold
	CIMethod    string  // one of CIMethods; "" = the first
	Baseline    string  // mode label every cell is compared with; "" = the first cell's mode
	// Precision is the 95% CI half-width (a share of the ratio) a
	// precision run went on for (0: a run of fixed rounds); Looks are the
	// measured rounds at each of its looks (sequential.go).
	Precision float64
	Looks     []int
}

func (o Options) withDefaults() Options {
	if o.CVThreshold == 0 {
		o.CVThreshold = DefaultCVThreshold
	}
	if !slices.Contains(CIMethods, o.CIMethod) {
		o.CIMethod = CIMethods[0]
	}
	return o
}
