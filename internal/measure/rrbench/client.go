package rrbench

import (
	"fmt"
	"math"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// ClientConfig says what to measure.
type ClientConfig struct {
	Proto    string        // "tcp" or "udp"
	Mode     string        // "rr" (one connection) or "crr" (a connection per transaction, tcp only)
	Addr     string        // server IP:PORT
	Size     int           // request and response size in bytes
	Duration time.Duration // how long to run
	// Timeout: how long a UDP request waits for its response before it is
	// counted as lost (and how long TCP waits before failing).
	Timeout time.Duration
	// Flows run at once, each its own connection (flows.go); 0 or 1: one.
	// Open loop: at least this many (OpenFlows).
	Flows int
	// Rate, when above 0, is the open loop's schedule (open.go): requests
	// (crr: connections) per second in all; 0: closed loop.
	Rate float64
}

// DefaultUDPTimeout is long against a same-host round trip (tens of us) and
// against scheduling stalls on a busy machine, short against the sample.
const DefaultUDPTimeout = 100 * time.Millisecond

// tcpTimeout bounds any TCP connect/read/write, so a dead server fails the
// sample instead of hanging it (a variable: tests shorten it).
var tcpTimeout = 5 * time.Second

func (c *ClientConfig) check() error {
	if c.Proto != "tcp" && c.Proto != "udp" {
		return fmt.Errorf("proto %q: use tcp or udp", c.Proto)
	}
	if c.Mode != "rr" && c.Mode != "crr" {
		return fmt.Errorf("mode %q: use rr or crr", c.Mode)
	}
	if c.Mode == "crr" && c.Proto != "tcp" {
		return fmt.Errorf("mode crr needs proto tcp (UDP has no connections)")
	}
	if c.Duration <= 0 || c.Duration > maxDuration {
		return fmt.Errorf("duration %s: must be positive, at most %s", c.Duration, maxDuration)
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultUDPTimeout
	}
	if c.Flows < 0 || c.Flows > MaxFlows {
		return fmt.Errorf("flows %d: use 1 to %d", c.Flows, MaxFlows)
	}
	if err := CheckRate(c.Rate); c.Rate != 0 && err != nil {
		return err
	}
	return checkSize(c.Proto, c.Size)
}

// Report is one client run; `rr-client -o json` prints it.
type Report struct {
	Proto        string             `json:"proto"`
	Mode         string             `json:"mode"`
	Size         int                `json:"size"`
	Flows        int                `json:"flows,omitempty"` // flows at once, each its own connection
	Seconds      float64            `json:"seconds"`         // first request to last response
	Transactions uint64             `json:"transactions"`    // completed request/response pairs (crr: connections)
	Rate         float64            `json:"rate"`            // transactions (crr: connections) per second
	Errors       uint64             `json:"errors"`          // crr: failed connects/exchanges
	Lost         uint64             `json:"lost"`            // udp: requests unanswered within the timeout
	FirstError   string             `json:"first_error,omitempty"`
	Latency      map[string]float64 `json:"latency_us,omitempty"` // min, mean, max, and p50, p90, p99, p99.9 each from MinSamples or more
	// LatencySamples is how many latencies the summary is from.
	LatencySamples uint64 `json:"latency_samples"`
	// Open: the open loop's schedule and how well it was kept (nil:
	// closed loop); latencies are then from each request's intended time.
	Open *OpenLoop `json:"open_loop,omitempty"`
}

// Run measures against a running server.
func Run(cfg ClientConfig) (*Report, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	sa, family, err := sockaddr(cfg.Addr, false)
	if err != nil {
		return nil, err
	}
	defer spareP()()
	h := new(Histogram) // 35 KB: on the heap, allocated once
	rep := &Report{Proto: cfg.Proto, Mode: cfg.Mode, Size: cfg.Size, Flows: max(cfg.Flows, 1)}
	run := loop(runTCP)
	switch {
	case cfg.Mode == "crr":
		run = runCRR
	case cfg.Proto == "udp":
		run = runUDP
	}
	var elapsed time.Duration
	switch {
	case cfg.Rate > 0:
		h, rep, elapsed, err = runOpen(cfg, sa, family)
	case cfg.Flows > 1:
		elapsed, err = runFlows(cfg, sa, family, run, h, rep)
	default:
		elapsed, err = run(cfg, sa, family, h, rep)
	}
	if err != nil {
		return nil, err
	}
	rep.Seconds = elapsed.Seconds()
	rep.Transactions = h.Count()
	if rep.Seconds > 0 {
		rep.Rate = float64(rep.Transactions) / rep.Seconds
	}
	rep.Latency = h.Summary()
	rep.LatencySamples = h.Count()
	return rep, nil
}

// runTCP: netperf TCP_RR. One connection with TCP_NODELAY; send Size bytes,
// read Size bytes, repeat until the duration is over.
func runTCP(cfg ClientConfig, sa unix.Sockaddr, family int, h *Histogram, rep *Report) (time.Duration, error) {
	fd, err := socket(family, unix.SOCK_STREAM)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
		return 0, fmt.Errorf("TCP_NODELAY: %w", err)
	}
	// The deadline is kept by a watchdog, not by SO_RCVTIMEO/SO_SNDTIMEO:
	// a socket timeout arms and cancels a kernel timer in every receive that
	// waits (measured here: ~0.8% of the CPU time of each side).
	wd := startWatchdog(tcpTimeout)
	defer wd.close()
	wd.watch(fd) // from connect on
	defer wd.release()
	if err := connect(fd, sa); err != nil {
		return 0, fmt.Errorf("connect %s: %w", cfg.Addr, wd.explain(err))
	}
	buf := make([]byte, cfg.Size)
	clk := startClock()
	var t0 time.Duration
	var y yielder
	for {
		if err := writeFull(fd, buf); err != nil {
			return 0, fmt.Errorf("send request %d: %w", h.Count()+1, wd.explain(err))
		}
		if err := readFull(fd, buf); err != nil {
			return 0, fmt.Errorf("read response %d: %w", h.Count()+1, wd.explain(err))
		}
		t1 := clk.now()
		wd.progress()
		h.Record(t1 - t0)
		if t1 >= cfg.Duration {
			return t1, nil
		}
		y.maybe(t1)
		t0 = t1
	}
}

// runUDP: netperf UDP_RR with one outstanding request. A request whose
// response does not come within Timeout is counted lost and the next one is
// sent (netperf would hang), by a watcher beside the loop (lossWatch): the
// loop's receive has no timeout. Each request carries a sequence number,
// echoed back, so a late response is recognised and skipped.
func runUDP(cfg ClientConfig, sa unix.Sockaddr, family int, h *Histogram, rep *Report) (time.Duration, error) {
	fd, err := socket(family, unix.SOCK_DGRAM)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	// connect: read only the server's datagrams, and learn of a closed port (ECONNREFUSED).
	if err := connect(fd, sa); err != nil {
		return 0, fmt.Errorf("connect %s: %w", cfg.Addr, err)
	}
	req := make([]byte, cfg.Size)
	resp := make([]byte, cfg.Size)
	clk := startClock()
	start := clk.now()
	lw := startLossWatch(fd, clk, start, cfg)
	defer lw.close() // before the socket is closed
	// ended: the watcher ended the run (or a re-send of its failed).
	ended := func(now time.Duration) (time.Duration, error) {
		err := lw.failure()
		rep.Lost += lw.lost.Load()
		switch {
		case err != nil:
			return 0, fmt.Errorf("send request %d: %w", h.Count()+1, err)
		case h.Count() == 0:
			return 0, fmt.Errorf("no response from %s within %s: is the server running?", cfg.Addr, cfg.Timeout)
		}
		return now - start, nil
	}
	y := yielder{last: start}
	for w := lw.out.Load(); ; {
		putWord(req, w)
		if _, err := send(fd, req); err != nil {
			if lw.out.Load() == lossEnded {
				return ended(clk.now())
			}
			return 0, fmt.Errorf("send request %d: %w", h.Count()+1, err)
		}
		for {
			got, err := recv(fd, resp)
			t1 := clk.now()
			cur := lw.out.Load()
			if cur == lossEnded {
				return ended(t1)
			}
			if err != nil {
				return 0, fmt.Errorf("read response %d: %w", h.Count()+1, err)
			}
			if got != len(resp) || !isAnswerTo(resp, cur) {
				continue // a late answer to a request given up: wait on
			}
			next, ok := lw.answered(cur, t1, t1 >= cfg.Duration)
			if !ok {
				continue // given up just now: its re-send is outstanding
			}
			h.Record(t1 - sentAt(cur))
			if next == lossEnded {
				rep.Lost += lw.lost.Load()
				return t1 - start, nil
			}
			y.maybe(t1)
			w = next
			break
		}
	}
}

// runCRR: netperf TCP_CRR, timing connect + request + response + close.
//
// Unlike netperf, the client closes with SO_LINGER {on, 0}: close sends a
// RST instead of a FIN, so neither side keeps the connection in TIME_WAIT.
// netperf's client closes normally and its TIME_WAIT sockets pile up (60 s
// each), so repeated samples run out of ephemeral ports and the rate
// collapses (measured here: 9.6k/s falling to 0.3k/s). The price: this
// test skips the FIN/ACK exchange, so it costs the kernel slightly less
// per connection than netperf's TCP_CRR does.
//
// A failed connect or exchange is counted, not fatal; the engine marks a
// sample with errors invalid.
func runCRR(cfg ClientConfig, sa unix.Sockaddr, family int, h *Histogram, rep *Report) (time.Duration, error) {
	buf := make([]byte, cfg.Size)
	linger := unix.Linger{Onoff: 1, Linger: 0}
	wd := startWatchdog(tcpTimeout)
	defer wd.close()
	clk := startClock()
	var t0 time.Duration
	var y yielder
	for {
		err := oneConnection(sa, family, buf, &linger, wd)
		t1 := clk.now()
		if err != nil {
			rep.Errors++
			if rep.FirstError == "" {
				rep.FirstError = err.Error()
			}
		} else {
			h.Record(t1 - t0)
		}
		if t1 >= cfg.Duration {
			if h.Count() == 0 && rep.Errors > 0 {
				return 0, fmt.Errorf("no connection to %s succeeded (%d errors, first: %s)", cfg.Addr, rep.Errors, rep.FirstError)
			}
			return t1, nil
		}
		y.maybe(t1)
		t0 = t1
	}
}

// oneConnection: socket, SO_LINGER, connect, request, response, close: the
// system calls of a minimal C client, the deadline kept by wd. Errors are
// wrapped only on the failure path (no allocation when all goes well).
func oneConnection(sa unix.Sockaddr, family int, buf []byte, linger *unix.Linger, wd *watchdog) (err error) {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	wd.watch(fd)
	defer func() {
		if wd.release() && err != nil {
			err = fmt.Errorf("timed out after %s: %w", tcpTimeout, err)
		}
		closeRaw(fd)
	}()
	if err := setLingerRaw(fd, linger); err != nil {
		return fmt.Errorf("SO_LINGER: %w", err)
	}
	// No TCP_NODELAY: one small write per side never waits for Nagle.
	if err := connect(fd, sa); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if err := writeFull(fd, buf); err != nil {
		return fmt.Errorf("send request: %w", err)
	}
	if err := readFull(fd, buf); err != nil {
		return fmt.Errorf("read response: %w", err)
	}
	return nil
}

// spareP makes sure the Go runtime has a second P (GOMAXPROCS 2 or more)
// while a loop runs; the returned func puts the old value back. Pinned to
// one CPU, a Go program starts with one P, and then every system call that
// blocks for longer than a sysmon tick (20 us; every accept and connect
// of tcp_crr does) makes sysmon take that P away and wake a spinning
// thread to look for other work: on the same CPU, a futex wake-up and two
// context switches more per connection. Measured here on loopback,
// pinned: 0.8 futex calls per connection in the server. With a spare idle
// P, sysmon leaves a P in a system call alone for 10 ms. Set even when
// it is 2 already: an explicit value also stops the runtime from lowering
// it to 1 once it notices that rr --cpu pinned the process after its start.
func spareP() (restore func()) {
	n := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(max(n, 2))
	return func() { runtime.GOMAXPROCS(n) }
}

// yieldPeriod: half of sysmon's 10 ms (forcePreemptNS): sysmon preempts a
// goroutine only when it finds the same scheduling tick 10 ms apart. Not
// shorter: with the spare P each yield wakes another thread to take the
// goroutine (a futex wake-up and context switches on the pinned CPU);
// measured, every 2 ms in the client and every 32 transactions in the
// server made 1 and 3 futex calls per ms at 48k transactions/s.
const yieldPeriod = 5 * time.Millisecond

// yielder calls runtime.Gosched every yieldPeriod. A goroutine that
// only ever blocks in system calls never passes through the scheduler, so
// after 10 ms Go's sysmon thread treats it as a hog: it takes its P away in
// the middle of a read (the thread then pays a slow re-entry) and wakes up
// every 20 us for the next milliseconds. Measured on loopback tcp_rr: 12k
// sysmon wake-ups/s and a second latency mode ~15 us above the first.
// It takes the loop's own clock reading (clock.now), not one of its own.
type yielder struct{ last time.Duration }

func (y *yielder) maybe(now time.Duration) {
	if now-y.last >= yieldPeriod {
		runtime.Gosched()
		y.last = now
	}
}

// sparseYielder is a yielder for a loop that needs no clock of its own (the
// servers): it reads the clock every few transactions, not every one (a
// reading costs ~34 ns here, 0.3% of a loopback tcp_rr transaction). The
// stride doubles while readings come less than yieldPeriod/16 apart and
// halves when they come more than yieldPeriod/4 apart, so readings stay
// 0.3-1.3 ms apart at any steady rate; at most maxStride transactions
// pass unread, so a sudden slowdown is seen within a few strides.
type sparseYielder struct {
	y            yielder
	clk          clock
	last         time.Duration
	left, stride int
}

const maxStride = 64

func newSparseYielder(clk clock) *sparseYielder { return &sparseYielder{clk: clk, stride: 1} }

// tick counts one transaction.
func (s *sparseYielder) tick() {
	if s.left--; s.left > 0 {
		return
	}
	now := s.clk.now()
	switch gap := now - s.last; {
	case gap < yieldPeriod/16 && s.stride < maxStride:
		s.stride *= 2
	case gap > yieldPeriod/4 && s.stride > 1:
		s.stride /= 2
	}
	s.last, s.left = now, s.stride
	s.y.maybe(now)
}

// clock reads one monotonic clock per call: time since the loop started.
// time.Now reads two (wall and monotonic: two vDSO clock_gettime calls);
// time.Since of a time.Now with a monotonic reading reads only the
// monotonic one, like the C reference's one clock_gettime per connection.
type clock struct {
	start time.Time
	// base is the start on CLOCK_MONOTONIC (ns), when mono: a timerfd
	// armed at an absolute time (epoll.go) takes abs(d).
	base int64
	mono bool
}

func startClock() clock { return clock{start: time.Now()} }

func (c clock) now() time.Duration { return time.Since(c.start) }

// startMonoClock is startClock knowing its start on CLOCK_MONOTONIC too.
// Go's monotonic readings on Linux are CLOCK_MONOTONIC (runtime.nanotime,
// through the vDSO), not the wall clock, so now's durations and the
// kernel's timers count alike and only the start is read twice:
// time.Now between two clock_gettime calls, retried until they are at
// most maxBaseGap apart. base is the first: a deadline comes at most that
// gap early (the loop then sees it not yet passed and waits again, the
// timer armed at a past time firing at once), never late.
func startMonoClock() (clock, error) {
	const maxBaseGap = 2 * time.Microsecond
	var c clock
	gap := time.Duration(math.MaxInt64)
	for try := 0; try < 20 && gap > maxBaseGap; try++ {
		var t0, t1 unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &t0); err != nil {
			return clock{}, fmt.Errorf("clock_gettime: %w", err)
		}
		start := time.Now()
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &t1); err != nil {
			return clock{}, fmt.Errorf("clock_gettime: %w", err)
		}
		if g := time.Duration(t1.Nano() - t0.Nano()); g < gap {
			gap, c = g, clock{start: start, base: t0.Nano(), mono: true}
		}
	}
	return c, nil
}

// abs is time d of the clock on CLOCK_MONOTONIC, in ns: at least 1 (a
// zero timerfd it_value disarms it), saturated far in the future.
func (c clock) abs(d time.Duration) int64 {
	if d > 0 && int64(d) > math.MaxInt64-c.base {
		return math.MaxInt64
	}
	return max(c.base+int64(d), 1)
}
