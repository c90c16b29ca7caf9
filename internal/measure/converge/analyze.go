package converge

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/stats"
)

// The kinds of change, each with the answer that shows it (Change.Shows).
const (
	KindServiceCreated  = "service-created"  // the first answer, from any backend
	KindEndpointAdded   = "endpoint-added"   // the first answer from the new backend
	KindEndpointRemoved = "endpoint-removed" // the end of the last run of answers from the backend that left
	KindServiceDeleted  = "service-deleted"  // the first probe not answered (silent or refused)
)

// Kinds are the kinds in the order a cycle writes them.
var Kinds = []string{KindServiceCreated, KindEndpointAdded, KindEndpointRemoved, KindServiceDeleted}

// What Change.Shows holds besides a backend's name.
const (
	ShowsAny  = "*" // any backend's answer
	ShowsNone = "!" // no answer
	notPrefix = "!" // "!NAME": the answers of NAME have stopped
)

// AllNodes names the rows of the slowest node per change.
const AllNodes = "all nodes"

func answered(a string) bool { return a != Silent && a != Refused }

// Gone is what Change.Shows holds for a backend that leaves: the end of
// its answers.
func Gone(backend string) string { return notPrefix + backend }

// GoneOf is the backend whose leaving shows spells (Gone), if it is one.
func GoneOf(shows string) (string, bool) {
	if shows == ShowsNone || !strings.HasPrefix(shows, notPrefix) {
		return "", false
	}
	return shows[len(notPrefix):], true
}

// Latency is how long after ch was written node's transitions ts (sorted
// by Sent) show it, looking at probes sent before until (the next change's
// write, or now): ok is false when they do not show it yet. A removed
// backend's change shows at the end of its last run of answers before
// until, so it is known only once until is past it by more than the
// prober's timeout (Run waits for that). A change some probe showed before
// the write (a state that already held) costs 0.
func Latency(ch results.Change, ts []results.Transition, until int64) (time.Duration, bool) {
	var after []results.Transition
	stateAt := Silent // what the probes saw when ch was written
	for _, t := range ts {
		switch {
		case t.Sent < ch.Written:
			stateAt = t.Answer
		case t.Sent < until:
			after = append(after, t)
		}
	}
	gone, leaving := GoneOf(ch.Shows)
	shows := func(a string) bool {
		switch {
		case ch.Shows == ShowsAny:
			return answered(a)
		case ch.Shows == ShowsNone:
			return !answered(a)
		case leaving:
			return a != gone
		}
		return a == ch.Shows
	}
	if leaving {
		// The end of the last run of the backend's answers.
		end, ended := int64(0), shows(stateAt)
		for _, t := range after {
			if shows(t.Answer) && !ended {
				end, ended = t.Sent, true
			} else if !shows(t.Answer) {
				ended = false
			}
		}
		if !ended {
			return 0, false
		}
		return time.Duration(max(end-ch.Written, 0)), true
	}
	if shows(stateAt) {
		return 0, true
	}
	for _, t := range after {
		if shows(t.Answer) {
			return time.Duration(t.Sent - ch.Written), true
		}
	}
	return 0, false
}

// Summarize fills each change's latency per node from the transitions
// (by node, each sorted by Sent; a change's window ends at the next
// change's write, the last one's at end) and returns the rows: per kind,
// per node and for all nodes (per change, its slowest node; a change some
// node did not apply counts as not applied there).
func Summarize(changes []results.Change, byNode map[string][]results.Transition, end int64) []results.ConvergeRow {
	nodes := slices.Sorted(maps.Keys(byNode))
	for i := range changes {
		ch := &changes[i]
		until := end
		if i+1 < len(changes) {
			until = changes[i+1].Written
		}
		ch.LatencyUS, ch.NotApplied = map[string]int64{}, nil
		for _, n := range nodes {
			if d, ok := Latency(*ch, byNode[n], until); ok {
				ch.LatencyUS[n] = d.Microseconds()
			} else {
				ch.NotApplied = append(ch.NotApplied, n)
			}
		}
	}
	var rows []results.ConvergeRow
	var kinds []string // in the order the changes were written (Kinds' for a Service)
	for _, ch := range changes {
		if !slices.Contains(kinds, ch.Kind) {
			kinds = append(kinds, ch.Kind)
		}
	}
	for _, kind := range kinds {
		for _, n := range append(nodes, AllNodes) {
			row := results.ConvergeRow{Kind: kind, Node: n}
			var us []float64
			for _, ch := range changes {
				if ch.Kind != kind {
					continue
				}
				row.Changes++
				v, ok := nodeLatency(ch, n)
				if !ok {
					row.NotApplied++
					continue
				}
				us = append(us, float64(v))
			}
			if row.Changes == 0 {
				continue
			}
			row.P50, row.P90, row.P99 = quantile(us, 0.50), quantile(us, 0.90), quantile(us, 0.99)
			if len(us) > 0 {
				row.MaxUS = slices.Max(us)
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// nodeLatency is ch's latency on node n, or on its slowest node (AllNodes,
// which needs every node to have applied it).
func nodeLatency(ch results.Change, n string) (int64, bool) {
	if n != AllNodes {
		v, ok := ch.LatencyUS[n]
		return v, ok
	}
	if len(ch.NotApplied) > 0 || len(ch.LatencyUS) == 0 {
		return 0, false
	}
	return slices.Max(slices.Collect(maps.Values(ch.LatencyUS))), true
}

// quantile is xs's q quantile with its bootstrap CI (none below 2 values).
func quantile(xs []float64, q float64) results.QuantileCI {
	if len(xs) == 0 {
		return results.QuantileCI{}
	}
	out := results.QuantileCI{Value: stats.EmpiricalQuantile(xs, q)}
	if len(xs) >= 2 {
		if lo, hi, ok := stats.BootstrapQuantileCI(xs, q); ok {
			out.CI = [2]float64{lo, hi}
		}
	}
	return out
}
