package knob

import (
	"fmt"
	"slices"
	"strings"
)

// Axis is one swept dimension: a knob, or several knobs that take the same
// value together (gso+gro: BIG TCP on the sender and the receiver), and
// its values, canonical. The first value is the axis's base: with one axis
// at a time, the other axes are measured at their base.
type Axis struct {
	Knobs  []Name   `json:"knobs"`
	Values []string `json:"values"`
}

// Key is the axis as written: "streams", "gso+gro".
func (a Axis) Key() string {
	var s []string
	for _, k := range a.Knobs {
		s = append(s, string(k))
	}
	return strings.Join(s, "+")
}

// Base is the axis's first value.
func (a Axis) Base() string { return a.Values[0] }

// Links says whether the axis sets the lab's links (then each value needs a lab).
func (a Axis) Links() bool {
	for _, k := range a.Knobs {
		if IsLinks(k) {
			return true
		}
	}
	return false
}

// ParseAxis reads one axis: key names a knob or knobs joined by +
// ("gso+gro"), values its values (each checked, canonical, distinct).
func ParseAxis(key string, values []string) (Axis, error) {
	var a Axis
	var kind *Knob
	for _, n := range strings.Split(key, "+") {
		k, err := Get(strings.TrimSpace(n))
		if err != nil {
			return a, err
		}
		// Messages name the axis by its knobs' names (key may hold
		// spaces, a line break, around them).
		so := Axis{Knobs: append(slices.Clone(a.Knobs), k.Name)}.Key()
		if slices.Contains(a.Knobs, k.Name) {
			return a, fmt.Errorf("sweep %s names %s twice", so, k.Name)
		}
		if kind != nil && (k.Scope != kind.Scope || k.Scope == Lab && !(k.Whole && kind.Whole)) {
			return a, fmt.Errorf("sweep %s: knobs swept together take the same values (gso+gro); %s and %s do not", so, kind.Name, k.Name)
		}
		kind = &k
		a.Knobs = append(a.Knobs, k.Name)
	}
	key = a.Key()
	if len(values) == 0 {
		return a, fmt.Errorf("sweep %s has no values: give them as %s=V1,V2,...", key, key)
	}
	for _, v := range values {
		var canon string
		for _, n := range a.Knobs {
			k, _ := Get(string(n))
			c, err := k.Canonical(v)
			if err != nil {
				return a, fmt.Errorf("sweep %s: %w", key, err)
			}
			canon = c
		}
		if slices.Contains(a.Values, canon) {
			return a, fmt.Errorf("sweep %s lists %s twice", key, canon)
		}
		a.Values = append(a.Values, canon)
	}
	return a, nil
}

// ParseAxisFlag reads "KNOB=V1,V2,..." (--sweep). An offload value's
// features are joined by + there, since , separates the values.
func ParseAxisFlag(s string) (Axis, error) {
	key, vals, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(key) == "" {
		return Axis{}, fmt.Errorf("sweep %q: write KNOB=V1,V2,... (knobs: %s), e.g. streams=1,2,4,8", s, NameList())
	}
	var values []string
	for _, v := range strings.Split(vals, ",") {
		if v = strings.TrimSpace(v); v != "" {
			values = append(values, v)
		}
	}
	return ParseAxis(strings.TrimSpace(key), values)
}

// Sweep is every axis of a run.
type Sweep struct {
	Axes []Axis `json:"axes"`
	// Cross measures every combination of the axes' values; otherwise one
	// axis varies at a time, the others at their base (first) value.
	Cross bool `json:"cross,omitempty"`
}

// Check refuses a knob on two axes, and a name no knob has.
func (s Sweep) Check() error {
	seen := map[Name]string{}
	for _, a := range s.Axes {
		for _, k := range a.Knobs {
			if _, err := Get(string(k)); err != nil {
				return err
			}
			if prev, dup := seen[k]; dup {
				return fmt.Errorf("knob %s is swept twice (%s and %s): sweep each knob once", k, prev, a.Key())
			}
			seen[k] = a.Key()
		}
	}
	return nil
}

// Sweeps says whether knob n is on an axis.
func (s Sweep) Sweeps(n Name) bool {
	for _, a := range s.Axes {
		if slices.Contains(a.Knobs, n) {
			return true
		}
	}
	return false
}

// Value is one axis's value in a point.
type Value struct {
	Axis  string // Axis.Key
	Value string
}

// Point is one value per axis, in the axes' order: one cell coordinate.
// No axis: the single point "" (a run without a sweep).
type Point []Value

// String is the point as cells name it: "streams=4", "mtu=9000,gso+gro=65536".
func (p Point) String() string {
	var s []string
	for _, v := range p {
		s = append(s, v.Axis+"="+v.Value)
	}
	return strings.Join(s, ",")
}

// Values are the point's values, in its axes' order (results.Sweep.Varies).
func (p Point) Values() []string {
	v := make([]string, len(p))
	for i, x := range p {
		v[i] = x.Value
	}
	return v
}

// Get is the value the point gives knob n, and whether it gives one.
func (p Point) Get(n Name) (string, bool) {
	for _, v := range p {
		for _, k := range strings.Split(v.Axis, "+") {
			if Name(k) == n {
				return v.Value, true
			}
		}
	}
	return "", false
}

// Settings are the point's knob settings, one per knob.
func (p Point) Settings() []Setting {
	var out []Setting
	for _, v := range p {
		for _, k := range strings.Split(v.Axis, "+") {
			out = append(out, Setting{Knob: Name(k), Value: v.Value})
		}
	}
	return out
}

// Setting is one knob's value.
type Setting struct {
	Knob  Name
	Value string
}

// ParsePoint reads a point's String back ("" is the empty point).
func ParsePoint(s string) (Point, error) {
	if s == "" {
		return nil, nil
	}
	var p Point
	for _, item := range strings.Split(s, ",") {
		axis, v, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("point %q: %q is not AXIS=VALUE", s, item)
		}
		p = append(p, Value{Axis: axis, Value: v})
	}
	return p, nil
}

// Points are the sweep's points: every combination (Cross), or the base
// (every axis at its first value) and then each axis's other values in
// turn. No axis: one empty point.
func (s Sweep) Points() []Point {
	if len(s.Axes) == 0 {
		return []Point{nil}
	}
	base := make(Point, len(s.Axes))
	for i, a := range s.Axes {
		base[i] = Value{Axis: a.Key(), Value: a.Base()}
	}
	if s.Cross {
		out := []Point{nil}
		for _, a := range s.Axes {
			var next []Point
			for _, p := range out {
				for _, v := range a.Values {
					next = append(next, append(slices.Clone(p), Value{Axis: a.Key(), Value: v}))
				}
			}
			out = next
		}
		return out
	}
	out := []Point{base}
	for i, a := range s.Axes {
		for _, v := range a.Values[1:] {
			p := slices.Clone(base)
			p[i].Value = v
			out = append(out, p)
		}
	}
	return out
}

// Varies says which axis p moves away from the base (its index), -1 for
// the base itself, -2 when it moves several (a crossed point).
func (s Sweep) Varies(p Point) int {
	at := -1
	for i, a := range s.Axes {
		if i < len(p) && p[i].Value != a.Base() {
			if at >= 0 {
				return -2
			}
			at = i
		}
	}
	return at
}
