package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"github.com/vnetlab/vnetlab/internal/engine"
	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/kube/image"
	"github.com/vnetlab/vnetlab/internal/kube/measure"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/runner"
	"github.com/vnetlab/vnetlab/internal/scenario"
)

// kubeRunFlags are kube run's flags; the measurement ones are bound to spec
// with runner.DefaultSpec's values as their defaults.
type kubeRunFlags struct {
	cf                               clusterFlags
	paths, placements, nodes, tests  []string
	out, reportDir, img, label, file string
	readyTimeout                     time.Duration
	spec                             runner.Spec // only the measurement settings are used
}

// kubeRun is what one kube run does, from the defaults, the scenario file
// and the flags.
type kubeRun struct {
	cf        clusterFlags
	spec      runner.Spec
	opts      measure.Options
	out       string
	reportDir string
	label     string
	scenario  string
	table     *scenario.Kube // kube.clusters: several local clusters, one after the other (kube_table.go)
}

func newKubeRunCmd() *cobra.Command {
	var r kubeRunFlags
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

A scenario file with a kube: section (docs/scenarios.md) says all of this in one file;
flags given with -f override it. With kube.clusters it names several configurations
(CNI x proxy): each gets a local cluster brought up, measured and removed in turn, into one
results file (cells CONFIG/path@placement/test; docs/kubernetes.md).

Examples:
  vnetlab kube run --cluster k --tests tcp_stream,tcp_rr,tcp_crr --repeat 5
  vnetlab kube run --kubeconfig ~/.kube/config --context prod --paths pod,service --placements cross-node -o prod.json
  vnetlab kube run -f scenarios/kube-pod-service-host.yaml --cluster k
  vnetlab kube run -f scenarios/kube-proxies.yaml -o kube-proxies.json --report kube-proxies-report`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			run, err := r.resolve(cmd.Flags())
			if err != nil {
				return err
			}
			return run.execute(cmd.Context())
		},
	}
	r.register(cmd)
	return cmd
}

func (r *kubeRunFlags) register(cmd *cobra.Command) {
	r.cf.add(cmd)
	f := cmd.Flags()
	f.StringSliceVar(&r.paths, "paths", measure.Paths, "paths: pod (pod IP), service (ClusterIP), host (hostNetwork pods: node to node)")
	f.StringSliceVar(&r.placements, "placements", measure.Placements, "placements: same-node, cross-node")
	f.StringSliceVar(&r.nodes, "nodes", nil, "server node and cross-node client node (default: the first two Ready schedulable nodes by name)")
	registerMeasureFlags(f, &r.spec, &r.tests)
	f.StringVar(&r.img, "image", "", "image with vnetlab, iperf3 and sockperf in /usr/bin (default: vnetlab's own; vnetlab kube image writes it)")
	f.StringVar(&r.label, "label", "", "name of the cluster in tables and results (default: --cluster, --context, or \"cluster\")")
	f.StringVarP(&r.out, "output", "o", "", "write the results JSON here")
	f.StringVar(&r.reportDir, "report", "", "also write the report (Markdown, HTML, charts) into this directory")
	f.StringVarP(&r.file, "file", "f", "", "scenario YAML with a kube: section (flags given too override it)")
	f.DurationVar(&r.readyTimeout, "ready-timeout", measure.DefaultReadyTimeout, "how long the measuring pods may take to be Ready (a registry image may need longer to pull)")
}

// resolve: the defaults, the scenario file over them, then every flag given.
func (r *kubeRunFlags) resolve(f *pflag.FlagSet) (*kubeRun, error) {
	k := &kubeRun{spec: runner.DefaultSpec(), scenario: r.file,
		opts: measure.Options{Paths: measure.Paths, Placements: measure.Placements, ReadyTimeout: measure.DefaultReadyTimeout}}
	if r.file != "" {
		sc, err := scenario.Load(r.file)
		if err != nil {
			return nil, err
		}
		if err := sc.ForKube(); err != nil {
			return nil, err
		}
		k.spec, k.out, k.reportDir = sc.RunSpec(k.spec), sc.Output, sc.Report
		sk := sc.Kube
		k.cf = clusterFlags{cluster: sk.Cluster, kubeconfig: sk.Kubeconfig, context: sk.Context}
		if len(sk.Paths) > 0 {
			k.opts.Paths = sk.Paths
		}
		if len(sk.Placements) > 0 {
			k.opts.Placements = sk.Placements
		}
		k.opts.Nodes, k.opts.Image, k.label = sk.Nodes, sk.Image, sk.Label
		k.opts.ReadyTimeout = sk.ReadyTimeoutValue()
		if sk.Tabled() {
			k.table = sk
		}
	}
	var err error
	f.Visit(func(fl *pflag.Flag) {
		if ok, ferr := applyMeasureFlag(fl.Name, &k.spec, r.spec, r.tests); ok {
			if ferr != nil && err == nil {
				err = ferr
			}
			return
		}
		switch fl.Name {
		// A cluster on the command line replaces the file's as a whole.
		case "cluster", "kubeconfig", "context":
			k.cf = r.cf
		case "paths":
			k.opts.Paths = r.paths
		case "placements":
			k.opts.Placements = r.placements
		case "nodes":
			k.opts.Nodes = r.nodes
		case "image":
			k.opts.Image = r.img
		case "ready-timeout":
			k.opts.ReadyTimeout = r.readyTimeout
		case "label":
			k.label = r.label
		case "output":
			k.out = r.out
		case "report":
			k.reportDir = r.reportDir
		}
	})
	if err != nil {
		return nil, err
	}
	if k.table != nil {
		for _, name := range []string{"cluster", "kubeconfig", "context", "nodes", "label"} {
			if f.Changed(name) {
				return nil, fmt.Errorf("--%s: %s names its clusters in kube.clusters and brings each up itself: drop --%s, or edit the file", name, r.file, name)
			}
		}
	}
	return k, nil
}

func (k *kubeRun) execute(ctx context.Context) error {
	if k.table != nil {
		return k.executeTable(ctx)
	}
	kubeconfig, local, err := k.cf.resolve()
	if err != nil {
		return err
	}
	spec := k.spec
	// The engines run on the nodes, whose CPUs this machine does not know.
	spec.CPUsElsewhere = true
	if err := runner.CheckSpec(spec); err != nil {
		return err
	}
	if err := checkReportDir(k.reportDir); err != nil {
		return err
	}
	opts := k.opts
	opts.Kubeconfig, opts.Context, opts.PullPolicy = kubeconfig, k.cf.context, corev1.PullIfNotPresent
	if err := opts.Validate(); err != nil {
		return err
	}
	if opts.Image == "" {
		if opts.Image, err = vnetlabImage(ctx, k.cf.cluster); err != nil {
			return err
		}
		// No registry has it: a node without it fails at once (ErrImageNeverPull).
		opts.PullPolicy = corev1.PullNever
	}
	label := k.label
	if label == "" {
		label = k.cf.cluster
		if label == "" {
			label = "cluster"
			if k.cf.context != "" {
				label = k.cf.context
			}
		}
	}
	meta := runner.Metadata(version, commit, os.Args)
	meta.Scenario = k.scenario
	meta.Start = time.Now().UTC()
	meta.Settings = results.Settings{Duration: spec.Duration.String(), Repeat: spec.Repeat, Warmup: spec.Warmup, Streams: spec.Streams, Size: spec.Size,
		CPUAffinity: spec.CPUAffinity.String()}
	s, err := measure.Setup(ctx, opts, stderrf)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := s.Close(); cerr != nil {
			stderrf("warning: deleting namespace %s: %v (run `vnetlab kube clean`)", s.Namespace, cerr)
		}
	}()
	meta.Cluster = s.Detect(ctx, local)
	meta.Cluster.Name, meta.Cluster.Image = label, opts.Image
	res := &results.File{SchemaVersion: results.SchemaVersion}
	planned, err := planCells(s, spec.Engine, spec.Tests, label, "", 0, nil)
	if err != nil {
		return err
	}
	for _, p := range planned {
		res.Cells = append(res.Cells, p.Cell)
	}
	runErr := runner.Execute(ctx, spec, planned, newProgress())
	res.Metadata = meta
	res.Metadata.End = time.Now().UTC()
	return emitResults(res, k.out, k.reportDir, runErr)
}

// vnetlabImage is this vnetlab's image reference; a local cluster gets the
// image imported into its nodes when it does not have it yet.
func vnetlabImage(ctx context.Context, local string) (string, error) {
	self, err := engine.SelfBinary()
	if err != nil {
		return "", err
	}
	img, err := image.Build(self)
	if err != nil {
		return "", err
	}
	if local == "" {
		return img.Ref, nil
	}
	st, err := cluster.Load(local)
	if err != nil {
		return "", err
	}
	if st.Facts[cluster.FactImage] == img.Ref {
		return img.Ref, nil
	}
	if err := requireRoot(); err != nil {
		return "", fmt.Errorf("cluster %s lacks this vnetlab's image %s and loading it needs root: run as root, or `vnetlab kube load`", local, img.Ref)
	}
	tmp, err := os.CreateTemp("", "vnetlab-image-*.tar")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	if err := img.Write(tmp.Name()); err != nil {
		return "", err
	}
	stderrf("loading image %s into cluster %s", img.Ref, local)
	return img.Ref, cluster.LoadImages(ctx, local, []string{tmp.Name()})
}

// planCells is a cell per endpoint of the session (of the given paths; nil:
// all) and test, named label/path@placement/test, with extra generated
// Services present besides the measured one; provider, when given, names
// the service cells' proxy as a lab's service cells name theirs
// (label/service(provider+extra)@placement/test).
func planCells(s *measure.Session, eng string, tests []engine.Test, label, provider string, extra int, paths []string) ([]runner.Planned, error) {
	var planned []runner.Planned
	for _, ep := range s.Endpoints {
		if paths != nil && !slices.Contains(paths, ep.Path) {
			continue
		}
		for _, t := range tests {
			d, err := engine.For(eng, t)
			if err != nil {
				return nil, err
			}
			c := &results.Cell{Mode: label, Path: ep.Path, Placement: ep.Placement, ClientNode: ep.ClientNode, ServerNode: ep.ServerNode,
				Test: string(t), Engine: d.Name(), Unit: t.Unit(), ExtraServices: extra}
			if ep.Path == measure.PathService {
				c.Provider = provider
			}
			planned = append(planned, runner.Planned{Cell: c, Driver: d,
				Target: engine.Target{ServerNS: ep.ServerPod, ClientNS: ep.ClientPod, Addr: ep.Addr, Starter: s.Exec}})
		}
	}
	return planned, nil
}
