package rrbench

import (
	"encoding/binary"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// lossWatch keeps udp_rr going when a datagram is lost, as a watchdog
// beside the loop instead of a timeout on the loop's receive: a receive on
// a socket with SO_RCVTIMEO arms and cancels a kernel timer every time it
// waits (that is every udp_rr transaction), and the C reference has none.
// The loop blocks in an ordinary receive without a timeout (it gives up
// its P: a stop-the-world never waits for it, and signals restart it);
// the watcher sleeps until the outstanding request is Timeout old, and if
// it is still unanswered then, counts it lost and sends the next request
// itself (netperf's UDP_RR would hang). Once the sample's duration is over
// it ends the run instead: it shuts the socket down, which wakes the
// loop's receive.
//
// Which request is outstanding is one word, out, that both change by
// compare-and-swap only: the loop when an answer to it comes (one CAS per
// transaction, no lock), the watcher when it gives it up. So a request is
// either answered or lost, never both, and a late answer (to a request
// already given up) is recognised by its sequence number and skipped.
type lossWatch struct {
	fd      int
	clk     clock
	timeout time.Duration
	end     time.Duration // the sample's duration: a loss after it ends the run
	out     atomic.Uint64 // reqWord of the outstanding request, or lossEnded
	lost    atomic.Uint64 // requests given up
	err     error         // a re-send that failed (read after done: failure)
	buf     []byte        // the watcher's own request buffer
	stop    chan struct{}
	done    chan struct{}
}

// A request's word: the clock reading at its send (ns since the loop's
// start, 48 bits: 78 hours) above a 16-bit sequence number. Requests carry
// the word's first Size bytes (little-endian: the sequence number first, so
// that even 1-byte requests tell consecutive requests apart) and the
// server echoes them.
const (
	seqBits   = 16
	seqMask   = 1<<seqBits - 1
	lossEnded = ^uint64(0) // the run is over (a clock reading 78 hours on)
	// maxDuration keeps a run's clock readings inside the word.
	maxDuration = 72 * time.Hour
)

func reqWord(seq uint64, at time.Duration) uint64 { return uint64(at)<<seqBits | seq&seqMask }

// sentAt is when the request of word w was sent.
func sentAt(w uint64) time.Duration { return time.Duration(w >> seqBits) }

// nextWord is the request after w, sent at at.
func nextWord(w uint64, at time.Duration) uint64 { return reqWord(w+1, at) }

// putWord writes w into a request: its first min(len(b), 8) bytes.
func putWord(b []byte, w uint64) {
	var le [8]byte
	binary.LittleEndian.PutUint64(le[:], w)
	copy(b, le[:])
}

// isAnswerTo reports whether the echoed request b is the one of word w.
func isAnswerTo(b []byte, w uint64) bool {
	var le [8]byte
	binary.LittleEndian.PutUint64(le[:], w)
	n := min(len(b), 8)
	return string(b[:n]) == string(le[:n])
}

// startLossWatch watches fd's requests, the first of which is sent at start.
func startLossWatch(fd int, clk clock, start time.Duration, cfg ClientConfig) *lossWatch {
	lw := &lossWatch{fd: fd, clk: clk, timeout: cfg.Timeout, end: cfg.Duration,
		buf: make([]byte, cfg.Size), stop: make(chan struct{}), done: make(chan struct{})}
	lw.out.Store(reqWord(1, start))
	go lw.run()
	return lw
}

// answered claims the outstanding request w for an answer that came at
// now, and makes the next request (sent at now) outstanding, or ends the
// run when last. False: the watcher gave w up first (the answer is late).
func (lw *lossWatch) answered(w uint64, now time.Duration, last bool) (next uint64, ok bool) {
	next = nextWord(w, now)
	if last {
		next = lossEnded
	}
	return next, lw.out.CompareAndSwap(w, next)
}

func (lw *lossWatch) run() {
	defer close(lw.done)
	t := time.NewTimer(lw.timeout)
	defer t.Stop()
	for {
		select {
		case <-lw.stop:
			return
		case <-t.C:
		}
		w := lw.out.Load()
		if w == lossEnded {
			return
		}
		now := lw.clk.now()
		if wait := sentAt(w) + lw.timeout - now; wait > 0 {
			t.Reset(wait) // answered meanwhile: watch the request outstanding now
			continue
		}
		next := lossEnded
		if now < lw.end {
			next = nextWord(w, now)
		}
		if !lw.out.CompareAndSwap(w, next) {
			t.Reset(0) // answered just now: look again
			continue
		}
		lw.lost.Add(1)
		if next == lossEnded {
			lw.wake()
			return
		}
		putWord(lw.buf, next)
		if _, err := send(lw.fd, lw.buf); err != nil && lw.out.CompareAndSwap(next, lossEnded) {
			lw.err = err
			lw.wake()
			return
		}
		t.Reset(lw.timeout)
	}
}

// wake gets the loop out of its receive (or send): a shut down socket
// returns at once, from now on.
func (lw *lossWatch) wake() { _ = unix.Shutdown(lw.fd, unix.SHUT_RDWR) }

// failure is the error of a failed re-send, once the watcher has ended the
// run (out is lossEnded, and not by the loop): it waits for the watcher to
// return, which it does right after, so that its write of err is seen.
func (lw *lossWatch) failure() error {
	<-lw.done
	return lw.err
}

// close stops the watcher; the socket may be closed after it returns.
func (lw *lossWatch) close() {
	close(lw.stop)
	<-lw.done
}
