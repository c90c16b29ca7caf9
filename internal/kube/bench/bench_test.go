package bench

import (
	"slices"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/runner"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// A local cluster's nodes run on this machine's CPUs (--cpu-affinity auto
// pins there as in a lab); a kubeconfig's cluster may be anywhere.
func TestMeasureSpecCPUs(t *testing.T) {
	for _, tc := range []struct {
		name      string
		s         Spec
		elsewhere bool
	}{
		{"--cluster", Spec{Cluster: Target{Local: "k"}}, false},
		{"kube.clusters", Spec{Configs: []Config{{Name: "a"}}}, false},
		{"--kubeconfig", Spec{Cluster: Target{Kubeconfig: "kc"}}, true},
	} {
		if got := tc.s.measureSpec().CPUsElsewhere; got != tc.elsewhere {
			t.Errorf("%s: CPUsElsewhere %v, want %v", tc.name, got, tc.elsewhere)
		}
	}
}

// A lab cell, then a cluster cell; the longer side's rest in its order.
func TestInterleave(t *testing.T) {
	cells := func(names ...string) []runner.Planned {
		var out []runner.Planned
		for _, n := range names {
			out = append(out, runner.Planned{Cell: &results.Cell{Mode: n}})
		}
		return out
	}
	got := interleave(cells("l1", "l2", "l3"), cells("c1"))
	var names []string
	for _, p := range got {
		names = append(names, p.Cell.Mode)
	}
	if want := []string{"l1", "c1", "l2", "l3"}; !slices.Equal(names, want) {
		t.Errorf("interleave: %v, want %v", names, want)
	}
	if got := interleave(nil, cells("c1", "c2")); len(got) != 2 || got[1].Cell.Mode != "c2" {
		t.Errorf("no lab: %v", got)
	}
}

// kube.lab_same_node adds a one-node lab to a two-node lab beside the
// cluster: without kube.lab, or with a one-node lab, it is refused.
func TestValidateLabSameNode(t *testing.T) {
	spec := func(lab bool, nodes int) Spec {
		s := DefaultSpec()
		s.Cluster.Local, s.Lab, s.LabSameNode = "k", lab, []string{"bridge"}
		s.Measure.Modes, s.Measure.Nodes = runner.Variants([]string{"host"}, nil), nodes
		return s
	}
	for _, s := range []Spec{spec(false, 2), spec(true, 1)} {
		if err := field.Rendered(s.Validate(), field.Key); err == nil || !strings.Contains(err.Error(), "lab_same_node adds a one-node lab beside the file's two-node lab: set lab and nodes: 2") {
			t.Errorf("lab %v, nodes %d: %v", s.Lab, s.Measure.Nodes, err)
		}
	}
}

// A precision target and a duet are run's: kube run refuses both by name.
func TestValidateRefusesPrecisionAndDuet(t *testing.T) {
	s := DefaultSpec()
	s.Cluster.Local = "k"
	s.Measure.Summary.Precision = 0.02
	if err := field.Rendered(s.Validate(), field.Key); err == nil || !strings.Contains(err.Error(), "precision is run's") {
		t.Errorf("precision: %v", err)
	}
	s.Measure.Summary.Precision, s.Measure.Duet = 0, true
	if err := field.Rendered(s.Validate(), field.Key); err == nil || !strings.Contains(err.Error(), "duet is run's") {
		t.Errorf("duet: %v", err)
	}
}

// A policies sweep is a cluster's (its enforcer's): measured on one
// cluster's pod or service path, never with a lab's providers, links or
// beside-lab; a local cluster that enforces none is refused.
func TestValidatePolicies(t *testing.T) {
	spec := func(sweep string, edit func(*Spec)) Spec {
		s := DefaultSpec()
		s.Cluster.Kubeconfig = "kc"
		for _, a := range strings.Split(sweep, " ") {
			ax, err := knob.ParseAxisFlag(a)
			if err != nil {
				t.Fatal(err)
			}
			s.Measure.Sweep.Axes = append(s.Measure.Sweep.Axes, ax)
		}
		if edit != nil {
			edit(&s)
		}
		return s
	}
	if err := spec("policies=0,100,1000", nil).Validate(); err != nil {
		t.Errorf("a policies sweep: %v", err)
	}
	for _, tc := range []struct {
		name string
		s    Spec
		want string
	}{
		{"links", spec("policies=0,10 mtu=default,9000", nil), "set a lab's links"},
		{"providers", spec("policies=0,10", func(s *Spec) { s.Measure.PolicyProviders = []string{"nftables"} }), "names a lab's policy providers"},
		{"table", spec("policies=0,10", func(s *Spec) { s.Cluster, s.Configs = Target{}, []Config{{Name: "a"}} }), "measure one cluster"},
		{"host only", spec("policies=0,10", func(s *Spec) { s.Pods.Paths = []string{"host"} }), "select the server pod"},
	} {
		if err := field.Rendered(tc.s.Validate(), field.Key); err == nil || !strings.Contains(err.Error(), tc.want) {
			if !(tc.name == "table" && err != nil && strings.Contains(err.Error(), "root")) { // kube.clusters needs root first
				t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
			}
		}
	}
	if err := checkEnforcer("k", clusternet.PolicyNone, "policies"); err == nil || !strings.Contains(err.Error(), "enforces no NetworkPolicy") {
		t.Errorf("enforcer none: %v", err)
	}
	if err := checkEnforcer("k", clusternet.PolicyVnetlab, "policies"); err != nil {
		t.Errorf("enforcer vnetlab: %v", err)
	}
	// A namespace per set; its cells carry the set, host cells no proof.
	s := spec("policies=0,100,1000", nil)
	g := s.Measure.PolicyGroups()
	if len(g) != 3 || g[2].Set.Policies != 1000 || len(g[2].Points) != 1 {
		t.Fatalf("groups: %+v", g)
	}
	ps := &pointSet{set: g[1].Set, names: []string{"a", "b"}, server: map[family.Family]string{family.IPv4: "10.0.0.1"}}
	cells := []runner.Planned{{Cell: &results.Cell{Path: "pod"}, Family: family.IPv4}, {Cell: &results.Cell{Path: "host"}}}
	ps.prove(cells)
	if cells[0].Policy == nil || cells[0].Cell.Policies.Policies != 100 || cells[1].Policy != nil || cells[1].Cell.Policies != nil {
		t.Errorf("proofs: pod %+v, host %+v", cells[0].Cell.Policies, cells[1].Cell.Policies)
	}
	if p := cells[0].Policy.(*policyProof); p.addr != "10.0.0.1:9" {
		t.Errorf("deny probe to %s", p.addr)
	}
}
