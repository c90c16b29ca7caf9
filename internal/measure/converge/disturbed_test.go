package converge

import (
	"slices"
	"testing"

	"github.com/vnetlab/vnetlab/internal/results"
)

// A change is disturbed when a busy sample of the other work (above
// DisturbedCPUs) overlaps it, from its write to its slowest node's
// showing; idle samples and a file without the other work flag none.
func TestDisturbed(t *testing.T) {
	const s = int64(1e9)
	c := &results.Convergence{
		Changes: []results.Change{
			{Seq: 1, Written: 1 * s, LatencyUS: map[string]int64{"n1": 20_000}},         // in the idle first 10 s
			{Seq: 2, Written: 9 * s, LatencyUS: map[string]int64{"n1": 2_000_000}},      // reaches into the busy sample
			{Seq: 3, Written: 15 * s, LatencyUS: map[string]int64{}},                    // not applied: its write is in it
			{Seq: 4, Written: 25 * s, LatencyUS: map[string]int64{"n1": 1000, "n2": 5}}, // after it
		},
		OtherWork: &results.OtherWork{Samples: []results.OtherWorkSample{
			{Start: 0, End: 10 * s, CPUSeconds: 0.05},      // 0.005 CPUs
			{Start: 10 * s, End: 20 * s, CPUSeconds: 12},   // 1.2 CPUs
			{Start: 20 * s, End: 30 * s, CPUSeconds: 0.99}, // 0.099 CPUs
		}},
	}
	if got := Disturbed(c); !slices.Equal(got, []int{2, 3}) {
		t.Errorf("disturbed %v, want [2 3]", got)
	}
	if b, ok := BusiestOtherWork(c); !ok || b.Start != 10*s {
		t.Errorf("busiest sample %+v, want the one from 10 s", b)
	}
	c.OtherWork = nil
	if got := Disturbed(c); got != nil {
		t.Errorf("a file without the other work: disturbed %v", got)
	}
}
