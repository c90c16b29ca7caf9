package scenario

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/runner"
)

// scenarios/knobs.yaml plans, per mode, tcp_stream at the base and at
// each other value of every links or streams axis (load is rr's only),
// and tcp_rr idle and under load only (its cells:).
func TestKnobsScenarioPlan(t *testing.T) {
	s, err := Load("../../scenarios/knobs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec := s.RunSpec(runner.DefaultSpec())
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(spec.Modes) != 5 || len(spec.Sweep.Axes) != 5 {
		t.Fatalf("%d modes, %d axes", len(spec.Modes), len(spec.Sweep.Axes))
	}
	cells, err := spec.Plan(results.Cell{Mode: "bridge", Path: "pod"}, engine.Target{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	per := map[string][]string{}
	for _, c := range cells {
		per[c.Cell.Test] = append(per[c.Cell.Test], c.Cell.Point)
	}
	// base, streams 2/4/8, mtu 9000, gso+gro 185000, two offloads
	if n := len(per["tcp_stream"]); n != 8 {
		t.Errorf("%d tcp_stream cells, want 8: %v", n, per["tcp_stream"])
	}
	rr := per["tcp_rr"]
	if len(rr) != 2 || !strings.HasSuffix(rr[0], "load=0") || !strings.HasSuffix(rr[1], "load=2") {
		t.Errorf("tcp_rr cells %v, want idle and load=2", rr)
	}
}

// A sweep in a file is refused at its line: out of range, unknown,
// not a list.
func TestSweepErrorsNameLine(t *testing.T) {
	for body, want := range map[string]string{
		"sweep:\n  streams: [1, 0]\n": "k.yaml:2: field sweep.streams: sweep streams: streams 0 is below the minimum 1",
		"sweep:\n  colour: [1]\n":     `k.yaml:2: field sweep.colour: unknown knob "colour"`,
		"sweep: [1, 2]\n":             "k.yaml:1: field sweep: want KNOB: [V1, V2, ...] lines",
		"sweep:\n  size: [{a: 1}]\n":  "k.yaml:2: field sweep.size: want a list of values",
		"mtu: 70000\n":                "mtu 70000 is above 65535",
		"offload: \"gro:sideways\"\n": "gro",
		// a knob's key, read through the registry, at its line
		"mode: bridge\nstreams: abc\n":    `k.yaml:2: field streams: streams "abc" is not a whole number`,
		"mode: bridge\nstreams: 200\n":    "k.yaml:2: field streams: streams 200: use 1 to 128",
		"mode: bridge\nmtu: 2\n":          "k.yaml:2: field mtu: mtu 2 is below the minimum 68",
		"mode: bridge\nload: [1, 2]\n":    "k.yaml:2: field load: want one value (a sweep of several: sweep: {load: [V1, V2]})",
		"mode: bridge\ncolour: 1\nz: 2\n": `k.yaml:2: unknown field "colour" (see docs/scenarios.md for the fields)`,
	} {
		if _, err := Parse("k.yaml", []byte(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}

// Every knob is a scenario key, read through the registry into the run's
// settings: a knob needs no field of Scenario.
func TestEveryKnobIsAKey(t *testing.T) {
	for _, k := range knob.All {
		v := k.Example // a value in its range
		sc, err := Parse("k.yaml", []byte(fmt.Sprintf("mode: bridge\n%s: %q\n", k.Name, v)))
		if err != nil {
			t.Fatalf("%s: %v", k.Name, err)
		}
		spec := sc.RunSpec(runner.DefaultSpec())
		if got := k.Value(spec.Settings); got != v {
			t.Errorf("%s: %q in the run's settings, want %q", k.Name, got, v)
		}
		if !sc.Sets(string(k.Name)) {
			t.Errorf("%s: the file does not say it sets it", k.Name)
		}
	}
}
