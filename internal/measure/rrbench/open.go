package rrbench

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Open loop (issue 46): requests (crr: connections) go out on a fixed
// schedule, Rate per second in all, whatever the answers do, as wrk2 sends
// them; each latency is measured from the request's intended send time,
// not from when it was sent. A closed loop stops asking while the server
// stalls, so a 100 ms stall costs it one slow sample; here every request
// scheduled during the stall waits for the rest of it and is recorded so
// (what HdrHistogram's recordValueWithExpectedInterval corrects for
// afterwards, done at the source).
//
// The schedule is spread over flows, each its own connection (crr: its own
// sequence of connections) with one request outstanding: a flow whose
// answer comes late sends its next requests as soon as it can, back to
// back, each still timed from its own intended time. Flow i of n sends its
// k-th request at (k·n + i)/Rate seconds after the common start, so the
// flows interleave evenly.

// OpenFlowRate is the most requests (crr: connections) per second one flow
// is given: OpenFlows(rate) = ceil(rate / OpenFlowRate). A flow sends its
// next request only once the last is answered; 1 ms apart, against a
// same-host round trip of 30-150 us here (crr: ~140 us), a flow is idle
// most of the time, so an ordinary answer never delays the next send and
// only a stall does.
const OpenFlowRate = 1000

// MinRate is the lowest open-loop rate: a flow of a slower schedule would
// sit longer than its TCP watchdog (tcpTimeout) between two requests.
const MinRate = 1

// MaxRate is the highest open-loop rate vnetlab schedules: about where
// client and server stop keeping up on this machine (2 vCPUs), so that a
// run above it would measure the client's own backlog, not the path.
// Measured with `vnetlab rr-client --rate R --duration 3s` against
// `rr-server --open-loop` on loopback in a scratch namespace, unpinned,
// load average 4.7 (shared machine), share of requests sent late: tcp_rr
// 0.9% at 40k/s, 3.3% at 50k, 12.6% at 60k, 71% at 80k; udp_rr 1.5% at
// 60k, 64% at 80k; tcp_crr 1.8% at 15k, 5.3% at 20k. Below it a path or
// a test that cannot keep up says so per sample (OpenLoop.Behind).
const MaxRate = 50000

// LateAfter: a request sent this long or longer after its intended time
// was sent late (the flow was behind its schedule). Far above a sleeping
// flow's own wake-up lateness (measured here with clock_nanosleep at 1 ns
// timer slack: p50 31 us, p99 183 us), so a late send is a real backlog.
const LateAfter = time.Millisecond

// BehindShare: a run with more than this share of its requests sent late,
// or any scheduled request left unsent, fell behind its schedule.
const BehindShare = 0.01

// CheckRate refuses an open-loop rate this engine cannot schedule.
func CheckRate(rate float64) error {
	switch {
	case math.IsNaN(rate) || rate <= 0:
		return fmt.Errorf("rate %g: use a positive number of requests per second", rate)
	case rate < MinRate:
		return fmt.Errorf("rate %g: the open loop sends at least %d request per second", rate, MinRate)
	case rate > MaxRate:
		return fmt.Errorf("rate %g is above %d/s, the most the rr engine schedules on this machine (docs/engines.md)", rate, MaxRate)
	}
	return nil
}

// OpenFlows is the number of flows an open loop at rate runs (at least
// streams, the flows asked for, at most MaxFlows).
// Each flow keeps MinRate at least: a sparser one would sit longer than
// its watchdog allows between two requests.
func OpenFlows(rate float64, streams int) int {
	n := max(int(math.Ceil(rate/OpenFlowRate)), streams, 1)
	return max(min(n, MaxFlows, int(rate/MinRate)), 1)
}

// OpenLoop is what an open-loop run scheduled and how well it kept to it.
type OpenLoop struct {
	Offered   float64 `json:"offered_rate"` // requests (crr: connections) per second scheduled
	Flows     int     `json:"flows"`
	Scheduled uint64  `json:"scheduled"` // requests whose intended time fell inside the run
	Sent      uint64  `json:"sent"`      // the rest were still waiting when it ended
	Late      uint64  `json:"late"`      // sent LateAfter or more after their intended time
	MaxLagUs  float64 `json:"max_lag_us"`
	Behind    bool    `json:"behind"` // more than BehindShare sent late, or any left unsent
}

// LateShare is the share of the scheduled requests sent late or not at all.
func (o *OpenLoop) LateShare() float64 {
	if o.Scheduled == 0 {
		return 0
	}
	return float64(o.Late+o.Scheduled-o.Sent) / float64(o.Scheduled)
}

// schedule: flow i of n at rate r sends request k at (k·n + i)/r s.
type schedule struct {
	first, step float64 // ns
	end         time.Duration
}

func (s schedule) at(k uint64) time.Duration { return time.Duration(s.first + float64(k)*s.step) }

// count is how many requests of the schedule fall before its end.
func (s schedule) count() uint64 {
	if float64(s.end) <= s.first {
		return 0
	}
	return uint64(math.Ceil((float64(s.end) - s.first) / s.step))
}

// openFlow is one flow's tally; merged into the Report at the end.
type openFlow struct {
	h         *Histogram
	sched     schedule
	sent      uint64
	late      uint64
	maxLag    time.Duration
	lost      uint64
	errors    uint64
	firstErr  string
	last      time.Duration // its last answer
	seq       uint64        // udp: requests numbered
	err       error
	fd        int // tcp/udp rr: the connected socket
	wd        *watchdog
	buf, resp []byte
}

// pace waits until request k's intended time (now: the clock as last read)
// and returns it and the clock after the wait; ok is false when the
// schedule or the run is over (what is left of the schedule stays unsent).
func (f *openFlow) pace(clk clock, k uint64, now time.Duration) (at, sent time.Duration, ok bool) {
	at = f.sched.at(k)
	if at >= f.sched.end || now >= f.sched.end {
		return at, now, false
	}
	for now < at {
		ts := unix.NsecToTimespec(int64(at - now))
		_ = unix.ClockNanosleep(unix.CLOCK_MONOTONIC, 0, &ts, nil) // EINTR: the loop sleeps the rest
		now = clk.now()
	}
	lag := now - at
	f.sent++
	if lag >= LateAfter {
		f.late++
	}
	f.maxLag = max(f.maxLag, lag)
	return at, now, true
}

// openStep is one request of a flow (intended at at), sent now; it returns when it was
// answered, given up or failed (the clock then) and whether it was
// answered; a non-nil error ends the run.
type openStep func(f *openFlow, clk clock, at time.Duration) (done time.Duration, answered bool, err error)

// runOpen runs the open loop of cfg into h and rep.
func runOpen(cfg ClientConfig, sa unix.Sockaddr, family int) (*Histogram, *Report, time.Duration, error) {
	n := OpenFlows(cfg.Rate, cfg.Flows)
	rep := &Report{Proto: cfg.Proto, Mode: cfg.Mode, Size: cfg.Size, Flows: n}
	step := openStepOf(cfg, sa)
	// Each flow runs on a thread of its own, set up in this thread's
	// network namespace (a caller may have entered one on its thread
	// only), with a timer slack of 1 ns so that its sleeps end on time.
	origin, err := netns.Get()
	if err != nil {
		return nil, nil, 0, fmt.Errorf("read the network namespace: %w", err)
	}
	defer origin.Close()
	defer setProcs(n + 2)()
	flows := make([]openFlow, n)
	var ready, done sync.WaitGroup
	start := make(chan clock)
	for i := range flows {
		f := &flows[i]
		f.h = new(Histogram)
		f.sched = schedule{first: float64(i) * 1e9 / cfg.Rate, step: float64(n) * 1e9 / cfg.Rate, end: cfg.Duration}
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			// Locked and never unlocked: the thread ends with the flow,
			// its namespace and timer slack with it.
			runtime.LockOSThread()
			f.err = f.setUp(cfg, sa, family, origin)
			ready.Done()
			clk, ok := <-start
			if !ok || f.err != nil {
				f.close()
				return
			}
			f.run(cfg, clk, step)
			f.close()
		}()
	}
	ready.Wait()
	for i := range flows {
		if err := flows[i].err; err != nil {
			close(start)
			done.Wait()
			return nil, nil, 0, err
		}
	}
	clk := startClock()
	for range flows {
		start <- clk
	}
	done.Wait()
	h := new(Histogram)
	ol := &OpenLoop{Offered: cfg.Rate, Flows: n}
	var elapsed time.Duration
	for i := range flows {
		f := &flows[i]
		if f.err != nil { // a failure that ended the flow
			return nil, nil, 0, f.err
		}
		h.Merge(f.h)
		rep.Errors += f.errors
		rep.Lost += f.lost
		if rep.FirstError == "" {
			rep.FirstError = f.firstErr
		}
		ol.Scheduled += f.sched.count()
		ol.Sent += f.sent
		ol.Late += f.late
		ol.MaxLagUs = max(ol.MaxLagUs, float64(f.maxLag.Nanoseconds())/1000)
		elapsed = max(elapsed, f.last)
	}
	ol.Behind = ol.Sent < ol.Scheduled || float64(ol.Late) > BehindShare*float64(ol.Scheduled)
	rep.Open = ol
	if h.Count() == 0 && rep.Errors > 0 {
		return nil, nil, 0, fmt.Errorf("no request to %s succeeded (%d errors, first: %s)", cfg.Addr, rep.Errors, rep.FirstError)
	}
	if h.Count() == 0 {
		return nil, nil, 0, fmt.Errorf("no response from %s: is the server running?", cfg.Addr)
	}
	return h, rep, max(elapsed, cfg.Duration), nil
}

// setUp readies a flow on its locked thread: the namespace, the timer
// slack, and (rr) its connected socket.
func (f *openFlow) setUp(cfg ClientConfig, sa unix.Sockaddr, family int, origin netns.NsHandle) error {
	if cur, err := netns.Get(); err != nil || !cur.Equal(origin) {
		if err := netns.Set(origin); err != nil {
			return fmt.Errorf("enter the client's network namespace: %w", err)
		}
	}
	if cur, err := netns.Get(); err == nil {
		cur.Close()
	}
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("timer slack: %w", err)
	}
	f.buf = make([]byte, cfg.Size)
	f.resp = make([]byte, cfg.Size)
	f.fd = -1
	f.wd = startWatchdog(tcpTimeout)
	switch {
	case cfg.Mode == "crr":
		return nil
	case cfg.Proto == "udp":
		fd, err := socket(family, unix.SOCK_DGRAM)
		if err != nil {
			return err
		}
		f.fd = fd
		// A receive timeout marks a request lost (one timer per request:
		// at a fixed rate, not the closed loop's cost per transaction).
		tv := unix.NsecToTimeval(int64(cfg.Timeout))
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return fmt.Errorf("SO_RCVTIMEO: %w", err)
		}
		if err := connect(fd, sa); err != nil {
			return fmt.Errorf("connect %s: %w", cfg.Addr, err)
		}
		return nil
	}
	fd, err := socket(family, unix.SOCK_STREAM)
	if err != nil {
		return err
	}
	f.fd = fd
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
		return fmt.Errorf("TCP_NODELAY: %w", err)
	}
	f.wd.watch(fd)
	if err := connect(fd, sa); err != nil {
		return fmt.Errorf("connect %s: %w", cfg.Addr, f.wd.explain(err))
	}
	return nil
}

func (f *openFlow) close() {
	if f.wd != nil {
		if f.fd >= 0 {
			f.wd.release()
		}
		f.wd.close()
	}
	if f.fd >= 0 {
		unix.Close(f.fd)
	}
}

// run sends the flow's schedule until the run's end.
func (f *openFlow) run(cfg ClientConfig, clk clock, step openStep) {
	var y yielder
	now := clk.now()
	for k := uint64(0); ; k++ {
		at, _, ok := f.pace(clk, k, now)
		if !ok {
			return
		}
		done, answered, err := step(f, clk, at)
		if err != nil {
			f.err = err
			return
		}
		if answered {
			f.h.Record(done - at)
			f.last = done
		}
		y.maybe(done)
		now = done
	}
}

// openStepOf is the request of cfg's test.
func openStepOf(cfg ClientConfig, sa unix.Sockaddr) openStep {
	switch {
	case cfg.Mode == "crr":
		linger := unix.Linger{Onoff: 1, Linger: 0}
		family := unix.AF_INET
		if _, ok := sa.(*unix.SockaddrInet6); ok {
			family = unix.AF_INET6
		}
		return func(f *openFlow, clk clock, at time.Duration) (time.Duration, bool, error) {
			err := oneConnection(sa, family, f.buf, &linger, f.wd)
			done := clk.now()
			if err != nil {
				f.errors++
				if f.firstErr == "" {
					f.firstErr = err.Error()
				}
				return done, false, nil
			}
			return done, true, nil
		}
	case cfg.Proto == "udp":
		return func(f *openFlow, clk clock, at time.Duration) (time.Duration, bool, error) {
			f.seq++
			w := reqWord(f.seq, at) // its intended time: a late answer is told apart
			putWord(f.buf, w)
			if _, err := send(f.fd, f.buf); err != nil {
				return 0, false, fmt.Errorf("send request %d: %w", f.sent, err)
			}
			for {
				got, err := recv(f.fd, f.resp)
				if err == unix.EAGAIN || err == unix.EWOULDBLOCK {
					f.lost++
					return clk.now(), false, nil
				}
				if err != nil {
					return 0, false, fmt.Errorf("read response %d: %w", f.sent, err)
				}
				if got == len(f.resp) && isAnswerTo(f.resp, w) {
					return clk.now(), true, nil
				}
				// a late answer to a request given up: wait on
			}
		}
	}
	return func(f *openFlow, clk clock, at time.Duration) (time.Duration, bool, error) {
		if err := writeFull(f.fd, f.buf); err != nil {
			return 0, false, fmt.Errorf("send request %d: %w", f.sent, f.wd.explain(err))
		}
		if err := readFull(f.fd, f.buf); err != nil {
			return 0, false, fmt.Errorf("read response %d: %w", f.sent, f.wd.explain(err))
		}
		f.wd.progress()
		return clk.now(), true, nil
	}
}

// setProcs sets GOMAXPROCS to n (and returns what puts it back): a P per
// flow, so that a flow's thread coming back from a blocking system call
// finds its P waiting instead of queueing for one of two (with two Ps,
// 10 flows fell behind a 10k/s schedule on loopback: every answer a
// hand-off between threads).
func setProcs(n int) (restore func()) {
	old := runtime.GOMAXPROCS(n)
	return func() { runtime.GOMAXPROCS(old) }
}
