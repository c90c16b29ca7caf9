package main

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/runner"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// Bad knobs are refused in one line naming the value and the
// limit, from flags and from files, before anything is built.
func TestRunKnobBadInput(t *testing.T) {
	for _, c := range []struct{ args, want string }{
		{"--sweep mtu=1500,70000", "mtu 70000 is above 65535"},
		{"--sweep size=0", "size 0 is below the minimum 1"},
		{"--sweep streams=0,1", "streams 0 is below the minimum 1"},
		{"--sweep colour=1,2", `unknown knob "colour" (knobs: size, streams, mtu`},
		{"--sweep streams=1,1", "lists 1 twice"},
		{"--sweep offload=gro:maybe", "gro"},
		{"--sweep mtu+streams=1500", "take the same values"},
		{"--sweep streams=1,2 --sweep streams=4,8", "knob streams is swept twice"},
		{"--sweep rate=10%,120%", "rate 120% is above the path's closed-loop maximum (100%)"},
		{"--sweep rate=0%,50%", "rate 0%: use a share above 0% of the path's closed-loop maximum"},
	} {
		f := pflag.NewFlagSet("run", pflag.ContinueOnError)
		f.SetOutput(io.Discard)
		newRunFlags(runner.DefaultSpec(), "", "").register(f)
		err := f.Parse(strings.Fields(c.args))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line with %q", c.args, err, c.want)
		}
	}
	for args, want := range map[string]string{
		"--mtu 70000":   "mtu 70000 is above 65535",
		"--streams 200": "--streams 200: use 1 to 128",
		"--load 99":     "load 99 is above the maximum 64",
		// The rate: its spelling, its range, and the tests.
		"--rate 0 --tests tcp_rr":                      "rate 0: use a positive rate, or max",
		"--rate -5 --tests tcp_rr":                     `rate "-5": use max, requests per second`,
		"--rate lots --tests udp_rr":                   `rate "lots": use max`,
		"--rate 20.5 --tests tcp_crr":                  "--rate 20.5: use a whole number of requests per second",
		"--rate 50001 --tests tcp_rr":                  "rate 50001 is above 50000/s, the most the rr engine schedules",
		"--rate 20000":                                 "--rate 20000 is an open loop's requests per second for tcp_rr, tcp_crr, a rate stream tests (tcp_stream) cannot take",
		"--rate 20000 --tests tcp_stream":              "--rate 20000: tcp_stream takes no rate",
		"--rate 500M --tests udp_stream,udp_rr":        "stream tests (udp_stream) cannot take",
		"--sweep rate=max,5000 --tests tcp_rr,udp_pps": "--sweep rate=5000 is an open loop's requests per second for tcp_rr",
		"--sweep rate=max,60k --tests udp_rr":          "rate 60000 is above 50000/s",
		// A share of each path's maximum (rate=50%).
		"--rate 0% --tests tcp_rr":                              "rate 0%: use a share above 0% of the path's closed-loop maximum",
		"--rate 5x% --tests tcp_rr":                             `rate "5x%": use max`,
		"--rate 50% --tests udp_stream":                         "--rate 50%: a share of the path's closed-loop maximum is for rr/crr tests",
		"--rate 50% --tests tcp_rr --engine sockperf --size 14": "--rate 50%: sockperf's ping-pong is a closed loop",
		"--sweep rate=10%,50% --tests tcp_rr,tcp_stream":        "stream tests (tcp_stream) cannot take",
	} {
		_, _, err := resolveRun(t, strings.Fields(args)...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
	file := writeScenario(t, "modes: [bridge]\nsweep:\n  streams: [1, 2]\n  mtu: [1500, 70000]\n")
	if _, _, err := resolveRun(t, "-f", file); err == nil || !strings.Contains(err.Error(), ":4: field sweep.mtu: sweep mtu: mtu 70000 is above 65535") {
		t.Errorf("file with mtu 70000: %v", err)
	}
	if _, err := resolveKubeRun(t, "--cluster", "k", "--sweep", "mtu=1500,9000"); err == nil || !strings.Contains(err.Error(), "set a lab's links; a cluster's are its CNI's") {
		t.Errorf("kube run --sweep mtu: %v", err)
	}
	if _, err := resolveKubeRun(t, "--cluster", "k", "--sweep", "streams=1,4"); err != nil {
		t.Errorf("kube run --sweep streams: %v", err)
	}
	file = writeScenario(t, "modes: [bridge]\ntests: [tcp_rr]\nrate: 0\n")
	if _, _, err := resolveRun(t, "-f", file); err == nil || !strings.Contains(err.Error(), "rate 0: use a positive rate") {
		t.Errorf("file with rate 0: %v", err)
	}
}

// A rate is a knob: --rate sets every cell's, a sweep of it
// makes a cell per value (its point), and the file records it.
func TestRunRate(t *testing.T) {
	spec, _, err := resolveRun(t, "--rate", "20k", "--tests", "tcp_rr,udp_rr,tcp_crr")
	if err != nil || spec.Rate != "20k" {
		t.Fatalf("--rate 20k: rate %q, %v", spec.Rate, err)
	}
	if es := spec.EngineSpec(engine.TCPRR, nil, family.IPv4); es.Rate != "20k" {
		t.Errorf("--rate 20k reached the engine as %q", es.Rate)
	}
	// Each point's rate as the engine gets it: absolute rates, and shares
	// of each path's maximum beside them (made a rate when the path's
	// maximum is measured: runner's calibrate).
	for sweep, want := range map[string]string{
		"rate=5000,10000,20000":        "rate=5000:5000 rate=10000:10000 rate=20000:20000",
		"rate=10%,50.0%,95%,100%,2000": "rate=10%:10% rate=50%:50% rate=95%:95% rate=100%:100% rate=2000:2000",
	} {
		spec, _, err := resolveRun(t, "--sweep", sweep, "--tests", "tcp_rr,tcp_crr")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range spec.Sweep.Points() {
			got = append(got, p.String()+":"+spec.EngineSpec(engine.TCPCRR, p, family.IPv4).Rate)
		}
		if strings.Join(got, " ") != want {
			t.Errorf("--sweep %s: points %v, want %s", sweep, got, want)
		}
	}
	// Latency under load: the rr probe runs open-loop at the probe's rate
	// at every point of a load sweep, idle too (flent's RRUL shape); a
	// rate given keeps its own; streams and sockperf take none.
	spec, _, err = resolveRun(t, "--sweep", "load=0,2", "--tests", "tcp_rr,tcp_stream")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range spec.Sweep.Points() {
		if es := spec.EngineSpec(engine.TCPRR, p, family.IPv4); es.Rate != runner.LoadProbeRate || es.Streams != runner.LoadProbeFlows {
			t.Errorf("%s: tcp_rr's rate %q over %d flows, want the probe's %s over %d", p, es.Rate, es.Streams, runner.LoadProbeRate, runner.LoadProbeFlows)
		}
		if r := spec.EngineSpec(engine.TCPStream, p, family.IPv4).Rate; r != "max" {
			t.Errorf("%s: tcp_stream's rate %q, want max", p, r)
		}
	}
	spec, _, err = resolveRun(t, "--load", "2", "--rate", "300", "--tests", "tcp_rr")
	if es := spec.EngineSpec(engine.TCPRR, nil, family.IPv4); err != nil || es.Rate != "300" {
		t.Errorf("--load 2 --rate 300: the rate %q, %v: want 300", es.Rate, err)
	}
	spec, _, err = resolveRun(t, "--load", "2", "--tests", "tcp_rr", "--engine", "sockperf", "--size", "14")
	if es := spec.EngineSpec(engine.TCPRR, nil, family.IPv4); err != nil || es.Rate != "max" {
		t.Errorf("--load 2 on sockperf: the rate %q, %v: want max (a closed loop)", es.Rate, err)
	}
	if spec, _, err := resolveRun(t, "--rate", "500M", "--tests", "tcp_stream,udp_stream"); err != nil || spec.Rate != "500M" {
		t.Errorf("a UDP stream's rate beside tcp_stream (as before): %q, %v", spec.Rate, err)
	}
}
