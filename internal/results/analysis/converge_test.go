package analysis

import (
	"slices"
	"testing"

	"github.com/vnetlab/vnetlab/internal/results"
)

// Kinds of change, as a file records them.
const (
	created = "service-created"
	deleted = "service-deleted"
	added   = "endpoint-added"
	removed = "endpoint-removed"
)

// rowOf is c's row of kind on node n.
func rowOf(t *testing.T, rows []results.ConvergeRow, kind, n string) results.ConvergeRow {
	t.Helper()
	for _, r := range rows {
		if r.Kind == kind && r.Node == n {
			return r
		}
	}
	t.Fatalf("no row %s %s in %+v", kind, n, rows)
	return results.ConvergeRow{}
}

// nodes are transitions naming each node once: a file's nodes.
func nodes(ns ...string) []results.Transition {
	var ts []results.Transition
	for _, n := range ns {
		ts = append(ts, results.Transition{Node: n})
	}
	return ts
}

// Rows per kind and node, and all nodes' row from each change's slowest
// node; a change one node missed is not applied in the all-nodes row; the
// write calls' p50 is on every node's row.
func TestConvergeRows(t *testing.T) {
	c := &results.Convergence{IntervalUS: 1000, Transitions: nodes("n2", "n1", "n2"), Changes: []results.Change{
		{Kind: created, WriteUS: 3000, LatencyUS: map[string]int64{"n1": 2000, "n2": 10000}},
		{Kind: deleted, LatencyUS: map[string]int64{"n1": 3000, "n2": 20000}},
		{Kind: created, WriteUS: 3000, LatencyUS: map[string]int64{"n1": 4000}, NotApplied: []string{"n2"}},
	}}
	rows := ConvergeRows(c)
	if len(rows) != 6 || rows[0].Kind != created || rows[0].Node != "n1" || rows[2].Node != AllNodes || rows[3].Kind != deleted {
		t.Errorf("rows %+v: want created then deleted, each on n1, n2 and all nodes", rows)
	}
	if r := rowOf(t, rows, created, "n1"); r.Changes != 2 || r.NotApplied != 0 || r.MaxUS != 4000 {
		t.Errorf("n1 created: %+v, want 2 changes, max 4 ms", r)
	}
	if r := rowOf(t, rows, created, "n2"); r.NotApplied != 1 || r.MaxUS != 10000 {
		t.Errorf("n2 created: %+v, want one not applied, max 10 ms", r)
	}
	if r := rowOf(t, rows, created, AllNodes); r.Changes != 2 || r.NotApplied != 1 || r.P50.Value != 10000 {
		t.Errorf("all nodes created: %+v, want the slowest node's 10 ms and one not applied", r)
	}
	if r := rowOf(t, rows, deleted, AllNodes); r.MaxUS != 20000 || r.Write != nil {
		t.Errorf("all nodes deleted: %+v, want 20 ms and no write time (none recorded)", r)
	}
	for _, n := range []string{"n1", "n2", AllNodes} {
		if r := rowOf(t, rows, created, n); r.Write == nil || r.Write.Value != 3000 {
			t.Errorf("%s created: write p50 %v, want the writes' 3 ms on every node's row", n, r.Write)
		}
	}
}

// A change some node's probes showed before its write is counted apart
// on that node's row and the all-nodes row (shown before), never as 0.
func TestConvergeRowsShownBefore(t *testing.T) {
	c := &results.Convergence{Transitions: nodes("n1", "n2"), Changes: []results.Change{
		{Kind: created, LatencyUS: map[string]int64{"n1": 4000, "n2": 10000}},
		{Kind: created, LatencyUS: map[string]int64{"n1": 50000}, ShownBefore: []string{"n2"}},
	}}
	for _, r := range ConvergeRows(c) {
		want := map[string]int{"n1": 0, "n2": 1, AllNodes: 1}[r.Node]
		if r.ShownBefore != want || r.NotApplied != 0 {
			t.Errorf("%s: shown before %d, not applied %d, want %d and 0", r.Node, r.ShownBefore, r.NotApplied, want)
		}
		if r.Node == "n2" && r.MaxUS != 10000 || r.Node == AllNodes && (r.P50.Value != 10000 || r.MaxUS != 10000) {
			t.Errorf("%s: p50 %.0f µs, max %.0f µs: the change shown before must not count as 0 (want 10 ms, the first change's)", r.Node, r.P50.Value, r.MaxUS)
		}
	}
}

// A row counts the connections held at its changes' writes, the broken,
// and the stalled among those not broken; those to a backend the change
// took out apart; the all-nodes row every node's.
func TestConvergeRowsConns(t *testing.T) {
	c := &results.Convergence{Transitions: nodes("n1", "n2"), Changes: []results.Change{{Kind: removed, Conns: map[string][]results.ConnFate{
		"n1": {{Backend: "a", StallUS: 250000}, {Backend: "b", Broken: true, StallUS: 1}, {Backend: "c"}},
		"n2": {{Backend: "b", Gone: true, Broken: true}},
	}}}}
	rows := ConvergeRows(c)
	if r := rowOf(t, rows, removed, "n1"); r.ConnsHeld != 3 || r.ConnsBroken != 1 || r.ConnsStalled != 1 || r.GoneConnsHeld != 0 {
		t.Errorf("n1: %+v; want 3 held, 1 broken, 1 stalled, none gone", r)
	}
	if r := rowOf(t, rows, removed, AllNodes); r.ConnsHeld != 3 || r.GoneConnsHeld != 1 || r.GoneConnsBroken != 1 {
		t.Errorf("all nodes: %+v; want n1's 3 held and n2's gone one, broken", r)
	}
}

// The controller's share: the quantiles of the changes seen, the count
// with those not seen, the largest.
func TestControllerShare(t *testing.T) {
	got := ControllerShare([]int64{30000, 10000, 20000}, 2)
	if got.Changes != 5 || got.NotApplied != 2 || got.P50.Value != 20000 || got.MaxUS != 30000 || got.P50.CI == [2]float64{} {
		t.Errorf("%+v: want 5 changes, 2 not seen, p50 20 ms with a CI, max 30 ms", got)
	}
	if none := ControllerShare(nil, 3); none.Changes != 3 || none.P50.Value != 0 || none.MaxUS != 0 {
		t.Errorf("none seen: %+v", none)
	}
}

// A change's latency less its write call, per node and over all nodes
// (each change's slowest): only timed changes, none shown before their
// write; below 0 when a node showed it before the call returned.
func TestAfterWrite(t *testing.T) {
	changes := []results.Change{
		{Kind: added, WriteUS: 10000, LatencyUS: map[string]int64{"n1": 12000, "n2": 15000}},
		{Kind: added, WriteUS: 10000, LatencyUS: map[string]int64{"n1": 9000, "n2": 11000}},
		{Kind: added, LatencyUS: map[string]int64{"n1": 90000, "n2": 90000}},                                // not timed
		{Kind: added, WriteUS: 1000, LatencyUS: map[string]int64{"n1": 50000}, ShownBefore: []string{"n2"}}, // no all-nodes latency
		{Kind: removed, WriteUS: 1000, LatencyUS: map[string]int64{"n1": 70000, "n2": 70000}},               // another kind
	}
	p50, p99, ok := AfterWrite(changes, added, AllNodes)
	if !ok || p50.Value != 1000 || p99.Value != 5000 {
		t.Errorf("all nodes: p50 %v p99 %v (%v), want 1 and 5 ms: 5 and 1 ms after the writes", p50, p99, ok)
	}
	if p50, _, _ := AfterWrite(changes, added, "n1"); p50.Value != 2000 {
		t.Errorf("n1: p50 %v, want 2 ms of -1, 2 and 49 ms", p50)
	}
	if _, _, ok := AfterWrite(changes, created, AllNodes); ok {
		t.Error("a kind with no changes has an after-write latency")
	}
}

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
