package rrbench

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Concurrent flows (vnetlab run --streams N on rr/crr tests): N
// copies of the loop at once, each its own connection (crr: its own
// sequence of connections) and its own histogram, merged at the end. The
// server answers each connection in a goroutine of its own (serveFlows).

// MaxFlows bounds --flows.
const MaxFlows = 128

// loop is one flow of a test: runTCP, runUDP or runCRR.
type loop func(cfg ClientConfig, sa unix.Sockaddr, family int, h *Histogram, rep *Report) (time.Duration, error)

// runFlows runs cfg.Flows copies of run at once into h and rep: the
// transactions of all flows over the longest flow's time; the first
// flow's error fails the run.
func runFlows(cfg ClientConfig, sa unix.Sockaddr, family int, run loop, h *Histogram, rep *Report) (time.Duration, error) {
	type result struct {
		h       *Histogram
		rep     Report
		elapsed time.Duration
		err     error
	}
	out := make([]result, cfg.Flows)
	var wg sync.WaitGroup
	for i := range out {
		out[i].h = new(Histogram)
		wg.Add(1)
		go func(r *result) {
			defer wg.Done()
			r.elapsed, r.err = run(cfg, sa, family, r.h, &r.rep)
		}(&out[i])
	}
	wg.Wait()
	var longest time.Duration
	for _, r := range out {
		if r.err != nil {
			return 0, r.err
		}
		h.Merge(r.h)
		rep.Errors += r.rep.Errors
		rep.Lost += r.rep.Lost
		if rep.FirstError == "" {
			rep.FirstError = r.rep.FirstError
		}
		longest = max(longest, r.elapsed)
	}
	return longest, nil
}

// Merge adds o's values into h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// serveFlows serves every TCP connection in a goroutine of its own, until
// Close: the server of a run with concurrent flows.
func (s *Server) serveFlows() error {
	defer unix.Close(s.fd)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		nfd, _, err := unix.Accept4(s.fd, unix.SOCK_CLOEXEC)
		if err != nil {
			if s.done.Load() {
				return nil
			}
			if err == unix.EINTR || err == unix.ECONNABORTED {
				continue
			}
			return err
		}
		if !s.track(nfd) {
			closeRaw(nfd)
			return nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, s.cfg.Size)
			s.echoTCP(nfd, buf, newSparseYielder(startClock()))
			s.untrack(nfd)
		}()
	}
}

// track records a connection Close must shut down (false: Close came first).
func (s *Server) track(fd int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done.Load() {
		return false
	}
	if s.flows == nil {
		s.flows = map[int]bool{}
	}
	s.flows[fd] = true
	return true
}

// untrack closes a connection once Close cannot be shutting it down.
func (s *Server) untrack(fd int) {
	s.mu.Lock()
	delete(s.flows, fd)
	s.mu.Unlock()
	closeRaw(fd)
}
