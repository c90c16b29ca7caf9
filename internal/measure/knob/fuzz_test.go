package knob

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/vocab/field/fieldtest"
)

// --sweep KNOB=V1,V2,...: an axis read has known knobs, canonical and
// distinct values, and written back (as a flag, and as its points) reads
// the same; a refused one is one line.
func FuzzParseAxisFlag(f *testing.F) {
	for _, s := range []string{"streams=1,2,4,8", "streams=1,2,008", "gso+gro=default,185000", "mtu=default,9000", "size=1,1024,65536",
		"offload=gro:off+tso:off,gro:on", "rate=10%,50%,1000", "load=0,1", "policies=0,100,10000", "ipblocks=0,16",
		"streams=1,1", "gso+mtu=1500", "mtu+offload=default", "streams+streams=1", "=1", "streams=", "warp=9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAxisFlag(s)
		if err != nil {
			fieldtest.OneLine(t, err)
			return
		}
		if len(a.Knobs) == 0 || len(a.Values) == 0 {
			t.Fatalf("%q: %+v", s, a)
		}
		for i, v := range a.Values {
			if slices.Contains(a.Values[:i], v) {
				t.Fatalf("%q: %s twice in %v", s, v, a.Values)
			}
			for _, n := range a.Knobs {
				k, err := Get(string(n))
				if err != nil {
					t.Fatal(err)
				}
				if c, err := k.Canonical(v); err != nil || c != v {
					t.Fatalf("%q: value %q of %s is not canonical (%q, %v)", s, v, n, c, err)
				}
			}
		}
		if err := (Sweep{Axes: []Axis{a}}).Check(); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		written := a.Key() + "=" + strings.Join(a.Values, ",")
		b, err := ParseAxisFlag(written)
		if err != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("%q -> %q -> %+v, %v (want %+v)", s, written, b, err, a)
		}
		for _, p := range (Sweep{Axes: []Axis{a}}).Points() {
			q, err := ParsePoint(p.String())
			if err != nil || !reflect.DeepEqual(p, q) {
				t.Fatalf("point %v -> %q -> %v, %v", p, p.String(), q, err)
			}
		}
	})
}

// A point as results name their cells: read back as written.
func FuzzParsePoint(f *testing.F) {
	for _, s := range []string{"", "streams=4", "mtu=9000,gso+gro=65536", "offload=gro:off+tso:off", "a=b=c", "streams", ",", "x=,=y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePoint(s)
		if err != nil {
			fieldtest.OneLine(t, err)
			return
		}
		if p.String() != s {
			t.Fatalf("%q read as %v, written back as %q", s, p, p.String())
		}
	})
}

// One knob's value as a flag or a scenario key sets it: refused with one
// line and the settings untouched, or set so that the value read back
// from the settings sets the same settings again.
func FuzzKnobValue(f *testing.F) {
	for _, k := range All {
		for _, v := range []string{"0", "1", "8", "9000", "default", "65536", "gro:off+tso:off", "10%", "1000", "-1", "x", " 4 ", "99999999999999999999"} {
			f.Add(string(k.Name), v)
		}
	}
	f.Fuzz(func(t *testing.T, name, v string) {
		if err := CheckValue(Name(name), v); err != nil {
			fieldtest.OneLine(t, err)
		}
		k, err := Get(name)
		if err != nil {
			return
		}
		if c, err := k.Canonical(v); err == nil {
			if c2, err := k.Canonical(c); err != nil || c2 != c {
				t.Fatalf("%s: %q -> %q -> %q, %v", name, v, c, c2, err)
			}
		} else {
			fieldtest.OneLine(t, err)
		}
		var s Settings
		other := All[(index(k.Name)+1)%len(All)]
		other.Set(&s, "1")
		before := s
		if err := k.Parse(&s, v); err != nil {
			fieldtest.OneLine(t, err)
			if !reflect.DeepEqual(s, before) {
				t.Fatalf("%s: %q refused (%v) and yet set: %+v", name, v, err, s)
			}
			return
		}
		s2 := before
		if err := k.Parse(&s2, k.Value(s)); err != nil || !reflect.DeepEqual(s, s2) {
			t.Fatalf("%s: %q set %+v; written back %q set %+v, %v", name, v, s, k.Value(s), s2, err)
		}
	})
}
