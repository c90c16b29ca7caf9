package runner

import (
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/results"
)

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
