package converge

import (
	"bufio"
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

	"github.com/vnetlab/vnetlab/internal/results"
)

// Writer writes the changes of one Service, each returning its time (Unix
// ns, taken just before the write's call): through a cluster's API (kube
// converge) or a lab's Service transaction (svc converge).
type Writer interface {
	Create(ctx context.Context) (int64, error)         // the Service, with its first backend
	AddEndpoint(ctx context.Context) (int64, error)    // the second backend, Second
	RemoveEndpoint(ctx context.Context) (int64, error) // the second backend out again
	Delete(ctx context.Context) (int64, error)         // the Service
	Second() string                                    // the second backend's name (its answers)
}

// Pace is how changes are written, probed and waited for.
type Pace struct {
	Changes       int           // written, cycling through Kinds
	Interval      time.Duration // between a prober's probes: the latencies' resolution
	ProbeTimeout  time.Duration // a probe unanswered for this long was Silent; a removed backend's last answers must be twice that old
	ChangeTimeout time.Duration // a node that has not shown a change by then did not apply it
	WarmUpTimeout time.Duration // the unmeasured first creation and deletion's: after many other Services the system may still be working through them (about 19 s after 1,000 on a local cluster)
}

// DefaultPace: 200 changes (50 of each kind), a probe every millisecond.
func DefaultPace() Pace {
	return Pace{Changes: 200, Interval: time.Millisecond, ProbeTimeout: 100 * time.Millisecond, ChangeTimeout: 10 * time.Second, WarmUpTimeout: 10 * time.Minute}
}

// Bounds of a Pace.
const (
	MinInterval = 100 * time.Microsecond
	MaxChanges  = 100000
)

// Check refuses a pace that cannot run, in one line naming the flag.
func (p Pace) Check() error {
	switch {
	case p.Changes < len(Kinds) || p.Changes > MaxChanges:
		return fmt.Errorf("--changes %d: use %d to %d (a cycle writes one change of each kind: %s)", p.Changes, len(Kinds), MaxChanges, strings.Join(Kinds, ", "))
	case p.Interval < MinInterval:
		return fmt.Errorf("--interval %s: use %s or more (a probe is a socket, a datagram and its answer)", p.Interval, MinInterval)
	case p.ProbeTimeout < p.Interval:
		return fmt.Errorf("--probe-timeout %s is below --interval %s: a probe must be waited for at least until the next is sent", p.ProbeTimeout, p.Interval)
	case p.ChangeTimeout < 2*p.ProbeTimeout:
		return fmt.Errorf("--change-timeout %s: use at least twice --probe-timeout (%s)", p.ChangeTimeout, 2*p.ProbeTimeout)
	}
	return nil
}

// Pauses between changes: changes spread, not batched.
const (
	minPause = 50 * time.Millisecond
	maxPause = 250 * time.Millisecond
)

// A Step is one kind of change a cycle writes: its kind, the answer that
// shows it (Change.Shows), and its write, returning its time (Unix ns,
// taken just before the write's call).
type Step struct {
	Kind  string
	Shows string
	Write func(ctx context.Context) (int64, error)
}

// ServiceSteps are a Service's changes written through w, in Kinds'
// order: created, an endpoint added, removed, deleted.
func ServiceSteps(w Writer) []Step {
	return []Step{
		{KindServiceCreated, ShowsAny, w.Create},
		{KindEndpointAdded, w.Second(), w.AddEndpoint},
		{KindEndpointRemoved, Gone(w.Second()), w.RemoveEndpoint},
		{KindServiceDeleted, ShowsNone, w.Delete},
	}
}

// Cycle writes p.Changes changes of a Service through w (ServiceSteps).
func Cycle(ctx context.Context, w Writer, seen *Seen, p Pace, target string, say func(string, ...any)) ([]results.Change, error) {
	return CycleSteps(ctx, ServiceSteps(w), seen, p, target, say)
}

// CycleSteps writes p.Changes changes, cycling through steps, one at a
// time, each waited for on every node seen reports (or p.ChangeTimeout),
// with a random pause of 50-250 ms after it. An unmeasured first and last
// step (a Service created and deleted, a policy's allow added and
// deleted), each followed on every node, come first: what the system
// still owed earlier writes is not charged to the first measured change.
// say reports progress.
func CycleSteps(ctx context.Context, steps []Step, seen *Seen, p Pace, target string, say func(string, ...any)) ([]results.Change, error) {
	start := time.Now()
	for _, step := range []Step{steps[0], steps[len(steps)-1]} {
		at, err := step.Write(ctx)
		if err != nil {
			return nil, fmt.Errorf("warm-up: %v", err)
		}
		ch := results.Change{Shows: step.Shows, Written: at}
		if err := waitUntil(ctx, p.WarmUpTimeout, func() bool { return seen.shownEverywhere(ch, 0) }); err != nil {
			return nil, fmt.Errorf("warm-up: the nodes never followed the %s change within %s (%v): is the data plane being programmed?", step.Kind, p.WarmUpTimeout, err)
		}
	}
	say("converge: warm-up done in %s", time.Since(start).Round(time.Millisecond))
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 47))
	var changes []results.Change
	for i := range p.Changes {
		step := steps[i%len(steps)]
		ch := results.Change{Seq: i, Kind: step.Kind, Target: target, Shows: step.Shows}
		var err error
		if ch.Written, err = step.Write(ctx); err != nil {
			return changes, fmt.Errorf("change %d (%s): %v", i, step.Kind, err)
		}
		changes = append(changes, ch)
		// A removed backend's change shows at the end of its last answers:
		// that end must be two probe timeouts old, as a later answer from
		// it would move it. Not shown in time: not applied (Summarize).
		_ = waitUntil(ctx, p.ChangeTimeout, func() bool { return seen.shownEverywhere(ch, 2*p.ProbeTimeout) })
		if (i+1)%20 == 0 {
			say("converge: %d/%d changes", i+1, p.Changes)
		}
		select {
		case <-ctx.Done():
			return changes, ctx.Err()
		case <-time.After(minPause + time.Duration(r.Int64N(int64(maxPause-minPause)))):
		}
	}
	return changes, nil
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

// Seen is what the probers printed, by node.
type Seen struct {
	mu     sync.Mutex
	byNode map[string][]results.Transition
}

// NewSeen is an empty Seen.
func NewSeen() *Seen { return &Seen{byNode: map[string][]results.Transition{}} }

// Read takes a prober's lines until its stream ends.
func (s *Seen) Read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var tr results.Transition
		if json.Unmarshal(sc.Bytes(), &tr) != nil {
			continue
		}
		s.mu.Lock()
		s.byNode[tr.Node] = append(s.byNode[tr.Node], tr)
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

// since is, for every node, its transitions from the last one before w
// (the state at w) on: what a change written at w is judged on.
func (s *Seen) since(w int64) map[string][]results.Transition {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]results.Transition, len(s.byNode))
	for n, ts := range s.byNode {
		i := sort.Search(len(ts), func(i int) bool { return ts[i].Sent >= w })
		out[n] = slices.Clone(ts[max(i-1, 0):])
	}
	return out
}

// shownEverywhere says whether every node shows ch (a removed backend's,
// with the end of its answers settle old).
func (s *Seen) shownEverywhere(ch results.Change, settle time.Duration) bool {
	_, leaving := GoneOf(ch.Shows)
	now := time.Now().UnixNano()
	for _, ts := range s.since(ch.Written) {
		d, ok := Latency(ch, ts, now)
		if !ok || leaving && ch.Written+int64(d+settle) > now {
			return false
		}
	}
	return true
}

// All is a copy of every node's transitions, each in send order.
func (s *Seen) All() map[string][]results.Transition {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]results.Transition, len(s.byNode))
	for n, ts := range s.byNode {
		out[n] = slices.Clone(ts)
	}
	return out
}

// Finish fills c's changes' latencies, rows and transitions from what seen
// holds at the end.
func Finish(c *results.Convergence, changes []results.Change, seen *Seen) {
	all := seen.All()
	c.Changes = changes
	c.Rows = Summarize(c.Changes, all, c.End.UnixNano())
	for _, n := range slices.Sorted(maps.Keys(all)) {
		c.Transitions = append(c.Transitions, all[n]...)
	}
}
