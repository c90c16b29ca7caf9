package main

import (
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/runner"
)

// The flags every measuring command (run, kube run) shares.

// registerMeasureFlags binds the flags that say how each cell is measured
// (tests, engine, sample length, rounds, the knobs) to s, its values the
// defaults; run and kube run share them, links (the links' knobs) only run:
// a cluster's links are its CNI's. The tests land in tests as typed
// (parseTests reads them).
func registerMeasureFlags(f *pflag.FlagSet, s *runner.Spec, tests *[]string, links bool) {
	f.StringSliceVar(tests, "tests", *tests, "tests: "+strings.Join(testNames(engine.AllTests), ", "))
	f.StringVar(&s.Engine, "engine", s.Engine, "engine for every test: iperf3, rr, sockperf (default: iperf3 for streams, rr for rr/crr; docs/engines.md)")
	f.DurationVar(&s.Duration, "duration", s.Duration, "length of each sample")
	f.IntVar(&s.Repeat, "repeat", s.Repeat, "samples per cell, taken in interleaved rounds")
	f.IntVar(&s.Warmup, "warmup", s.Warmup, "rounds run first and discarded")
	registerKnobFlags(f, &s.Settings, links)
	f.Var(knob.AxesFlag{S: &s.Sweep}, "sweep", "a cell per value of a knob: KNOB=V1,V2,... (repeatable; knobs: "+knob.NameList()+"; gso+gro=... sets both; the first value of each is where the other sweeps are measured; docs/knobs.md)")
	f.BoolVar(&s.Sweep.Cross, "sweep-cross", s.Sweep.Cross, "measure every combination of the sweeps' values, not one sweep at a time")
	f.StringVar(&s.Order, "order", s.Order, "cells' order within each round: random (shuffled anew each round, the seed recorded) or fixed (docs/statistics.md)")
	f.Uint64Var(&s.OrderSeed, "order-seed", s.OrderSeed, "seed of --order random's shuffles, to repeat a run's order (default: drawn, and recorded in the results)")
	f.Var(&s.CPUAffinity, "cpu-affinity", "pin each engine's client and server like iperf3 -A: N (both on CPU N), C,S (client on C, server on S), none, or auto (every test's client and server on the last CPU; docs/engines.md)")
}

// registerPrecisionFlags binds --precision, --max-time and --duet (run: a
// precision run's looks need every cell in one run's rounds, a duet two
// labs' cells side by side).
func registerPrecisionFlags(f *pflag.FlagSet, s *runner.Spec) {
	f.Var(shareFlag{&s.Summary.Precision}, "precision", "measure rounds until every comparison's confidence interval is this narrow (half-width, a share of the ratio: 2%), or --max-time runs out; the table says which met it and after how many rounds (docs/statistics.md)")
	f.DurationVar(&s.MaxTime, "max-time", s.MaxTime, "with --precision: the most time its measured rounds may take")
	f.BoolVar(&s.Duet, "duet", s.Duet, "measure the two modes' cells at once, each client and server on a CPU of its own, swapped every round; compared round by round (rr/crr tests only; docs/statistics.md)")
}

// shareFlag is a share given as a percentage ("2%") or a fraction (0.02).
type shareFlag struct{ p *float64 }

func (f shareFlag) String() string {
	if f.p == nil || *f.p == 0 {
		return ""
	}
	return strconv.FormatFloat(*f.p*100, 'g', -1, 64) + "%"
}

func (f shareFlag) Set(v string) error {
	x, err := runner.ParseShare(v)
	if err == nil {
		*f.p = x
	}
	return err
}

func (shareFlag) Type() string { return "percent" }

// registerKnobFlags binds each knob's plain flag (--NAME, knob.All) to its
// field of s (a lab knob's: its value in s.Lab, Knob.Flag): the engine's
// knobs always, the lab's own (lab and policy knobs) when links.
func registerKnobFlags(f *pflag.FlagSet, s *knob.Settings, links bool) {
	for _, k := range knob.All {
		if k.LabOnly() && !links {
			continue
		}
		if p := k.IntField(s); p != nil {
			f.IntVar(p, string(k.Name), *p, k.Help)
		} else if p := k.StringField(s); p != nil {
			f.StringVar(p, string(k.Name), *p, k.Help)
		} else {
			f.Var(k.Flag(s), string(k.Name), k.Help)
		}
	}
}

// registerProfileFlags binds --profile and --profile-dir (run, and kube run
// on a local cluster, whose nodes are this machine's namespaces).
func registerProfileFlags(f *pflag.FlagSet, s *runner.Spec) {
	f.BoolVar(&s.Profile, "profile", s.Profile, "sample every CPU's kernel stacks and count data-path events during each measured window: CPU per transaction or MB by stage and function in the results (explain them with vnetlab explain)")
	f.StringVar(&s.ProfileDir, "profile-dir", s.ProfileDir, "write each profiled cell's pprof profile, folded stacks and flame graph here (implies --profile; default: OUTPUT.profile/ beside -o, else vnetlab-profile/)")
}

// resolveProfile: --profile-dir implies --profile, whose files go beside
// the results file by default.
func resolveProfile(s *runner.Spec, output string) {
	if s.ProfileDir != "" {
		s.Profile = true
	}
	if s.Profile && s.ProfileDir == "" {
		s.ProfileDir = defaultProfileDir(output)
	}
}

func testNames(tests []engine.Test) []string {
	var out []string
	for _, t := range tests {
		out = append(out, string(t))
	}
	return out
}

// parseTests reads --tests; the first unknown name is the error.
func parseTests(names []string) ([]engine.Test, error) {
	var out []engine.Test
	for _, t := range names {
		tt, err := engine.ParseTest(strings.TrimSpace(t))
		if err != nil {
			return nil, err
		}
		out = append(out, tt)
	}
	return out, nil
}
