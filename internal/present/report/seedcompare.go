package report

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
)

// seedTolerance is how close our ratio must be to the seed's when we have
// no confidence interval (fewer than two samples on a side).
const seedTolerance = 0.05

// maxUsefulCISpread: a CI whose high end is more than 1.5 times its low end
// (wider than about ±20%) cannot tell the seeds' differences apart.
const maxUsefulCISpread = 1.5

// SeedView is one seed table beside this run.
type SeedView struct {
	Table    *SeedTable
	Heading  string
	Baseline string // our baseline cell, or why there is none
	Rows     []SeedRowView
	Summary  string
}

// SeedRowView is one published number beside ours.
type SeedRowView struct {
	What, SeedValue, SeedRatio string
	Ours, OurValue, OurRatio   string
	Verdict                    string
	Class                      string // agree, disagree, baseline, none
	StandsIn                   bool   // our cell is another mode's, measured for the seed's
	Weak                       bool   // agrees only because our CI is wide
	Note                       string
}

// compareSeeds builds a view for every seed table that has a cell besides
// its baseline in this run; the string says why none is shown when none is.
func compareSeeds(cells []*results.Cell, skipped ...results.Skipped) ([]*SeedView, string) {
	var out []*SeedView
	for i := range SeedTables {
		t := &SeedTables[i]
		if sv := compareSeed(t, cells, skipped); sv != nil {
			out = append(out, sv)
		}
	}
	if len(out) == 0 {
		return nil, "no cell of this run matches a seed's published experiment (seeds compare tcp_stream, udp_stream and tcp_rr over their own modes and paths)"
	}
	return out, ""
}

func compareSeed(t *SeedTable, cells []*results.Cell, skipped []results.Skipped) *SeedView {
	matched := make([]*results.Cell, len(t.Rows))
	standIn := make([]string, len(t.Rows))
	others := false // a row beside the baseline is in the run: something to compare
	for i, r := range t.Rows {
		matched[i], standIn[i] = findSeedCell(r, t.Test, cells)
		others = others || (i > 0 && matched[i] != nil)
	}
	if !others {
		return nil
	}
	sv := &SeedView{Table: t, Heading: fmt.Sprintf("Seed %s: %s", t.Seed.Number, t.Title)}
	base, baseRow := matched[0], t.Rows[0]
	baseOK := base != nil && base.Valid > 0 && base.Median != 0
	switch {
	case base == nil:
		sv.Baseline = fmt.Sprintf("our baseline cell (%s) is not in this run: no ratios can be compared", rowCellName(baseRow, t.Test))
	case !baseOK:
		sv.Baseline = fmt.Sprintf("our baseline cell (%s) has no valid sample: no ratios can be compared", base.ID().String())
	default:
		sv.Baseline = fmt.Sprintf("ratios are to the seed's \"%s\" (%s %s) and to our %s (%s %s)",
			baseRow.What, fmtValue(baseRow.Value), t.Unit, base.ID().String(), fmtValue(base.Median), base.Unit)
	}
	counts, weak := map[string]int{}, 0
	for i, r := range t.Rows {
		rv := SeedRowView{What: r.What, SeedValue: fmtValue(r.Value), SeedRatio: fmt.Sprintf("%.2f", r.Value/baseRow.Value), Note: r.Note}
		c := matched[i]
		switch {
		case r.Mode == "":
			rv.Ours, rv.Verdict, rv.Class = "—", "not measured: "+r.Note, "none"
			rv.Note = ""
		case c == nil:
			rv.Ours, rv.Verdict, rv.Class = rowCellName(r, t.Test), "not in this run", "none"
			for _, sk := range skipped {
				if sk.Mode == r.Mode && (sk.Provider == "" || sk.Provider == r.Provider) {
					rv.Verdict = "skipped: " + sk.Reason
					break
				}
			}
		default:
			rv.Ours = c.ID().String()
			if standIn[i] != "" {
				rv.Ours += fmt.Sprintf(" (stands in for %s)", r.Mode)
				rv.StandsIn = true
			}
			if c.Valid == 0 {
				rv.OurValue, rv.Verdict, rv.Class = "FAILED", "failed in this run", "none"
				break
			}
			rv.OurValue = fmtValue(c.Median) + " " + c.Unit
			switch {
			case i == 0:
				rv.OurRatio, rv.Verdict, rv.Class = "1.00", "baseline", "baseline"
			case !baseOK:
				rv.Verdict, rv.Class = "no baseline in this run", "none"
			default:
				rv.OurRatio, rv.Verdict, rv.Class = seedVerdict(c, base, r.Value/baseRow.Value)
			}
		}
		counts[rv.Class]++
		if strings.HasPrefix(rv.Verdict, "agrees, weakly") {
			rv.Weak = true
			weak++
		}
		sv.Rows = append(sv.Rows, rv)
	}
	var sum []string
	if n := counts["agree"]; n > 0 {
		a := fmt.Sprintf("%d agree", n)
		if weak > 0 {
			a += fmt.Sprintf(" (%d only weakly: our interval is too wide to test the seed)", weak)
		}
		sum = append(sum, a)
	}
	if n := counts["disagree"]; n > 0 {
		sum = append(sum, fmt.Sprintf("%d disagree", n))
	}
	if n := counts["none"]; n > 0 {
		sum = append(sum, fmt.Sprintf("%d not compared", n))
	}
	sv.Summary = strings.Join(sum, ", ")
	return sv
}

// seedVerdict compares our ratio c/base with the seed's: it agrees when the
// seed's ratio lies inside our ratio's 95% CI (or within ±5% without a CI).
func seedVerdict(c, base *results.Cell, seedRatio float64) (ours, verdict, class string) {
	cmp := analysis.CompareCells(c, base, analysis.HigherIsBetter(c.Unit))
	r, lo, hi := cmp.Ratio, cmp.RatioCI[0], cmp.RatioCI[1]
	if cmp.HasCI {
		ours = fmt.Sprintf("%.2f [%.2f, %.2f]", r, lo, hi)
	} else {
		ours = fmt.Sprintf("%.2f (no CI)", r)
		lo, hi = r*(1-seedTolerance), r*(1+seedTolerance)
	}
	// Compare at the two decimals shown, so a printed match never reads as a disagreement.
	sr := math.Round(seedRatio*100) / 100
	in := func(x float64) bool { return x >= math.Round(lo*100)/100 && x <= math.Round(hi*100)/100 }
	if in(sr) {
		// An interval wide enough to hold both "no difference" and a seed
		// difference agrees with anything: say so.
		if math.Abs(sr-1) >= seedTolerance && in(1) {
			return ours, "agrees, weakly: our CI also holds 1.00 (no difference)", "agree"
		}
		if lo > 0 && hi/lo > maxUsefulCISpread {
			return ours, "agrees, weakly: our CI is too wide to tell", "agree"
		}
		return ours, "agrees", "agree"
	}
	return ours, fmt.Sprintf("disagrees (ours %.2f vs seed %.2f)", r, seedRatio), "disagree"
}

// findSeedCell finds the run's cell for a seed row, trying stand-in modes
// when the seed's own mode is not in the run.
func findSeedCell(r SeedRow, test string, cells []*results.Cell) (*results.Cell, string) {
	if r.Mode == "" {
		return nil, ""
	}
	if c := findCell(r.Mode, r, test, cells); c != nil {
		return c, ""
	}
	for _, m := range r.StandIn {
		if c := findCell(m, r, test, cells); c != nil {
			return c, m
		}
	}
	return nil, ""
}

func findCell(mode string, r SeedRow, test string, cells []*results.Cell) *results.Cell {
	want := r.Nodes
	if want == 0 {
		want = 1
	}
	var best *results.Cell
	for _, c := range cells {
		if c.Mode != mode || c.Path != r.Path || c.Test != test || nodesOf(c) != want {
			continue
		}
		// The pod path never crosses a service, so any provider will do
		// (one without a provider first); a service path needs the seed's.
		if r.Path == "pod" {
			if best == nil || (c.Provider == "" && best.Provider != "") {
				best = c
			}
			continue
		}
		if c.Provider == r.Provider {
			return c
		}
	}
	return best
}

// nodesOf reads how many nodes a cell spans (default 1).
func nodesOf(c *results.Cell) int {
	if c.Nodes > 1 {
		return c.Nodes
	}
	return 1
}

// rowCellName names the cell a seed row wants, as the run would name it.
func rowCellName(r SeedRow, test string) string {
	s := results.CellID{Mode: r.Mode, Path: r.Path, Provider: r.Provider, Test: test}.String()
	if r.Nodes > 1 {
		s += fmt.Sprintf(" (%d nodes)", r.Nodes)
	}
	return s
}

// seedLines prints, under the table, each seed table the run can be set
// beside (compareSeeds, as the report's "Beside the seeds"): per row the
// run measured, the seed's ratio, ours with its 95% CI and whether the
// seed's difference is reproduced here; then the tally. A seed table
// whose rows none could be compared (its baseline not in the run) is left
// to the report, which says why.
func seedLines(w io.Writer, seeds []*SeedView) {
	for _, s := range seeds {
		var rows []string
		for _, r := range s.Rows {
			if r.Class == "agree" || r.Class == "disagree" {
				what := r.What
				if r.StandsIn {
					what += " (here " + r.Ours + ")"
				}
				rows = append(rows, fmt.Sprintf("  %s: seed %s, here %s: %s\n", what, r.SeedRatio, r.OurRatio, r.Verdict))
			}
		}
		if len(rows) == 0 { // nothing compared: the report says why
			continue
		}
		fmt.Fprintf(w, "%s (%s): %s.\n%s  %s (vnetlab report lists every row).\n", s.Heading, s.Table.Test, s.Baseline, strings.Join(rows, ""), capitalize(s.Summary))
	}
}
