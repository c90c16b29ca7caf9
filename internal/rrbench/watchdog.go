package rrbench

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// watchdog bounds every blocking call of a crr connection (connect, send,
// receive) by a deadline, without the two setsockopt calls per connection
// (SO_SNDTIMEO, SO_RCVTIMEO) that would add a quarter to the client's
// system calls: a goroutine looks a few times per deadline whether the loop
// has moved on, and shuts down the socket it is stuck on, which wakes the
// blocked call (as Server.Close does).
type watchdog struct {
	limit time.Duration
	mu    sync.Mutex // fd and fired, between the loop and the watcher
	fd    int        // the connection in use; -1 between connections
	seq   uint64     // connections released so far
	fired bool
	stop  chan struct{}
	done  chan struct{}
}

func startWatchdog(limit time.Duration) *watchdog {
	w := &watchdog{limit: limit, fd: -1, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// watch marks fd as the connection in use, before its first blocking call.
func (w *watchdog) watch(fd int) {
	w.mu.Lock()
	w.fd = fd
	w.mu.Unlock()
}

// release ends the connection's watch, before it is closed (so the watcher
// never shuts down a descriptor that has been reused); it reports whether
// the watcher had to cut it short.
func (w *watchdog) release() (timedOut bool) {
	w.mu.Lock()
	w.fd = -1
	w.seq++
	timedOut, w.fired = w.fired, false
	w.mu.Unlock()
	return timedOut
}

func (w *watchdog) run() {
	defer close(w.done)
	tick := time.NewTicker(w.limit / 5)
	defer tick.Stop()
	var lastSeq uint64
	since := time.Now()
	for {
		select {
		case <-w.stop:
			return
		case now := <-tick.C:
			w.mu.Lock()
			switch {
			case w.seq != lastSeq || w.fd < 0:
				lastSeq, since = w.seq, now
			case now.Sub(since) >= w.limit && !w.fired:
				w.fired = true
				_ = unix.Shutdown(w.fd, unix.SHUT_RDWR)
			}
			w.mu.Unlock()
		}
	}
}

func (w *watchdog) close() {
	close(w.stop)
	<-w.done
}
