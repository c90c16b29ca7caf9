package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vnetlab/vnetlab/internal/engine"
	"github.com/vnetlab/vnetlab/internal/export"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/runner"
	"github.com/vnetlab/vnetlab/internal/scenario"
	"github.com/vnetlab/vnetlab/internal/service"
)

// commit is set at build time.
var commit = ""

// runFlags are run's flags. Those that set a field of the runner's spec are
// bound to it, with runner.DefaultSpec's values as their defaults.
type runFlags struct {
	spec                    runner.Spec
	modes, tests, opts      []string
	file, output, reportDir string
	exports                 export.Flag
}

func newRunCmd() *cobra.Command {
	var r runFlags
	cmd := &cobra.Command{
		Use:   "run [--modes M,...] [--tests T,...] [--repeat N] [-o results.json] | run -f scenario.yaml",
		Short: "Measure a matrix of modes x paths x tests, print a table and write a results JSON",
		Long: `Bring one lab up per mode, run every test from pod-b to pod-a (or as the path says),
repeat in interleaved rounds (A B C A B C ...), print a table, write a versioned results
JSON (docs/results-json.md) and tear every lab down, also on Ctrl-C.

Each cell shows its median, a 95% CI, the CV (NOISY above --cv-threshold), the ratio to
the baseline mode with a Mann-Whitney verdict ("~" = not significant; needs 4 or more
samples per side) and its CPU cost per GB or per 1000 transactions (docs/statistics.md).

Plain "vnetlab run" runs seed 002's podIP row (veth-routed, bridge, macvlan, ipvlan) with
iperf3; modes this kernel lacks are listed as skipped with the reason.

Examples:
  vnetlab run
  vnetlab run --modes host,veth-routed,bridge --tests tcp_stream --duration 5s --repeat 5 -o r.json
  vnetlab run --modes veth-routed,bridge,macvlan --paths pod,service --providers iptables,nftables,ebpf
  vnetlab run --modes veth-routed --paths pod,service --providers iptables,nftables --extra-services 0,1000,10000 --tests tcp_crr
  vnetlab run --nodes 2 --modes host,bridge,host-gw,vxlan --tests tcp_stream,udp_stream
  vnetlab run -f scenarios/seed-002-pod-modes.yaml --report report/
  vnetlab run --modes host,veth-routed,macvlan --tests tcp_rr --profile -o r.json && vnetlab explain r.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireRoot(); err != nil {
				return err
			}
			spec, output, err := r.resolve(cmd.Flags())
			if err != nil {
				return err
			}
			if err := runner.CheckSpec(spec); err != nil {
				return err
			}
			if err := checkReportDir(r.reportDir); err != nil {
				return err
			}
			meta := runner.Metadata(version, commit, os.Args)
			if meta.Emulation != "" {
				fmt.Fprintf(os.Stderr, "warning: %s\n", meta.Emulation)
			}
			meta.Scenario = r.file
			meta.Start = time.Now().UTC()
			res, err := runner.Run(cmd.Context(), spec, newProgress())
			if res != nil {
				meta.Settings, meta.Skipped = res.Metadata.Settings, res.Metadata.Skipped
				res.Metadata = meta
				res.Metadata.End = time.Now().UTC()
			}
			if err != nil && (res == nil || len(res.Cells) == 0) {
				return err
			}
			if spec.Profile {
				relativeProfileDirs(res, output)
			}
			return emitResults(res, output, r.reportDir, r.exports, err)
		},
	}
	r.register(cmd.Flags())
	return cmd
}

func (r *runFlags) register(f *pflag.FlagSet) {
	def := runner.DefaultSpec()
	var defModes []string
	for _, m := range def.Modes {
		defModes = append(defModes, m.Label)
	}
	s := &r.spec
	f.StringSliceVar(&r.modes, "modes", defModes, "modes to compare, in table order (the first is the baseline)")
	registerMeasureFlags(f, s, &r.tests)
	f.StringSliceVar(&s.Paths, "paths", def.Paths, "paths: pod (pod IP), service (clusterIP "+service.DefaultVIP+" -> pod, per provider); docker-nat also has published, published-local, published-hairpin; host also has published (ext -> node IP, docker --net=host)")
	f.StringSliceVar(&s.Providers, "providers", def.Providers, "service path providers: "+strings.Join(service.Names(), ", ")+" (default: iptables; ebpf for veth-ebpf and macvlan-ebpf)")
	f.IntSliceVar(&s.ExtraServices, "extra-services", def.ExtraServices, "service path: generated services loaded besides the tested ones; a list gives one cell per count (0,1000,10000)")
	f.IntVar(&s.PodCount, "pods", def.PodCount, "pods per lab")
	f.IntVar(&s.Nodes, "nodes", def.Nodes, "nodes per lab: 2 puts pod-a and pod-b on different nodes joined by a veth underlay")
	f.StringVar(&s.UnderlayRate, "underlay-rate", def.UnderlayRate, "tbf rate on the node-to-node underlay, e.g. 10gbit")
	f.StringVar(&s.PodCIDR, "pod-cidr", def.PodCIDR, "pod network")
	f.StringArrayVar(&r.opts, "option", nil, "mode option key=value for every mode (repeatable)")
	f.StringVarP(&r.output, "output", "o", "", "write the results JSON here")
	f.Float64Var(&s.Summary.CVThreshold, "cv-threshold", def.Summary.CVThreshold, "flag a cell NOISY when its coefficient of variation (stddev/mean) is above this")
	f.StringVar(&s.Summary.Baseline, "baseline", def.Summary.Baseline, "mode every cell is compared with (default: the first of --modes)")
	f.StringVar(&s.Summary.CIMethod, "ci-method", def.Summary.CIMethod, "95% CI of each cell: bootstrap-median or student-t-mean")
	f.StringVarP(&r.file, "file", "f", "", "scenario YAML (flags given too override it)")
	f.StringVar(&r.reportDir, "report", "", "also write the report (Markdown, HTML, charts) into this directory, as the report verb does")
	export.AddFlag(f, &r.exports)
	f.BoolVar(&s.Profile, "profile", false, "sample every CPU's kernel stacks and count data-path events during each measured window: CPU per transaction or MB by stage and function in the results (explain them with vnetlab explain)")
	f.StringSliceVar(&s.Cells, "cells", nil, "measure only the matrix cells whose names match these patterns (mode/path/test as the table names them, e.g. veth-routed/service(ebpf+10000)/tcp_crr; * within one part); labs no such cell needs are not built")
	f.StringVar(&s.ProfileDir, "profile-dir", "", "write each profiled cell's pprof profile, folded stacks and flame graph here (implies --profile; default: OUTPUT.profile/ beside -o, else vnetlab-profile/)")
}

// registerMeasureFlags binds the flags that say how each cell is measured
// (tests, engine, sample length, rounds, stream settings) to s, with the
// defaults of runner.DefaultSpec; run and kube run share them. The tests
// land in tests as typed (parseTests reads them).
func registerMeasureFlags(f *pflag.FlagSet, s *runner.Spec, tests *[]string) {
	def := runner.DefaultSpec()
	var defTests []string
	for _, t := range def.Tests {
		defTests = append(defTests, string(t))
	}
	f.StringSliceVar(tests, "tests", defTests, "tests: tcp_stream, udp_stream, tcp_rr, udp_rr, tcp_crr")
	f.StringVar(&s.Engine, "engine", def.Engine, "engine for every test: iperf3, rr, sockperf (default: iperf3 for streams, rr for rr/crr; docs/engines.md)")
	f.DurationVar(&s.Duration, "duration", def.Duration, "length of each sample")
	f.IntVar(&s.Repeat, "repeat", def.Repeat, "samples per cell, taken in interleaved rounds")
	f.IntVar(&s.Warmup, "warmup", def.Warmup, "rounds run first and discarded")
	f.IntVar(&s.Streams, "streams", def.Streams, "parallel streams (iperf3 -P)")
	f.IntVar(&s.Size, "size", def.Size, "request and response size in bytes (rr, crr; sockperf needs 14 or more)")
	f.StringVar(&s.Rate, "rate", def.Rate, "UDP stream target rate (iperf3 -b syntax, e.g. 10G), or max")
	s.CPUAffinity = def.CPUAffinity
	f.Var(&s.CPUAffinity, "cpu-affinity", "pin each engine's client and server like iperf3 -A: N (both on CPU N), C,S (client on C, server on S), none, or auto (rr/crr tests both on the last CPU, streams unpinned; docs/engines.md)")
}

// applyMeasureFlag copies the measurement flag name, given on the command
// line, from flag (the values registerMeasureFlags bound) into spec; false
// when name is not one of them.
func applyMeasureFlag(name string, spec *runner.Spec, flag runner.Spec, tests []string) (bool, error) {
	var err error
	switch name {
	case "tests":
		spec.Tests, err = parseTests(tests)
	case "engine":
		spec.Engine = flag.Engine
	case "duration":
		spec.Duration = flag.Duration
	case "repeat":
		spec.Repeat = flag.Repeat
	case "warmup":
		spec.Warmup = flag.Warmup
	case "streams":
		spec.Streams = flag.Streams
	case "size":
		spec.Size = flag.Size
	case "rate":
		spec.Rate = flag.Rate
	case "cpu-affinity":
		spec.CPUAffinity = flag.CPUAffinity
	default:
		return false, nil
	}
	return true, err
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

// resolve says what `run` measures and where its results go: the defaults
// (runner.DefaultSpec), the scenario file over them, then every flag given.
func (r *runFlags) resolve(f *pflag.FlagSet) (runner.Spec, string, error) {
	spec, output := runner.DefaultSpec(), ""
	if r.file != "" {
		sc, err := scenario.Load(r.file)
		if err != nil {
			return spec, "", err
		}
		if err := sc.ForLabs("run"); err != nil {
			return spec, "", err
		}
		spec, output = sc.RunSpec(spec), sc.Output
		if r.reportDir == "" {
			r.reportDir = sc.Report
		}
	}
	var err error
	flag := r.spec
	f.Visit(func(fl *pflag.Flag) {
		if ok, ferr := applyMeasureFlag(fl.Name, &spec, flag, r.tests); ok {
			if ferr != nil && err == nil {
				err = ferr
			}
			return
		}
		switch fl.Name {
		case "modes":
			spec.Modes = runner.Variants(r.modes, nil)
		case "output":
			output = r.output
		case "paths":
			spec.Paths = flag.Paths
		case "providers":
			spec.Providers = flag.Providers
		case "extra-services":
			spec.ExtraServices = flag.ExtraServices
		case "pods":
			spec.PodCount, spec.Pods = flag.PodCount, nil
		case "nodes":
			spec.Nodes = flag.Nodes
		case "underlay-rate":
			spec.UnderlayRate = flag.UnderlayRate
		case "pod-cidr":
			spec.PodCIDR = flag.PodCIDR
		case "cv-threshold":
			spec.Summary.CVThreshold = flag.Summary.CVThreshold
		case "baseline":
			spec.Summary.Baseline = flag.Summary.Baseline
		case "ci-method":
			spec.Summary.CIMethod = flag.Summary.CIMethod
		case "profile":
			spec.Profile = flag.Profile
		case "profile-dir":
			spec.ProfileDir, spec.Profile = flag.ProfileDir, true
		case "cells":
			spec.Cells = flag.Cells
		}
	})
	if err != nil {
		return spec, "", err
	}
	if spec.Profile && spec.ProfileDir == "" {
		spec.ProfileDir = defaultProfileDir(output)
	}
	// --option applies to every mode, over the options a scenario gives it.
	if len(r.opts) > 0 {
		extra := map[string]string{}
		if err := parseOptions(r.opts, extra); err != nil {
			return spec, "", err
		}
		for i, mv := range spec.Modes {
			o := maps.Clone(mv.Options)
			if o == nil {
				o = map[string]string{}
			}
			maps.Copy(o, extra)
			spec.Modes[i].Options = o
		}
	}
	return spec, output, checkServiceRun(spec)
}

// checkServiceRun validates the service path's settings before anything is built.
func checkServiceRun(spec runner.Spec) error {
	hasService := false
	for _, p := range spec.Paths {
		if p == runner.ServicePath {
			hasService = true
		}
	}
	for _, p := range spec.Providers {
		if _, err := service.Get(p); err != nil {
			return err
		}
	}
	for _, n := range spec.ExtraServices {
		if n < 0 || n > service.MaxExtra {
			return fmt.Errorf("--extra-services %d: want 0 to %d", n, service.MaxExtra)
		}
	}
	for _, s := range spec.Services {
		if err := s.Check(); err != nil {
			return err
		}
	}
	if hasService {
		return nil
	}
	custom := len(spec.Services) > 0 || len(spec.ExtraServices) > 1 || (len(spec.ExtraServices) == 1 && spec.ExtraServices[0] != 0) ||
		len(spec.Providers) > 1 || (len(spec.Providers) == 1 && spec.Providers[0] != service.DefaultProvider)
	if custom {
		return fmt.Errorf("providers and services apply to the service path: add it with --paths pod,service")
	}
	return nil
}

// defaultProfileDir: beside the results file (r.json -> r.profile/), else
// vnetlab-profile/ in the working directory.
func defaultProfileDir(output string) string {
	if output == "" {
		return "vnetlab-profile"
	}
	return strings.TrimSuffix(output, filepath.Ext(output)) + ".profile"
}

// resultsDir is the directory of the results file ("." without one): the
// cells' profile dirs are relative to it.
func resultsDir(output string) string {
	if output == "" {
		return "."
	}
	return filepath.Dir(output)
}

// relativeProfileDirs makes each cell's profile dir relative to the results
// file's directory, so that the file and its profiles can move together.
func relativeProfileDirs(res *results.File, output string) {
	base := resultsDir(output)
	for _, c := range res.Cells {
		if c.Profile == nil || c.Profile.Dir == "" {
			continue
		}
		if rel, err := filepath.Rel(base, c.Profile.Dir); err == nil {
			c.Profile.Dir = filepath.ToSlash(rel)
		}
	}
}
