package main

import (
	"maps"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/labpolicy"
	"github.com/vnetlab/vnetlab/internal/platform/labservice"
	"github.com/vnetlab/vnetlab/internal/present/export"
	"github.com/vnetlab/vnetlab/internal/runner"
	"github.com/vnetlab/vnetlab/internal/scenario"
)

// runFlags are run's flags. Those that set a field of the runner's spec are
// bound to it; each flag's default is the spec's value (overlay.go).
type runFlags struct {
	spec                    runner.Spec
	modes, tests, opts      []string
	file, output, reportDir string
	exports                 export.Flag
	sc                      *scenario.Scenario // the file, once read
}

// newRunFlags binds to spec, output and report dir (their values the flags' defaults).
func newRunFlags(spec runner.Spec, output, reportDir string) *runFlags {
	r := &runFlags{spec: spec, output: output, reportDir: reportDir}
	for _, m := range spec.Modes {
		r.modes = append(r.modes, m.Label)
	}
	r.tests = testNames(spec.Tests)
	return r
}

func newRunCmd() *cobra.Command {
	r := newRunFlags(runner.DefaultSpec(), "", "")
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
tcp_stream (iperf3), tcp_rr and tcp_crr, client and server on one CPU (--cpu-affinity
auto), and says under the table which of the seed's differences it reproduces; modes this
kernel lacks are listed as skipped with the reason.`,
		Example: `  vnetlab run
  vnetlab run --modes host,veth-routed,bridge --tests tcp_stream --duration 5s --repeat 5 -o r.json
  vnetlab run --modes veth-routed,bridge,macvlan --paths pod,service --providers iptables,nftables,ebpf
  vnetlab run --modes veth-routed --paths pod,service --providers iptables,nftables --extra-services 0,1000,10000 --tests tcp_crr
  vnetlab run --modes veth-routed,bridge --tests tcp_crr,tcp_rr --policy-providers nftables,iptables --sweep policies=0,100,1000,10000
  vnetlab run --nodes 2 --modes host,bridge,host-gw,vxlan --tests tcp_stream,udp_stream
  vnetlab run --modes veth-routed,bridge --ip-family dual --tests tcp_rr,tcp_crr -o r.json   # each cell over IPv4 and IPv6 (docs/labs.md)
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
			if err := checkReportDir(r.reportDir); err != nil {
				return err
			}
			res, err := runner.Run(cmd.Context(), spec, provenance(r.file), newProgress())
			if err != nil && (res == nil || len(res.Cells) == 0) {
				return inputErr(err, cmd.Flags(), r.sc)
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
	s := &r.spec
	f.StringSliceVar(&r.modes, "modes", r.modes, "modes to compare, in table order (the first is the baseline)")
	registerMeasureFlags(f, s, &r.tests, true)
	registerPrecisionFlags(f, s)
	f.StringSliceVar(&s.Paths, "paths", s.Paths, "paths: pod (pod IP), service (clusterIP "+labservice.DefaultVIP+", over IPv6 "+labservice.DefaultVIP6+" -> pod, per provider); docker-nat also has published, published-local, published-hairpin; host also has published (ext -> node IP, docker --net=host)")
	f.StringSliceVar(&s.Providers, "providers", s.Providers, "service path providers: "+labservice.NameList()+" (default: "+defaultProviders()+")")
	f.StringSliceVar(&s.PolicyProviders, "policy-providers", s.PolicyProviders, "NetworkPolicy providers ("+strings.Join(labpolicy.Names(), ", ")+") each enforcing --policies/--ipblocks (or a sweep of them) in labs of their own, a cell each (default with a policy knob: "+labpolicy.DefaultProvider+"; docs/policies.md)")
	f.IntSliceVar(&s.ExtraServices, "extra-services", s.ExtraServices, "service path: generated services loaded besides the tested ones; a list gives one cell per count (0,1000,10000)")
	f.IntVar(&s.PodCount, "pods", s.PodCount, "pods per lab")
	f.IntVar(&s.Nodes, "nodes", s.Nodes, "nodes per lab: 2 puts pod-a and pod-b on different nodes joined by a veth underlay")
	f.StringVar(&s.UnderlayRate, "underlay-rate", s.UnderlayRate, "tbf rate on the node-to-node underlay, e.g. 10gbit")
	f.StringVar(&s.PodCIDR, "pod-cidr", s.PodCIDR, "pod network")
	f.Var(&s.Family, "ip-family", ipFamilyHelp)
	f.StringVar(&s.PodCIDR6, "pod-cidr6", s.PodCIDR6, "pods' IPv6 network with --ip-family ipv6 or dual (default "+lab.DefaultPodCIDR6+")")
	f.StringArrayVar(&r.opts, "option", nil, "mode option key=value for every mode (repeatable)")
	f.StringVarP(&r.output, "output", "o", r.output, "write the results JSON here")
	f.Float64Var(&s.Summary.CVThreshold, "cv-threshold", s.Summary.CVThreshold, "flag a cell NOISY when its coefficient of variation (stddev/mean) is above this")
	f.StringVar(&s.Summary.Baseline, "baseline", s.Summary.Baseline, "mode every cell is compared with (default: the first of --modes)")
	f.StringVar(&s.Summary.CIMethod, "ci-method", s.Summary.CIMethod, "95% CI of each cell: bootstrap-median or student-t-mean")
	f.StringVarP(&r.file, "file", "f", "", "scenario YAML (flags given too override it)")
	export.AddFlag(f, &r.exports)
	f.StringVar(&r.reportDir, "report", r.reportDir, "also write the report (Markdown, HTML, charts) into this directory, as the report verb does")
	f.StringSliceVar(&s.Cells, "cells", s.Cells, "measure only the matrix cells whose names match these patterns (mode/path/test as the table names them, e.g. veth-routed/service(ebpf+10000)/tcp_crr; * within one part); labs no such cell needs are not built")
	registerProfileFlags(f, s)
}

// resolve says what `run` measures and where its results go: the defaults
// (runner.DefaultSpec), the scenario file over them, then every flag given.
func (r *runFlags) resolve(given *pflag.FlagSet) (runner.Spec, string, error) {
	spec, output, report := runner.DefaultSpec(), "", ""
	if r.file != "" {
		sc, err := scenario.Load(r.file)
		r.sc = sc
		if err != nil {
			return spec, "", err
		}
		if err := sc.ForLabs("run"); err != nil {
			return spec, "", err
		}
		spec, output, report = sc.RunSpec(spec), sc.Output, sc.Report
	}
	w := newRunFlags(spec, output, report)
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	w.register(fs)
	if err := overlay(given, fs); err != nil {
		return spec, "", err
	}
	spec, r.reportDir = w.spec, w.reportDir
	var err error
	if spec.Tests, err = parseTests(w.tests); err != nil {
		return spec, "", err
	}
	if fs.Changed("modes") {
		spec.Modes = runner.Variants(w.modes, nil)
	}
	if fs.Changed("pods") {
		spec.Pods = nil // a count replaces the file's list
	}
	resolveProfile(&spec, w.output)
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
	return spec, w.output, inputErr(spec.Validate(), given, r.sc)
}
