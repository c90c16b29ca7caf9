package results

import "strings"

// Sweep is every swept axis of a run (Settings.Sweep), as the file records
// it; the runner converts internal/measure/knob's into it. Each cell's Point names
// its value on every axis, in the axes' order.
type Sweep struct {
	Axes []Axis `json:"axes"`
	// Cross: every combination of the axes' values was measured;
	// otherwise one axis varied at a time, the others at their base.
	Cross bool `json:"cross,omitempty"`
}

// Axis is one swept dimension: its knobs (several take the same value
// together: gso+gro) and its values, the first being its base.
type Axis struct {
	Knobs  []string `json:"knobs"`
	Values []string `json:"values"`
}

// Key is the axis as a point writes it: "streams", "gso+gro".
func (a Axis) Key() string { return strings.Join(a.Knobs, "+") }

// Base is the axis's first value.
func (a Axis) Base() string { return a.Values[0] }

// Varies is the index of the one axis whose value (values: a point's, in
// the axes' order) is off its base: -1 when every axis is at its base, -2
// when several are off theirs (a crossed sweep).
func (s Sweep) Varies(values []string) int {
	at := -1
	for i, a := range s.Axes {
		if i < len(values) && values[i] != a.Base() {
			if at >= 0 {
				return -2
			}
			at = i
		}
	}
	return at
}
