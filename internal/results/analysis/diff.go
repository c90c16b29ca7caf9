package analysis

import (
	"fmt"
	"math"

	"github.com/vnetlab/vnetlab/internal/results"
)

// Delta is one cell present in two results files: New compared with Old
// (Old is the reference), in the manner of benchstat.
type Delta struct {
	ID       results.CellID
	Unit     string
	Old, New *results.Cell
	Comparison
	// Lost: the cell has no valid sample in new, had some in old, and new
	// did not predict it: a regression whatever the threshold.
	Lost bool
}

// Pct is the change of the median in percent: (new/old - 1) * 100.
func (d *Delta) Pct() float64 { return (d.Ratio - 1) * 100 }

// PctCI is the 95% interval of Pct, when HasCI.
func (d *Delta) PctCI() (lo, hi float64) { return (d.RatioCI[0] - 1) * 100, (d.RatioCI[1] - 1) * 100 }

// Measured says the two sides could be compared, so Pct means something;
// otherwise Note says why not.
func (d *Delta) Measured() bool { return d.Verdict != NoVerdict }

// Name is how a comparison table names the delta: the cell's key, or both
// keys when a lab cell was matched with a cluster's ("old ~ new").
func (d *Delta) Name() string {
	if d.Old != nil && d.New != nil && d.Old.ID() != d.New.ID() {
		return d.Old.ID().Key() + " ~ " + d.New.ID().Key()
	}
	return d.ID.Key()
}

// FileDiff is the whole comparison of two files.
type FileDiff struct {
	Deltas  []*Delta
	OnlyOld []*results.Cell
	OnlyNew []*results.Cell
	// Note says how cells were matched when that was not by their own IDs
	// (a lab file against a cluster's).
	Note string
	// Caveat says what makes the two sides unlike besides what they
	// measured: one side's packets counted inside its measured windows.
	Caveat string
}

// Diff matches the cells of two files by CellID, in old's order. A lab file
// and a cluster file (kube run) are matched by what their cells measure
// (labcluster.go).
func Diff(old, new *results.File) *FileDiff {
	fd := &FileDiff{}
	oldID, newID, note, _ := labClusterIDs(old, new)
	fd.Note = note
	newBy := map[results.CellID]*results.Cell{}
	for _, c := range new.Cells {
		newBy[newID(c)] = c
	}
	seen := map[results.CellID]bool{}
	for _, o := range old.Cells {
		id := oldID(o)
		n, ok := newBy[id]
		if !ok {
			fd.OnlyOld = append(fd.OnlyOld, o)
			continue
		}
		seen[id] = true
		fd.Deltas = append(fd.Deltas, diffCells(o, n))
	}
	for _, c := range new.Cells {
		if !seen[newID(c)] {
			fd.OnlyNew = append(fd.OnlyNew, c)
		}
	}
	fd.Caveat = counterCaveat(old, new)
	return fd
}

// counterCaveat warns when one side only was measured with the packet
// counter attached in its windows (results.File.CountedInWindows: vnetlab
// before issue 41).
func counterCaveat(old, new *results.File) string {
	side := "old"
	switch o, n := old.CountedInWindows(), new.CountedInWindows(); {
	case o == n:
		return ""
	case n:
		side = "new"
	}
	return fmt.Sprintf("caveat: the %s file was %s; the deltas carry that offset", side, results.CountedNote)
}

func diffCells(o, n *results.Cell) *Delta {
	d := &Delta{ID: o.ID(), Unit: o.Unit, Old: o, New: n}
	ov, nv := o.Values(), n.Values()
	d.Comparison = Comparison{P: math.NaN(), WelchP: math.NaN(), MinP: 1}
	switch {
	case len(ov) == 0 && len(nv) == 0 && StatusOf(n) == FailedAsExpected:
		d.Note = "failed as expected in both"
	case len(ov) == 0 && len(nv) == 0:
		d.Note = "failed in both"
	case len(ov) == 0:
		d.Note = "failed in old"
	case len(nv) == 0 && StatusOf(n) == FailedAsExpected:
		d.Note = "failed as expected in new"
	case len(nv) == 0:
		d.Note, d.Lost = "FAILED in new", true
	case o.Unit != n.Unit:
		d.Note = fmt.Sprintf("units differ (%s vs %s)", o.Unit, n.Unit)
	default:
		d.Comparison = Compare(nv, ov, HigherIsBetter(d.Unit))
	}
	return d
}

// Regressions are the cells significantly worse by more than pct percent,
// and the cells lost in new.
func (fd *FileDiff) Regressions(pct float64) []*Delta {
	var out []*Delta
	for _, d := range fd.Deltas {
		if d.Lost || (d.Verdict == Worse && math.Abs(d.Pct()) > pct) {
			out = append(out, d)
		}
	}
	return out
}
