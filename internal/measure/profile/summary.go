package profile

import (
	"sort"

	"github.com/vnetlab/vnetlab/internal/results"
)

// A summary keeps the TopFunctions functions with the most self samples
// and every function on the stack in at least MinInclusiveShare of the data
// path's samples: a function absent from a summary was on fewer stacks
// than that (explain says so).
const (
	TopFunctions      = 40
	MinInclusiveShare = 0.002
)

// Summarize attributes p's samples (the profiler's own Profile) to stages and functions and divides by
// the work done: the cell's profile as the results file records it to stages and functions and divides by
// the work done: units of unit ("transaction" or "MB").
func Summarize(p *Profile, r *Rules, units float64, unit string) *results.Profile {
	s := &results.Profile{Hz: p.Hz, CPUs: p.CPUs, WallSec: p.WallSec, Unit: unit, Units: units, Lost: p.Lost}
	perUnitUS := func(n uint64) float64 {
		if units <= 0 || p.Hz == 0 {
			return 0
		}
		return float64(n) * 1e6 / float64(p.Hz) / units
	}
	perUnit := func(n uint64) float64 {
		if units <= 0 {
			return 0
		}
		return float64(n) / units
	}
	byStage := map[string]uint64{}
	self := map[string]uint64{}
	incl := map[string]uint64{}
	for _, st := range p.Stacks {
		s.Samples += st.Count
		id := r.Attribute(st)
		byStage[id] += st.Count
		kind := r.Kind(id)
		if !Counted(kind) {
			continue
		}
		s.DataPath += st.Count
		names := FunctionFrames(st)
		if len(names) == 0 {
			continue
		}
		self[names[len(names)-1]] += st.Count
		seen := map[string]bool{}
		for _, f := range names {
			if !seen[f] {
				seen[f] = true
				incl[f] += st.Count
			}
		}
	}
	for _, id := range r.Order() {
		n := byStage[id]
		if n == 0 {
			continue
		}
		c := results.StageCost{Stage: id, Name: r.Name(id), Kind: r.Kind(id), Samples: n, US: perUnitUS(n)}
		if Counted(c.Kind) {
			c.Share = float64(n) / float64(s.DataPath)
			s.DataPathUS += c.US
		}
		s.Stages = append(s.Stages, c)
	}
	keep := map[string]bool{}
	for _, name := range topKeys(self, TopFunctions) {
		keep[name] = true
	}
	for name, n := range incl {
		if float64(n) >= MinInclusiveShare*float64(s.DataPath) {
			keep[name] = true
		}
	}
	for name := range keep {
		f := results.FunctionCost{Name: name, Self: self[name], Inclusive: incl[name],
			SelfUS: perUnitUS(self[name]), InclusiveUS: perUnitUS(incl[name])}
		if st := r.match(name); st >= 0 {
			f.Stage = r.Stages[st].ID
		}
		s.Functions = append(s.Functions, f)
	}
	sort.Slice(s.Functions, func(i, j int) bool {
		a, b := s.Functions[i], s.Functions[j]
		if a.Self != b.Self {
			return a.Self > b.Self
		}
		if a.Inclusive != b.Inclusive {
			return a.Inclusive > b.Inclusive
		}
		return a.Name < b.Name
	})
	for _, name := range eventNames {
		if n, ok := p.Events[name]; ok {
			s.Events = append(s.Events, results.EventRate{Name: name, Count: n, PerUnit: perUnit(n)})
		}
	}
	for _, name := range sortedKeys(p.Drops) {
		s.Drops = append(s.Drops, results.EventRate{Name: name, Count: p.Drops[name], PerUnit: perUnit(p.Drops[name])})
	}
	return s
}

// FunctionFrames is a stack's frames for function statistics: the user part
// named by its process ("[user iperf3@lab]").
func FunctionFrames(st Stack) []string {
	out := make([]string, 0, len(st.Frames))
	for _, f := range st.Frames {
		if f == UserFrame {
			f = "[user " + st.Process() + "]"
		}
		out = append(out, f)
	}
	return out
}

func topKeys(m map[string]uint64, n int) []string {
	keys := sortedKeys(m)
	sort.SliceStable(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	if len(keys) > n {
		keys = keys[:n]
	}
	return keys
}

func sortedKeys(m map[string]uint64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
