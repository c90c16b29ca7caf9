package converge

import (
	"context"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/results"
)

// A change's write call is timed (Change.WriteUS): from the write's time,
// taken just before its call, to the call's return. A writer that takes
// 30 ms to answer reads 30 ms or a little more, never less.
func TestCycleTimesTheWrite(t *testing.T) {
	const answer = 30 * time.Millisecond
	write := func(ctx context.Context) (int64, error) {
		at := time.Now().UnixNano()
		time.Sleep(answer)
		return at, nil
	}
	steps := []Step{{KindAllowAdded, "t", ShowsAny, write}, {KindAllowDeleted, "t", ShowsNone, write}}
	p := DefaultPace()
	p.Changes = 4
	// No prober: every change is shown at once on every (no) node.
	changes, err := CycleSteps(context.Background(), steps, Hooks{}, NewSeen(), p, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != p.Changes {
		t.Fatalf("%d changes, want %d", len(changes), p.Changes)
	}
	for _, ch := range changes {
		if d := time.Duration(ch.WriteUS) * time.Microsecond; d < answer || d > answer+time.Second {
			t.Errorf("change %d (%s): its write took %s, want %s or a little more", ch.Seq, ch.Kind, d, answer)
		}
	}
	rows := Summarize(changes, map[string][]results.Transition{}, time.Now().UnixNano(), 1000)
	for _, r := range rows {
		if r.Write == nil || r.Write.Value < float64(answer.Microseconds()) {
			t.Errorf("%s %s: write p50 %v, want %d µs or more", r.Kind, r.Node, r.Write, answer.Microseconds())
		}
	}
}
