package bench

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/kube/measure"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/runner"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

// runOne measures one cluster: the pods set up, the cells measured, the
// namespace deleted at the end (and on Ctrl-C).
func (s Spec) runOne(ctx context.Context, res *results.File, prog runner.Progress, say func(string, ...any)) error {
	opts := s.Pods
	opts.Kubeconfig, opts.Context, opts.PullPolicy = s.Cluster.Kubeconfig, s.Cluster.Context, corev1.PullIfNotPresent
	opts.NodeCPUPods = s.Cluster.Local == "" // a local cluster's nodes are read from their cgroups
	var local *clusternet.Network
	if s.Cluster.Local != "" {
		st, err := cluster.Load(s.Cluster.Local)
		if err != nil {
			return err
		}
		n := cluster.Network(st)
		local, opts.Kubeconfig = &n, st.Facts[cluster.FactKubeconfig]
	}
	if opts.Image == "" {
		var err error
		if opts.Image, err = vnetlabImage(ctx, s.Cluster.Local, say); err != nil {
			return err
		}
		// No registry has it: a node without it fails at once (ErrImageNeverPull).
		opts.PullPolicy = corev1.PullNever
	}
	sess, err := measure.Setup(ctx, opts, say)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := sess.Close(); cerr != nil {
			say("warning: deleting namespace %s: %v (run `vnetlab kube clean`)", sess.Namespace, cerr)
		}
	}()
	label := s.label()
	res.Metadata.Cluster = sess.Detect(ctx, local)
	res.Metadata.Cluster.Name, res.Metadata.Cluster.Image = label, opts.Image
	meter, how, stop := nodeMeter(ctx, sess, local != nil, say)
	defer stop()
	res.Metadata.Cluster.NodeCPU = how
	spec := s.measureSpec()
	planned, err := plan(sess, spec, label, "", 0, nil)
	if err != nil {
		return err
	}
	if s.Lab {
		labs, err := s.prepareLabs(ctx, prog)
		for _, l := range labs {
			defer l.Close()
		}
		if err != nil {
			return err
		}
		var cells []runner.Planned
		for _, l := range labs {
			cells = append(cells, l.Cells()...)
			res.Metadata.Skipped = append(res.Metadata.Skipped, l.Skipped()...)
		}
		planned = interleave(cells, planned)
	}
	return measurePlanned(ctx, spec, planned, res, prog, meter)
}

// label names the cluster in its cells: Label, else the local cluster's
// name, else the kubeconfig's context, else "cluster".
func (s Spec) label() string {
	for _, l := range []string{s.Label, s.Cluster.Local, s.Cluster.Context} {
		if l != "" {
			return l
		}
	}
	return "cluster"
}
