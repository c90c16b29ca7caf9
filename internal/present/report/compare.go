package report

// compare: two results files, cell by cell, in the manner of benchstat. The
// numbers and verdicts are internal/results/analysis's (Diff); this file prints them.

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"

	"github.com/vnetlab/vnetlab/internal/results/analysis"
)

// ParsePercent reads "5%" or "5" as 5.
func ParsePercent(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "%")), 64)
	if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a percentage: use a number like 5%%", s)
	}
	return v, nil
}

// PrintComparison writes the comparison table and the cells only in one file.
func PrintComparison(w io.Writer, fd *analysis.FileDiff, oldName, newName string) {
	t := table.NewWriter()
	t.SetOutputMirror(w)
	t.AppendHeader(table.Row{"cell", "old", "new", "unit", "delta", "95% CI", "p", "n", "verdict"})
	small := false
	for _, d := range fd.Deltas {
		row := table.Row{d.Name(), medianText(d.Old), medianText(d.New), d.Unit}
		if !d.Measured() {
			row = append(row, "", "", "", nCount(d), d.Note)
		} else {
			ci := ""
			if d.HasCI {
				lo, hi := d.PctCI()
				ci = fmt.Sprintf("[%+.1f%%, %+.1f%%]", lo, hi)
			}
			v := d.Verdict.String()
			if d.TooFew() {
				v += " *"
				small = true
			}
			row = append(row, fmt.Sprintf("%+.1f%%", d.Pct()), ci, fmt.Sprintf("%.3f", d.P), nCount(d), v)
		}
		t.AppendRow(row)
	}
	t.SetStyle(table.StyleLight)
	fmt.Fprintf(w, "old: %s\nnew: %s\n", oldName, newName)
	for _, n := range append([]string{fd.Note}, fd.Caveats...) {
		if n != "" {
			fmt.Fprintln(w, n)
		}
	}
	t.Render()
	fmt.Fprintln(w, `"~": not significant (Mann-Whitney U, p >= 0.05); delta = new median / old median - 1, CI by bootstrap of that ratio.`)
	if small {
		fmt.Fprintln(w, "*: too few samples on a side for any difference to reach p < 0.05 (e.g. 3 vs 3: smallest p 0.10); repeat more (--repeat).")
	}
	for _, x := range fd.OnlyOld {
		fmt.Fprintf(w, "only in old: %s\n", x.ID().Key())
	}
	for _, x := range fd.OnlyNew {
		fmt.Fprintf(w, "only in new: %s\n", x.ID().Key())
	}
}

func nCount(d *analysis.Delta) string {
	return fmt.Sprintf("%d+%d", len(d.Old.Values()), len(d.New.Values()))
}
