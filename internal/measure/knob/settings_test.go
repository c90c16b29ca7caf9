package knob

import (
	"testing"
)

// Every knob says where its value lives (one field of Settings, its own),
// how its flag is helped, and reads back what it set: a knob added to All
// without its field fails here, not at a run.
func TestEveryKnobHasItsField(t *testing.T) {
	var s Settings
	seen := map[any]Name{}
	for _, k := range All {
		ip, sp := k.IntField(&s), k.StringField(&s)
		if (ip == nil) == (sp == nil) {
			t.Fatalf("knob %s: give it exactly one of intField, stringField", k.Name)
		}
		var p any = ip
		if ip == nil {
			p = sp
		}
		if prev, dup := seen[p]; dup {
			t.Errorf("knobs %s and %s share a field", prev, k.Name)
		}
		seen[p] = k.Name
		if k.Help == "" {
			t.Errorf("knob %s: no help", k.Name)
		}
		var c string
		var err error
		for _, v := range []string{"9000", "64", "gro:off"} {
			if c, err = k.Canonical(v); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("knob %s: %v", k.Name, err)
		}
		var one Settings
		k.Set(&one, c)
		if got := k.Value(one); got != c {
			t.Errorf("knob %s: set %q, reads %q", k.Name, c, got)
		}
		if k.Links {
			k.Set(&one, Default)
			if one != (Settings{}) {
				t.Errorf("knob %s: default leaves %+v, not the zero value", k.Name, one)
			}
		}
	}
}

// A point sets each of its knobs; plain values are checked in each knob's
// words, the first wrong one in All's order.
func TestSettingsWithPointAndCheck(t *testing.T) {
	s := Settings{Streams: 1}.WithPoint(Point{{Axis: "gso+gro", Value: "185000"}, {Axis: "offload", Value: Default}, {Axis: "load", Value: "4"}})
	if want := (Settings{Streams: 1, Load: 4, Links: Links{GSO: 185000, GRO: 185000}}); s != want {
		t.Errorf("at the point: %+v, want %+v", s, want)
	}
	if s.Links.String() != "gso=185000,gro=185000" {
		t.Errorf("links %q", s.Links.String())
	}
	for _, c := range []struct {
		s    Settings
		want string
	}{
		{Settings{}, ""},
		{Settings{Streams: 200}, "--streams 200: use 1 to 128"},
		{Settings{Size: -1}, "--size -1: use 1 to 1048576 bytes (0: each engine's default)"},
		{Settings{Links: Links{MTU: 70000}}, "--mtu: mtu 70000 is above 65535, the largest MTU Linux allows (ETH_MAX_MTU)"},
		{Settings{Links: Links{Offload: "gro:maybe"}}, `--offload: offload "gro:maybe": gro must be on or off, not "maybe"`},
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
