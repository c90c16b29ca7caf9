package runner

import (
	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/results"
)

// The one boundary between the measuring packages and the results file:
// what an engine and the knobs produce in their own types becomes
// internal/results' types here (the profiler, the packet counter
// and the lab knobs produce the file's types themselves: profile.Summarize's results.Profile,
// pktstat.Prove's results.Packets, each lab knob's results.KnobProof), so that a field renamed in any of them never changes the file's
// format (results.TestSchemaGolden pins that format). Where the two types have the
// same fields the conversion is Go's own, so that a field added on one side
// only fails to compile here.

// resultOf is an engine's result as a sample records it.
func resultOf(r engine.Result) results.Result { return results.Result(r) }

// knobsOf is the knobs set for every cell as the file records them, by
// name (unset ones, and the default rate, max, left out).
func knobsOf(s knob.Settings) map[string]string {
	out := map[string]string{}
	for _, k := range knob.All {
		if v := k.Value(s); v != "" && v != "0" && !(k.Name == knob.Rate && v == knob.Unlimited) {
			out[string(k.Name)] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// sweepOf is the run's sweep as the file records it (nil without one).
func sweepOf(s knob.Sweep) *results.Sweep {
	if len(s.Axes) == 0 {
		return nil
	}
	out := &results.Sweep{Cross: s.Cross}
	for _, a := range s.Axes {
		ra := results.Axis{Values: a.Values}
		for _, k := range a.Knobs {
			ra.Knobs = append(ra.Knobs, string(k))
		}
		out.Axes = append(out.Axes, ra)
	}
	return out
}
