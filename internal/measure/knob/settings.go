package knob

import (
	"strconv"
	"strings"

	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// Settings are the knobs' values for every cell of a run (runner.Spec
// embeds it): the engine's (Streams, Size, Load, Rate), the lab's (Lab)
// and the cluster's (Policy). A zero value leaves its knob unset. Each
// knob of All says where its value lives here (an engine or cluster
// knob's field; a lab knob's is Lab, by its name), so setting, reading,
// checking and binding a flag go through the registry: a new lab knob is
// its file alone.
type Settings struct {
	Streams int
	Size    int
	// Lab are the lab knobs' values (a lab per distinct Lab).
	Lab  Values
	Load int
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

// policyKnob is a policy knob: scope Cluster, a count from 0 to most kept
// in the PolicySet's field.
func policyKnob(name Name, order, most int, example, help string, field func(*PolicySet) *int) Knob {
	return Knob{Name: name, Scope: Cluster, order: order, Whole: true, Example: example, canonical: intIn(name, 0, most, ""),
		Help: help, intField: func(s *Settings) *int { return field(&s.Policy) }}
}

// IsZero says no policy knob is set.
func (p PolicySet) IsZero() bool { return p == PolicySet{} }

// String is the set as flags spell it: "policies=1000,ipblocks=100".
func (p PolicySet) String() string {
	var out []string
	for _, k := range All {
		if v := k.Value(Settings{Policy: p}); k.Scope == Cluster && v != "0" {
			out = append(out, string(k.Name)+"="+v)
		}
	}
	return strings.Join(out, ",")
}

// Set puts value v of k into s: canonical (Canonical), or Default, which
// leaves a lab knob as the mode built it (unset).
func (k Knob) Set(s *Settings, v string) {
	if k.Scope == Lab {
		s.Lab = s.Lab.With(k.Name, v)
		return
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
	if k.Whole {
		if _, err := strconv.Atoi(v); err != nil {
			return field.Errorf(string(k.Name), "{%s} %q is not a whole number", k.Name, v)
		}
	}
	if err := k.fitsValues(v); err != nil {
		return err
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
	if k.Scope == Lab {
		if v := s.Lab.Get(k.Name); v != "" || !k.Whole {
			return v
		}
		return "0"
	}
	if k.intField != nil {
		return strconv.Itoa(*k.intField(&s))
	}
	return *k.stringField(&s)
}

// IntField is where a numeric engine or cluster knob's value lives in s
// (nil: k takes a string, StringField, or is a lab knob, Flag); a flag
// binds to it.
func (k Knob) IntField(s *Settings) *int {
	if k.intField == nil {
		return nil
	}
	return k.intField(s)
}

// StringField is where an engine or cluster knob given as text lives in
// s (nil: k is numeric, IntField, or a lab knob, Flag).
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

// Values are the lab knobs' values, canonical and in All's order, the
// unset ones left out: "mtu=9000,qdisc=fq" ("": none). Equal Values are
// the same setting of a lab (runner's labs are grouped by them).
type Values string

// Get is the value of knob n ("": not set).
func (l Values) Get(n Name) string {
	for _, st := range l.Settings() {
		if st.Knob == n {
			return st.Value
		}
	}
	return ""
}

// With is l with knob n at v; "", Default, or 0 for a whole-number knob
// leaves n unset.
func (l Values) With(n Name, v string) Values {
	k, err := Get(string(n))
	unset := v == "" || v == Default || (err == nil && k.Whole && v == "0")
	var out []string
	for _, o := range All {
		w := l.Get(o.Name)
		if o.Name == n {
			if w = v; unset {
				w = ""
			}
		}
		if w != "" {
			out = append(out, string(o.Name)+"="+w)
		}
	}
	return Values(strings.Join(out, ","))
}

// Settings are l's knobs and values.
func (l Values) Settings() []Setting {
	var out []Setting
	for _, item := range strings.Split(string(l), ",") {
		if n, v, ok := strings.Cut(item, "="); ok {
			out = append(out, Setting{Knob: Name(n), Value: v})
		}
	}
	return out
}

// fitsValues refuses a lab knob's value that Values cannot hold: its
// settings are "name=value" joined by ",", so a value has neither.
func (k Knob) fitsValues(v string) error {
	if k.Scope == Lab && strings.ContainsAny(v, ",=") {
		return field.Errorf(string(k.Name), "{%s} %q: a lab knob's value has no \",\" or \"=\" (example: %s)", k.Name, v, k.Example)
	}
	return nil
}

// IsZero says no lab knob is set.
func (l Values) IsZero() bool { return l == "" }

// String names the settings ("mtu=9000,gso=185000"; "" when none).
func (l Values) String() string { return string(l) }

// Check refuses a value out of its knob's range, or a name no lab knob
// has, as a field error naming the knob's key.
func (l Values) Check() error {
	for _, st := range l.Settings() {
		if !IsLinks(st.Knob) {
			return field.Errorf(string(st.Knob), "{%s}: not a lab knob (lab knobs: %s)", st.Knob, LinksNames())
		}
		k, _ := Get(string(st.Knob))
		if err := k.Check(Settings{Lab: l}); err != nil {
			return err
		}
	}
	return nil
}

// Flag is k's plain flag (--NAME) bound to s, for a lab knob (an engine or
// cluster knob binds its field: IntField, StringField): a pflag.Value
// whose type is int or string as the knob's values are.
func (k Knob) Flag(s *Settings) *LabFlag { return &LabFlag{k: k, s: s} }

// LabFlag is a lab knob's flag (Knob.Flag): its value is checked as the
// others' are, by Settings.CheckRanges, once every flag is read.
type LabFlag struct {
	k Knob
	s *Settings
}

// Set takes v as the knob's value (a whole number where the knob takes one).
func (f *LabFlag) Set(v string) error {
	if f.k.Whole {
		if _, err := strconv.Atoi(v); err != nil {
			return err
		}
	}
	if err := f.k.fitsValues(v); err != nil {
		return err
	}
	f.k.Set(f.s, v)
	return nil
}

// String is the value set ("" or 0: none).
func (f *LabFlag) String() string { return f.k.Value(*f.s) }

// Type names the value in --help, as an int or string flag's.
func (f *LabFlag) Type() string {
	if f.k.Whole {
		return "int"
	}
	return "string"
}
