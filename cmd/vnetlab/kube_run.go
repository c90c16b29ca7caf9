package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/vnetlab/vnetlab/internal/engine"
	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/kube/image"
	"github.com/vnetlab/vnetlab/internal/kube/measure"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/runner"
)

func newKubeRunCmd() *cobra.Command {
	var (
		cf                       clusterFlags
		paths, placements, nodes []string
		tests                    []string
		out, reportDir, img      string
		label                    string
		// The measurement settings of a lab run; the lab ones (modes, pods) stay unused.
		spec = runner.DefaultSpec()
	)
	cmd := &cobra.Command{
		Use:   "run (--kubeconfig PATH [--context C] | --cluster NAME) [--paths pod,service,host] [--placements same-node,cross-node]",
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

Examples:
  vnetlab kube run --cluster k --tests tcp_stream,tcp_rr,tcp_crr --repeat 5
  vnetlab kube run --kubeconfig ~/.kube/config --context prod --paths pod,service --placements cross-node -o prod.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			kubeconfig, local, err := cf.resolve()
			if err != nil {
				return err
			}
			if spec.Tests, err = parseTests(tests); err != nil {
				return err
			}
			// The engines run on the nodes, whose CPUs this machine does not know.
			spec.CPUsElsewhere = true
			if err := runner.CheckSpec(spec); err != nil {
				return err
			}
			if err := checkReportDir(reportDir); err != nil {
				return err
			}
			opts := measure.Options{Kubeconfig: kubeconfig, Context: cf.context, Paths: paths, Placements: placements, Nodes: nodes,
				Image: img, PullPolicy: corev1.PullIfNotPresent}
			if err := opts.Validate(); err != nil {
				return err
			}
			if opts.Image == "" {
				if opts.Image, err = vnetlabImage(ctx, cf.cluster); err != nil {
					return err
				}
				// No registry has it: a node without it fails at once (ErrImageNeverPull).
				opts.PullPolicy = corev1.PullNever
			}
			if label == "" {
				label = cf.cluster
				if label == "" {
					label = "cluster"
					if cf.context != "" {
						label = cf.context
					}
				}
			}
			meta := runner.Metadata(version, commit, os.Args)
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
			var known map[string]string
			if local != nil {
				known = map[string]string{"cni": local[cluster.FactCNI], "proxy": local[cluster.FactProxy]}
			}
			meta.Cluster = s.Detect(ctx, known)
			meta.Cluster.Name, meta.Cluster.Image = label, opts.Image
			res := &results.File{SchemaVersion: results.SchemaVersion}
			var planned []runner.Planned
			for _, ep := range s.Endpoints {
				for _, t := range spec.Tests {
					d, err := engine.For(spec.Engine, t)
					if err != nil {
						return err
					}
					c := &results.Cell{Mode: label, Path: ep.Path, Placement: ep.Placement, ClientNode: ep.ClientNode, ServerNode: ep.ServerNode,
						Test: string(t), Engine: d.Name(), Unit: t.Unit()}
					res.Cells = append(res.Cells, c)
					planned = append(planned, runner.Planned{Cell: c, Driver: d,
						Target: engine.Target{ServerNS: ep.ServerPod, ClientNS: ep.ClientPod, Addr: ep.Addr, Starter: s.Exec}})
				}
			}
			runErr := runner.Execute(ctx, spec, planned, newProgress())
			res.Metadata = meta
			res.Metadata.End = time.Now().UTC()
			return emitResults(res, out, reportDir, runErr)
		},
	}
	cf.add(cmd)
	f := cmd.Flags()
	f.StringSliceVar(&paths, "paths", []string{measure.PathPod, measure.PathService, measure.PathHost}, "paths: pod (pod IP), service (ClusterIP), host (hostNetwork pods: node to node)")
	f.StringSliceVar(&placements, "placements", []string{measure.SameNode, measure.CrossNode}, "placements: same-node, cross-node")
	f.StringSliceVar(&nodes, "nodes", nil, "server node and cross-node client node (default: the first two Ready schedulable nodes by name)")
	registerMeasureFlags(f, &spec, &tests)
	f.StringVar(&img, "image", "", "image with vnetlab, iperf3 and sockperf in /usr/bin (default: vnetlab's own; vnetlab kube image writes it)")
	f.StringVar(&label, "label", "", "name of the cluster in tables and results (default: --cluster, --context, or \"cluster\")")
	f.StringVarP(&out, "output", "o", "", "write the results JSON here")
	f.StringVar(&reportDir, "report", "", "also write the report (Markdown, HTML, charts) into this directory")
	return cmd
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
