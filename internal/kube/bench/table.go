package bench

// A run over several cluster configurations (a scenario's kube.clusters):
// each is brought up as a local cluster of its own, measured, and removed,
// one after the other; the cells of all of them go into one results file,
// named CONFIG/path@placement/test, so `vnetlab ratio` and the report treat
// each configuration as a mode.

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/kube/measure"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
	"github.com/vnetlab/vnetlab/internal/runner"
)

// programmedTimeout bounds the wait for a proxy to carry a Service created
// after the extra ones (kube-proxy iptables rewrites every rule per sync).
const programmedTimeout = 5 * time.Minute

// runTable measures every configuration in turn; one that fails is
// recorded as skipped and the others still run.
func (s Spec) runTable(ctx context.Context, res *results.File, prog runner.Progress, say func(string, ...any)) error {
	meta := &res.Metadata
	var runErr error
	var failed []string
	for i, c := range s.Configs {
		if ctx.Err() != nil {
			runErr = ctx.Err()
			break
		}
		n := c.Cluster.Network()
		say("configuration %d/%d %s: cluster %s, CNI %s, proxy %s, %d nodes (%s into the run)", i+1, len(s.Configs), c.Name, c.Cluster.Name,
			n.CNIText(), n.ProxyText(), c.Cluster.Nodes, time.Since(meta.Start).Round(time.Second))
		cl, err := s.measureConfig(ctx, c, res, prog, say)
		if cl != nil {
			meta.Clusters = append(meta.Clusters, *cl)
		}
		if err != nil {
			if ctx.Err() != nil {
				runErr = ctx.Err()
				break
			}
			say("configuration %s failed: %v", c.Name, err)
			meta.Skipped = append(meta.Skipped, results.Skipped{Mode: c.Name, Reason: err.Error()})
			failed = append(failed, c.Name)
		}
	}
	if runErr == nil && len(failed) > 0 {
		runErr = fmt.Errorf("configuration(s) %s failed (above, and under skipped in the results)", strings.Join(failed, ", "))
	}
	// Once over every configuration's cells: each compared with the first
	// configuration's (vs baseline), and the cells of an interrupted one
	// summarised too.
	analysis.Analyze(res.Cells, s.Measure.Summary)
	return runErr
}

// measureConfig measures one configuration: its cluster up (or reused),
// the matrix, then the extra-Services cells; everything it made is removed
// on return, also after a failure or Ctrl-C. Cells measured go into res.
func (s Spec) measureConfig(ctx context.Context, c Config, res *results.File, prog runner.Progress, say func(string, ...any)) (*results.Cluster, error) {
	st, ours, err := upOrReuse(ctx, c, say)
	if err != nil {
		return nil, err
	}
	if ours {
		defer func() {
			start := time.Now()
			if err := cluster.Down(c.Cluster.Name, nil); err != nil {
				say("warning: removing cluster %s: %v (run `vnetlab kube down %s`)", c.Cluster.Name, err, c.Cluster.Name)
				return
			}
			say("cluster %s removed in %s", c.Cluster.Name, time.Since(start).Round(100*time.Millisecond))
		}()
	}
	opts := s.Pods
	opts.Kubeconfig, opts.Context, opts.Nodes, opts.PullPolicy = st.Facts[cluster.FactKubeconfig], "", nil, corev1.PullIfNotPresent
	if opts.Image == "" {
		if opts.Image, err = vnetlabImage(ctx, c.Cluster.Name, say); err != nil {
			return nil, err
		}
		opts.PullPolicy = corev1.PullNever
	}
	sess, err := measure.Setup(ctx, opts, say)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := sess.Close(); cerr != nil {
			say("warning: deleting namespace %s: %v", sess.Namespace, cerr)
		}
	}()
	net := cluster.Network(st)
	cl := sess.Detect(ctx, &net)
	cl.Name, cl.Image, cl.ProxySince = c.Name, opts.Image, st.Facts[cluster.FactProxySince]
	meter, how, stop := nodeMeter(ctx, sess, true, say)
	defer stop()
	cl.NodeCPU = how
	spec := s.measureSpec()
	planned, err := plan(sess, spec, c.Name, c.Cluster.Proxy, 0, nil, nil)
	if err != nil {
		return cl, err
	}
	if err := measurePlanned(ctx, spec, planned, res, prog, meter); err != nil || c.Extra == 0 {
		return cl, err
	}
	return cl, s.measureWithExtra(ctx, sess, c, res, prog, say, ours, meter)
}

// measureWithExtra creates c.Extra Services through the API, waits until
// the proxy carries one made after them, measures the pod and service
// paths with ExtraTests again (cells +Extra), and deletes the Services,
// unless the cluster goes right after (clusterGoes): deleting 10000
// Services one by one takes minutes on this machine and the cluster's
// removal takes them all.
func (s Spec) measureWithExtra(ctx context.Context, sess *measure.Session, c Config, res *results.File, prog runner.Progress, say func(string, ...any), clusterGoes bool, meter runner.NodeMeter) error {
	var measured []string
	for _, p := range s.Pods.Paths {
		if p != measure.PathHost { // the node-to-node path has no Service to load
			measured = append(measured, p)
		}
	}
	if len(measured) == 0 {
		say("no extra Services: kube.paths has no pod or service path to measure with them")
		return nil
	}
	n := c.Extra
	say("creating %d extra Services (each with one EndpointSlice) with %d workers", n, measure.ExtraWorkers)
	ex, err := measure.CreateExtraServices(ctx, sess.Config, n, 1, say)
	if err != nil {
		return err
	}
	say("created %d Services and %d EndpointSlices in %s: %.0f Services/s", n, n, ex.Took.Round(100*time.Millisecond), ex.Rate())
	defer func() {
		if clusterGoes {
			say("the %d extra Services go with the cluster", n)
			return
		}
		took, err := ex.Delete(say)
		if err != nil {
			say("warning: deleting the extra Services (namespace %s): %v (run `vnetlab kube clean`)", ex.Namespace, err)
			return
		}
		say("deleted the %d extra Services in %s", n, took.Round(100*time.Millisecond))
	}()
	took, err := sess.WaitProgrammed(ctx, programmedTimeout)
	if err != nil {
		return err
	}
	say("the proxy carried a Service created after them %s later", took.Round(100*time.Millisecond))
	spec := s.measureSpec()
	spec.Tests = s.ExtraTests
	planned, err := plan(sess, spec, c.Name, c.Cluster.Proxy, n, measured, nil)
	if err != nil {
		return err
	}
	for _, p := range planned {
		p.Cell.ServiceLoadSec = (ex.Took + took).Seconds()
	}
	return measurePlanned(ctx, spec, planned, res, prog, meter)
}

// upOrReuse brings the configuration's cluster up, or reuses a local
// cluster of that name built the same way (ours false: it stays up after
// the run). A cluster of that name built differently is refused, never
// replaced: it may be someone's.
func upOrReuse(ctx context.Context, c Config, say func(string, ...any)) (*lab.State, bool, error) {
	name := c.Cluster.Name
	if _, err := lab.Load(name); err == nil {
		st, err := cluster.Load(name)
		if err != nil {
			return nil, false, err
		}
		if d := c.Cluster.Differs(st); d != "" {
			return nil, false, fmt.Errorf("cluster %s exists with %s: remove it (vnetlab kube down %s) or give configuration %s another cluster name (kube.clusters[].cluster)", name, d, name, c.Name)
		}
		say("reusing cluster %s (built the same way); it stays up after the run", name)
		return st, false, nil
	}
	start := time.Now()
	st, err := cluster.Up(ctx, c.Cluster, say)
	if err != nil {
		return nil, false, err
	}
	say("cluster %s up in %s", name, time.Since(start).Round(100*time.Millisecond))
	return st, true, nil
}
