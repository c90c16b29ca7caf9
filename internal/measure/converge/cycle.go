package converge

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Writer writes the changes of one Service, each returning its time (Unix
// ns, taken just before the write's call): through a cluster's API (kube
// converge) or a lab's Service transaction (svc converge).
type Writer interface {
	Create(ctx context.Context) (int64, error)         // the Service, with its first backend
	AddEndpoint(ctx context.Context) (int64, error)    // the second backend, Second
	RemoveEndpoint(ctx context.Context) (int64, error) // the second backend out again
	ChangePort(ctx context.Context) (int64, error)     // the Service's port from Targets.Main's to Targets.Moved's
	Delete(ctx context.Context) (int64, error)         // the Service, at whichever port it has
	Second() string                                    // the second backend's name (its answers)
}

// Targets are the probed addresses (IP:port) of the changed Service: its
// port at creation, and after its port changed.
type Targets struct{ Main, Moved string }

// Pace is how changes are written, probed and waited for.
type Pace struct {
	Changes       int           // written, cycling through the cycle's kinds
	Interval      time.Duration // between a prober's probes: the latencies' resolution
	ProbeTimeout  time.Duration // a probe unanswered for this long was Silent; a removed backend's or a deleted Service's last answers must be Settle of it old, by a prober's evidence
	ChangeTimeout time.Duration // a node that has not shown a change by then did not apply it
	WarmUpTimeout time.Duration // the unmeasured first creation and deletion's: after many other Services the system may still be working through them (about 19 s after 1,000 on a local cluster)
	// PauseMin and PauseMax bound the random pause after a change was
	// shown everywhere (or timed out), before the next is written: changes
	// spread, not batched. A proxy that syncs at most once a period
	// (kube-proxy's minSyncPeriod, 1 s) makes a change written within that
	// period of its last sync wait for it: pauses shorter than the period
	// measure changes arriving at that rate, longer ones each change alone.
	PauseMin, PauseMax time.Duration
}

// DefaultPace: 1,000 changes (200 of each kind), a probe every
// millisecond, a pause of 50-250 ms after each change (DefaultPause*).
func DefaultPace() Pace {
	return Pace{Changes: 200 * len(ServiceKinds), Interval: time.Millisecond, ProbeTimeout: 100 * time.Millisecond, ChangeTimeout: 10 * time.Second, WarmUpTimeout: 10 * time.Minute,
		PauseMin: DefaultPauseMin, PauseMax: DefaultPauseMax}
}

// The default pause after a change, as every run had before --pause.
const (
	DefaultPauseMin = 50 * time.Millisecond
	DefaultPauseMax = 250 * time.Millisecond
	// MaxPause bounds --pause: a run of the default 1,000 changes then
	// takes up to about 17 hours.
	MaxPause = time.Minute
)

// DefaultPause is --pause's default as the flag, files and reports write it.
var DefaultPause = FormatPause(DefaultPauseMin, DefaultPauseMax)

// ParsePause reads --pause: "MIN-MAX" (50ms-250ms) or one duration (a
// fixed pause).
func ParsePause(s string) (lo, hi time.Duration, err error) {
	a, b, isRange := strings.Cut(s, "-")
	if lo, err = time.ParseDuration(a); err == nil {
		hi = lo
		if isRange {
			hi, err = time.ParseDuration(b)
		}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("--pause %q: want MIN-MAX, such as 50ms-250ms or 1.5s-2s, or one duration", s)
	}
	return lo, hi, nil
}

// FormatPause is --pause's value for lo and hi.
func FormatPause(lo, hi time.Duration) string {
	if lo == hi {
		return lo.String()
	}
	return lo.String() + "-" + hi.String()
}

// PauseOf is the pause a run recorded, or for a file from before --pause
// ("") the default it had.
func PauseOf(recorded string) string {
	if recorded != "" {
		return recorded
	}
	return DefaultPause
}

// Bounds of a Pace. MinInterval: a probe's 5-tuple comes back after
// ReuseAfter(interval), 45 s at 700 µs, half as long again as conntrack's
// UDP timeout (UDPConntrackTimeout).
const (
	MinInterval = 700 * time.Microsecond
	MaxChanges  = 100000
)

// Check refuses a pace that cannot run, in one line naming the flag.
func (p Pace) Check(kinds []string) error {
	switch {
	case p.Changes < len(kinds) || p.Changes > MaxChanges:
		return fmt.Errorf("--changes %d: use %d to %d (a cycle writes one change of each kind: %s)", p.Changes, len(kinds), MaxChanges, strings.Join(kinds, ", "))
	case p.Interval < MinInterval:
		return fmt.Errorf("--interval %s: use %s or more (a probe's source port comes back after %s, within conntrack's %s UDP timeout: an earlier probe's entry would decide its path)", p.Interval, MinInterval, ReuseAfter(p.Interval), UDPConntrackTimeout)
	case p.ProbeTimeout < p.Interval:
		return fmt.Errorf("--probe-timeout %s is below --interval %s: a probe must be waited for at least until the next is sent", p.ProbeTimeout, p.Interval)
	case p.ChangeTimeout < Settle(p.ProbeTimeout):
		return fmt.Errorf("--change-timeout %s: use at least twice --probe-timeout (%s)", p.ChangeTimeout, Settle(p.ProbeTimeout))
	case p.PauseMin < 0 || p.PauseMax < p.PauseMin || p.PauseMax > MaxPause:
		return fmt.Errorf("--pause %s: use MIN-MAX with 0 <= MIN <= MAX <= %s (such as %s)", FormatPause(p.PauseMin, p.PauseMax), MaxPause, DefaultPause)
	}
	return nil
}

// A Step is one kind of change a cycle writes: its kind, the probed
// address that shows it (Change.Target) and the answer that does
// (Change.Shows), and its write, returning its time (Unix ns, taken just
// before the write's call).
type Step struct {
	Kind   string
	Target string
	Shows  string
	Write  func(ctx context.Context) (int64, error)
}

// ServiceSteps are a Service's changes written through w, in
// ServiceKinds' order: created, an endpoint added, removed, its port
// changed (shown at t.Moved), deleted (at the port it then has).
func ServiceSteps(w Writer, t Targets) []Step {
	return []Step{
		{KindServiceCreated, t.Main, ShowsAny, w.Create},
		{KindEndpointAdded, t.Main, w.Second(), w.AddEndpoint},
		{KindEndpointRemoved, t.Main, Gone(w.Second()), w.RemoveEndpoint},
		{KindPortChanged, t.Moved, ShowsAny, w.ChangePort},
		{KindServiceDeleted, t.Moved, ShowsNone, w.Delete},
	}
}

// PolicySteps are a policy's changes, probed at target (an isolated pod's
// address): add writes the policy allowing the probers (allow-added,
// shown by any answer), del deletes it (allow-deleted, by none).
func PolicySteps(target string, add, del func(ctx context.Context) (int64, error)) []Step {
	return []Step{{KindAllowAdded, target, ShowsAny, add}, {KindAllowDeleted, target, ShowsNone, del}}
}

// PolicyLabelSteps are PolicySteps with a pod's label update between
// them: add writes the policy allowing the probers into the isolated pod
// (allow-added), unlabel takes from the pod the label the policy selects it
// by (label-removed, shown by no answer), relabel gives it back
// (label-added, by any answer), del deletes the policy (allow-deleted). The
// first and last steps undo each other, as the cycle's unmeasured warm-up
// needs.
func PolicyLabelSteps(target string, add, unlabel, relabel, del func(ctx context.Context) (int64, error)) []Step {
	p := PolicySteps(target, add, del)
	return []Step{p[0], {KindLabelRemoved, target, ShowsNone, unlabel}, {KindLabelAdded, target, ShowsAny, relabel}, p[1]}
}

// Hooks are what a cycle tells its writer, when it asks (nil: nothing).
type Hooks struct {
	// WarmedUp: the warm-up is done, the first measured change comes
	// next (kube converge ends its creation phase there: every node
	// carries a Service made after the N others, and measures the idle
	// one).
	WarmedUp func(ctx context.Context)
	// Observed: a change the nodes showed (or whose timeout passed);
	// kube converge scrapes the proxies' own metrics there
	// (Change.MetricUS).
	Observed func(ctx context.Context, ch *Change)
}

// Cycle writes p.Changes changes of a Service through w (ServiceSteps),
// telling h what it asks for.
func Cycle(ctx context.Context, w Writer, h Hooks, seen *Seen, p Pace, t Targets, say func(string, ...any)) ([]Change, error) {
	return CycleSteps(ctx, ServiceSteps(w, t), h, seen, p, say)
}

// CycleSteps writes p.Changes changes, cycling through steps, one at a
// time, each waited for on every node seen reports (or p.ChangeTimeout),
// with a random pause of p.PauseMin to p.PauseMax after it. An
// unmeasured first and last step (a Service created and deleted, a
// policy's allow added and deleted), each followed on every node at the first step's target, come
// first: what the system still owed earlier writes is not charged to the
// first measured change. say reports progress.
func CycleSteps(ctx context.Context, steps []Step, h Hooks, seen *Seen, p Pace, say func(string, ...any)) ([]Change, error) {
	start := time.Now()
	for _, step := range []Step{steps[0], steps[len(steps)-1]} {
		at, err := step.Write(ctx)
		if err != nil {
			return nil, fmt.Errorf("warm-up: %v", err)
		}
		ch := Change{Shows: step.Shows, Written: at, Target: steps[0].Target}
		if err := waitUntil(ctx, p.WarmUpTimeout, func() bool { return seen.shownEverywhere(ch, 0) }); err != nil {
			return nil, fmt.Errorf("warm-up: the nodes never followed the %s change within %s (%v): is the data plane being programmed?", step.Kind, p.WarmUpTimeout, err)
		}
	}
	say("converge: warm-up done in %s", time.Since(start).Round(time.Millisecond))
	if h.WarmedUp != nil {
		h.WarmedUp(ctx)
	}
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 47))
	var changes []Change
	for i := range p.Changes {
		step := steps[i%len(steps)]
		ch := Change{Seq: i, Kind: step.Kind, Target: step.Target, Shows: step.Shows}
		var err error
		if ch.Written, err = step.Write(ctx); err != nil {
			return changes, fmt.Errorf("change %d (%s): %v", i, step.Kind, err)
		}
		ch.WriteUS = (time.Now().UnixNano() - ch.Written) / 1000
		changes = append(changes, ch)
		// A removed backend's change shows at the end of its last answers,
		// a deleted Service's at the end of any: a probe sent Settle after
		// that end must show it still (another backend's answer, or none),
		// as a later answer would move it. Not shown in time: not applied
		// (Pair).
		_ = waitUntil(ctx, p.ChangeTimeout, func() bool { return seen.shownEverywhere(ch, Settle(p.ProbeTimeout)) })
		if h.Observed != nil {
			h.Observed(ctx, &changes[len(changes)-1])
		}
		if (i+1)%20 == 0 {
			say("converge: %d/%d changes", i+1, p.Changes)
		}
		select {
		case <-ctx.Done():
			return changes, ctx.Err()
		case <-time.After(p.pause(r)):
		}
	}
	return changes, nil
}

// pause is a random pause in [PauseMin, PauseMax].
func (p Pace) pause(r *rand.Rand) time.Duration {
	return p.PauseMin + time.Duration(r.Int64N(int64(p.PauseMax-p.PauseMin)+1))
}

// waitUntil polls ok every millisecond until it holds (nil), limit passes
// or ctx ends (an error).
func waitUntil(ctx context.Context, limit time.Duration, ok func() bool) error {
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

// Seen is what the probers printed, by node: their transitions, and each
// target's latest held line (EventHeld).
type Seen struct {
	mu     sync.Mutex
	byNode map[string][]Transition
	held   map[nodeTarget]Transition
}

type nodeTarget struct{ node, target string }

// NewSeen is an empty Seen.
func NewSeen() *Seen {
	return &Seen{byNode: map[string][]Transition{}, held: map[nodeTarget]Transition{}}
}

// Read takes a prober's lines until its stream ends.
func (s *Seen) Read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var tr Transition
		if json.Unmarshal(sc.Bytes(), &tr) != nil {
			continue
		}
		s.mu.Lock()
		if tr.Event == EventHeld {
			if k := (nodeTarget{tr.Node, tr.Target}); tr.Sent > s.held[k].Sent {
				s.held[k] = tr
			}
			s.mu.Unlock()
			continue
		}
		// In send order: a prober's targets and kept connections write
		// their lines independently, each in its own order.
		ts := append(s.byNode[tr.Node], tr)
		for i := len(ts) - 1; i > 0 && ts[i-1].Sent > ts[i].Sent; i-- {
			ts[i-1], ts[i] = ts[i], ts[i-1]
		}
		s.byNode[tr.Node] = ts
		s.mu.Unlock()
	}
}

// WaitNodes waits until n probers have each reported their first probe.
func (s *Seen) WaitNodes(ctx context.Context, n int, limit time.Duration) error {
	return waitUntil(ctx, limit, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.byNode) >= n
	})
}

// since is, for every node, its transitions from target's last one before
// w (the state at w) on: what a change written at w is judged on; and its
// latest held line for target, read with them (a held line comes after
// every transition of its target sent before it).
func (s *Seen) since(w int64, target string) (map[string][]Transition, map[string]Transition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]Transition, len(s.byNode))
	held := map[string]Transition{}
	for n, ts := range s.byNode {
		i := sort.Search(len(ts), func(i int) bool { return ts[i].Sent >= w })
		from := 0
		for j := i - 1; j >= 0; j-- {
			if ts[j].Event == "" && ts[j].Target == target {
				from = j
				break
			}
		}
		out[n] = slices.Clone(ts[from:])
		if h, ok := s.held[nodeTarget{n, target}]; ok {
			held[n] = h
		}
	}
	return out, held
}

// shownEverywhere says whether every node shows ch. A change that ends
// something (ending: a removed backend's answers, a deleted Service's),
// with settle above 0, also needs positive evidence on each node: a held
// line (EventHeld) that shows it (evidence: another backend's answers, or
// none), sent at least settle after the start of the last run of probes
// showing it. Time passing is no evidence: a prober starved of CPU sends
// no probes, and the removed backend, or the deleted Service, may answer
// again when it does.
func (s *Seen) shownEverywhere(ch Change, settle time.Duration) bool {
	ends := ending(ch.Shows)
	now := time.Now().UnixNano()
	byNode, held := s.since(ch.Written, ch.Target)
	for n, ts := range byNode {
		d, ok := Latency(ch, ts, now)
		if !ok {
			return false
		}
		if h := held[n]; ends && settle > 0 && (h.Sent < ch.Written+int64(d+settle) || !evidence(ch.Shows, h.Answer)) {
			return false
		}
	}
	return true
}

// WaitShown waits until every node shows ch (or limit passes: an error).
func (s *Seen) WaitShown(ctx context.Context, ch Change, limit time.Duration) error {
	return waitUntil(ctx, limit, func() bool { return s.shownEverywhere(ch, 0) })
}

// All is a copy of every node's transitions, each in send order.
func (s *Seen) All() map[string][]Transition {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]Transition, len(s.byNode))
	for n, ts := range s.byNode {
		out[n] = slices.Clone(ts)
	}
	return out
}

// ByNode is ts by node, each node's in send order (as Seen.All gives
// them): a stored run's transitions, to be paired again (Pair).
func ByNode(ts []Transition) map[string][]Transition {
	byNode := map[string][]Transition{}
	for _, t := range ts {
		byNode[t.Node] = append(byNode[t.Node], t)
	}
	for _, ts := range byNode {
		slices.SortStableFunc(ts, func(a, b Transition) int { return cmp.Compare(a.Sent, b.Sent) })
	}
	return byNode
}

// Finish sets r's changes, each paired with what seen holds at the end
// (Pair: its latency per node), and r's transitions, node by node.
func Finish(r *Run, changes []Change, seen *Seen) {
	all := seen.All()
	r.Changes = changes
	Pair(r.Changes, all, r.End.UnixNano())
	for _, n := range slices.Sorted(maps.Keys(all)) {
		r.Transitions = append(r.Transitions, all[n]...)
	}
}
