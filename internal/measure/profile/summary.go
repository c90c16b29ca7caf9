package profile

import "sort"

// A summary keeps the TopFunctions functions with the most self samples
// and every function on the stack in at least MinInclusiveShare of the data
// path's samples: a function absent from a summary was on fewer stacks
// than that (explain says so).
const (
	TopFunctions      = 40
	MinInclusiveShare = 0.002
)

// Summary is a cell's profile summarised: its samples attributed to
// stages and functions, and its data-path events, per unit of work. The
// runner converts it into the results file's type
// (internal/runner/filing_profile.go).
type Summary struct {
	Hz       int     // samples per second per CPU
	CPUs     int     // CPUs sampled
	Samples  uint64  // every sample of the windows
	DataPath uint64  // samples charged to the data path (not idle, not other processes)
	WallSec  float64 // length of the windows, summed
	Unit     string  // "transaction" or "MB"
	Units    float64 // transactions completed or MB moved in the windows
	// DataPathUS is the data path's CPU time per unit (µs), the sum of the
	// net and task stages.
	DataPathUS float64
	Stages     []StageCost
	Functions  []FunctionCost
	Events     []EventRate
	Drops      []EventRate
	Lost       uint64
}

// StageCost is one stage's share.
type StageCost struct {
	Stage   string
	Name    string
	Kind    string // net, task (the data path), idle, overhead (the profiler); empty for "other"
	Samples uint64
	US      float64 // µs per unit
	Share   float64 // of the data path's samples (0 for idle and other)
}

// FunctionCost is one kernel function over the data path's samples.
type FunctionCost struct {
	Name        string
	Stage       string // the stage its name is attributed to
	Self        uint64 // samples with it as the leaf
	Inclusive   uint64 // samples with it anywhere in the stack
	SelfUS      float64
	InclusiveUS float64
}

// EventRate is a tracepoint's count over the windows and per unit.
type EventRate struct {
	Name    string
	Count   uint64
	PerUnit float64
}

// Summarize attributes p's samples (the profiler's own Profile) to stages
// and functions and divides by the work done: units of unit
// ("transaction" or "MB").
func Summarize(p *Profile, r *Rules, units float64, unit string) *Summary {
	s := &Summary{Hz: p.Hz, CPUs: p.CPUs, WallSec: p.WallSec, Unit: unit, Units: units, Lost: p.Lost}
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
		c := StageCost{Stage: id, Name: r.Name(id), Kind: r.Kind(id), Samples: n, US: perUnitUS(n)}
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
		f := FunctionCost{Name: name, Self: self[name], Inclusive: incl[name],
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
			s.Events = append(s.Events, EventRate{Name: name, Count: n, PerUnit: perUnit(n)})
		}
	}
	for _, name := range sortedKeys(p.Drops) {
		s.Drops = append(s.Drops, EventRate{Name: name, Count: p.Drops[name], PerUnit: perUnit(p.Drops[name])})
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
