package bench

import (
	"slices"
	"testing"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/runner"
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
