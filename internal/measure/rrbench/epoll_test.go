package rrbench

import (
	"math"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The event loop's waits end at their deadline (the timerfd), not before,
// and a deadline set again after its timer expired is armed again (no
// wait forever); a socket's event ends a wait before its deadline.
func TestEpollerDeadlines(t *testing.T) {
	p, clk := testEpoller(t)
	// waitUntil waits with deadline dl until it passes or an event other
	// than the timer's comes; it returns that event's data, or -1.
	waitUntil := func(dl time.Duration) int32 {
		for now := clk.now(); now < dl; now = clk.now() {
			evs, err := p.wait(dl, now)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				if ev.Fd != timerData {
					return ev.Fd
				}
			}
		}
		return -1
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, d := range []time.Duration{20 * time.Millisecond, 30 * time.Millisecond, 30 * time.Millisecond} {
			t0 := clk.now()
			if got := waitUntil(t0 + d); got != -1 {
				t.Errorf("wait %d: event %d, want only the timer's", i, got)
			}
			if el := clk.now() - t0; el < d {
				t.Errorf("wait %d for %s ended after %s", i, d, el)
			}
		}
		// The same deadline again after its timer expired (a loop whose
		// clock read it as not yet passed): armed again, so the wait ends.
		dl := clk.now() + 5*time.Millisecond
		waitUntil(dl)
		if _, err := p.wait(dl, dl-time.Millisecond); err != nil {
			t.Error(err)
			return
		}
		// A readable socket ends a wait long before its deadline.
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer unix.Close(fds[0])
		defer unix.Close(fds[1])
		if err := p.ctl(unix.EPOLL_CTL_ADD, fds[0], unix.EPOLLIN, 7); err != nil {
			t.Error(err)
			return
		}
		if _, err := unix.Write(fds[1], []byte{1}); err != nil {
			t.Error(err)
			return
		}
		t0 := clk.now()
		if got := waitUntil(t0 + 10*time.Second); got != 7 {
			t.Errorf("socket wait: event %d, want 7", got)
		}
		if el := clk.now() - t0; el > 5*time.Second {
			t.Errorf("a readable socket ended the wait after %s", el)
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second): // seconds: a busy shared machine
		t.Fatal("a wait with a deadline did not end")
	}
}

// A deadline is the instant it names, however long after reading now the
// timer is armed (the loop's sends between its clock read and its wait): a
// timer armed for the deadline less that now (relative) fires late by all
// the time spent in between (a5af99a's +25-35 us on every p50), here 20 ms,
// far outside the slack a loaded 2-vCPU machine needs for a wake-up. A
// deadline already past ends the wait at once, and so does one whose
// CLOCK_MONOTONIC time would be zero (a zero it_value disarms a timerfd:
// the wait would never end).
func TestEpollerAbsoluteDeadline(t *testing.T) {
	const (
		ahead = 30 * time.Millisecond // the deadline, after the now read
		spent = 20 * time.Millisecond // spent before arming: a late-armed timer fires this late
		slack = 10 * time.Millisecond // a wake-up's lateness allowed (load ~5, 2 vCPUs)
		tries = 5                     // a try ends within slack if the timer is right
	)
	p, clk := testEpoller(t)
	// timerWait waits with deadline dl (now: the loop's last clock read)
	// until the timer's event, again after a signal's EINTR (no events),
	// and returns when it ended.
	timerWait := func(dl, now time.Duration) (time.Duration, error) {
		for {
			evs, err := p.wait(dl, now)
			if err != nil {
				return 0, err
			}
			for _, ev := range evs {
				if ev.Fd == timerData {
					return clk.now(), nil
				}
			}
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var lates []time.Duration
		ok := false
		for i := 0; i < tries && !ok; i++ {
			now := clk.now()
			dl := now + ahead
			time.Sleep(spent)
			end, err := timerWait(dl, now)
			if err != nil {
				t.Error(err)
				return
			}
			late := end - dl
			lates = append(lates, late)
			if late < -time.Millisecond {
				t.Errorf("the wait for a deadline ended %s before it", -late)
				return
			}
			ok = late <= slack
		}
		t.Logf("armed %s after reading now, %s before the deadline: ended after it by %v", spent, ahead-spent, lates)
		if !ok {
			t.Errorf("every wait ended later than %s after its deadline (%v): the timer counts from when it was armed, not to the deadline", slack, lates)
		}
		// Past deadlines: one 19 ms ago (armed, since now was read
		// before it), and one at CLOCK_MONOTONIC's zero.
		now := clk.now()
		time.Sleep(spent)
		for _, dl := range []time.Duration{now + time.Millisecond, time.Duration(-clk.base)} {
			t0 := clk.now()
			if _, err := timerWait(dl, dl-1); err != nil {
				t.Error(err)
				return
			}
			if el := clk.now() - t0; el > slack {
				t.Errorf("a wait for a past deadline (%s on the clock) lasted %s", dl, el)
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second): // seconds: a busy shared machine
		t.Fatal("a wait for a deadline did not end (a timer disarmed?)")
	}
}

// The loop's clock and the kernel's CLOCK_MONOTONIC, on which its timer
// is armed, are one clock: a time read on the first is, on the second,
// between the kernel's readings around it (within the start's bracket).
func TestMonoClockIsTheKernels(t *testing.T) {
	clk, err := startMonoClock()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	var m0, m1 unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &m0); err != nil {
		t.Fatal(err)
	}
	now := clk.now()
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &m1); err != nil {
		t.Fatal(err)
	}
	const tol = int64(time.Millisecond) // the start's bracket is 2 us, unless 20 tries all were preempted
	if a := clk.abs(now); a < m0.Nano()-tol || a > m1.Nano()+tol {
		t.Errorf("clock time %s is %d ns on CLOCK_MONOTONIC, read between %d and %d", now, a, m0.Nano(), m1.Nano())
	}
	if got := (clock{base: 5}).abs(-10); got != 1 {
		t.Errorf("abs of a time before CLOCK_MONOTONIC's zero = %d, want 1 (never 0: it disarms)", got)
	}
	if got := (clock{base: 5}).abs(never - 1); got != math.MaxInt64 {
		t.Errorf("abs far ahead = %d, want saturated", got)
	}
}

// The open loop's event loops, client and server, do not allocate per
// request either (the timerfd's re-arming, epoll_ctl, a crr connection).
func TestOpenLoopNoAllocation(t *testing.T) {
	const rate = 2000
	inScratch(t, func() {
		for _, c := range []struct{ proto, mode string }{{"tcp", "rr"}, {"udp", "rr"}, {"tcp", "crr"}} {
			srv, err := Listen(ServerConfig{Proto: c.proto, Addr: "127.0.0.1:0", Size: 32, Flows: OpenFlows(rate, 0), Open: true})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			go func() { done <- srv.Serve() }()
			rep, err := Run(ClientConfig{Proto: c.proto, Mode: c.mode, Addr: "127.0.0.1:" + strconv.Itoa(srv.Port()),
				Size: 32, Duration: time.Second, Rate: rate, Timeout: 5 * time.Second})
			srv.Close()
			serr := <-done
			runtime.ReadMemStats(&after)
			if err != nil || serr != nil {
				t.Fatalf("%s_%s: client %v, server %v", c.proto, c.mode, err, serr)
			}
			allocs := after.Mallocs - before.Mallocs
			t.Logf("%s_%s: %d answered, %d allocations", c.proto, c.mode, rep.Transactions, allocs)
			if rep.Transactions < rate/2 || rep.Errors != 0 || rep.Lost != 0 {
				t.Fatalf("%s_%s: bad report: %+v", c.proto, c.mode, rep)
			}
			// Setup allocates a few dozen objects; per-request allocation would be thousands.
			if allocs > 300 || allocs*10 > rep.Transactions {
				t.Errorf("%s_%s: %d allocations for %d requests: the event loop allocates", c.proto, c.mode, allocs, rep.Transactions)
			}
		}
	})
}

// testEpoller is an epoller on the loop's monotonic clock, closed at the
// test's end.
func testEpoller(t *testing.T) (*epoller, clock) {
	t.Helper()
	p, err := newEpoller(4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	clk, err := startMonoClock()
	if err != nil {
		t.Fatal(err)
	}
	p.clk = clk
	return p, clk
}
