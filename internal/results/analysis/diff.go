package analysis

import (
	"fmt"
	"math"
	"strings"

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
	// Caveats say what makes the two sides unlike besides what they
	// measured: one side's packets counted inside its measured windows,
	// matched cells pinned differently.
	Caveats []string
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
	for _, c := range []string{counterCaveat(old, new), pinCaveat(fd.Deltas)} {
		if c != "" {
			fd.Caveats = append(fd.Caveats, c)
		}
	}
	return fd
}

// counterCaveat warns when one side only was measured with the packet
// counter attached in its windows (results.File.CountedInWindows: a vnetlab
// that attached its counter there).
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

// pinCaveat warns when matched cells ran their client and server on other
// CPUs, or one pinned and the other not: on a small machine pinning alone
// moves a cell's rate (docs/engines.md), so such a delta is partly the
// pinning's. (A file from before the default pinned streams said `auto`
// for streams it left unpinned: its cells have no cpu_affinity.)
func pinCaveat(deltas []*Delta) string {
	var names []string
	for _, d := range deltas {
		if d.Old == nil || d.New == nil || pinning(d.Old) == pinning(d.New) {
			continue
		}
		names = append(names, fmt.Sprintf("%s (%s, %s)", d.Name(), pinning(d.Old), pinning(d.New)))
	}
	if len(names) == 0 {
		return ""
	}
	n, more := len(names), ""
	if most := 3; n > most {
		more, names = fmt.Sprintf(" and %d more", n-most), names[:most]
	}
	noun := "cells were"
	if n == 1 {
		noun = "cell was"
	}
	return fmt.Sprintf("caveat: %d matched %s pinned differently, old against new: %s%s; their deltas carry that difference (--cpu-affinity)", n, noun, strings.Join(names, "; "), more)
}

// pinning is where a cell's client and server ran, as a caveat names it.
func pinning(c *results.Cell) string {
	if c.CPUAffinity == nil {
		return "unpinned"
	}
	return fmt.Sprintf("client CPU %d, server CPU %d", c.CPUAffinity.Client, c.CPUAffinity.Server)
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
