package converge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
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
}

// Each cycle writes its kinds in the order its list gives (the list
// --changes is bounded by), and --changes below one of each is refused in
// one line naming that cycle's kinds.
func TestCycleKinds(t *testing.T) {
	write := func(context.Context) (int64, error) { return 0, nil }
	for _, c := range []struct {
		steps []Step
		kinds []string
	}{
		{ServiceSteps(nopWriter{}, Targets{}), ServiceKinds},
		{PolicySteps("t", write, write), PolicyKinds},
		{PolicyLabelSteps("t", write, write, write, write), PolicyLabelKinds},
	} {
		var got []string
		for _, s := range c.steps {
			got = append(got, s.Kind)
		}
		if strings.Join(got, " ") != strings.Join(c.kinds, " ") {
			t.Errorf("a cycle writes %v, its kinds are %v", got, c.kinds)
		}
		p := DefaultPace()
		p.Changes = len(c.kinds)
		if err := p.Check(c.kinds); err != nil {
			t.Errorf("--changes %d for %v: %v", p.Changes, c.kinds, err)
		}
		p.Changes--
		want := fmt.Sprintf("--changes %d: use %d to %d (a cycle writes one change of each kind: %s)", p.Changes, len(c.kinds), MaxChanges, strings.Join(c.kinds, ", "))
		if err := p.Check(c.kinds); err == nil || err.Error() != want {
			t.Errorf("--changes %d for %v: %v, want %q", p.Changes, c.kinds, err, want)
		}
	}
}

type nopWriter struct{}

func (nopWriter) Create(context.Context) (int64, error)         { return 0, nil }
func (nopWriter) AddEndpoint(context.Context) (int64, error)    { return 0, nil }
func (nopWriter) RemoveEndpoint(context.Context) (int64, error) { return 0, nil }
func (nopWriter) ChangePort(context.Context) (int64, error)     { return 0, nil }
func (nopWriter) Delete(context.Context) (int64, error)         { return 0, nil }
func (nopWriter) Second() string                                { return "b" }

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
			err = p.Check(ServiceKinds)
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
	if r := p.NewRun(); r.Pause != "300ms" || r.IntervalUS != 1000 {
		t.Errorf("the result records pause %q, interval %d µs", r.Pause, r.IntervalUS)
	}
}

// waitCase is a wait's test: a change of kind, shown so, written 5 s ago
// (long past: time alone would do) on target "t"; feed gives seen a
// prober's line sent ms after the write, check asks whether the wait, with
// a settle of 200 ms, takes the change as shown.
func waitCase(t *testing.T, kind, shows string) (*Seen, Change, func(node string, ms int, answer, event string), func(step string, want bool)) {
	const settle = 200 * time.Millisecond
	seen := NewSeen()
	ch := Change{Kind: kind, Target: "t", Shows: shows, Written: time.Now().Add(-5 * time.Second).UnixNano()}
	feed := func(node string, ms int, answer, event string) {
		t.Helper()
		b, err := json.Marshal(Transition{Node: node, Target: "t", Sent: ch.Written + int64(ms)*int64(time.Millisecond), Answer: answer, Event: event})
		if err != nil {
			t.Fatal(err)
		}
		seen.Read(bytes.NewReader(append(b, '\n')))
	}
	check := func(step string, want bool) {
		t.Helper()
		if got := seen.shownEverywhere(ch, settle); got != want {
			t.Errorf("%s: shown %v, want %v", step, got, want)
		}
	}
	return seen, ch, feed, check
}

// A removed backend's leaving is shown, for the cycle's wait, only with
// positive evidence on every node: a held line of another backend's
// answers sent Settle after the end of the removed one's. Time passing is
// not enough (a starved prober sent nothing), nor a held line too early,
// nor one of silence; a later answer from the removed backend moves the
// end, and the evidence must come again. Without settle (WaitShown) the
// end alone shows it.
func TestRemovalWaitsForEvidence(t *testing.T) {
	seen, ch, feed, check := waitCase(t, KindEndpointRemoved, Gone("b"))
	for _, n := range []string{"n1", "n2"} {
		feed(n, -10, "a", "")
		feed(n, -5, "b", "")
		feed(n, 20, "a", "") // b's answers end 20 ms after the write
	}
	check("the end, no evidence", false)
	if !seen.shownEverywhere(ch, 0) {
		t.Error("without settle: the end alone should show it")
	}
	feed("n1", 150, "a", EventHeld)
	check("n1 held 130 ms after the end", false)
	feed("n1", 230, "a", EventHeld)
	check("n1 held 210 ms after the end, n2 nothing", false)
	feed("n2", 400, Silent, "")
	feed("n2", 600, Silent, EventHeld)
	check("n2 held silent", false)
	feed("n2", 700, "a", "")
	feed("n2", 900, "a", EventHeld)
	check("both held another backend's answers", true)
	feed("n1", 1000, "b", "") // b answers again on n1
	feed("n1", 1010, "a", "")
	check("b answered again on n1", false)
	feed("n1", 1300, "a", EventHeld)
	check("held again after b's new end", true)
	if got := len(seen.All()["n1"]); got != 5 {
		t.Errorf("n1 keeps %d transitions, want 5 (held lines are not transitions)", got)
	}
}

// A deleted Service's end of answers is shown, for the cycle's wait, as a
// removal's is: with a held line of no answer sent Settle after the start
// of the last silent run on every node. An answer after a first silent
// probe (the prober or the backend starved while a proxy synced) moves
// that start: the deletion was not done yet.
func TestDeletionWaitsForEvidence(t *testing.T) {
	seen, ch, feed1, check := waitCase(t, KindServiceDeleted, ShowsNone)
	feed := func(ms int, answer, event string) { t.Helper(); feed1("n1", ms, answer, event) }
	feed(-10, "a", "")
	feed(30, Silent, "")
	check("the first silent probe, no evidence", false)
	feed(300, "a", "") // answered again: not deleted yet
	check("answered again", false)
	feed(400, Refused, "")
	feed(550, Refused, EventHeld)
	check("held 150 ms after the last run's start", false)
	feed(650, Refused, EventHeld)
	check("held 250 ms after it", true)
	byNode, _ := seen.since(ch.Written, ch.Target)
	if d, ok := Latency(ch, byNode["n1"], time.Now().UnixNano()); !ok || d != 400*time.Millisecond {
		t.Errorf("latency %s (shown %v), want 400ms: the start of the last unanswered run", d, ok)
	}
}

// A starved prober does not end a removal's wait. A real prober (vnetlab
// kube probe, a process of its own) probes a loopback UDP server that
// answers as two backends in turn, a and b, until b is removed; as soon as
// the prober has shown b's end, it is stopped (SIGSTOP) for 600 ms, as the
// CPU starved the probers on a 2-CPU cluster whose proxies synced for
// seconds. No probe is sent meanwhile, so nothing says b will not answer
// again: the wait must go on until the prober, resumed, has answered a's
// for a while (its held line), and end soon after.
func TestRemovalWaitOutlastsAStarvedProber(t *testing.T) {
	self := os.Getenv("VNETLAB_BIN")
	if self == "" {
		t.Skip("the prober is vnetlab kube probe: set VNETLAB_BIN (make test does)")
	}
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var removed atomic.Bool
	go func() {
		buf := make([]byte, 64)
		for i := 0; ; i++ {
			_, from, err := srv.ReadFromUDP(buf)
			if err != nil {
				return
			}
			who := "a"
			if i%2 == 1 && !removed.Load() {
				who = "b"
			}
			_, _ = srv.WriteToUDP([]byte(who+"\n"), from)
		}
	}()
	target := srv.LocalAddr().String()
	p := exec.Command(self, "kube", "probe", "--node", "n1", "--target", target, "--interval", "1ms", "--timeout", "100ms")
	out, err := p.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Process.Signal(syscall.SIGCONT); _ = p.Process.Kill(); _ = p.Wait() }()
	seen := NewSeen()
	go seen.Read(out)
	ctx := context.Background()
	if err := seen.WaitNodes(ctx, 1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	const settle, starved = 200 * time.Millisecond, 600 * time.Millisecond
	// The stop must come before the prober could have said a's answers
	// held (settle after b's end): a test descheduled that long on a
	// loaded machine tries again.
	var ch Change
	for try := 1; ; try++ {
		removed.Store(false)
		time.Sleep(300 * time.Millisecond) // a and b answering in turn
		ch = Change{Kind: KindEndpointRemoved, Target: target, Shows: Gone("b"), Written: time.Now().UnixNano()}
		removed.Store(true)
		if err := seen.WaitShown(ctx, ch, 10*time.Second); err != nil {
			t.Fatalf("b's answers never ended: %v", err)
		}
		if err := p.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		byNode, _ := seen.since(ch.Written, ch.Target)
		end, _ := Latency(ch, byNode["n1"], time.Now().UnixNano())
		if late := time.Duration(time.Now().UnixNano() - ch.Written - int64(end)); late < settle/2 {
			break
		} else if try == 5 {
			t.Fatalf("the prober was stopped %s after b's end, 5 times: want within %s (a machine this busy cannot run the test)", late, settle/2)
		}
		_ = p.Process.Signal(syscall.SIGCONT)
	}
	stopped := time.Now()
	for time.Since(stopped) < starved {
		if seen.shownEverywhere(ch, settle) {
			t.Fatalf("the wait ended %s into the prober's stop, on no probe sent since", time.Since(stopped).Round(time.Millisecond))
		}
		time.Sleep(time.Millisecond)
	}
	if err := p.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	if err := waitUntil(ctx, 10*time.Second, func() bool { return seen.shownEverywhere(ch, settle) }); err != nil {
		t.Fatalf("the resumed prober's answers from a never ended the wait: %v", err)
	}
	t.Logf("the wait ended %s after the prober resumed", time.Since(resumed).Round(time.Millisecond))
}
