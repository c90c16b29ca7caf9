package converge

import (
	"maps"
	"testing"
	"time"
)

// tr is a node's transitions: pairs of (ms since 0, answer).
func tr(pairs ...any) []Transition {
	var ts []Transition
	for i := 0; i+1 < len(pairs); i += 2 {
		ts = append(ts, Transition{Sent: int64(pairs[i].(int)) * int64(time.Millisecond), Answer: pairs[i+1].(string)})
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
		ts    []Transition
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
		ch := Change{Shows: c.shows, Written: at(100)}
		d, ok := Latency(ch, c.ts, at(c.until))
		switch {
		case c.want < 0 && ok:
			t.Errorf("%s: applied after %s, want not applied", c.name, d)
		case c.want >= 0 && (!ok || d != time.Duration(c.want)*time.Millisecond):
			t.Errorf("%s: %s (applied %v), want %d ms", c.name, d, ok, c.want)
		}
	}
}

// Each change is paired, per node, with its latency there, or counted as
// not applied on a node that did not show it in its window (which ends at
// the next change's write).
func TestPair(t *testing.T) {
	changes := []Change{
		{Kind: KindServiceCreated, Shows: ShowsAny, Written: at(100), WriteUS: 3000},
		{Kind: KindServiceDeleted, Shows: ShowsNone, Written: at(500)},
		{Kind: KindServiceCreated, Shows: ShowsAny, Written: at(900), WriteUS: 3000},
	}
	byNode := map[string][]Transition{
		"n1": tr(0, Silent, 102, "a", 503, Silent, 904, "a"),
		"n2": tr(0, Silent, 110, "a", 520, Silent),
	}
	Pair(changes, byNode, at(2000))
	for i, want := range []map[string]int64{{"n1": 2000, "n2": 10000}, {"n1": 3000, "n2": 20000}, {"n1": 4000}} {
		if got := changes[i].LatencyUS; !maps.Equal(got, want) {
			t.Errorf("change %d: latencies %v, want %v", i, got, want)
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
	ts := []Transition{
		{Target: "a:53", Sent: at(0), Answer: "x"},
		{Target: "a:54", Sent: at(0), Answer: Refused},
		{Target: "a:80", Sent: at(105), Answer: "x", Event: EventOpen},
		{Target: "a:53", Sent: at(110), Answer: Refused},
		{Target: "a:54", Sent: at(120), Answer: "x"},
	}
	d, ok := Latency(Change{Target: "a:54", Shows: ShowsAny, Written: at(100)}, ts, at(1000))
	if !ok || d != 20*time.Millisecond {
		t.Errorf("port-changed: %s (applied %v), want 20 ms (the new port's first answer)", d, ok)
	}
	d, ok = Latency(Change{Target: "a:53", Shows: ShowsNone, Written: at(100)}, ts, at(1000))
	if !ok || d != 10*time.Millisecond {
		t.Errorf("the old port: %s (applied %v), want 10 ms", d, ok)
	}
}

// The connections held open at a write, and what became of them before
// the window's end: the removed backend's is Gone; one opened after the
// write, or broken before it, is not counted.
func TestFates(t *testing.T) {
	ev := func(ms int, backend, event string) Transition {
		return Transition{Target: "a:80", Sent: at(ms), Answer: backend, Event: event, Detail: "reset"}
	}
	ts := []Transition{
		ev(10, "a", EventOpen), ev(20, "b", EventOpen), ev(30, "c", EventOpen), ev(40, "c", EventBroken),
		ev(130, "b", EventBroken), ev(140, "d", EventOpen), ev(1500, "a", EventBroken),
	}
	got := Fates(Change{Kind: KindEndpointRemoved, Shows: Gone("b"), Written: at(100)}, ts, at(1000))
	want := []ConnFate{{Backend: "a"}, {Backend: "b", Gone: true, Broken: true, AfterUS: 30000, Detail: "reset"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("fates %+v, want %+v", got, want)
	}
	for _, f := range Fates(Change{Kind: KindServiceDeleted, Shows: ShowsNone, Written: at(100)}, ts, at(1000)) {
		if !f.Gone {
			t.Errorf("service deleted: %+v not gone", f)
		}
	}
}

// A line answered late after the write stalls its connection (the
// longest wait kept), a stall before the write does not, and a connection
// that stalled and then broke is broken.
func TestFatesStalled(t *testing.T) {
	ev := func(ms int, backend, event string, stall int64) Transition {
		return Transition{Target: "a:80", Sent: at(ms), Answer: backend, Event: event, StallUS: stall}
	}
	ts := []Transition{
		ev(10, "a", EventOpen, 0), ev(20, "b", EventOpen, 0), ev(30, "c", EventOpen, 0),
		ev(50, "c", EventStalled, 900000), // before the write
		ev(110, "a", EventStalled, 150000), ev(120, "a", EventStalled, 250000),
		ev(130, "b", EventStalled, 200000), ev(400, "b", EventBroken, 0),
	}
	ch := Change{Kind: KindEndpointAdded, Shows: "d", Written: at(100)}
	got := Fates(ch, ts, at(1000))
	want := []ConnFate{{Backend: "a", StallUS: 250000}, {Backend: "b", Broken: true, AfterUS: 300000}, {Backend: "c"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("fates %+v, want %+v", got, want)
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
		ts    []Transition
		want  bool
	}{
		{"created, answered before", ShowsAny, tr(0, "a", 130, "a"), true},
		{"created, refused before", ShowsAny, tr(0, Refused, 130, "a"), false},
		{"added, its answer before", "b", tr(0, "a", 90, "b", 150, "a"), true},
		{"added", "b", tr(0, "a", 150, "b"), false},
		{"deleted, silent before", ShowsNone, tr(0, Silent), true},
		{"removed, the other backend before", Gone("b"), tr(0, "a", 160, "b", 170, "a"), false},
	} {
		ch := Change{Shows: c.shows, Written: at(100)}
		if got := ShownBefore(ch, c.ts); got != c.want {
			t.Errorf("%s: shown before %v, want %v", c.name, got, c.want)
		}
	}
	changes := []Change{
		{Kind: KindServiceCreated, Shows: ShowsAny, Written: at(100)},
		{Kind: KindServiceCreated, Shows: ShowsAny, Written: at(900)},
	}
	byNode := map[string][]Transition{
		"n1": tr(0, Silent, 104, "a", 800, Silent, 950, "a"),
		"n2": tr(0, Silent, 110, "a", 850, "a"), // answered before the second write
	}
	Pair(changes, byNode, at(2000))
	if got := changes[1]; len(got.ShownBefore) != 1 || got.ShownBefore[0] != "n2" || got.LatencyUS["n2"] != 0 || len(got.LatencyUS) != 1 {
		t.Errorf("second change: shown before %v, latencies %v, want n2 shown before and only n1's latency", got.ShownBefore, got.LatencyUS)
	}
}
