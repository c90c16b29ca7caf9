package knob

import (
	"strconv"
	"strings"

	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// Settings are the knobs' values for every cell of a run (runner.Spec
// embeds it): the engine's (Streams, Size, Load, Rate) and the links' (Links).
// A zero value leaves its knob unset. Each knob of All says where its
// value lives here (its field), so setting, reading, checking and binding
// a flag go through the registry: a new knob is its entry in All and its
// field here.
type Settings struct {
	Streams int
	Size    int
	Links   Links
	Load    int
	// Rate is the offered rate (Unlimited, max, by default): rr/crr
	// requests per second, an open loop; UDP streams bits per second.
	Rate string
	// Policy is the lab's generated NetworkPolicies (the policy knobs).
	Policy PolicySet
}

// PolicySet is what the policy knobs ask of a lab: Policies generated
// policies and IPBlocks address blocks of one more, each selecting the
// measured server without matching its flow (labpolicy.BenchSet).
type PolicySet struct {
	Policies, IPBlocks int
}

// IsZero says no policy knob is set.
func (p PolicySet) IsZero() bool { return p == PolicySet{} }

// String is the set as flags spell it: "policies=1000,ipblocks=100".
func (p PolicySet) String() string {
	var out []string
	for _, k := range All {
		if v := k.Value(Settings{Policy: p}); k.Policy && v != "0" {
			out = append(out, string(k.Name)+"="+v)
		}
	}
	return strings.Join(out, ",")
}

// Set puts value v of k into s: canonical (Canonical), or Default, which
// leaves a links' knob as the mode built it (zero).
func (k Knob) Set(s *Settings, v string) {
	if k.Links && v == Default {
		v = ""
	}
	if k.intField != nil {
		*k.intField(s) = Int(v)
		return
	}
	*k.stringField(s) = v
}

// Parse sets s's value of k from text v (a scenario key's), refusing a
// value that is not a number where k takes one, or that Check refuses, as
// a field error naming its key; s is left as it was then.
func (k Knob) Parse(s *Settings, v string) error {
	if k.intField != nil {
		if _, err := strconv.Atoi(v); err != nil {
			return field.Errorf(string(k.Name), "{%s} %q is not a whole number", k.Name, v)
		}
	}
	next := *s
	k.Set(&next, v)
	if err := k.Check(next); err != nil {
		return err
	}
	*s = next
	return nil
}

// Value is s's value of k as flags, keys and points spell it ("0" or "":
// not set).
func (k Knob) Value(s Settings) string {
	if k.intField != nil {
		return strconv.Itoa(*k.intField(&s))
	}
	return *k.stringField(&s)
}

// IntField is where a numeric knob's value lives in s (nil: k takes a
// string, StringField); a flag binds to it.
func (k Knob) IntField(s *Settings) *int {
	if k.intField == nil {
		return nil
	}
	return k.intField(s)
}

// StringField is where a knob given as text lives in s (nil: k is
// numeric, IntField).
func (k Knob) StringField(s *Settings) *string {
	if k.stringField == nil {
		return nil
	}
	return k.stringField(s)
}

// Check refuses s's plain value of k (a flag or key, not a sweep) out of
// its range, as a field error naming its key; 0 or "" is not set.
func (k Knob) Check(s Settings) error {
	if k.check != nil {
		return k.check(k.Value(s))
	}
	if err := CheckValue(k.Name, k.Value(s)); err != nil {
		return field.Errorf(string(k.Name), "{%s}: %v", k.Name, err)
	}
	return nil
}

// CheckRanges refuses the first knob out of its range, in All's order
// (a name of its own: Settings is embedded, as in runner.Spec).
func (s Settings) CheckRanges() error {
	for _, k := range All {
		if err := k.Check(s); err != nil {
			return err
		}
	}
	return nil
}

// WithPoint is s with point p's values set (a sweep's point: its knobs were
// checked when the sweep was, Sweep.Check; a name no knob has sets nothing).
func (s Settings) WithPoint(p Point) Settings {
	for _, st := range p.Settings() {
		if k, err := Get(string(st.Knob)); err == nil {
			k.Set(&s, st.Value)
		}
	}
	return s
}

// countMax refuses a count of k outside 0..hi (0: the engines' default)
// in its own words (unit: "" or " bytes", zero what 0 means).
func countMax(n Name, hi int, unit, zero string) func(string) error {
	return func(value string) error {
		if v := Int(value); v < 0 || v > hi {
			return field.Errorf(string(n), "{%s} %d: use 1 to %d%s%s", n, v, hi, unit, zero)
		}
		return nil
	}
}
