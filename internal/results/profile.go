package results

// Profile is a cell's profile (Cell.Profile; profile in
// docs/results-json.md), converted by the runner from
// internal/measure/profile's Summary: CPU per unit of work by stage and by
// function, and data-path events per unit.
type Profile struct {
	Hz       int     `json:"hz"`                // samples per second per CPU
	CPUs     int     `json:"cpus"`              // CPUs sampled
	Samples  uint64  `json:"samples"`           // every sample of the windows
	DataPath uint64  `json:"data_path_samples"` // samples charged to the data path (not idle, not other processes)
	WallSec  float64 `json:"wall_s"`            // length of the windows, summed
	Unit     string  `json:"unit"`              // "transaction" or "MB"
	Units    float64 `json:"units"`             // transactions completed or MB moved in the windows
	// DataPathUS is the data path's CPU time per unit (µs), the sum of the
	// net and task stages.
	DataPathUS float64        `json:"data_path_us_per_unit"`
	Stages     []StageCost    `json:"stages"`
	Functions  []FunctionCost `json:"functions"`
	Events     []EventRate    `json:"events"`
	Drops      []EventRate    `json:"drops,omitempty"`
	Lost       uint64         `json:"samples_lost,omitempty"`
	// Files are the cell's stacks (pprof, folded, flame graph) in Dir
	// (run --profile-dir; relative to the results file's directory).
	Dir   string        `json:"dir,omitempty"`
	Files *ProfileFiles `json:"files,omitempty"`
}

// StageCost is one stage's share.
type StageCost struct {
	Stage   string  `json:"stage"`
	Name    string  `json:"name"`
	Kind    string  `json:"kind,omitempty"` // net, task (the data path), idle, overhead (the profiler); empty for "other"
	Samples uint64  `json:"samples"`
	US      float64 `json:"us_per_unit"`
	Share   float64 `json:"share"` // of the data path's samples (0 for idle and other)
}

// FunctionCost is one kernel function over the data path's samples.
type FunctionCost struct {
	Name        string  `json:"name"`
	Stage       string  `json:"stage,omitempty"` // the stage its name is attributed to
	Self        uint64  `json:"self"`            // samples with it as the leaf
	Inclusive   uint64  `json:"inclusive"`       // samples with it anywhere in the stack
	SelfUS      float64 `json:"self_us_per_unit"`
	InclusiveUS float64 `json:"inclusive_us_per_unit"`
}

// EventRate is a tracepoint's count over the windows and per unit.
type EventRate struct {
	Name    string  `json:"name"`
	Count   uint64  `json:"count"`
	PerUnit float64 `json:"per_unit"`
}

// ProfileFiles are the files written for one cell, relative to Profile.Dir.
type ProfileFiles struct {
	Pprof  string `json:"pprof"`
	Folded string `json:"folded"`
	Flame  string `json:"flamegraph"`
}

// Stage is the cost of one stage, zero when absent.
func (s *Profile) Stage(id string) StageCost {
	for _, c := range s.Stages {
		if c.Stage == id {
			return c
		}
	}
	return StageCost{Stage: id}
}

// Function is one function's cost, and whether the summary kept it.
func (s *Profile) Function(name string) (FunctionCost, bool) {
	for _, f := range s.Functions {
		if f.Name == name {
			return f, true
		}
	}
	return FunctionCost{Name: name}, false
}

// Event is one event's rate, zero when absent.
func (s *Profile) Event(name string) EventRate {
	for _, e := range s.Events {
		if e.Name == name {
			return e
		}
	}
	return EventRate{Name: name}
}
