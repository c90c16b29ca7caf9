// Package history lines up the same cell across many results files in time
// order (`vnetlab history`): each cell's median and 95% CI run after run,
// marked where the machine or vnetlab changed (boundary.go), with change
// points found by E-Divisive means (detect.go, stats.EDivisive), as a chart
// and a Markdown section per cell (write.go).
package history

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/stats"
)

// Run is one results file.
type Run struct {
	File string
	Data *results.File
}

// Start is when the run started (its metadata).
func (r Run) Start() time.Time { return r.Data.Metadata.Start }

// Point is one run's cell in a series.
type Point struct {
	Run    int // index into History.Runs
	Cell   *results.Cell
	Values []float64 // the valid samples
}

// Failed says the cell has no valid sample in this run.
func (p Point) Failed() bool { return len(p.Values) == 0 }

// Series is one cell (CellID.Key) across the runs that have it.
type Series struct {
	ID      results.CellID
	Unit    string
	Points  []Point
	Changes []Change // filled by Detect
	Notes   []string // what detection could not do, and why
}

// History is every selected cell across the runs, in time order.
type History struct {
	Runs       []Run
	Boundaries []Boundary
	Series     []*Series
	Options    Options
	Detected   bool // Detect ran
}

// Options say which cells to follow and how to detect changes.
type Options struct {
	Cells results.CellPatterns
	// Across are the boundary kinds detection may run across (it never
	// does silently: the report says so).
	Across []Kind
	// Newest is how many of the newest runs a worse change point may fall
	// in to count as a regression of the newest run (Regressions); 1 by
	// default: a change at the newest file.
	Newest    int
	EDivisive stats.EDivisiveOptions
}

// Load reads the results files named by args, each a file or a directory
// of *.json files, and orders them by start time. A file named on the
// command line must be a results file; a JSON file in a directory that is
// not one is skipped with a warning.
func Load(args []string) ([]Run, []string, error) {
	var runs []Run
	var warnings []string
	seen := map[string]bool{}
	add := func(path string, inDir bool) error {
		abs, _ := filepath.Abs(path)
		if seen[abs] {
			return nil
		}
		seen[abs] = true
		f, err := results.Read(path)
		if err != nil {
			if inDir {
				warnings = append(warnings, fmt.Sprintf("skipped %s: %v", path, err))
				return nil
			}
			return err
		}
		if f.Metadata.Start.IsZero() {
			return fmt.Errorf("%s has no start time in its metadata: history cannot place it in time", path)
		}
		runs = append(runs, Run{File: path, Data: f})
		return nil
	}
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, nil, err
		}
		if !st.IsDir() {
			if err := add(a, false); err != nil {
				return nil, nil, err
			}
			continue
		}
		files, err := filepath.Glob(filepath.Join(a, "*.json"))
		if err != nil {
			return nil, nil, err
		}
		slices.Sort(files)
		for _, f := range files {
			if err := add(f, true); err != nil {
				return nil, nil, err
			}
		}
	}
	if len(runs) == 0 {
		return nil, warnings, fmt.Errorf("no results file in %s: give results JSON files or directories holding them", strings.Join(args, " "))
	}
	slices.SortStableFunc(runs, func(a, b Run) int { return a.Start().Compare(b.Start()) })
	return runs, warnings, nil
}

// Build lines up the selected cells of runs (in time order), in the order
// each cell first appears, and finds the boundaries between runs.
func Build(runs []Run, o Options) (*History, error) {
	if err := o.Cells.Check(); err != nil {
		return nil, err
	}
	if o.Newest < 1 {
		o.Newest = 1
	}
	h := &History{Runs: runs, Options: o, Boundaries: boundaries(runs, o.Across)}
	byKey := map[string]*Series{}
	for i, r := range runs {
		for _, c := range r.Data.Cells {
			id := c.ID()
			if !o.Cells.Match(id) {
				continue
			}
			s, ok := byKey[id.Key()]
			if !ok {
				s = &Series{ID: id, Unit: c.Unit}
				byKey[id.Key()] = s
				h.Series = append(h.Series, s)
			}
			s.Points = append(s.Points, Point{Run: i, Cell: c, Values: c.Values()})
		}
	}
	if len(h.Series) == 0 {
		return nil, fmt.Errorf("no cell of the %d results files matches --cells %s (names look like veth-routed/pod/tcp_stream)", len(runs), strings.Join(o.Cells, ","))
	}
	for _, s := range h.Series {
		for _, p := range s.Points[1:] {
			if u := p.Cell.Unit; u != s.Unit {
				return nil, fmt.Errorf("cell %s is in %s in one run and %s in %s: its runs cannot be lined up", s.ID, s.Unit, u, runs[p.Run].File)
			}
		}
	}
	return h, nil
}
