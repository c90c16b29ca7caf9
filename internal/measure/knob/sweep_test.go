package knob

import (
	"slices"
	"testing"
)

func axis(t *testing.T, flag string) Axis {
	t.Helper()
	a, err := ParseAxisFlag(flag)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func names(ps []Point) []string {
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	return s
}

// One axis at a time: the base, then each axis's other values with the
// rest at their base; crossed: every combination. Values are canonical
// ("008" is 8, "default" stays) and a point reads back as written.
func TestSweepPoints(t *testing.T) {
	s := Sweep{Axes: []Axis{axis(t, "streams=1,2,008"), axis(t, "gso+gro=default,185000")}}
	want := []string{"streams=1,gso+gro=default", "streams=2,gso+gro=default", "streams=8,gso+gro=default", "streams=1,gso+gro=185000"}
	if got := names(s.Points()); !slices.Equal(got, want) {
		t.Errorf("points %v, want %v", got, want)
	}
	s.Cross = true
	if got := s.Points(); len(got) != 6 || s.Varies(got[5]) != -2 {
		t.Errorf("crossed: %v", names(got))
	}
	p, err := ParsePoint("streams=8,gso+gro=185000")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := p.Get(GRO); !ok || v != "185000" || len(p.Settings()) != 3 {
		t.Errorf("gro of %v: %q %v, settings %v", p, v, ok, p.Settings())
	}
	if got := names((Sweep{}).Points()); !slices.Equal(got, []string{""}) {
		t.Errorf("no sweep: %v, want the one empty point", got)
	}
	if _, err := ParseAxisFlag("streams=default"); err == nil {
		t.Error("streams=default accepted: default is a links knob's value only")
	}
}

// A policy axis is one whose knobs are policy knobs, alone or swept
// together; any other knob's axis, or a name that is no knob, is not.
func TestIsPolicyAxis(t *testing.T) {
	for key, want := range map[string]bool{"policies": true, "ipblocks": true, "policies+ipblocks": true, "streams": false, "gso+gro": false, "nope": false} {
		if got := IsPolicyAxis(key); got != want {
			t.Errorf("IsPolicyAxis(%q) = %v, want %v", key, got, want)
		}
	}
}
