// Package bench is `vnetlab kube run`: a cluster's pod, Service and host
// paths measured by the lab runs' engines, in the same interleaved rounds
// (runner.Execute), into the same results file. One cluster (single.go),
// or a table of configurations, each a local cluster brought up, measured
// with extra Services and removed in turn (table.go).
package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/kube/measure"
	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
	"github.com/vnetlab/vnetlab/internal/runner"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// Spec is one `kube run`.
type Spec struct {
	// Measure is how each cell is measured (tests, engine, duration,
	// repeat, ...: a lab run's settings; the lab fields are unused).
	Measure runner.Spec
	// Cluster is the cluster to measure; unused with Configs.
	Cluster Target
	// Pods says which paths and placements, on which nodes, with which
	// image (the kubeconfig comes from Cluster or each configuration).
	Pods measure.Options
	// Label names the cluster in the cells ("": Cluster.Local, else its
	// context, else "cluster"); unused with Configs.
	Label string
	// Configs: several configurations (a scenario's kube.clusters), each a
	// local cluster of its own, measured one after the other into one
	// results file, each Name being its cells' mode.
	Configs []Config
	// ExtraTests are measured again with each configuration's extra Services.
	ExtraTests []engine.Test
	// Tolerance fails the run when a pod cell is significantly below its
	// host cell by more than this ratio (analysis.HostChecks); 0: no check.
	Tolerance float64
	// Lab: Measure's lab (its modes, nodes, paths) is brought up beside
	// the cluster and measured in the same rounds, a lab cell then a
	// cluster cell (beside.go); one cluster only.
	Lab bool
	// LabSameNode: with Lab, these modes are measured too on a one-node
	// lab beside the cluster, for its same-node cells (Measure's lab has
	// two nodes), labelled MODE-1node (oneNodeLabel).
	LabSameNode []string
}

// Target is a local cluster (vnetlab kube up) or any cluster's kubeconfig
// and context.
type Target struct {
	Local               string
	Kubeconfig, Context string
}

// Config is one configuration of a table: its name (the cells' mode), the
// local cluster it runs on, and how many Services to create through the API
// before ExtraTests are measured again (0: none).
type Config struct {
	Name    string
	Cluster cluster.Spec
	Extra   int
}

// DefaultSpec is a plain `kube run`: every path and placement, the lab
// run's default measurement.
func DefaultSpec() Spec {
	return Spec{Measure: runner.DefaultSpec(),
		Pods: measure.Options{Paths: measure.Paths, Placements: measure.Placements, ReadyTimeout: measure.DefaultReadyTimeout}}
}

// measureSpec is Measure as the run executes it: the engines run on the
// nodes, whose CPUs are this machine's only for local clusters (a table's,
// or --cluster's: --cpu-affinity auto pins every test there as in a lab run;
// a kubeconfig's cluster may be anywhere).
func (s Spec) measureSpec() runner.Spec {
	m := s.Measure
	m.CPUsElsewhere = len(s.Configs) == 0 && s.Cluster.Local == ""
	m.ClusterPolicies = true // the cluster's enforcer's (policies.go)
	return m
}

// Validate refuses a bad spec before anything is set up.
func (s Spec) Validate() error {
	if len(s.Configs) > 0 && os.Geteuid() != 0 {
		return fmt.Errorf("kube.clusters brings up local clusters, which needs root: run it with sudo")
	}
	if s.Cluster.Local != "" && (s.Cluster.Kubeconfig != "" || s.Cluster.Context != "") {
		return field.Errorf("cluster", "give either {cluster} or {kubeconfig}/{context}, not both")
	}
	if s.Measure.Summary.Precision > 0 {
		return field.Errorf("precision", "{precision} is run's: kube run measures its configurations and Services in runs of their own, whose looks its comparisons cannot spend the error over; give --repeat")
	}
	if s.Measure.Duet {
		return field.Errorf("duet", "{duet} is run's: a cluster's pods run where the scheduler puts them, not on a CPU each")
	}
	if s.Measure.Profile && s.Cluster.Local == "" && len(s.Configs) == 0 {
		return field.Errorf("profile", "{profile} samples this machine's CPUs, which run only a local cluster's nodes: measure one with {cluster} NAME, or drop {profile}")
	}
	if err := s.measureSpec().Validate(); err != nil {
		return err
	}
	if s.Tolerance != 0 {
		if err := analysis.ValidateTolerance(s.Tolerance); err != nil {
			return err
		}
		if !slices.Contains(s.Pods.Paths, measure.PathPod) || !slices.Contains(s.Pods.Paths, measure.PathHost) {
			return fmt.Errorf("--tolerance compares the pod path with host: measure both (--paths pod,host)")
		}
	}
	if s.Lab && (s.Cluster.Local == "" || len(s.Measure.Modes) == 0) {
		return field.Errorf("lab", "{lab} measures the file's modes beside one local cluster, on the same CPUs: give modes and kube.cluster (not kube.clusters or a kubeconfig)")
	}
	if len(s.LabSameNode) > 0 && (!s.Lab || s.Measure.Nodes < 2) {
		return field.Errorf("lab_same_node", "{lab_same_node} adds a one-node lab beside the file's two-node lab: set {lab} and nodes: 2 (or list the modes under modes: with nodes: 1)")
	}
	if s.Lab && os.Geteuid() != 0 {
		return fmt.Errorf("kube.lab brings up labs, which needs root: run it with sudo")
	}
	if s.Measure.SetsLinks() {
		return field.Errorf("sweep", "%s set a lab's links; a cluster's are its CNI's: kube run takes %s, %s, %s, %s, %s and %s",
			knob.LinksNames(), knob.Size, knob.Streams, knob.Load, knob.Rate, knob.Policies, knob.IPBlocks)
	}
	if err := s.checkPolicies(); err != nil {
		return err
	}
	return s.Pods.Validate()
}

// Run measures the spec's cluster, or each of its configurations, and
// returns the results file; say reports progress (the bar is prog's).
func Run(ctx context.Context, s Spec, prov runner.Provenance, prog runner.Progress, say func(string, ...any)) (*results.File, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	s.Measure.ClusterPolicies = true                 // its settings name no lab policy provider
	s.Measure.OrderSeed = s.Measure.DrawnOrderSeed() // one seed, recorded, for every configuration's rounds
	res := runner.Begin(prov, s.Measure)
	res.Metadata.Settings.Tolerance = s.Tolerance
	var err error
	if len(s.Configs) > 0 {
		err = s.runTable(ctx, res, prog, say)
	} else {
		err = s.runOne(ctx, res, prog, say)
	}
	res.Metadata.End = time.Now().UTC()
	return res, err
}

// plan is a cell per endpoint of the session (of the given paths; nil: all),
// test and point of the sweep (points; nil: all), named label/path@placement/test, with extra generated Services
// present besides the measured one; provider, when given, names the
// service cells' proxy as a lab's service cells name theirs
// (label/service(provider+extra)@placement/test).
func plan(s *measure.Session, spec runner.Spec, label, provider string, extra int, paths []string, points []knob.Point) ([]runner.Planned, error) {
	if points == nil {
		points = spec.Sweep.Points()
	}
	var planned []runner.Planned
	for _, ep := range s.Endpoints {
		if paths != nil && !slices.Contains(paths, ep.Path) {
			continue
		}
		proto := results.Cell{Mode: label, Path: ep.Path, Placement: ep.Placement, ClientNode: ep.ClientNode, ServerNode: ep.ServerNode, ExtraServices: extra,
			Family: ep.Family.Cell(), Addr: ep.Addr}
		if ep.Path == measure.PathService {
			proto.Provider = provider
		}
		cells, err := spec.PlanPoints(points, proto, engine.Target{ServerNS: ep.ServerPod, ClientNS: ep.ClientPod, Addr: ep.Addr, Starter: s.Exec}, nil)
		if err != nil {
			return nil, err
		}
		planned = append(planned, cells...)
	}
	return planned, nil
}

// measurePlanned adds the planned cells to res and measures them, with
// each node's CPU read by meter (nil: none).
func measurePlanned(ctx context.Context, spec runner.Spec, planned []runner.Planned, res *results.File, prog runner.Progress, meter runner.NodeMeter) error {
	for _, p := range planned {
		res.Cells = append(res.Cells, p.Cell)
	}
	return runner.Execute(ctx, spec, planned, prog, meter)
}
