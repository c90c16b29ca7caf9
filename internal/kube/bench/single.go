package bench

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/kube/measure"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
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
	nodeCount := map[string]nodeCounters{} // a local vnetlab enforcer's, read by the policies' proofs
	policyLab := ""                        // the lab provider with the local enforcer's data path
	proxySince := ""                       // when kube set-proxy started the local cluster's proxy
	if s.Cluster.Local != "" {
		// Held for the run: no set-proxy or kube down changes the proxy
		// the results name while it measures.
		st, release, err := cluster.Hold(s.Cluster.Local)
		if err != nil {
			return err
		}
		defer release()
		n := cluster.Network(st)
		local, opts.Kubeconfig, policyLab = &n, st.Facts[cluster.FactKubeconfig], cluster.PolicyLabProvider(st)
		proxySince = st.Facts[cluster.FactProxySince]
		if e, _ := clusternet.GetEnforcer(n.Policy); e.Vnetlab && s.Measure.UsesPolicies() {
			nodeCount = enforcerCounters(st)
		}
	}
	groups := []runner.PolicyGroup{{Points: s.Measure.Sweep.Points()}}
	if s.Measure.UsesPolicies() {
		if local == nil {
			say("warning: which NetworkPolicy enforcer cluster %s runs is not known here: each cell's proof (a denied connection dropped) says whether its policies are in force", s.label())
		} else if err := checkEnforcer(s.Cluster.Local, local.Policy, fmt.Sprintf("%s and %s", knob.Policies, knob.IPBlocks)); err != nil {
			return err
		}
		groups = s.Measure.PolicyGroups()
	}
	if opts.Image == "" {
		var err error
		if opts.Image, err = vnetlabImage(ctx, s.Cluster.Local, say); err != nil {
			return err
		}
		// No registry has it: a node without it fails at once (ErrImageNeverPull).
		opts.PullPolicy = corev1.PullNever
	}
	// A namespace per policy set (policies.go), the first with every path.
	var sessions []*measure.Session
	defer func() {
		for _, sess := range sessions {
			if cerr := sess.Close(); cerr != nil {
				say("warning: deleting namespace %s: %v (run `vnetlab kube clean`)", sess.Namespace, cerr)
			}
		}
	}()
	label := s.label()
	spec := s.measureSpec()
	var planned []runner.Planned
	for i, g := range groups {
		o := opts
		if i > 0 {
			o.Paths = slices.DeleteFunc(slices.Clone(o.Paths), func(p string) bool { return p == measure.PathHost })
			o.NodeCPUPods, o.Nodes = false, nil
			for _, n := range sessions[0].Nodes {
				o.Nodes = append(o.Nodes, n.Name)
			}
		}
		sess, err := measure.Setup(ctx, o, say)
		if err != nil {
			return err
		}
		sessions = append(sessions, sess)
		cells, err := plan(sess, spec, label, "", 0, nil, g.Points)
		if err != nil {
			return err
		}
		if s.Measure.UsesPolicies() {
			ps, err := enforce(ctx, sess, g.Set, nodeCount, say)
			if err != nil {
				return err
			}
			ps.prove(cells)
		}
		planned = append(planned, cells...)
	}
	sess := sessions[0]
	res.Metadata.Cluster = sess.Detect(ctx, local)
	res.Metadata.Cluster.Name, res.Metadata.Cluster.Image, res.Metadata.Cluster.PolicyLabProvider = label, opts.Image, policyLab
	res.Metadata.Cluster.ProxySince = proxySince
	meter, how, stop := nodeMeter(ctx, sess, local != nil, say)
	defer stop()
	res.Metadata.Cluster.NodeCPU = how
	if s.Lab {
		labs, err := s.prepareLabs(ctx, policyLab, prog)
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
