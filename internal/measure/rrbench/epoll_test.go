package rrbench

import (
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
	p, err := newEpoller(4)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	clk := startClock()
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
