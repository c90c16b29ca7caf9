package converge

import (
	"maps"
	"slices"
	"strings"
	"time"
)

// The kinds of change, each with the answer that shows it (Change.Shows).
const (
	KindServiceCreated  = "service-created"  // the first answer, from any backend
	KindEndpointAdded   = "endpoint-added"   // the first answer from the new backend
	KindEndpointRemoved = "endpoint-removed" // the end of the last run of answers from the backend that left
	KindPortChanged     = "port-changed"     // the first answer on the Service's new port
	KindServiceDeleted  = "service-deleted"  // the start of the last run of the new port's probes not answered (silent or refused)
)

// The kinds of a NetworkPolicy's change (policy converge in a lab, kube
// converge --policy in a cluster): a policy allowing the probers into an
// isolated pod added (the first answer) and deleted again (the start of
// the last run of probes not answered).
const (
	KindAllowAdded   = "allow-added"
	KindAllowDeleted = "allow-deleted"
)

// The kinds of a pod's label update (kube converge --policy): the isolated
// pod relabelled out of the policy allowing the probers into it (the start
// of the last run of probes not answered) and into it again (the first
// answer), the policy unchanged: a pod moving in or out of a policy by its
// labels alone.
const (
	KindLabelRemoved = "label-removed"
	KindLabelAdded   = "label-added"
)

// The kinds of each cycle, in the order it writes them: a Service's
// (ServiceSteps), a policy's (PolicySteps) and a policy's with a pod's
// label update between (PolicyLabelSteps).
var (
	ServiceKinds     = []string{KindServiceCreated, KindEndpointAdded, KindEndpointRemoved, KindPortChanged, KindServiceDeleted}
	PolicyKinds      = []string{KindAllowAdded, KindAllowDeleted}
	PolicyLabelKinds = []string{KindAllowAdded, KindLabelRemoved, KindLabelAdded, KindAllowDeleted}
)

// What Change.Shows holds besides a backend's name.
const (
	ShowsAny  = "*" // any backend's answer
	ShowsNone = "!" // no answer
	notPrefix = "!" // "!NAME": the answers of NAME have stopped
)

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
// write, or now): ok is false when they do not show it yet. A change that
// ends something (ending: a removed backend's answers, a deleted Service's)
// shows at the start of the last run of probes showing it before until:
// an answer after a first unanswered probe (a prober or backend starved of
// CPU while a proxy syncs) says the change was not done yet. So it is
// known only once until is past it by more than the prober's timeout (Run
// waits for that). A change some probe showed before the write (a state
// that already held: ShownBefore) costs 0 here, so that the cycle does
// not wait for it; Pair sets it apart (ShownBefore).
func Latency(ch Change, ts []Transition, until int64) (time.Duration, bool) {
	stateAt, after := split(ch, ts, until)
	shows, ends := showsFor(ch)
	if ends {
		// The start of the last run of probes that show it.
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

// ShownBefore says whether the node's probes (ts) already showed ch when
// it was written: a Service answering before it was created, a backend
// before it was added, a port before it was moved there, or a deleted
// port silent before the deletion. The change's write cannot have caused
// that: the probes did not see what the rules said (a conntrack entry of
// an earlier probe with the same 5-tuple decided its path), or the change
// before it had not settled. Such a change has no latency on that node;
// Pair sets it apart, never as 0. A backend's removal is not
// judged so: with two backends, a probe before the write may well have
// reached the other one.
func ShownBefore(ch Change, ts []Transition) bool {
	shows, _ := showsFor(ch)
	if _, leaving := GoneOf(ch.Shows); leaving {
		return false
	}
	stateAt, _ := split(ch, ts, ch.Written)
	return shows(stateAt)
}

// split is what ch's target's probes in ts saw when ch was written, and
// their transitions after it, sent before until.
func split(ch Change, ts []Transition, until int64) (string, []Transition) {
	var after []Transition
	stateAt := Silent
	for _, t := range ts {
		if t.Event != "" || ch.Target != "" && t.Target != ch.Target {
			continue // a kept connection's, or another target's probes
		}
		switch {
		case t.Sent < ch.Written:
			stateAt = t.Answer
		case t.Sent < until:
			after = append(after, t)
		}
	}
	return stateAt, after
}

// showsFor is whether an answer shows ch, and whether ch ends something
// (ending).
func showsFor(ch Change) (func(string) bool, bool) {
	gone, leaving := GoneOf(ch.Shows)
	return func(a string) bool {
		switch {
		case ch.Shows == ShowsAny:
			return answered(a)
		case ch.Shows == ShowsNone:
			return !answered(a)
		case leaving:
			return a != gone
		}
		return a == ch.Shows
	}, ending(ch.Shows)
}

// ending says whether a change that shows so ends something: a backend's
// answers (Gone) or every answer (ShowsNone). Such a change shows at the
// start of the last run of probes showing it (Latency), and the cycle
// waits for a prober's evidence that the run goes on (evidence).
func ending(shows string) bool {
	_, leaving := GoneOf(shows)
	return leaving || shows == ShowsNone
}

// evidence says whether a prober's held line (EventHeld) answered so
// proves that a change that ends something (ending) stays shown: another
// backend answering after a backend's removal (silence proves nothing
// there: the Service still has a backend), no answer after a deletion.
func evidence(shows, answer string) bool {
	if gone, leaving := GoneOf(shows); leaving {
		return answered(answer) && answer != gone
	}
	return shows == ShowsNone && !answered(answer)
}

// Pair fills each change's latency per node from the transitions (by
// node, each sorted by Sent; a change's window ends at the next change's
// write, the last one's at end): the nodes that showed it (LatencyUS),
// those whose probes showed it before its write (ShownBefore, no latency),
// those that did not in time (NotApplied), and what became of each node's
// kept connections (Conns).
func Pair(changes []Change, byNode map[string][]Transition, end int64) {
	nodes := slices.Sorted(maps.Keys(byNode))
	for i := range changes {
		ch := &changes[i]
		until := end
		if i+1 < len(changes) {
			until = changes[i+1].Written
		}
		ch.LatencyUS, ch.NotApplied, ch.ShownBefore, ch.Conns = map[string]int64{}, nil, nil, nil
		for _, n := range nodes {
			if ShownBefore(*ch, byNode[n]) {
				ch.ShownBefore = append(ch.ShownBefore, n)
			} else if d, ok := Latency(*ch, byNode[n], until); ok {
				ch.LatencyUS[n] = d.Microseconds()
			} else {
				ch.NotApplied = append(ch.NotApplied, n)
			}
			if fates := Fates(*ch, byNode[n], until); len(fates) > 0 {
				if ch.Conns == nil {
					ch.Conns = map[string][]ConnFate{}
				}
				ch.Conns[n] = fates
			}
		}
	}
}

// Fates is what became of the connections node's prober held open at ch's
// write (its kept connections' transitions in ts), before until: each
// broken, stalled (its longest late answer) or neither, and whether ch took
// its backend out (an endpoint removed: the backend that left; the Service
// deleted: all).
func Fates(ch Change, ts []Transition, until int64) []ConnFate {
	open := map[string]bool{}
	broke := map[string]Transition{}
	stall := map[string]int64{}
	for _, t := range ts {
		switch {
		case t.Event == "" || t.Sent >= until:
		case t.Sent < ch.Written && t.Event == EventOpen:
			open[t.Answer] = true
		case t.Sent < ch.Written && t.Event == EventBroken:
			delete(open, t.Answer)
		case t.Sent < ch.Written:
		case t.Event == EventBroken:
			if _, seen := broke[t.Answer]; !seen {
				broke[t.Answer] = t
			}
		case t.Event == EventStalled:
			stall[t.Answer] = max(stall[t.Answer], t.StallUS)
		}
	}
	gone, _ := GoneOf(ch.Shows)
	var out []ConnFate
	for _, b := range slices.Sorted(maps.Keys(open)) {
		f := ConnFate{Backend: b, Gone: b == gone || ch.Kind == KindServiceDeleted}
		if t, ok := broke[b]; ok {
			f.Broken, f.AfterUS, f.Detail = true, (t.Sent-ch.Written)/1000, t.Detail
		} else {
			f.StallUS = stall[b]
		}
		out = append(out, f)
	}
	return out
}
