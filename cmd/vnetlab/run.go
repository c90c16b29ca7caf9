package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/doctor"
	"github.com/vnetlab/vnetlab/internal/engine"
	"github.com/vnetlab/vnetlab/internal/lab"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/runner"
	"github.com/vnetlab/vnetlab/internal/scenario"
	"github.com/vnetlab/vnetlab/internal/service"
)

// commit is set at build time.
var commit = ""

func newRunCmd() *cobra.Command {
	var (
		modes, tests, paths         []string
		eng, file, out, rate, cidr  string
		reportDir                   string
		dur                         time.Duration
		repeat, warmup, streams, sz int
		pods, nodes                 int
		underlayRate                string
		opts                        []string
		providers                   []string
		extraSvc                    []int
		cvThreshold                 float64
		baseline, ciMethod          string
	)
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
  vnetlab run -f scenarios/seed-002-pod-modes.yaml --report report/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireRoot(); err != nil {
				return err
			}
			spec := runner.Spec{Duration: 4 * time.Second, Repeat: 5, Streams: 1, Size: 1, PodCIDR: lab.DefaultPodCIDR, Paths: []string{"pod"}}
			modeNames := doctor.DefaultModes
			testNames := []string{"tcp_stream"}
			output := ""
			podCount := lab.DefaultPods
			var variants []runner.ModeVariant
			if file != "" {
				sc, err := scenario.Load(file)
				if err != nil {
					return err
				}
				variants = sc.Modes
				if sc.Mode != "" {
					variants = append(variants, runner.ModeVariant{Label: sc.Mode, Mode: sc.Mode, Options: sc.Options})
				}
				if len(sc.Tests) > 0 {
					testNames = sc.Tests
				}
				if len(sc.Paths) > 0 {
					spec.Paths = sc.Paths
				}
				spec.Engine, spec.Rate, output = sc.Engine, sc.Rate, sc.Output
				spec.Duration = sc.DurationValue(spec.Duration)
				setInt(&spec.Repeat, sc.Repeat)
				setInt(&spec.Warmup, sc.Warmup)
				setInt(&spec.Streams, sc.Streams)
				setInt(&spec.Size, sc.Size)
				setInt(&podCount, sc.PodCount)
				setInt(&spec.Nodes, sc.Nodes)
				spec.UnderlayRate = sc.UnderlayRate
				spec.Pods = sc.Pods
				spec.Providers, spec.Services, spec.ExtraServices = sc.Providers, sc.Services, sc.ExtraServices
				if sc.Provider != "" && len(sc.Providers) == 0 {
					spec.Providers = []string{sc.Provider}
				}
				spec.Summary.Baseline, spec.Summary.CIMethod = sc.Baseline, sc.CIMethod
				if sc.CVThreshold != nil {
					spec.Summary.CVThreshold = *sc.CVThreshold
				}
				if sc.PodCIDR != "" {
					spec.PodCIDR = sc.PodCIDR
				}
			}
			f := cmd.Flags()
			if f.Changed("modes") || variants == nil {
				if f.Changed("modes") {
					modeNames = modes
				}
				extra := map[string]string{}
				if err := parseOptions(opts, extra); err != nil {
					return err
				}
				variants = nil
				for _, m := range modeNames {
					variants = append(variants, runner.ModeVariant{Label: m, Mode: m, Options: extra})
				}
			}
			if f.Changed("tests") {
				testNames = tests
			}
			if f.Changed("paths") {
				spec.Paths = paths
			}
			if f.Changed("engine") {
				spec.Engine = eng
			}
			if f.Changed("duration") {
				spec.Duration = dur
			}
			if f.Changed("repeat") {
				spec.Repeat = repeat
			}
			if f.Changed("warmup") {
				spec.Warmup = warmup
			}
			if f.Changed("streams") {
				spec.Streams = streams
			}
			if f.Changed("size") {
				spec.Size = sz
			}
			if f.Changed("rate") {
				spec.Rate = rate
			}
			if f.Changed("pod-cidr") {
				spec.PodCIDR = cidr
			}
			if f.Changed("pods") {
				podCount, spec.Pods = pods, nil
			}
			if f.Changed("nodes") {
				spec.Nodes = nodes
			}
			if f.Changed("underlay-rate") {
				spec.UnderlayRate = underlayRate
			}
			if f.Changed("output") {
				output = out
			}
			if f.Changed("providers") {
				spec.Providers = providers
			}
			if f.Changed("extra-services") {
				spec.ExtraServices = extraSvc
			}
			if err := checkServiceRun(spec); err != nil {
				return err
			}
			if f.Changed("cv-threshold") {
				spec.Summary.CVThreshold = cvThreshold
			}
			if f.Changed("baseline") {
				spec.Summary.Baseline = baseline
			}
			if f.Changed("ci-method") {
				spec.Summary.CIMethod = ciMethod
			}
			if spec.Summary.CVThreshold == 0 {
				spec.Summary.CVThreshold = runner.DefaultCVThreshold
			}
			if spec.Summary.CIMethod == "" {
				spec.Summary.CIMethod = runner.CIMethods[0]
			}
			spec.Modes = variants
			for _, t := range testNames {
				tt, err := engine.ParseTest(strings.TrimSpace(t))
				if err != nil {
					return err
				}
				spec.Tests = append(spec.Tests, tt)
			}
			if err := runner.CheckSpec(spec); err != nil {
				return err
			}
			if err := checkReportDir(reportDir); err != nil {
				return err
			}
			if spec.Pods == nil {
				p, err := lab.DefaultPodSpecs(podCount, spec.PodCIDR, spec.Nodes)
				if err != nil {
					return err
				}
				spec.Pods = p
			}
			meta := runner.Metadata(version, commit, os.Args)
			if meta.Emulation != "" {
				fmt.Fprintf(os.Stderr, "warning: %s\n", meta.Emulation)
			}
			meta.Scenario = file
			meta.Start = time.Now().UTC()
			meta.Settings = results.Settings{Duration: spec.Duration.String(), Repeat: spec.Repeat, Warmup: spec.Warmup, Streams: spec.Streams, Size: spec.Size,
				CVThreshold: spec.Summary.CVThreshold, CIMethod: spec.Summary.CIMethod, Baseline: spec.Summary.Baseline}
			if meta.Settings.Baseline == "" && len(spec.Modes) > 0 {
				meta.Settings.Baseline = spec.Modes[0].Label
			}
			res, err := runner.Run(cmd.Context(), spec, newProgress())
			if res != nil {
				skipped := res.Metadata.Skipped
				res.Metadata = meta
				res.Metadata.Skipped = skipped
				res.Metadata.End = time.Now().UTC()
			}
			if err != nil && (res == nil || len(res.Cells) == 0) {
				return err
			}
			return emitResults(res, output, reportDir, err)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&modes, "modes", doctor.DefaultModes, "modes to compare, in table order (the first is the baseline)")
	f.StringSliceVar(&tests, "tests", []string{"tcp_stream"}, "tests: tcp_stream, udp_stream, tcp_rr, udp_rr, tcp_crr")
	f.StringSliceVar(&paths, "paths", []string{"pod"}, "paths: pod (pod IP), service (clusterIP "+service.DefaultVIP+" -> pod, per provider); docker-nat also has published, published-local, published-hairpin; host also has published (ext -> node IP, docker --net=host)")
	f.StringSliceVar(&providers, "providers", []string{service.DefaultProvider}, "service path providers: "+strings.Join(service.Names(), ", ")+" (default: iptables; ebpf for veth-ebpf and macvlan-ebpf)")
	f.IntSliceVar(&extraSvc, "extra-services", []int{0}, "service path: generated services loaded besides the tested ones; a list gives one cell per count (0,1000,10000)")
	f.StringVar(&eng, "engine", "", "engine for every test: iperf3, rr, sockperf (default: iperf3 for streams, rr for rr/crr; docs/engines.md)")
	f.DurationVar(&dur, "duration", 4*time.Second, "length of each sample")
	f.IntVar(&repeat, "repeat", 5, "samples per cell, taken in interleaved rounds")
	f.IntVar(&warmup, "warmup", 0, "rounds run first and discarded")
	f.IntVar(&streams, "streams", 1, "parallel streams (iperf3 -P)")
	f.IntVar(&sz, "size", 1, "request and response size in bytes (rr, crr; sockperf needs 14 or more)")
	f.StringVar(&rate, "rate", "max", "UDP stream target rate (iperf3 -b syntax, e.g. 10G), or max")
	f.IntVar(&pods, "pods", lab.DefaultPods, "pods per lab")
	f.IntVar(&nodes, "nodes", 1, "nodes per lab: 2 puts pod-a and pod-b on different nodes joined by a veth underlay")
	f.StringVar(&underlayRate, "underlay-rate", "", "tbf rate on the node-to-node underlay, e.g. 10gbit")
	f.StringVar(&cidr, "pod-cidr", lab.DefaultPodCIDR, "pod network")
	f.StringArrayVar(&opts, "option", nil, "mode option key=value for every mode (repeatable)")
	f.StringVarP(&out, "output", "o", "", "write the results JSON here")
	f.Float64Var(&cvThreshold, "cv-threshold", runner.DefaultCVThreshold, "flag a cell NOISY when its coefficient of variation (stddev/mean) is above this")
	f.StringVar(&baseline, "baseline", "", "mode every cell is compared with (default: the first of --modes)")
	f.StringVar(&ciMethod, "ci-method", runner.CIMethods[0], "95% CI of each cell: bootstrap-median or student-t-mean")
	f.StringVarP(&file, "file", "f", "", "scenario YAML (flags given too override it)")
	f.StringVar(&reportDir, "report", "", "also write the report (Markdown, HTML, charts) into this directory, as the report verb does")
	return cmd
}

func setInt(dst *int, v *int) {
	if v != nil {
		*dst = *v
	}
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
