package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vnetlab/vnetlab/internal/kube/bench"
	"github.com/vnetlab/vnetlab/internal/present/export"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
	"github.com/vnetlab/vnetlab/internal/scenario"
)

// kubeRunFlags are kube run's flags, bound to a bench.Spec (the
// measurement ones to its runner spec) with the spec's values as their
// defaults (overlay.go).
type kubeRunFlags struct {
	spec                 bench.Spec
	cf                   clusterFlags
	tests                []string
	out, reportDir, file string
	exports              export.Flag
	sc                   *scenario.Scenario // the file, once read
}

func newKubeRunFlags(spec bench.Spec, out, reportDir string) *kubeRunFlags {
	return &kubeRunFlags{spec: spec, out: out, reportDir: reportDir, tests: testNames(spec.Measure.Tests),
		cf: clusterFlags{cluster: spec.Cluster.Local, kubeconfig: spec.Cluster.Kubeconfig, context: spec.Cluster.Context}}
}

func newKubeRunCmd() *cobra.Command {
	r := newKubeRunFlags(bench.DefaultSpec(), "", "")
	cmd := &cobra.Command{
		Use:   "run (--kubeconfig PATH [--context C] | --cluster NAME) [--paths pod,service,host] [--placements same-node,cross-node] | run -f scenario.yaml",
		Short: "Measure a Kubernetes cluster's pod, Service and host paths, same-node and cross-node",
		Long: `Measure a real cluster with the engines of a lab run (iperf3, rr, sockperf), in the same
interleaved rounds with the same statistics and results JSON. vnetlab creates its own
namespace (labelled app.kubernetes.io/managed-by=vnetlab), a server pod on the first node,
a client pod beside it (same-node) and one on the second node (cross-node), a ClusterIP
Service in front of the server (path service) and a hostNetwork pair (path host, the
node-to-node baseline); it runs the programs in the pods through the API's exec and
deletes the namespace at the end and on Ctrl-C (after a kill -9: vnetlab kube clean).

The image is vnetlab's own (vnetlab, iperf3, sockperf): a local cluster (--cluster) gets
it loaded automatically; for another cluster, load "vnetlab kube image -o vnetlab.tar"
into its nodes or push it to a registry and pass --image.

Each sample also records each node's CPU (user, system, softirq), shown per unit of work
under the table: on a local cluster from each node's cgroup, elsewhere from each node's
/proc/stat through a hostNetwork helper pod (deleted with the namespace). On a local
cluster, --profile samples every CPU's kernel stacks in each measured window as run
--profile does (the nodes are this machine's namespaces; vnetlab explain reads it). --tolerance R
fails the run (exit 1, and a failing case in --export junit:FILE) when a pod cell is
significantly below its host cell by more than R: Mann-Whitney p < 0.05 and the whole
95% CI of pod/host under 1-R (docs/kubernetes.md).

Without --tests it measures what a plain "vnetlab run" measures (tcp_stream, tcp_rr,
tcp_crr), so a cluster's cells sit beside a lab's; --cpu-affinity auto pins them on a local
cluster and leaves them unpinned on a --kubeconfig one.

A scenario file with a kube: section (docs/scenarios.md) says all of this in one file;
flags given with -f override it. With kube.clusters it names several configurations
(CNI x proxy): each gets a local cluster brought up, measured and removed in turn, into one
results file (cells CONFIG/path@placement/test; docs/kubernetes.md).`,
		Example: `  vnetlab kube run --cluster k --tests tcp_stream,tcp_rr,tcp_crr --repeat 5
  vnetlab kube run --kubeconfig ~/.kube/config --context prod --paths pod,service --placements cross-node -o prod.json
  vnetlab kube run --cluster k --paths pod,host --tests tcp_stream --tolerance 0.1 --export junit:kube.xml
  vnetlab kube run --cluster k --paths host --placements cross-node --tests tcp_rr --profile -o k.json && vnetlab explain k.json
  vnetlab kube run -f scenarios/kube-pod-service-host.yaml --cluster k
  vnetlab kube run -f scenarios/kube-proxies.yaml -o kube-proxies.json --report kube-proxies-report`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := r.resolve(cmd.Flags())
			if err != nil {
				return err
			}
			if err := checkReportDir(r.reportDir); err != nil {
				return err
			}
			res, err := bench.Run(cmd.Context(), spec, provenance(r.file), newProgress(), stderrf)
			if res == nil {
				return inputErr(err, cmd.Flags(), r.sc)
			}
			if spec.Measure.Profile {
				relativeProfileDirs(res, r.out)
			}
			return emitResults(res, r.out, r.reportDir, r.exports, err)
		},
	}
	r.register(cmd)
	return cmd
}

func (r *kubeRunFlags) register(cmd *cobra.Command) {
	r.cf.add(cmd)
	f, s := cmd.Flags(), &r.spec
	f.StringSliceVar(&s.Pods.Paths, "paths", s.Pods.Paths, "paths: pod (pod IP), service (ClusterIP), host (hostNetwork pods: node to node)")
	f.StringSliceVar(&s.Pods.Placements, "placements", s.Pods.Placements, "placements: same-node, cross-node")
	f.Var(&s.Pods.Family, "ip-family", "IP family measured: ipv4, ipv6 or dual (the pods' podIPs and the Service's clusterIPs of that family; dual: a cell of each, interleaved; the cluster must have it)")
	f.StringSliceVar(&s.Pods.Nodes, "nodes", s.Pods.Nodes, "server node and cross-node client node (default: the first two Ready schedulable nodes by name)")
	registerMeasureFlags(f, &s.Measure, &r.tests, false)
	registerProfileFlags(f, &s.Measure)
	f.StringVar(&s.Pods.Image, "image", s.Pods.Image, "image with vnetlab, iperf3 and sockperf in /usr/bin (default: vnetlab's own; vnetlab kube image writes it)")
	f.StringVar(&s.Label, "label", s.Label, "name of the cluster in tables and results (default: --cluster, --context, or \"cluster\")")
	f.StringVarP(&r.out, "output", "o", r.out, "write the results JSON here")
	f.StringVar(&r.reportDir, "report", r.reportDir, "also write the report (Markdown, HTML, charts) into this directory")
	f.StringVarP(&r.file, "file", "f", "", "scenario YAML with a kube: section (flags given too override it)")
	export.AddFlag(f, &r.exports)
	f.Float64Var(&s.Tolerance, "tolerance", s.Tolerance, "fail when the pod path is significantly below host by more than this ratio (0.1: 10%; p < 0.05 and the whole 95% CI of pod/host under 1-R)")
	f.DurationVar(&s.Pods.ReadyTimeout, "ready-timeout", s.Pods.ReadyTimeout, "how long the measuring pods may take to be Ready (a registry image may need longer to pull)")
}

// resolve: the defaults, the scenario file over them, then every flag given.
func (r *kubeRunFlags) resolve(given *pflag.FlagSet) (bench.Spec, error) {
	spec, out, report := bench.DefaultSpec(), "", ""
	if r.file != "" {
		sc, err := scenario.Load(r.file)
		r.sc = sc
		if err != nil {
			return spec, err
		}
		if spec, err = sc.BenchSpec(spec); err != nil {
			return spec, err
		}
		out, report = sc.Output, sc.Report
	}
	w := newKubeRunFlags(spec, out, report)
	cmd := &cobra.Command{}
	w.register(cmd)
	if err := overlay(given, cmd.Flags()); err != nil {
		return spec, err
	}
	spec, r.out, r.reportDir = w.spec, w.out, w.reportDir
	resolveProfile(&spec.Measure, r.out)
	var err error
	if spec.Measure.Tests, err = parseTests(w.tests); err != nil {
		return spec, err
	}
	// A cluster on the command line replaces the file's as a whole.
	cluster := bench.Target{Local: w.cf.cluster, Kubeconfig: w.cf.kubeconfig, Context: w.cf.context}
	if f := cmd.Flags(); f.Changed("cluster") || f.Changed("kubeconfig") || f.Changed("context") {
		cluster = bench.Target{Local: r.cf.cluster, Kubeconfig: r.cf.kubeconfig, Context: r.cf.context}
	}
	spec.Cluster = cluster
	if given.Changed("tolerance") {
		if err := analysis.ValidateTolerance(spec.Tolerance); err != nil {
			return spec, err
		}
	}
	if len(spec.Configs) > 0 {
		for _, name := range []string{"cluster", "kubeconfig", "context", "nodes", "label"} {
			if given.Changed(name) {
				return spec, fmt.Errorf("--%s: %s names its clusters in kube.clusters and brings each up itself: drop --%s, or edit the file", name, r.file, name)
			}
		}
	}
	return spec, inputErr(spec.Validate(), given, r.sc)
}
