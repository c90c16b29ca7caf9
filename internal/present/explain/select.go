package explain

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// Pair is two cells to compare: B against A.
type Pair struct{ A, B *results.Cell }

// matches says whether name designates c: its label (mode, or
// mode/path/provider+N, with /ipv4 or /ipv6 when written), its mode, its
// names (mode/series[/family]/test) or its key (mode|path|provider|test).
func matches(c *results.Cell, name string) bool {
	return name == Label(c) || name == labelAs(c, string(family.OfCell(c.Family))) || name == c.Mode ||
		name == c.ID().Key() || slices.Contains(c.ID().Names(), name)
}

// Select picks the pairs to explain. With two names: those two cells, per
// test (test narrows to one). Without: every profiled cell against the
// run's baseline cell of the same path, provider, test and Services; in a
// run of one mode, every service cell against its pod cell.
func Select(f *results.File, names []string, test string) ([]Pair, error) {
	var cells []*results.Cell
	for _, c := range f.Cells {
		if test == "" || c.Test == test {
			cells = append(cells, c)
		}
	}
	if len(cells) == 0 {
		return nil, fmt.Errorf("no cell has test %q (the file has %s)", test, strings.Join(tests(f), ", "))
	}
	if len(names) != 0 && len(names) != 2 {
		return nil, fmt.Errorf("--cells wants two cells, A,B (e.g. --cells host,veth-routed)")
	}
	var pairs []Pair
	if len(names) == 2 {
		for _, t := range testsOf(cells) {
			a, errA := find(cells, names[0], t)
			b, errB := find(cells, names[1], t)
			if errA != nil || errB != nil {
				if len(testsOf(cells)) == 1 {
					if errA != nil {
						return nil, errA
					}
					return nil, errB
				}
				continue
			}
			pairs = append(pairs, Pair{a, b})
		}
		if len(pairs) == 0 {
			return nil, fmt.Errorf("no test has both %s and %s (cells: %s)", names[0], names[1], strings.Join(labels(cells), ", "))
		}
		return pairs, nil
	}
	base := f.Metadata.Settings.Baseline
	if base == "" {
		base = cells[0].Mode
	}
	for _, b := range cells {
		if b.Mode == base || b.Profile == nil {
			continue
		}
		for _, a := range cells {
			if a.Mode == base && a.Path == b.Path && a.Provider == b.Provider && a.Test == b.Test && a.ExtraServices == b.ExtraServices && a.Point == b.Point && a.Family == b.Family && a.Profile != nil {
				pairs = append(pairs, Pair{a, b})
			}
		}
	}
	if len(pairs) == 0 {
		pairs = servicesVsPods(cells)
	}
	if len(pairs) == 0 {
		return nil, fmt.Errorf("no profiled cell has a profiled baseline (%s) cell to compare with: run with --profile, or name two cells with --cells A,B (cells: %s)", base, strings.Join(labels(cells), ", "))
	}
	return pairs, nil
}

// servicesVsPods pairs each profiled service cell with its pod cell
// (Cell.PodID, the table's "vs pod"): what Select explains when no cell has
// a baseline of another mode to compare with (a run of one mode).
func servicesVsPods(cells []*results.Cell) []Pair {
	pod := results.PodCells(cells)
	var pairs []Pair
	for _, b := range cells {
		if a, ok := pod[b.PodID()]; ok && a.Profile != nil && b.Provider != "" && b.Profile != nil {
			pairs = append(pairs, Pair{a, b})
		}
	}
	return pairs
}

func find(cells []*results.Cell, name, test string) (*results.Cell, error) {
	var found []*results.Cell
	for _, c := range cells {
		if c.Test == test && matches(c, name) {
			found = append(found, c)
		}
	}
	if len(found) > 1 {
		// A mode's name in a dual-stack run: the cell whose label it is
		// exactly, the IPv4 one.
		var exact []*results.Cell
		for _, c := range found {
			if Label(c) == name {
				exact = append(exact, c)
			}
		}
		if len(exact) == 1 {
			found = exact
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, fmt.Errorf("no %s cell named %q (cells: %s)", test, name, strings.Join(labels(cells), ", "))
	}
	return nil, fmt.Errorf("%q names %d %s cells: use one of %s", name, len(found), test, strings.Join(labels(found), ", "))
}

func labels(cells []*results.Cell) []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range cells {
		if l := Label(c); !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}

func testsOf(cells []*results.Cell) []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range cells {
		if !seen[c.Test] {
			seen[c.Test] = true
			out = append(out, c.Test)
		}
	}
	return out
}

func tests(f *results.File) []string { return testsOf(f.Cells) }
