package converge

import (
	"context"
	"strings"
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

// --pause: MIN-MAX or one duration; refused, in one line naming the flag,
// when unreadable, reversed, negative or above MaxPause. A cycle waits a
// pause within the bounds after each change: with a fixed 300 ms and no
// prober, consecutive writes are 300 ms apart, plus the write's own time
// and the scheduler's slack.
func TestPause(t *testing.T) {
	for in, want := range map[string]string{
		"50ms-250ms": "",
		"1.5s-2s":    "",
		"300ms":      "",
		"0-0":        "",
		"2s-1s":      "--pause 2s-1s: use MIN-MAX with 0 <= MIN <= MAX <= 1m0s",
		"2m":         "--pause 2m0s: use MIN-MAX",
		"-1s":        `--pause "-1s": want MIN-MAX`,
		"fast":       `--pause "fast": want MIN-MAX`,
		"1s-":        `--pause "1s-": want MIN-MAX`,
	} {
		p := DefaultPace()
		var err error
		if p.PauseMin, p.PauseMax, err = ParsePause(in); err == nil {
			err = p.Check()
		}
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("--pause %s: %v; want %q", in, err, want)
		}
	}
	if d := DefaultPace(); FormatPause(d.PauseMin, d.PauseMax) != "50ms-250ms" {
		t.Errorf("the default pause is %s, want 50ms-250ms", FormatPause(d.PauseMin, d.PauseMax))
	}

	const pause = 300 * time.Millisecond
	write := func(ctx context.Context) (int64, error) { return time.Now().UnixNano(), nil }
	steps := []Step{{KindAllowAdded, "t", ShowsAny, write}, {KindAllowDeleted, "t", ShowsNone, write}}
	p := DefaultPace()
	p.Changes, p.PauseMin, p.PauseMax = 4, pause, pause
	changes, err := CycleSteps(context.Background(), steps, Hooks{}, NewSeen(), p, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(changes); i++ {
		if d := time.Duration(changes[i].Written - changes[i-1].Written); d < pause || d > pause+time.Second {
			t.Errorf("changes %d and %d written %s apart, want %s or a little more", i-1, i, d, pause)
		}
	}
	if r := p.NewResult(); r.Pause != "300ms" || r.IntervalUS != 1000 {
		t.Errorf("the result records pause %q, interval %d µs", r.Pause, r.IntervalUS)
	}
}
