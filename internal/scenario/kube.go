package scenario

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/kube/bench"
	"github.com/vnetlab/vnetlab/internal/kube/measure"
	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// Kube is a scenario's `kube:` section: what the flags of `vnetlab kube run`
// say about the cluster and where the pods go. The measurement settings
// (tests, duration, repeat, ...) stay at the top level, shared with `run`.
type Kube struct {
	Cluster    string   `yaml:"cluster"`    // a local cluster (vnetlab kube up)
	Kubeconfig string   `yaml:"kubeconfig"` // or any cluster's kubeconfig ...
	Context    string   `yaml:"context"`    // ... and context
	Paths      []string `yaml:"paths"`      // pod, service, host
	Placements []string `yaml:"placements"` // same-node, cross-node
	Nodes      []string `yaml:"nodes"`      // server node, cross-node client node
	Image      string   `yaml:"image"`
	Label      string   `yaml:"label"` // the cluster's name in tables and results
	// ReadyTimeout: how long the measuring pods may take to be Ready.
	ReadyTimeout string `yaml:"ready_timeout"`
	// Clusters: several configurations measured one after the other, each
	// on a local cluster of its own (kubetable.go); ExtraServices Services
	// created through the API before ExtraTests are measured again.
	Clusters      []KubeCluster `yaml:"clusters"`
	ExtraServices int           `yaml:"extra_services"`
	ExtraTests    []string      `yaml:"extra_tests"`
	// Tolerance: kube run --tolerance (nil: no check).
	Tolerance *float64 `yaml:"tolerance"`
	// IPFamily: kube run --ip-family; with clusters, each local cluster is
	// brought up with it too (kube up --ip-family).
	IPFamily string `yaml:"ip_family"`
	// Lab: the file's lab (its top-level modes, nodes, paths, ...) is
	// measured beside the cluster, a lab cell then a cluster cell, into
	// one results file (bench.Spec.Lab).
	Lab bool `yaml:"lab"`
	// LabSameNode: with lab, these modes on a one-node lab too, for the
	// cluster's same-node cells (the file's lab has two nodes), each
	// labelled MODE-1node (bench.Spec.LabSameNode).
	LabSameNode []string `yaml:"lab_same_node"`
}

// BenchSpec is the cluster run the file describes for `kube run -f`: b
// (the defaults, bench.DefaultSpec) with every field the file sets
// replaced; kube.clusters become the table's configurations.
func (s *Scenario) BenchSpec(b bench.Spec) (bench.Spec, error) {
	if err := s.ForKube(); err != nil {
		return b, err
	}
	k := s.Kube
	b.Measure = s.RunSpec(b.Measure)
	b.Cluster = bench.Target{Local: k.Cluster, Kubeconfig: k.Kubeconfig, Context: k.Context}
	if len(k.Paths) > 0 {
		b.Pods.Paths = k.Paths
	}
	if len(k.Placements) > 0 {
		b.Pods.Placements = k.Placements
	}
	b.Pods.Nodes, b.Pods.Image, b.Label, b.Lab, b.LabSameNode = k.Nodes, k.Image, k.Label, k.Lab, k.LabSameNode
	if k.Tolerance != nil {
		b.Tolerance = *k.Tolerance
	}
	if d := k.ReadyTimeoutValue(); d > 0 {
		b.Pods.ReadyTimeout = d
	}
	if k.IPFamily != "" {
		b.Pods.Family, _ = family.Parse(k.IPFamily) // checked by Parse
	}
	if !k.Tabled() {
		return b, nil
	}
	for _, c := range k.Clusters {
		spec := c.Spec()
		spec.Family = b.Pods.Family
		b.Configs = append(b.Configs, bench.Config{Name: c.Name, Cluster: spec, Extra: k.ExtraFor(c)})
	}
	b.ExtraTests = nil
	for _, t := range k.ExtraTestList() {
		b.ExtraTests = append(b.ExtraTests, engine.Test(t)) // checked by Parse
	}
	return b, nil
}

// ReadyTimeoutValue is ready_timeout, or 0 (the default) when not set.
func (k *Kube) ReadyTimeoutValue() time.Duration {
	d, _ := time.ParseDuration(k.ReadyTimeout) // checked by Parse
	return d
}

// labOnly are the top-level fields that describe labs; a cluster run has no
// use for them, so a file with `kube:` that sets one is refused rather than
// silently ignoring it.
var labOnly = []string{"name", "mode", "modes", "options", "pods", "pod_cidr", "ip_family", "pod_cidr6", "nodes", "underlay_rate", "paths",
	"provider", "providers", "services", "extra_services", "profile", "profile_dir", "cells", "mtu", "gso", "gro", "offload",
	"policies", "ipblocks", "policy_providers"}

func (s *Scenario) validateKube() error {
	k := s.Kube
	if k == nil {
		return nil
	}
	if k.Lab && (k.Cluster == "" || k.Tabled() || !s.has("modes")) {
		return s.kubeErrAt("lab", -1, "lab: true measures the file's modes beside one local cluster: give modes and kube.cluster (not kube.clusters or a kubeconfig)")
	}
	if err := s.validateLabSameNode(); err != nil {
		return err
	}
	for _, key := range labOnly {
		if s.has(key) && !k.Lab {
			return s.errAt(key, -1, "a file with kube: measures a cluster and %s describes labs: move it under kube: if it is one of its fields (%s), set kube.lab: true to measure that lab beside the cluster, else remove it", key, strings.Join(kubeFields, ", "))
		}
	}
	if k.Cluster != "" && (k.Kubeconfig != "" || k.Context != "") {
		return s.kubeErrAt("cluster", -1, "give either cluster (a local cluster) or kubeconfig/context, not both")
	}
	if k.Cluster != "" {
		if err := lab.ValidName("cluster", k.Cluster); err != nil {
			return s.kubeErrAt("cluster", -1, "%v", err)
		}
	}
	for i, p := range k.Paths {
		if err := measure.CheckPath(p); err != nil {
			return s.kubeErrAt("paths", i, "%v", err)
		}
	}
	for i, p := range k.Placements {
		if err := measure.CheckPlacement(p); err != nil {
			return s.kubeErrAt("placements", i, "%v", err)
		}
	}
	if k.ReadyTimeout != "" {
		if d, err := time.ParseDuration(k.ReadyTimeout); err != nil || d <= 0 {
			return s.kubeErrAt("ready_timeout", -1, "%q is not a positive duration (example: 2m)", k.ReadyTimeout)
		}
	}
	if _, err := family.Parse(k.IPFamily); err != nil {
		return s.kubeErrAt("ip_family", -1, "%q: use ipv4, ipv6 or dual", k.IPFamily)
	}
	if k.Tolerance != nil {
		if err := analysis.ValidateTolerance(*k.Tolerance); err != nil {
			return s.kubeErrAt("tolerance", -1, "%g: want a ratio between 0 and 1 (0.1: the pod path may be up to 10%% below host)", *k.Tolerance)
		}
	}
	if len(k.Nodes) > 2 {
		return s.kubeErrAt("nodes", -1, "%d nodes: name at most two, the server's and the cross-node client's", len(k.Nodes))
	}
	for i, n := range k.Nodes {
		if strings.TrimSpace(n) == "" {
			return s.kubeErrAt("nodes", i, "empty node name")
		}
	}
	for _, key := range []string{"paths", "placements"} {
		if n := s.kubeNode(key); n != nil && n.Kind == yaml.SequenceNode && len(n.Content) == 0 {
			return s.kubeErrAt(key, -1, "empty list: give at least one (or leave the field out for all)")
		}
	}
	return s.validateClusters()
}

// validateLabSameNode: kube.lab_same_node's modes are plain modes (the
// file's options are for its modes:), each able to run on one node, beside
// the file's two-node lab.
func (s *Scenario) validateLabSameNode() error {
	k := s.Kube
	if len(k.LabSameNode) == 0 {
		if n := s.kubeNode("lab_same_node"); n != nil && n.Kind == yaml.SequenceNode {
			return s.kubeErrAt("lab_same_node", -1, "empty list: name the modes to measure on one node (lab_same_node: [host, bridge]), or leave the field out")
		}
		return nil
	}
	if !k.Lab || s.Nodes == nil || *s.Nodes < 2 {
		return s.kubeErrAt("lab_same_node", -1, "lab_same_node adds a one-node lab beside the file's two-node lab: set kube.lab: true and nodes: 2 (or, for one node only, list the modes under modes:)")
	}
	if s.has("options") {
		return s.kubeErrAt("lab_same_node", -1, "lab_same_node's modes are built without options, and options applies to modes: only: remove one of them")
	}
	for i, name := range k.LabSameNode {
		m, err := modes.Get(name)
		if err != nil {
			return s.kubeErrAt("lab_same_node", i, "%v", err)
		}
		if m.MinNodes > 1 {
			return s.kubeErrAt("lab_same_node", i, "mode %s needs %d nodes: list it under modes:, which the two-node lab measures", name, m.MinNodes)
		}
		if slices.Contains(k.LabSameNode[:i], name) {
			return s.kubeErrAt("lab_same_node", i, "mode %s is listed twice", name)
		}
	}
	return nil
}

// kubeFields are the fields of a kube: section, for messages.
var kubeFields = []string{"cluster", "kubeconfig", "context", "paths", "placements", "nodes", "image", "label", "ready_timeout", "ip_family",
	"clusters", "extra_services", "extra_tests", "tolerance", "lab", "lab_same_node"}

// IsKube says whether the file describes a cluster run (`vnetlab kube run -f`).
func (s *Scenario) IsKube() bool { return s.Kube != nil }

// ForLabs refuses a cluster scenario where a lab one is needed (`run -f`, `up -f`).
func (s *Scenario) ForLabs(verb string) error {
	if s.Kube != nil {
		return fmt.Errorf("%s describes a cluster run (it has kube:): run it with `vnetlab kube run -f %s`, not `vnetlab %s -f`", s.file, s.file, verb)
	}
	return nil
}

// ForKube refuses a lab scenario where a cluster one is needed.
func (s *Scenario) ForKube() error {
	if s.Kube == nil {
		return fmt.Errorf("%s has no kube: section (it describes labs): run it with `vnetlab run -f %s`, or add kube: {cluster: NAME}", s.file, s.file)
	}
	return nil
}

// Sets says whether the file sets key, at the top level or in its kube:
// section (where the input of a spec's field came from: field.Error).
func (s *Scenario) Sets(key string) bool { return s.has(key) || s.kubeNode(key) != nil }

// File is the file's path.
func (s *Scenario) File() string { return s.file }

// has says whether the file sets a top-level key.
func (s *Scenario) has(key string) bool {
	if s.root == nil || s.root.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(s.root.Content); i += 2 {
		if s.root.Content[i].Value == key {
			return true
		}
	}
	return false
}

// kubeNode is the value node of kube.KEY, or nil.
func (s *Scenario) kubeNode(key string) *yaml.Node {
	if s.root == nil || s.root.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(s.root.Content); i += 2 {
		if s.root.Content[i].Value != "kube" || s.root.Content[i+1].Kind != yaml.MappingNode {
			continue
		}
		m := s.root.Content[i+1]
		for j := 0; j+1 < len(m.Content); j += 2 {
			if m.Content[j].Value == key {
				return m.Content[j+1]
			}
		}
	}
	return nil
}

// kubeErrAt formats an error at the line of kube.KEY (and list item).
func (s *Scenario) kubeErrAt(key string, idx int, format string, args ...any) error {
	line, field := s.line("kube", -1), "kube."+key
	if n := s.kubeNode(key); n != nil {
		line = n.Line
		if idx >= 0 && n.Kind == yaml.SequenceNode && idx < len(n.Content) {
			line = n.Content[idx].Line
		}
	}
	if idx >= 0 {
		field = fmt.Sprintf("%s[%d]", field, idx)
	}
	return fmt.Errorf("%s:%d: field %s: %s", s.file, line, field, fmt.Sprintf(format, args...))
}
