package rrbench

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// watchdog bounds every blocking call of a crr connection (connect, send,
// receive) by a deadline, without the two setsockopt calls per connection
// (SO_SNDTIMEO, SO_RCVTIMEO) that would add a quarter to the client's
// system calls: a goroutine looks a few times per deadline whether the loop
// has moved on, and shuts down the socket it is stuck on, which wakes the
// blocked call (as Server.Close does).
//
// The loop takes no lock: per connection one atomic store (watch) and one
// compare-and-swap (release). Only a watcher that fires takes mu, and a
// release that finds it fired takes mu too, so that the loop never closes
// (and the kernel never reuses) a descriptor the watcher is shutting down.
type watchdog struct {
	limit time.Duration
	// state: the connection in use, seq<<33 | fired<<32 | fd+1 (fd+1 = 0:
	// none). A new seq per connection, so an unchanged state at two looks
	// means the same connection is still in use.
	state atomic.Uint64
	cur   uint64     // what the loop stored (the loop's own copy)
	seq   uint64     // connections (tcp_rr: transactions) watched so far (the loop's)
	fired bool       // progress found the watcher had fired (the loop's)
	mu    sync.Mutex // held by a firing watcher until its shutdown is done
	stop  chan struct{}
	done  chan struct{}
}

const (
	wdFired = 1 << 32
	wdFD    = 1<<32 - 1
)

func startWatchdog(limit time.Duration) *watchdog {
	w := &watchdog{limit: limit, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// watch marks fd as the connection in use, before its first blocking call.
func (w *watchdog) watch(fd int) {
	w.seq++
	w.cur = w.seq<<33 | uint64(uint32(fd+1))
	w.state.Store(w.cur)
}

// progress tells the watcher that the connection in use moved on (tcp_rr:
// one connection, many transactions): one atomic swap.
func (w *watchdog) progress() {
	w.seq++
	w.cur = w.seq<<33 | w.cur&wdFD
	if w.state.Swap(w.cur)&wdFired != 0 {
		w.fired = true
	}
}

// explain names a failure that the watcher caused (it shut the socket down).
func (w *watchdog) explain(err error) error {
	if w.fired || w.state.Load()&wdFired != 0 {
		return fmt.Errorf("timed out after %s: %w", w.limit, err)
	}
	return err
}

// release ends the connection's watch, before it is closed (so the watcher
// never shuts down a descriptor that has been reused); it reports whether
// the watcher had to cut it short.
func (w *watchdog) release() (timedOut bool) {
	idle := w.seq << 33
	if w.state.CompareAndSwap(w.cur, idle) {
		return false
	}
	w.mu.Lock() // the watcher fired: wait until its shutdown is done
	w.state.Store(idle)
	w.mu.Unlock()
	return true
}

func (w *watchdog) run() {
	defer close(w.done)
	tick := time.NewTicker(w.limit / 5)
	defer tick.Stop()
	var last uint64
	since := time.Now()
	for {
		select {
		case <-w.stop:
			return
		case now := <-tick.C:
			s := w.state.Load()
			switch {
			case s != last || s&wdFD == 0 || s&wdFired != 0:
				last, since = s, now
			case now.Sub(since) >= w.limit:
				w.mu.Lock()
				if w.state.CompareAndSwap(s, s|wdFired) {
					_ = unix.Shutdown(int(s&wdFD)-1, unix.SHUT_RDWR)
				}
				w.mu.Unlock()
			}
		}
	}
}

func (w *watchdog) close() {
	close(w.stop)
	<-w.done
}
