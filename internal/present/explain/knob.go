package explain

// A knob's effect (explain --knob): each mode's cell at a swept
// value against the same mode's cell at the axis's base value, then why
// one mode gains more than another, from the stages whose CPU per unit
// moved differently.

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/platform/labpolicy"
	"github.com/vnetlab/vnetlab/internal/results"
)

// KnobPairs picks, for axis (a swept knob, "mtu" or "gso+gro") and each of
// its values but the base (only value, when given), each mode's cell
// there (B) against the same mode's cell at the base (A), the other axes
// at their base; only the given modes when modes is set, and only test.
func KnobPairs(f *results.File, axis, value, test string, modes []string) ([]Pair, error) {
	sw := f.Metadata.Settings.Sweep
	if sw == nil {
		return nil, fmt.Errorf("the results file has no sweep: --knob explains a run with --sweep")
	}
	ai := slices.IndexFunc(sw.Axes, func(a results.Axis) bool { return a.Key() == axis })
	if ai < 0 {
		var keys []string
		for _, a := range sw.Axes {
			keys = append(keys, a.Key())
		}
		return nil, fmt.Errorf("the run did not sweep %q (it swept %s)", axis, strings.Join(keys, ", "))
	}
	a := sw.Axes[ai]
	values := a.Values[1:]
	if value != "" {
		k, _ := knob.Get(string(a.Knobs[0]))
		v, err := k.Canonical(value)
		if err != nil || !slices.Contains(values, v) {
			return nil, fmt.Errorf("%s=%s is not a swept value other than the base %s (values: %s)", axis, value, a.Base(), strings.Join(a.Values, ", "))
		}
		values = []string{v}
	}
	at := map[string]*results.Cell{} // lineOf key + value -> cell
	for _, ac := range axisCells(f, *sw, ai, test, modes) {
		at[sameLine(ac.cell)+"|"+ac.value] = ac.cell
	}
	var pairs []Pair
	for _, c := range f.Cells {
		p, _ := knob.ParsePoint(c.Point)
		if len(p) != len(sw.Axes) || !slices.Contains(values, p[ai].Value) || at[sameLine(c)+"|"+p[ai].Value] != c {
			continue
		}
		if base := at[sameLine(c)+"|"+a.Base()]; base != nil {
			pairs = append(pairs, Pair{A: base, B: c})
		}
	}
	if len(pairs) == 0 {
		return nil, fmt.Errorf("no cell at %s=%s has a cell at the base %s=%s to compare with (the test, or modes, left none)", axis, strings.Join(values, "|"), axis, a.Base())
	}
	return pairs, nil
}

// lineName names a cell's line of a sweep: its mode, and its path with
// its providers when it is not the plain pod path ("bridge pod:iptables").
func lineName(c *results.Cell) string {
	id := c.ID()
	id.Point = ""
	if s := id.Series(); s != "pod" {
		return c.Mode + " " + s
	}
	return c.Mode
}

// axisCell is a cell on a swept axis, and its value there.
type axisCell struct {
	cell  *results.Cell
	value string
}

// axisCells are f's cells at the base or moving axis ai only (of test
// and modes, when set), with their value on it.
func axisCells(f *results.File, sw results.Sweep, ai int, test string, modes []string) []axisCell {
	var out []axisCell
	for _, c := range f.Cells {
		p, err := knob.ParsePoint(c.Point)
		if err != nil || len(p) != len(sw.Axes) || (test != "" && c.Test != test) || (len(modes) > 0 && !slices.Contains(modes, c.Mode)) {
			continue
		}
		if v := sw.Varies(p.Values()); v != -1 && v != ai {
			continue
		}
		out = append(out, axisCell{c, p[ai].Value})
	}
	return out
}

// sameLine is a cell's identity without its point.
func sameLine(c *results.Cell) string {
	id := c.ID()
	id.Point = ""
	return id.Key()
}

// KnobSentence says why effect b (a mode's gain from the knob) differs
// from effect a (another mode's, same test and values): each gain, each
// data path's change of CPU per unit with its largest stages, and the
// stage whose change differs most between the two.
func KnobSentence(axis string, a, b *Explanation) string {
	from, to := valueOf(a.A.Cell, axis), valueOf(a.B.Cell, axis)
	ga, gb := gain(a), gain(b)
	more, less := b, a
	if gb < ga {
		more, less = a, b
	}
	s := fmt.Sprintf("From %s=%s to %s=%s, %s %s %.2fx (%s → %s %s) and %s %.2fx (%s → %s)",
		axis, from, axis, to, a.B.Cell.Test+":", lineName(a.B.Cell), ga, num(a.RateA), num(a.RateB), a.RateUnit,
		lineName(b.B.Cell), gb, num(b.RateA), num(b.RateB))
	s += fmt.Sprintf("; per %s, %s's data path %s and %s's %s", a.Unit, lineName(a.B.Cell), cpuChange(a), lineName(b.B.Cell), cpuChange(b))
	if d, ok := divergentStage(more, less); ok {
		verb := "gains more"
		if ga <= 1 && gb <= 1 {
			verb = "loses less" // a cost axis (policies): both lose
		}
		s += fmt.Sprintf("; %s %s because its %s stage moves by %+.2f µs per %s against %+.2f µs for %s",
			lineName(more.B.Cell), verb, d.name, d.more, more.Unit, d.less, lineName(less.B.Cell))
	} else if math.Abs(ga-gb) > 0 {
		s += "; no stage's change differs between them beyond sampling noise"
	}
	return s + "."
}

func gain(e *Explanation) float64 {
	if e.RateA <= 0 {
		return 0
	}
	return e.RateB / e.RateA
}

func valueOf(c *results.Cell, axis string) string {
	p, _ := knob.ParsePoint(c.Point)
	for _, v := range p {
		if v.Axis == axis {
			return v.Value
		}
	}
	return "?"
}

// cpuChange is "costs 4.10 µs less (11.2 → 7.1 µs: -2.30 µs veth/backlog, ...)".
func cpuChange(e *Explanation) string {
	d := e.TotalB - e.TotalA
	verb := "more"
	if d < 0 {
		verb = "less"
	}
	s := fmt.Sprintf("costs %.2f µs %s (%.2f → %.2f µs", math.Abs(d), verb, e.TotalA, e.TotalB)
	var sig []StageDiff
	for _, st := range e.Stages {
		if st.Significant {
			sig = append(sig, st)
		}
	}
	sort.Slice(sig, func(i, j int) bool { return math.Abs(sig[i].Delta) > math.Abs(sig[j].Delta) })
	var parts []string
	for i, st := range sig {
		if i == 2 {
			break
		}
		parts = append(parts, fmt.Sprintf("%+.2f µs %s", st.Delta, st.Name))
	}
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, ", ")
	}
	return s + ")"
}

type divergence struct {
	name       string
	more, less float64
}

// divergentStage is the stage whose change differs most between the two
// effects, significant in at least one of them.
func divergentStage(more, less *Explanation) (divergence, bool) {
	var best divergence
	found := false
	for _, st := range more.Stages {
		var other StageDiff
		for _, o := range less.Stages {
			if o.Stage == st.Stage {
				other = o
			}
		}
		if !st.Significant && !other.Significant {
			continue
		}
		if d := math.Abs(st.Delta - other.Delta); !found || d > math.Abs(best.more-best.less) {
			best, found = divergence{name: st.Name, more: st.Delta, less: other.Delta}, true
		}
	}
	return best, found
}

// KnobEffects explains every pair of f (each mode's gain from the knob)
// and compares the first mode's effect with each other mode's at the same
// test and value: one sentence each. On a policy axis each explanation
// carries the enforcer's CPU (enforcerOf).
func KnobEffects(f *results.File, axis string, pairs []Pair) ([]*Explanation, []string, error) {
	cost := knob.IsPolicyAxis(axis)
	var all []*Explanation
	for _, p := range pairs {
		e, err := Compare(p.A, p.B)
		if err != nil {
			return nil, nil, err
		}
		if cost {
			e.Enforcer = enforcerOf(f, p)
		}
		all = append(all, e)
	}
	var sentences []string
	first := map[string]*Explanation{} // test|value -> the first mode's effect
	for _, e := range all {
		k := e.Test + "|" + e.B.Cell.Point
		if f, ok := first[k]; !ok {
			first[k] = e
		} else {
			sentences = append(sentences, KnobSentence(axis, f, e))
		}
	}
	return all, sentences, nil
}

// enforcerOf is the NetworkPolicy enforcer's CPU at both cells of p: the
// stages of the lab provider with its data path (a cluster cell's
// enforcer's, results.File.PolicyLabProviderOf); nil unless both cells
// are profiled.
func enforcerOf(f *results.File, p Pair) *EnforcerCPU {
	prov := f.PolicyLabProviderOf(p.B)
	stages, a, shareA, okA := labpolicy.EnforcerCPU(prov, p.A.Profile)
	_, b, shareB, okB := labpolicy.EnforcerCPU(prov, p.B.Profile)
	if !okA || !okB {
		return nil
	}
	return &EnforcerCPU{Provider: prov, Stages: stages, A: a, B: b, ShareA: shareA, ShareB: shareB}
}
