package runner

import (
	"github.com/vnetlab/vnetlab/internal/measure/profile"
	"github.com/vnetlab/vnetlab/internal/results"
)

// ProfileOf is a cell's profile summary as the file records it (nil: not
// profiled); its files are the cell's to add (filesOf). Exported for the
// presenting packages' tests that summarise crafted stacks as a run would.
func ProfileOf(s *profile.Summary) *results.Profile {
	if s == nil {
		return nil
	}
	out := &results.Profile{Hz: s.Hz, CPUs: s.CPUs, Samples: s.Samples, DataPath: s.DataPath, WallSec: s.WallSec,
		Unit: s.Unit, Units: s.Units, DataPathUS: s.DataPathUS, Lost: s.Lost}
	for _, c := range s.Stages {
		out.Stages = append(out.Stages, results.StageCost(c))
	}
	for _, f := range s.Functions {
		out.Functions = append(out.Functions, results.FunctionCost(f))
	}
	out.Events = eventsOf(s.Events)
	out.Drops = eventsOf(s.Drops)
	return out
}

// eventsOf are a summary's event rates as the file records them.
func eventsOf(es []profile.EventRate) []results.EventRate {
	var out []results.EventRate
	for _, e := range es {
		out = append(out, results.EventRate(e))
	}
	return out
}

// filesOf are a cell's profile files as the file records them.
func filesOf(f profile.Files) *results.ProfileFiles {
	out := results.ProfileFiles(f)
	return &out
}
