package converge

import (
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/results"
)

// tr is a node's transitions: pairs of (ms since 0, answer).
func tr(pairs ...any) []results.Transition {
	var ts []results.Transition
	for i := 0; i+1 < len(pairs); i += 2 {
		ts = append(ts, results.Transition{Sent: int64(pairs[i].(int)) * int64(time.Millisecond), Answer: pairs[i+1].(string)})
	}
	return ts
}

func at(ms int) int64 { return int64(ms) * int64(time.Millisecond) }

// Each kind's latency is from the write to the send of the first probe
// that shows it; a removed backend's, to the end of its last run of
// answers, a deleted Service's to the end of any; a change not shown
// before the window ends is not applied.
func TestLatency(t *testing.T) {
	for _, c := range []struct {
		name  string
		shows string
		ts    []results.Transition
		until int
		want  int // ms; -1: not applied
	}{
		{"created", ShowsAny, tr(0, Refused, 130, "a"), 1000, 30},
		{"created, not yet", ShowsAny, tr(0, Refused), 1000, -1},
		{"created, after the window", ShowsAny, tr(0, Refused, 1200, "a"), 1000, -1},
		{"added", "b", tr(0, "a", 150, "b", 151, "a"), 1000, 50},
		{"added, a's answers only", "b", tr(0, "a"), 1000, -1},
		{"removed: b's last run ends at 170", Gone("b"), tr(0, "a", 110, "b", 120, "a", 160, "b", 170, "a"), 1000, 70},
		{"removed: b still answers", Gone("b"), tr(0, "a", 160, "b"), 1000, -1},
		{"removed: b silent since before the write", Gone("b"), tr(0, "a"), 1000, 0},
		{"deleted: silent", ShowsNone, tr(0, "a", 140, Silent), 1000, 40},
		{"deleted: refused", ShowsNone, tr(0, "a", 105, Refused), 1000, 5},
		{"deleted, already silent", ShowsNone, tr(0, Silent), 1000, 0},
		// A starved prober or backend: silent, answered again, then silent
		// for good at 400 (iptables' syncs at 30,000 Services did this).
		{"deleted: the last silent run starts at 400", ShowsNone, tr(0, "a", 101, Silent, 150, "a", 300, Refused, 310, "a", 400, Silent), 1000, 300},
		{"deleted: answered again at the window's end", ShowsNone, tr(0, "a", 101, Silent, 990, "a"), 1000, -1},
	} {
		ch := results.Change{Shows: c.shows, Written: at(100)}
		d, ok := Latency(ch, c.ts, at(c.until))
		switch {
		case c.want < 0 && ok:
			t.Errorf("%s: applied after %s, want not applied", c.name, d)
		case c.want >= 0 && (!ok || d != time.Duration(c.want)*time.Millisecond):
			t.Errorf("%s: %s (applied %v), want %d ms", c.name, d, ok, c.want)
		}
	}
}

// Rows per kind and node, and all nodes' row from each change's slowest
// node; a change one node missed is not applied in the all-nodes row.
func TestSummarize(t *testing.T) {
	changes := []results.Change{
		{Kind: KindServiceCreated, Shows: ShowsAny, Written: at(100), WriteUS: 3000},
		{Kind: KindServiceDeleted, Shows: ShowsNone, Written: at(500)},
		{Kind: KindServiceCreated, Shows: ShowsAny, Written: at(900), WriteUS: 3000},
	}
	byNode := map[string][]results.Transition{
		"n1": tr(0, Silent, 102, "a", 503, Silent, 904, "a"),
		"n2": tr(0, Silent, 110, "a", 520, Silent),
	}
	rows := Summarize(changes, byNode, at(2000), 1000)
	get := func(kind, node string) results.ConvergeRow {
		for _, r := range rows {
			if r.Kind == kind && r.Node == node {
				return r
			}
		}
		t.Fatalf("no row %s %s in %+v", kind, node, rows)
		return results.ConvergeRow{}
	}
	if r := get(KindServiceCreated, "n1"); r.Changes != 2 || r.NotApplied != 0 || r.MaxUS != 4000 {
		t.Errorf("n1 created: %+v, want 2 changes, max 4 ms", r)
	}
	if r := get(KindServiceCreated, "n2"); r.NotApplied != 1 || r.MaxUS != 10000 {
		t.Errorf("n2 created: %+v, want one not applied, max 10 ms", r)
	}
	if r := get(KindServiceCreated, AllNodes); r.Changes != 2 || r.NotApplied != 1 || r.P50.Value != 10000 {
		t.Errorf("all nodes created: %+v, want the slowest node's 10 ms and one not applied", r)
	}
	if r := get(KindServiceDeleted, AllNodes); r.MaxUS != 20000 || r.Write != nil {
		t.Errorf("all nodes deleted: %+v, want 20 ms and no write time (none recorded)", r)
	}
	for _, n := range []string{"n1", "n2", AllNodes} {
		if r := get(KindServiceCreated, n); r.Write == nil || r.Write.Value != 3000 {
			t.Errorf("%s created: write p50 %v, want the writes' 3 ms on every node's row", n, r.Write)
		}
	}
	if got := changes[2].NotApplied; len(got) != 1 || got[0] != "n2" {
		t.Errorf("the third change's nodes not applied: %v, want n2", got)
	}
}

// A change is judged on its own target's probes only: the port it moved
// to, not the port it left (which answered until then); kept connections'
// events are not probes.
func TestLatencyOfItsTarget(t *testing.T) {
	ts := []results.Transition{
		{Target: "a:53", Sent: at(0), Answer: "x"},
		{Target: "a:54", Sent: at(0), Answer: Refused},
		{Target: "a:80", Sent: at(105), Answer: "x", Event: EventOpen},
		{Target: "a:53", Sent: at(110), Answer: Refused},
		{Target: "a:54", Sent: at(120), Answer: "x"},
	}
	d, ok := Latency(results.Change{Target: "a:54", Shows: ShowsAny, Written: at(100)}, ts, at(1000))
	if !ok || d != 20*time.Millisecond {
		t.Errorf("port-changed: %s (applied %v), want 20 ms (the new port's first answer)", d, ok)
	}
	d, ok = Latency(results.Change{Target: "a:53", Shows: ShowsNone, Written: at(100)}, ts, at(1000))
	if !ok || d != 10*time.Millisecond {
		t.Errorf("the old port: %s (applied %v), want 10 ms", d, ok)
	}
}

// The connections held open at a write, and what became of them before
// the window's end: the removed backend's is Gone; one opened after the
// write, or broken before it, is not counted.
func TestFates(t *testing.T) {
	ev := func(ms int, backend, event string) results.Transition {
		return results.Transition{Target: "a:80", Sent: at(ms), Answer: backend, Event: event, Detail: "reset"}
	}
	ts := []results.Transition{
		ev(10, "a", EventOpen), ev(20, "b", EventOpen), ev(30, "c", EventOpen), ev(40, "c", EventBroken),
		ev(130, "b", EventBroken), ev(140, "d", EventOpen), ev(1500, "a", EventBroken),
	}
	got := Fates(results.Change{Kind: KindEndpointRemoved, Shows: Gone("b"), Written: at(100)}, ts, at(1000))
	want := []results.ConnFate{{Backend: "a"}, {Backend: "b", Gone: true, Broken: true, AfterUS: 30000, Detail: "reset"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("fates %+v, want %+v", got, want)
	}
	for _, f := range Fates(results.Change{Kind: KindServiceDeleted, Shows: ShowsNone, Written: at(100)}, ts, at(1000)) {
		if !f.Gone {
			t.Errorf("service deleted: %+v not gone", f)
		}
	}
}

// A line answered late after the write stalls its connection (the
// longest wait kept), a stall before the write does not, and a connection
// that stalled and then broke is broken; a row counts the stalled among
// those not broken.
func TestFatesStalled(t *testing.T) {
	ev := func(ms int, backend, event string, stall int64) results.Transition {
		return results.Transition{Target: "a:80", Sent: at(ms), Answer: backend, Event: event, StallUS: stall}
	}
	ts := []results.Transition{
		ev(10, "a", EventOpen, 0), ev(20, "b", EventOpen, 0), ev(30, "c", EventOpen, 0),
		ev(50, "c", EventStalled, 900000), // before the write
		ev(110, "a", EventStalled, 150000), ev(120, "a", EventStalled, 250000),
		ev(130, "b", EventStalled, 200000), ev(400, "b", EventBroken, 0),
	}
	ch := results.Change{Kind: KindEndpointAdded, Shows: "d", Written: at(100)}
	got := Fates(ch, ts, at(1000))
	want := []results.ConnFate{{Backend: "a", StallUS: 250000}, {Backend: "b", Broken: true, AfterUS: 300000}, {Backend: "c"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("fates %+v, want %+v", got, want)
	}
	ch.Conns = map[string][]results.ConnFate{"n1": got}
	var row results.ConvergeRow
	countFates(&row, ch, AllNodes)
	if row.ConnsHeld != 3 || row.ConnsBroken != 1 || row.ConnsStalled != 1 {
		t.Errorf("row: %d held, %d broken, %d stalled; want 3, 1, 1", row.ConnsHeld, row.ConnsBroken, row.ConnsStalled)
	}
}

// A change its node's probes already showed when it was written has no
// latency: it is counted apart (shown before), never as 0, and it is
// neither applied nor not applied. Found on kube-proxy, where a stale
// conntrack entry of an earlier probe with the same 5-tuple answered for
// a Service before it was created: its rows read 0 ms. A removed
// backend's change is not judged so (the probe before the write may have
// reached the other backend).
func TestShownBeforeIsNoLatency(t *testing.T) {
	for _, c := range []struct {
		name  string
		shows string
		ts    []results.Transition
		want  bool
	}{
		{"created, answered before", ShowsAny, tr(0, "a", 130, "a"), true},
		{"created, refused before", ShowsAny, tr(0, Refused, 130, "a"), false},
		{"added, its answer before", "b", tr(0, "a", 90, "b", 150, "a"), true},
		{"added", "b", tr(0, "a", 150, "b"), false},
		{"deleted, silent before", ShowsNone, tr(0, Silent), true},
		{"removed, the other backend before", Gone("b"), tr(0, "a", 160, "b", 170, "a"), false},
	} {
		ch := results.Change{Shows: c.shows, Written: at(100)}
		if got := ShownBefore(ch, c.ts); got != c.want {
			t.Errorf("%s: shown before %v, want %v", c.name, got, c.want)
		}
	}
	changes := []results.Change{
		{Kind: KindServiceCreated, Shows: ShowsAny, Written: at(100)},
		{Kind: KindServiceCreated, Shows: ShowsAny, Written: at(900)},
	}
	byNode := map[string][]results.Transition{
		"n1": tr(0, Silent, 104, "a", 800, Silent, 950, "a"),
		"n2": tr(0, Silent, 110, "a", 850, "a"), // answered before the second write
	}
	rows := Summarize(changes, byNode, at(2000), 1000)
	for _, r := range rows {
		want := map[string]int{"n1": 0, "n2": 1, AllNodes: 1}[r.Node]
		if r.ShownBefore != want || r.NotApplied != 0 {
			t.Errorf("%s: shown before %d, not applied %d, want %d and 0", r.Node, r.ShownBefore, r.NotApplied, want)
		}
		if r.Node == "n2" && r.MaxUS != 10000 || r.Node == AllNodes && (r.P50.Value != 10000 || r.MaxUS != 10000) {
			t.Errorf("%s: p50 %.0f µs, max %.0f µs: the change shown before must not count as 0 (want 10 ms, the first change's)", r.Node, r.P50.Value, r.MaxUS)
		}
	}
	if got := changes[1]; len(got.ShownBefore) != 1 || got.ShownBefore[0] != "n2" || got.LatencyUS["n2"] != 0 || len(got.LatencyUS) != 1 {
		t.Errorf("second change: shown before %v, latencies %v, want n2 shown before and only n1's latency", got.ShownBefore, got.LatencyUS)
	}
}

// The controller's share: the quantiles of the changes seen, the count
// with those not seen, the largest.
func TestSummarizeController(t *testing.T) {
	got := SummarizeController([]int64{30000, 10000, 20000}, 2)
	if got.Changes != 5 || got.NotApplied != 2 || got.P50.Value != 20000 || got.MaxUS != 30000 || got.P50.CI == [2]float64{} {
		t.Errorf("%+v: want 5 changes, 2 not seen, p50 20 ms with a CI, max 30 ms", got)
	}
	if none := SummarizeController(nil, 3); none.Changes != 3 || none.P50.Value != 0 || none.MaxUS != 0 {
		t.Errorf("none seen: %+v", none)
	}
}

// A change's latency less its write call, per node and over all nodes
// (each change's slowest): only timed changes, none shown before their
// write; below 0 when a node showed it before the call returned.
func TestAfterWrite(t *testing.T) {
	changes := []results.Change{
		{Kind: KindEndpointAdded, WriteUS: 10000, LatencyUS: map[string]int64{"n1": 12000, "n2": 15000}},
		{Kind: KindEndpointAdded, WriteUS: 10000, LatencyUS: map[string]int64{"n1": 9000, "n2": 11000}},
		{Kind: KindEndpointAdded, LatencyUS: map[string]int64{"n1": 90000, "n2": 90000}},                                // not timed
		{Kind: KindEndpointAdded, WriteUS: 1000, LatencyUS: map[string]int64{"n1": 50000}, ShownBefore: []string{"n2"}}, // no all-nodes latency
		{Kind: KindEndpointRemoved, WriteUS: 1000, LatencyUS: map[string]int64{"n1": 70000, "n2": 70000}},               // another kind
	}
	p50, p99, ok := AfterWrite(changes, KindEndpointAdded, AllNodes)
	if !ok || p50.Value != 1000 || p99.Value != 5000 {
		t.Errorf("all nodes: p50 %v p99 %v (%v), want 1 and 5 ms: 5 and 1 ms after the writes", p50, p99, ok)
	}
	if p50, _, _ := AfterWrite(changes, KindEndpointAdded, "n1"); p50.Value != 2000 {
		t.Errorf("n1: p50 %v, want 2 ms of -1, 2 and 49 ms", p50)
	}
	if _, _, ok := AfterWrite(changes, KindServiceCreated, AllNodes); ok {
		t.Error("a kind with no changes has an after-write latency")
	}
}
