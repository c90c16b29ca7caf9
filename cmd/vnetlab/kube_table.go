package main

// kube run over several cluster configurations (a scenario's kube.clusters):
// each is brought up as a local cluster of its own, measured, and removed,
// one after the other; the cells of all of them go into one results file,
// named CONFIG/path@placement/test, so `vnetlab ratio` and the report treat
// each configuration as a mode.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vnetlab/vnetlab/internal/analysis"
	"github.com/vnetlab/vnetlab/internal/engine"
	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/kube/measure"
	"github.com/vnetlab/vnetlab/internal/lab"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/runner"
	"github.com/vnetlab/vnetlab/internal/scenario"
)

// programmedTimeout bounds the wait for a proxy to carry a Service created
// after the extra ones (kube-proxy iptables rewrites every rule per sync).
const programmedTimeout = 5 * time.Minute

func (k *kubeRun) executeTable(ctx context.Context) error {
	if err := requireRoot(); err != nil {
		return err
	}
	spec := k.spec
	// The clusters are local: their nodes' pods run on this machine's CPUs,
	// so --cpu-affinity auto pins rr/crr here as in a lab run (not so for
	// a single kube run, whose cluster may be anywhere).
	spec.CPUsElsewhere = false
	if err := runner.CheckSpec(spec); err != nil {
		return err
	}
	if err := checkReportDir(k.reportDir); err != nil {
		return err
	}
	if err := k.opts.Validate(); err != nil {
		return err
	}
	var extraTests []engine.Test
	for _, t := range k.table.ExtraTestList() {
		et, err := engine.ParseTest(t)
		if err != nil {
			return err
		}
		extraTests = append(extraTests, et)
	}
	meta := runner.Metadata(version, commit, os.Args)
	meta.Scenario = k.scenario
	meta.Start = time.Now().UTC()
	meta.Settings = results.Settings{Duration: spec.Duration.String(), Repeat: spec.Repeat, Warmup: spec.Warmup, Streams: spec.Streams, Size: spec.Size,
		CPUAffinity: spec.CPUAffinity.String()}
	res := &results.File{SchemaVersion: results.SchemaVersion}
	var runErr error
	var failed []string
	n := len(k.table.Clusters)
	for i, c := range k.table.Clusters {
		if ctx.Err() != nil {
			runErr = ctx.Err()
			break
		}
		stderrf("configuration %d/%d %s: cluster %s, CNI %s, proxy %s, %d nodes (%s into the run)", i+1, n, c.Name, c.Cluster,
			c.Spec().Network().CNIText(), c.Proxy, c.Nodes, time.Since(meta.Start).Round(time.Second))
		cl, err := k.measureConfig(ctx, c, spec, extraTests, res)
		if cl != nil {
			meta.Clusters = append(meta.Clusters, *cl)
		}
		if err != nil {
			if ctx.Err() != nil {
				runErr = ctx.Err()
				break
			}
			stderrf("configuration %s failed: %v", c.Name, err)
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
	analysis.Analyze(res.Cells, spec.Summary)
	res.Metadata = meta
	res.Metadata.End = time.Now().UTC()
	return emitResults(res, k.out, k.reportDir, runErr)
}

// measureConfig measures one configuration: its cluster up (or reused),
// the matrix, then the extra-Services cells; everything it made is removed
// on return, also after a failure or Ctrl-C. Cells measured go into res.
func (k *kubeRun) measureConfig(ctx context.Context, c scenario.KubeCluster, spec runner.Spec, extraTests []engine.Test, res *results.File) (*results.Cluster, error) {
	st, ours, err := upOrReuse(ctx, c)
	if err != nil {
		return nil, err
	}
	if ours {
		defer func() {
			start := time.Now()
			if err := cluster.Down(c.Cluster, nil); err != nil {
				stderrf("warning: removing cluster %s: %v (run `vnetlab kube down %s`)", c.Cluster, err, c.Cluster)
				return
			}
			stderrf("cluster %s removed in %s", c.Cluster, time.Since(start).Round(100*time.Millisecond))
		}()
	}
	opts := k.opts
	opts.Kubeconfig, opts.Context, opts.Nodes, opts.PullPolicy = st.Facts[cluster.FactKubeconfig], "", nil, corev1.PullIfNotPresent
	if opts.Image == "" {
		if opts.Image, err = vnetlabImage(ctx, c.Cluster); err != nil {
			return nil, err
		}
		opts.PullPolicy = corev1.PullNever
	}
	s, err := measure.Setup(ctx, opts, stderrf)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := s.Close(); cerr != nil {
			stderrf("warning: deleting namespace %s: %v", s.Namespace, cerr)
		}
	}()
	net := cluster.Network(st)
	cl := s.Detect(ctx, &net)
	cl.Name, cl.Image = c.Name, opts.Image
	planned, err := planCells(s, spec.Engine, spec.Tests, c.Name, c.Proxy, 0, nil)
	if err != nil {
		return cl, err
	}
	for _, p := range planned {
		res.Cells = append(res.Cells, p.Cell)
	}
	if err := runner.Execute(ctx, spec, planned, newProgress()); err != nil {
		return cl, err
	}
	n := k.table.ExtraFor(c)
	if n == 0 {
		return cl, nil
	}
	return cl, measureWithExtra(ctx, s, c.Name, c.Proxy, n, spec, extraTests, opts.Paths, res, ours)
}

// measureWithExtra creates n Services through the API, waits until the
// proxy carries one made after them, measures the pod and service paths
// with tests again (cells +n), and deletes the Services, unless the
// cluster goes right after (clusterGoes): deleting 10000 Services one by one
// takes minutes on this machine and the cluster's removal takes them all.
func measureWithExtra(ctx context.Context, s *measure.Session, label, proxy string, n int, spec runner.Spec, tests []engine.Test, paths []string, res *results.File, clusterGoes bool) error {
	var measured []string
	for _, p := range paths {
		if p != measure.PathHost { // the node-to-node path has no Service to load
			measured = append(measured, p)
		}
	}
	if len(measured) == 0 {
		stderrf("no extra Services: kube.paths has no pod or service path to measure with them")
		return nil
	}
	stderrf("creating %d extra Services (each with one EndpointSlice) with %d workers", n, measure.ExtraWorkers)
	ex, err := measure.CreateExtraServices(ctx, s.Config, n, stderrf)
	if err != nil {
		return err
	}
	stderrf("created %d Services and %d EndpointSlices in %s: %.0f Services/s", n, n, ex.Took.Round(100*time.Millisecond), ex.Rate())
	defer func() {
		if clusterGoes {
			stderrf("the %d extra Services go with the cluster", n)
			return
		}
		took, err := ex.Delete(stderrf)
		if err != nil {
			stderrf("warning: deleting the extra Services (namespace %s): %v (run `vnetlab kube clean`)", ex.Namespace, err)
			return
		}
		stderrf("deleted the %d extra Services in %s", n, took.Round(100*time.Millisecond))
	}()
	took, err := s.WaitProgrammed(ctx, programmedTimeout)
	if err != nil {
		return err
	}
	stderrf("the proxy carried a Service created after them %s later", took.Round(100*time.Millisecond))
	planned, err := planCells(s, spec.Engine, tests, label, proxy, n, measured)
	if err != nil {
		return err
	}
	for _, p := range planned {
		p.Cell.ServiceLoadSec = (ex.Took + took).Seconds()
		res.Cells = append(res.Cells, p.Cell)
	}
	spec.Tests = tests
	return runner.Execute(ctx, spec, planned, newProgress())
}

// upOrReuse brings the configuration's cluster up, or reuses a local
// cluster of that name built the same way (ours false: it stays up after
// the run). A cluster of that name built differently is refused, never
// replaced: it may be someone's.
func upOrReuse(ctx context.Context, c scenario.KubeCluster) (*lab.State, bool, error) {
	spec := c.Spec()
	if _, err := lab.Load(c.Cluster); err == nil {
		st, err := cluster.Load(c.Cluster)
		if err != nil {
			return nil, false, err
		}
		if d := spec.Differs(st); d != "" {
			return nil, false, fmt.Errorf("cluster %s exists with %s: remove it (vnetlab kube down %s) or give configuration %s another cluster name (kube.clusters[].cluster)", c.Cluster, d, c.Cluster, c.Name)
		}
		stderrf("reusing cluster %s (built the same way); it stays up after the run", c.Cluster)
		return st, false, nil
	}
	start := time.Now()
	st, err := cluster.Up(ctx, spec, stderrf)
	if err != nil {
		return nil, false, err
	}
	stderrf("cluster %s up in %s", c.Cluster, time.Since(start).Round(100*time.Millisecond))
	return st, true, nil
}
