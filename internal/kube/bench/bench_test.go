package bench

import (
	"slices"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/runner"
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
