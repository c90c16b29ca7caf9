package knob

import (
	"testing"
)

// Every knob says where its value lives (an engine or cluster knob: one
// field of Settings, its own; a lab knob: Settings.Lab, with how it is
// applied and proven), how its flag is helped, and reads back what it set:
// a knob registered without them fails here, not at a run.
func TestEveryKnobHasItsField(t *testing.T) {
	var s Settings
	seen := map[any]Name{}
	for _, k := range All {
		ip, sp := k.IntField(&s), k.StringField(&s)
		switch {
		case k.Scope == Lab && (ip != nil || sp != nil || k.Applier == nil):
			t.Errorf("knob %s: a lab knob has no field, and an Applier", k.Name)
		case k.Scope != Lab && (ip == nil) == (sp == nil):
			t.Fatalf("knob %s: give it exactly one of intField, stringField", k.Name)
		case k.Scope != Lab:
			var p any = ip
			if ip == nil {
				p = sp
			}
			if prev, dup := seen[p]; dup {
				t.Errorf("knobs %s and %s share a field", prev, k.Name)
			}
			seen[p] = k.Name
			if k.Whole != (ip != nil) {
				t.Errorf("knob %s: Whole is %v, its field another type", k.Name, k.Whole)
			}
		}
		if k.Help == "" {
			t.Errorf("knob %s: no help", k.Name)
		}
		c, err := k.Canonical(k.Example)
		if err != nil || c != k.Example {
			t.Fatalf("knob %s: its example %q is not a canonical value (%q, %v)", k.Name, k.Example, c, err)
		}
		var one Settings
		k.Set(&one, c)
		if got := k.Value(one); got != c {
			t.Errorf("knob %s: set %q, reads %q", k.Name, c, got)
		}
		if err := k.Check(one); err != nil {
			t.Errorf("knob %s: its example refused: %v", k.Name, err)
		}
		if k.Scope == Lab {
			k.Set(&one, Default)
			if one != (Settings{}) {
				t.Errorf("knob %s: default leaves %+v, not the zero value", k.Name, one)
			}
		}
	}
}

// Lab values are one canonical string whatever order they were set in,
// so that equal settings share a lab.
func TestValuesCanonical(t *testing.T) {
	a := Values("").With(Offload, "gro:off").With(MTU, "9000").With(GSO, "65536")
	b := Values("").With(GSO, "65536").With(MTU, "9000").With(Offload, "gro:off")
	if a != b || a != "mtu=9000,gso=65536,offload=gro:off" {
		t.Errorf("%q and %q", a, b)
	}
	if c := a.With(MTU, Default).With(GSO, "0"); c != "offload=gro:off" {
		t.Errorf("unset: %q", c)
	}
	if err := Values("colour=red").Check(); err == nil {
		t.Error("a name no lab knob has passes")
	}
}

// A point sets each of its knobs; plain values are checked in each knob's
// words, the first wrong one in All's order.
func TestSettingsWithPointAndCheck(t *testing.T) {
	s := Settings{Streams: 1}.WithPoint(Point{{Axis: "gso+gro", Value: "185000"}, {Axis: "offload", Value: Default}, {Axis: "load", Value: "4"}})
	if want := (Settings{Streams: 1, Load: 4, Lab: "gso=185000,gro=185000"}); s != want {
		t.Errorf("at the point: %+v, want %+v", s, want)
	}
	for _, c := range []struct {
		s    Settings
		want string
	}{
		{Settings{}, ""},
		{Settings{Streams: 200}, "--streams 200: use 1 to 128"},
		{Settings{Size: -1}, "--size -1: use 1 to 1048576 bytes (0: each engine's default)"},
		{Settings{Lab: "mtu=70000"}, "--mtu: mtu 70000 is above 65535, the largest MTU Linux allows (ETH_MAX_MTU)"},
		{Settings{Lab: "offload=gro:maybe"}, `--offload: offload "gro:maybe": gro must be on or off, not "maybe"`},
		{Settings{Load: 99}, "--load: load 99 is above the maximum 64"},
	} {
		err := c.s.CheckRanges()
		if got := ""; err != nil {
			got = err.Error()
			if got != c.want {
				t.Errorf("%+v: %q, want %q", c.s, got, c.want)
			}
		} else if c.want != "" {
			t.Errorf("%+v: accepted, want %q", c.s, c.want)
		}
	}
	if err := (Sweep{Axes: []Axis{{Knobs: []Name{"colour"}, Values: []string{"1"}}}}).Check(); err == nil {
		t.Error("a sweep of an unknown knob passes its check")
	}
}
