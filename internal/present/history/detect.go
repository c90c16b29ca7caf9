package history

import (
	"fmt"

	"github.com/vnetlab/vnetlab/internal/results/analysis"
	"github.com/vnetlab/vnetlab/internal/results/stats"
)

// MinRuns is the fewest runs (with valid samples) an epoch needs before
// detection runs in it: E-Divisive splits into segments of 2 or more, the
// last one 1 or more.
const MinRuns = 4

// Change is a change point of a series: the level moves at Point.
type Change struct {
	Point int // index into Series.Points: the first run at the new level
	// Ratio is median(after)/median(before) over the valid samples of the
	// runs in the segments on either side, with the bootstrap 95% CI of that
	// ratio (stats.RatioOfMediansCI) when each side has 2 or more samples.
	// Pooling samples ignores run-to-run spread, so the CI is narrower than
	// a CI over runs would be: P is the change's significance, not the CI.
	Ratio   float64
	RatioCI [2]float64
	HasCI   bool
	P       float64          // E-Divisive's permutation p-value
	Verdict analysis.Verdict // Better or Worse in the unit's direction; Same when the CI holds 1 (the spread changed, not the level)
	Newest  bool             // the change is in the newest Options.Newest runs
}

// Detect finds each series' change points within each epoch (runs between
// boundaries detection may not cross): stats.EDivisive over the runs'
// medians, failed runs left out.
func (h *History) Detect() {
	h.Detected = true
	eps := h.epochs()
	for _, s := range h.Series {
		s.Changes, s.Notes = nil, nil
		for i, ep := range eps {
			var pts []int
			for j, p := range s.Points {
				if p.Run >= ep[0] && p.Run < ep[1] && !p.Failed() {
					pts = append(pts, j)
				}
			}
			if len(pts) == 0 {
				continue
			}
			if len(pts) < MinRuns {
				s.Notes = append(s.Notes, fmt.Sprintf("%s: %d %s with valid samples, too few to look for changes (%d needed)",
					h.epochName(i, eps), len(pts), plural(len(pts), "run", "runs"), MinRuns))
				continue
			}
			s.Changes = append(s.Changes, h.detect(s, pts)...)
		}
	}
}

// detect runs E-Divisive on the points pts (indices into s.Points).
func (h *History) detect(s *Series, pts []int) []Change {
	medians := make([]float64, len(pts))
	for i, j := range pts {
		medians[i] = stats.Median(s.Points[j].Values)
	}
	cps := stats.EDivisive(medians, h.Options.EDivisive)
	cuts := []int{0}
	for _, c := range cps {
		cuts = append(cuts, c.Index)
	}
	cuts = append(cuts, len(pts))
	pooled := func(from, to int) []float64 {
		var v []float64
		for _, j := range pts[from:to] {
			v = append(v, s.Points[j].Values...)
		}
		return v
	}
	higher := analysis.HigherIsBetter(s.Unit)
	var out []Change
	for k, cp := range cps {
		before, after := pooled(cuts[k], cuts[k+1]), pooled(cuts[k+1], cuts[k+2])
		c := Change{Point: pts[cp.Index], P: cp.P, Ratio: stats.Median(after) / stats.Median(before)}
		if len(before) >= 2 && len(after) >= 2 {
			if lo, hi, ok := stats.RatioOfMediansCI(after, before); ok {
				c.RatioCI, c.HasCI = [2]float64{lo, hi}, true
			}
		}
		up, down := c.Ratio > 1, c.Ratio < 1
		if c.HasCI {
			up, down = c.RatioCI[0] > 1, c.RatioCI[1] < 1
		}
		switch {
		case up == higher && (up || down):
			c.Verdict = analysis.Better
		case up || down:
			c.Verdict = analysis.Worse
		default:
			c.Verdict = analysis.Same
		}
		c.Newest = s.Points[c.Point].Run >= len(h.Runs)-h.Options.Newest
		out = append(out, c)
	}
	return out
}

// Regression is a worse change in the newest runs.
type Regression struct {
	Series *Series
	Change Change
}

// Regressions are the changes that make `history --detect` exit non-zero:
// significant, worse in the unit's direction, in the newest runs.
func (h *History) Regressions() []Regression {
	var out []Regression
	for _, s := range h.Series {
		for _, c := range s.Changes {
			if c.Newest && c.Verdict == analysis.Worse {
				out = append(out, Regression{Series: s, Change: c})
			}
		}
	}
	return out
}

// epochName says which runs epoch i holds ("runs 1-12", numbered from 1).
func (h *History) epochName(i int, eps [][2]int) string {
	name := fmt.Sprintf("runs %d-%d", eps[i][0]+1, eps[i][1])
	if eps[i][1]-eps[i][0] == 1 {
		name = fmt.Sprintf("run %d", eps[i][0]+1)
	}
	if len(eps) > 1 {
		name += fmt.Sprintf(" (between boundaries, %d of %d)", i+1, len(eps))
	}
	return name
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
