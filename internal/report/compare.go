package report

// compare: two results files, cell by cell, in the manner of benchstat:
// delta of medians with a bootstrap 95% CI, Mann-Whitney U for significance,
// "~" when the difference is not significant.

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"

	"github.com/vnetlab/vnetlab/internal/results"
)

// Delta is one cell present in both files.
type Delta struct {
	Key, Unit             string
	Old, New              *results.Cell
	Pct                   float64 // (new median / old median - 1) * 100
	PctLo, PctHi          float64 // 95% CI of Pct, when HasCI
	HasCI                 bool
	P                     float64 // Mann-Whitney U p-value, NaN when it cannot be computed
	Significant           bool    // p < 0.05
	Worse                 bool    // the change goes the bad way for this unit
	Verdict               string  // "~", "better", "worse", or why there is no verdict
	TooFewForSignificance bool
}

// Comparison is the whole comparison of two files.
type Comparison struct {
	Deltas  []*Delta
	OnlyOld []*results.Cell
	OnlyNew []*results.Cell
}

// Compare matches cells by mode|path|provider|test.
func Compare(old, new *results.File) *Comparison {
	cmp := &Comparison{}
	newBy := map[string]*results.Cell{}
	for _, c := range new.Cells {
		newBy[c.Key()] = c
	}
	seen := map[string]bool{}
	for _, o := range old.Cells {
		n, ok := newBy[o.Key()]
		if !ok {
			cmp.OnlyOld = append(cmp.OnlyOld, o)
			continue
		}
		seen[o.Key()] = true
		cmp.Deltas = append(cmp.Deltas, compareCells(o, n))
	}
	for _, c := range new.Cells {
		if !seen[c.Key()] {
			cmp.OnlyNew = append(cmp.OnlyNew, c)
		}
	}
	return cmp
}

func compareCells(o, n *results.Cell) *Delta {
	d := &Delta{Key: o.Key(), Unit: o.Unit, Old: o, New: n, P: math.NaN()}
	ov, nv := o.Values(), n.Values()
	switch {
	case len(ov) == 0 && len(nv) == 0:
		d.Verdict = "failed in both"
		return d
	case len(ov) == 0:
		d.Verdict = "failed in old"
		return d
	case len(nv) == 0:
		d.Verdict = "FAILED in new"
		d.Worse = true
		return d
	case o.Unit != n.Unit:
		d.Verdict = fmt.Sprintf("units differ (%s vs %s)", o.Unit, n.Unit)
		return d
	}
	om, nm := median(ov), median(nv)
	d.Pct = (nm/om - 1) * 100
	if lo, hi, ok := RatioCI(nv, ov); ok {
		d.PctLo, d.PctHi, d.HasCI = (lo-1)*100, (hi-1)*100, true
	}
	d.P = Significance(ov, nv)
	d.TooFewForSignificance = len(ov) < minSamplesForSignificance || len(nv) < minSamplesForSignificance
	d.Significant = !math.IsNaN(d.P) && d.P < alpha
	up := nm > om
	d.Worse = up != HigherIsBetter(d.Unit) && nm != om
	switch {
	case !d.Significant:
		d.Verdict = "~"
	case d.Worse:
		d.Verdict = "worse"
	default:
		d.Verdict = "better"
	}
	return d
}

// Regressions are the cells significantly worse by more than pct percent,
// and cells that failed in new but not in old.
func (c *Comparison) Regressions(pct float64) []*Delta {
	var out []*Delta
	for _, d := range c.Deltas {
		if d.Verdict == "FAILED in new" || (d.Significant && d.Worse && math.Abs(d.Pct) > pct) {
			out = append(out, d)
		}
	}
	return out
}

// ParsePercent reads "5%" or "5" as 5.
func ParsePercent(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "%")), 64)
	if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a percentage: use a number like 5%%", s)
	}
	return v, nil
}

// PrintComparison writes the comparison table and the cells only in one file.
func PrintComparison(w io.Writer, c *Comparison, oldName, newName string) {
	t := table.NewWriter()
	t.SetOutputMirror(w)
	t.AppendHeader(table.Row{"cell", "old", "new", "unit", "delta", "95% CI", "p", "n", "verdict"})
	small := false
	for _, d := range c.Deltas {
		oldS, newS := medianText(d.Old), medianText(d.New)
		row := table.Row{d.Key, oldS, newS, d.Unit}
		if len(d.Old.Values()) == 0 || len(d.New.Values()) == 0 || strings.HasPrefix(d.Verdict, "units") {
			row = append(row, "", "", "", nCount(d), d.Verdict)
		} else {
			ci := ""
			if d.HasCI {
				ci = fmt.Sprintf("[%+.1f%%, %+.1f%%]", d.PctLo, d.PctHi)
			}
			p := ""
			if !math.IsNaN(d.P) {
				p = fmt.Sprintf("%.3f", d.P)
			}
			v := d.Verdict
			if d.TooFewForSignificance {
				v += " *"
				small = true
			}
			row = append(row, fmt.Sprintf("%+.1f%%", d.Pct), ci, p, nCount(d), v)
		}
		t.AppendRow(row)
	}
	t.SetStyle(table.StyleLight)
	fmt.Fprintf(w, "old: %s\nnew: %s\n", oldName, newName)
	t.Render()
	fmt.Fprintln(w, `"~": not significant (Mann-Whitney U, p >= 0.05); delta = new median / old median - 1, CI by bootstrap of that ratio.`)
	if small {
		fmt.Fprintf(w, "*: fewer than %d samples on a side: no difference can reach p < 0.05; repeat more (--repeat).\n", minSamplesForSignificance)
	}
	for _, x := range c.OnlyOld {
		fmt.Fprintf(w, "only in old: %s\n", x.Key())
	}
	for _, x := range c.OnlyNew {
		fmt.Fprintf(w, "only in new: %s\n", x.Key())
	}
}

func medianText(c *results.Cell) string {
	if len(c.Values()) == 0 {
		return "FAILED"
	}
	return fmtValue(median(c.Values()))
}

func nCount(d *Delta) string { return fmt.Sprintf("%d+%d", len(d.Old.Values()), len(d.New.Values())) }
