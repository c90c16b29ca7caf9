package converge

import (
	"testing"

	"github.com/vnetlab/vnetlab/internal/results"
)

// SplitByGap puts a node's change in the first group when it was written
// within RateLimitGap of that node showing the previous change, in the
// second when later; a change whose predecessor the node did not show
// is in neither.
func TestSplitByGap(t *testing.T) {
	const ms = int64(1e6)
	c := &results.Convergence{Changes: []results.Change{
		{Seq: 0, Written: 0, LatencyUS: map[string]int64{"n1": 100_000, "n2": 100_000}},
		{Seq: 1, Written: 300 * ms, LatencyUS: map[string]int64{"n1": 800_000}, NotApplied: []string{"n2"}}, // n1: 200 ms after its showing
		{Seq: 2, Written: 3000 * ms, LatencyUS: map[string]int64{"n1": 50_000, "n2": 60_000}},               // n1: 1.9 s after; n2: no predecessor
		{Seq: 3, Written: 4000 * ms, LatencyUS: map[string]int64{"n1": 40_000, "n2": 900_000}},              // both 0.94-0.95 s after
	}}
	got := SplitByGap(c)
	if len(got) != 2 || got[0].Node != "n1" || got[1].Node != "n2" {
		t.Fatalf("nodes %+v, want n1 and n2", got)
	}
	n1, n2 := got[0], got[1]
	if n1.NSoon != 2 || n1.NLater != 1 || n1.Later.Value != 50_000 || n1.Soon.Value < 40_000 || n1.Soon.Value > 800_000 {
		t.Errorf("n1: %+v; want 800 and 40 ms soon, 50 ms later", n1)
	}
	if n2.NSoon != 1 || n2.NLater != 0 || n2.Soon.Value != 900_000 {
		t.Errorf("n2: %+v; want 900 ms soon, none later", n2)
	}
}
