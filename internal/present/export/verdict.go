package export

import (
	"fmt"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
)

// Outcome is how a verdict reads as a test case.
type Outcome int

const (
	Pass Outcome = iota
	Fail
	Skip // nothing could be concluded (too few samples, a CI across the target)
)

var outcomeWords = []string{Pass: "pass", Fail: "fail", Skip: "skip"}

func (o Outcome) String() string { return outcomeWords[o] }

// Verdict is one judged thing: a cell of a run against the run's
// prediction, a cell of compare against --fail-on-regression, a ratio
// against its --target. It becomes one JUnit test case and one CSV row.
type Verdict struct {
	Suite     string         // "run", "compare", "ratio": the JUnit test suite
	Name      string         // the test case: the cell, or "NUM / DEN"
	Cell      results.CellID // the cell judged (a ratio's numerator)
	Reference string         // what it was judged against: the old file's cell, the denominator, ""
	Verdict   string         // analysis's word: ok, failed, worse, ~, MET, SHORT, ...
	Outcome   Outcome
	Message   string // one line: the numbers behind the verdict
	// The numbers, when the verdict came from a comparison.
	Ratio       float64
	RatioCI     [2]float64
	HasCI       bool
	P           float64
	HasP        bool
	Target      string // ">= 1.00" (ratio), "5%" (compare), ""
	Measurement string // unit, or ratio's metric
}

// Suite names.
const (
	SuiteRun     = "run"
	SuiteCompare = "compare"
	SuiteRatio   = "ratio"
	// SuiteTolerance: kube run --tolerance, each pod cell against host.
	SuiteTolerance = "tolerance"
)

// CellVerdicts judges every cell of a run as `run` does: a cell fails when
// its outcome contradicts the run's prediction (analysis.Status.Problem); a
// cell that failed as predicted passes, with its note.
func CellVerdicts(f *results.File) []Verdict {
	var out []Verdict
	for _, c := range f.Cells {
		st := analysis.StatusOf(c)
		v := Verdict{Suite: SuiteRun, Name: c.ID().String(), Cell: c.ID(), Verdict: st.String(), Measurement: c.Unit}
		switch st {
		case analysis.OK:
			v.Message = fmt.Sprintf("median %.6g %s over %d valid samples", c.Median, c.Unit, c.Valid)
		case analysis.Failed:
			v.Message = fmt.Sprintf("no valid sample out of %d%s", len(c.Samples), firstError(c))
		case analysis.FailedAsExpected:
			v.Message = "failed as predicted: " + c.Note
		case analysis.WorkedUnexpectedly:
			v.Message = "predicted to fail but measured: " + c.Note
		case analysis.NotApplied:
			v.Message = "not measured, a knob is not applied: " + c.NotApplied
		}
		if st.Problem() {
			v.Outcome = Fail
		}
		out = append(out, v)
	}
	return out
}

func firstError(c *results.Cell) string {
	for _, s := range c.Samples {
		if s.Error != "" {
			return ": " + s.Error
		}
	}
	return ""
}

// CompareVerdicts judges each cell of a two-file comparison as
// `compare --fail-on-regression pct` does (FileDiff.Regressions): one
// failing case per regression. pct < 0 means no gate was asked for: no case
// fails, each carries its verdict. Cells in only one file are skipped cases.
func CompareVerdicts(fd *analysis.FileDiff, pct float64) []Verdict {
	regressed := map[*analysis.Delta]bool{}
	if pct >= 0 {
		for _, d := range fd.Regressions(pct) {
			regressed[d] = true
		}
	}
	target := ""
	if pct >= 0 {
		target = fmt.Sprintf("%g%%", pct)
	}
	var out []Verdict
	for _, d := range fd.Deltas {
		v := Verdict{Suite: SuiteCompare, Name: d.Name(), Cell: d.New.ID(), Reference: d.Old.ID().Key(), Target: target, Measurement: d.Unit}
		switch {
		case d.Lost:
			v.Verdict, v.Message = "lost", d.Note
		case !d.Measured():
			v.Verdict, v.Message = "n/a", d.Note
		default:
			v.Verdict = d.Verdict.String()
			v.Ratio, v.RatioCI, v.HasCI, v.P, v.HasP = d.Ratio, d.RatioCI, d.HasCI, d.P, true
			v.Message = fmt.Sprintf("delta %+.1f%%%s, p=%.3f (Mann-Whitney U), %s", d.Pct(), pctCI(d), d.P, v.Verdict)
			if d.TooFew() {
				v.Message += ": too few samples for any difference to reach p < 0.05"
			}
		}
		if regressed[d] {
			v.Outcome = Fail
			v.Message = fmt.Sprintf("regressed by more than %s: %s", target, v.Message)
		}
		out = append(out, v)
	}
	only := func(cells []*results.Cell, where string) {
		for _, c := range cells {
			out = append(out, Verdict{Suite: SuiteCompare, Name: c.ID().Key(), Cell: c.ID(), Verdict: "only in " + where,
				Outcome: Skip, Message: "the cell is only in the " + where + " file", Target: target, Measurement: c.Unit})
		}
	}
	only(fd.OnlyOld, "old")
	only(fd.OnlyNew, "new")
	return out
}

func pctCI(d *analysis.Delta) string {
	if !d.HasCI {
		return ""
	}
	lo, hi := d.PctCI()
	return fmt.Sprintf(" [%+.1f%%, %+.1f%%]", lo, hi)
}

// RatioVerdict judges a ratio as `ratio --target` does: SHORT (the whole
// 95% CI misses the target) fails, UNRESOLVED (the CI holds the target) is
// skipped, MET passes; without a target the case passes with the numbers.
func RatioVerdict(r *analysis.CellRatio) Verdict {
	v := Verdict{Suite: SuiteRatio, Name: r.Num.String() + " / " + r.Den.String(), Cell: r.Num, Reference: r.Den.String(),
		Ratio: r.Ratio, RatioCI: r.RatioCI, HasCI: r.HasCI, P: r.P, HasP: r.Note == "", Measurement: string(r.Metric)}
	ci := "no CI"
	if r.HasCI {
		ci = fmt.Sprintf("95%% CI [%.3f, %.3f]", r.RatioCI[0], r.RatioCI[1])
	}
	v.Message = fmt.Sprintf("ratio %.3f, %s (%s)", r.Ratio, ci, r.Metric)
	v.Verdict = r.Verdict.String()
	if r.Target == nil {
		return v
	}
	v.Target, v.Verdict = r.Target.String(), r.Outcome.String()
	v.Message += fmt.Sprintf(", target %s: %s", r.Target, r.Outcome)
	switch r.Outcome {
	case analysis.Short:
		v.Outcome = Fail
	case analysis.Unresolved:
		v.Outcome = Skip
	}
	return v
}

// ToleranceVerdicts judges each pod cell against its host cell under the
// run's --tolerance (none when the run had none), as `kube run` does:
// SHORT (significantly below 1-R) fails, UNRESOLVED is skipped, MET passes.
func ToleranceVerdicts(f *results.File) []Verdict {
	tol := f.Metadata.Settings.Tolerance
	if tol == 0 {
		return nil
	}
	var out []Verdict
	for _, h := range analysis.HostChecks(f.Cells, tol) {
		v := Verdict{Suite: SuiteTolerance, Name: h.Pod.String() + " / host", Cell: h.Pod, Reference: h.Host.String(),
			Verdict: h.Outcome.String(), Message: h.String(), Ratio: h.Perf, RatioCI: [2]float64{h.PerfLo, h.PerfHi}, HasCI: h.HasCI,
			P: h.P, HasP: h.Note == "", Target: fmt.Sprintf(">= %.2f", 1-tol), Measurement: h.Unit}
		switch h.Outcome {
		case analysis.Short:
			v.Outcome = Fail
		case analysis.Unresolved:
			v.Outcome = Skip
		}
		out = append(out, v)
	}
	return out
}
