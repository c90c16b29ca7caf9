package history

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Kind is what changed between two runs so that their numbers should not be
// mixed silently.
type Kind string

const (
	KernelChanged  Kind = "kernel"
	CPUsChanged    Kind = "cpus"
	VersionChanged Kind = "version"
)

// Kinds lists every kind, in report order.
var Kinds = []Kind{KernelChanged, CPUsChanged, VersionChanged}

// ParseKinds reads --across (kernel, cpus, version).
func ParseKinds(names []string) ([]Kind, error) {
	var out []Kind
	for _, n := range names {
		k := Kind(strings.TrimSpace(n))
		if !slices.Contains(Kinds, k) {
			return nil, fmt.Errorf("boundary kind %q is unknown: use kernel, cpus or version", n)
		}
		out = append(out, k)
	}
	return out, nil
}

// Boundary is a change of machine or vnetlab between run Before-1 and run
// Before.
type Boundary struct {
	Before  int
	Kinds   []Kind
	Changes []string // "kernel 6.1.0 -> 6.18.0", one per kind
	// Crossed: every kind is one detection was allowed to run across
	// (Options.Across); otherwise detection stops at it.
	Crossed bool
}

// String is "kernel 6.1.0 -> 6.18.0, version a -> b".
func (b Boundary) String() string { return strings.Join(b.Changes, ", ") }

// boundaries compares each run's machine and vnetlab with the run before.
func boundaries(runs []Run, across []Kind) []Boundary {
	var out []Boundary
	for i := 1; i < len(runs); i++ {
		a, b := runs[i-1].Data.Metadata, runs[i].Data.Metadata
		bd := Boundary{Before: i, Crossed: true}
		diff := func(k Kind, x, y string) {
			if x != y {
				bd.Kinds = append(bd.Kinds, k)
				bd.Changes = append(bd.Changes, fmt.Sprintf("%s %s -> %s", k, x, y))
				if !slices.Contains(across, k) {
					bd.Crossed = false
				}
			}
		}
		diff(KernelChanged, a.Kernel, b.Kernel)
		diff(CPUsChanged, strconv.Itoa(a.CPUs), strconv.Itoa(b.CPUs))
		diff(VersionChanged, a.Vnetlab, b.Vnetlab)
		if len(bd.Kinds) > 0 {
			out = append(out, bd)
		}
	}
	return out
}

// epochs splits run indices 0..n at the boundaries detection may not
// cross: each epoch is [start, end) of run indices.
func (h *History) epochs() [][2]int {
	var out [][2]int
	start := 0
	for _, b := range h.Boundaries {
		if !b.Crossed {
			out = append(out, [2]int{start, b.Before})
			start = b.Before
		}
	}
	return append(out, [2]int{start, len(h.Runs)})
}
