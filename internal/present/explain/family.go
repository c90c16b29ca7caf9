package explain

// What IPv6 costs over IPv4 (explain --family): each IPv6 cell of
// a dual-stack run against the same cell measured over IPv4 on the same
// pods, so that the stages say where IPv6's extra (or saved) CPU goes.

import (
	"fmt"
	"slices"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// FamilyPairs picks each IPv6 cell (B) and the IPv4 cell of the same mode,
// path, provider, point and test (A); only the given modes when modes is
// set, and only test when it is set.
func FamilyPairs(f *results.File, test string, modes []string) ([]Pair, error) {
	v4 := map[results.CellID]*results.Cell{}
	var v6 []*results.Cell
	for _, c := range f.Cells {
		if (test != "" && c.Test != test) || (len(modes) > 0 && !slices.Contains(modes, c.Mode)) {
			continue
		}
		switch family.OfCell(c.Family) {
		case family.IPv4:
			v4[c.ID()] = c
		case family.IPv6:
			v6 = append(v6, c)
		}
	}
	if len(v6) == 0 {
		return nil, fmt.Errorf("no IPv6 cell to explain (the test, or modes, left none): --family explains a run with --ip-family dual")
	}
	var pairs []Pair
	for _, b := range v6 {
		id := b.ID()
		id.Family = family.IPv4.Cell()
		if a := v4[id]; a != nil {
			pairs = append(pairs, Pair{A: a, B: b})
		}
	}
	if len(pairs) == 0 {
		return nil, fmt.Errorf("no IPv6 cell has an IPv4 cell of the same mode, path and test: run with --ip-family dual")
	}
	return pairs, nil
}
