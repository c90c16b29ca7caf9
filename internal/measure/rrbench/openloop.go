package rrbench

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// The open loop's client is one event loop on one thread, as each of
// wrk2's threads is: every flow's socket is non-blocking and in one epoll
// instance (tcp_crr: each connection from its non-blocking connect to its
// close), and the thread sleeps in epoll_wait until the next request is
// due (a timerfd, epoll.go) or an answer comes. A request costs its system calls and no thread
// wake-up of its own; when many are due or answered at once, one wake-up
// serves them all. (Until then each flow was a thread sleeping in
// clock_nanosleep: pinned with the server on one CPU, that engine offered
// tcp_crr at about half the closed loop's rate before it fell behind.)

// openFlow is one flow: its socket (crr: the connection in progress), its
// place in the schedule and its request in flight.
type openFlow struct {
	i      uint64        // flow i of n sends its k-th request at (k·n + i)/Rate
	k      uint64        // its next request
	fd     int           // -1: none (crr between connections)
	busy   bool          // a request in flight
	at     time.Duration // the request in flight's intended time
	sentAt time.Duration // when it left (its deadline counts from then)
	wOff   int           // bytes of the request sent
	rOff   int           // bytes of the answer received
	added  bool          // its socket is in the epoll instance
	out    bool          // and watched for room to write too
	seq    uint64        // udp: requests numbered
	word   uint64        // udp: the request in flight's word
}

// openLoop is an open-loop run: the schedule, the flows and the tally.
type openLoop struct {
	cfg    ClientConfig
	sa     unix.Sockaddr
	family int
	p      *epoller
	clk    clock
	n      uint64        // flows
	nsPer  float64       // ns between two requests of the whole schedule
	gEnd   uint64        // requests of the whole schedule inside the run
	g      uint64        // the next request of the whole schedule not yet due
	limit  time.Duration // a request unanswered this long is lost (udp) or failed (tcp)
	check  time.Duration // no deadline passes before this
	flows  []openFlow
	busy   int // requests in flight
	req    []byte
	resp   []byte
	linger unix.Linger
	h      *Histogram
	rep    *Report
	ol     *OpenLoop
	maxLag time.Duration
	last   time.Duration // the last answer
}

const never = time.Duration(math.MaxInt64)

// at is when request g of the whole schedule is due: request k of flow i
// is request k·n + i.
func (l *openLoop) at(g uint64) time.Duration { return time.Duration(float64(g) * l.nsPer) }

// runOpen runs the open loop of cfg on the calling thread (and its network
// namespace) and returns its histogram, report and elapsed time.
func runOpen(cfg ClientConfig, sa unix.Sockaddr, family int) (*Histogram, *Report, time.Duration, error) {
	n := OpenFlows(cfg.Rate, cfg.Flows)
	l := &openLoop{cfg: cfg, sa: sa, family: family, n: uint64(n), nsPer: 1e9 / cfg.Rate,
		flows: make([]openFlow, n), req: make([]byte, cfg.Size), resp: make([]byte, cfg.Size),
		linger: unix.Linger{Onoff: 1, Linger: 0}, h: new(Histogram), check: never,
		rep: &Report{Proto: cfg.Proto, Mode: cfg.Mode, Size: cfg.Size, Flows: n},
		ol:  &OpenLoop{Offered: cfg.Rate, Flows: n}, limit: tcpTimeout}
	if cfg.Proto == "udp" {
		l.limit = cfg.Timeout
	}
	// The requests due before the run's end: the first g whose time is not.
	l.gEnd = uint64(math.Ceil(float64(cfg.Duration) / l.nsPer))
	for l.gEnd > 0 && l.at(l.gEnd-1) >= cfg.Duration {
		l.gEnd--
	}
	for l.at(l.gEnd) < cfg.Duration {
		l.gEnd++
	}
	// One thread, locked: the caller's (a caller may have entered a
	// network namespace on its thread only; each crr connection's socket
	// is made on it).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// A spare P, as the closed loop has: without it, sysmon takes the
	// loop's only P at each epoll_wait longer than 20 us (a pinned run's
	// every wait at a low rate) and the loop gets it back through another
	// thread's wake-up: +30-36 us on every p50 at 2000/s, tcp_rr and
	// tcp_crr, pinned on a veth-routed lab.
	defer spareP()()
	var err error
	if l.p, err = newEpoller(max(n, 16)); err != nil {
		return nil, nil, 0, err
	}
	defer l.p.close()
	defer l.closeAll()
	if err := l.setUp(); err != nil {
		return nil, nil, 0, err
	}
	if l.clk, err = startMonoClock(); err != nil {
		return nil, nil, 0, err
	}
	l.p.clk = l.clk
	if err := l.run(); err != nil {
		return nil, nil, 0, err
	}
	l.ol.Scheduled = l.gEnd
	l.ol.MaxLagUs = float64(l.maxLag.Nanoseconds()) / 1000
	l.ol.Behind = l.ol.Sent < l.ol.Scheduled || float64(l.ol.Late) > BehindShare*float64(l.ol.Scheduled)
	l.rep.Open = l.ol
	if l.h.Count() == 0 && l.rep.Errors > 0 {
		return nil, nil, 0, fmt.Errorf("no request to %s succeeded (%d errors, first: %s)", cfg.Addr, l.rep.Errors, l.rep.FirstError)
	}
	if l.h.Count() == 0 {
		return nil, nil, 0, fmt.Errorf("no response from %s: is the server running?", cfg.Addr)
	}
	return l.h, l.rep, max(l.last, cfg.Duration), nil
}

// setUp numbers the flows and (rr) connects each one's socket.
func (l *openLoop) setUp() error {
	for i := range l.flows {
		f := &l.flows[i]
		f.i, f.fd = uint64(i), -1
		if l.cfg.Mode == "crr" {
			continue
		}
		typ := unix.SOCK_STREAM
		if l.cfg.Proto == "udp" {
			typ = unix.SOCK_DGRAM
		}
		fd, err := socket(l.family, typ)
		if err != nil {
			return err
		}
		f.fd = fd
		if typ == unix.SOCK_STREAM {
			if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
				return fmt.Errorf("TCP_NODELAY: %w", err)
			}
		}
		// Blocking, bounded by the watchdog's limit (SO_SNDTIMEO): one
		// connection per flow before the run.
		tv := unix.NsecToTimeval(int64(tcpTimeout))
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
			return fmt.Errorf("SO_SNDTIMEO: %w", err)
		}
		if err := connect(fd, l.sa); err != nil {
			return fmt.Errorf("connect %s: %w", l.cfg.Addr, err)
		}
		if err := l.watch(f, false); err != nil {
			return err
		}
	}
	return nil
}

func (l *openLoop) closeAll() {
	for i := range l.flows {
		if fd := l.flows[i].fd; fd >= 0 {
			closeRaw(fd)
			l.flows[i].fd = -1
		}
	}
}

// run sends the schedule and takes the answers until the run's end and
// every request in flight then is answered or given up.
func (l *openLoop) run() error {
	var y yielder
	end := l.cfg.Duration
	for {
		now := l.clk.now()
		if err := l.sendDue(now); err != nil {
			return err
		}
		if now >= end && l.busy == 0 {
			return nil
		}
		wake := l.check
		if l.g < l.gEnd {
			wake = min(wake, l.at(l.g))
		}
		if now < end {
			wake = min(wake, end)
		}
		// The timer is armed at wake itself (absolute): the time sendDue
		// took since now delays nothing.
		evs, err := l.p.wait(wake, now)
		if err != nil {
			return err
		}
		now = l.clk.now()
		for _, ev := range evs {
			if ev.Fd == timerData {
				continue
			}
			f := &l.flows[ev.Fd]
			if err := l.event(f, ev.Events, now); err != nil {
				return err
			}
			// Its request answered or failed (crr), a flow behind its
			// schedule sends its next one at once.
			if err := l.next(f, now); err != nil {
				return err
			}
		}
		if now >= l.check {
			if err := l.expire(now); err != nil {
				return err
			}
		}
		y.maybe(now)
	}
}

// sendDue sends every request due by now whose flow is free; a busy
// flow's requests wait for its answer (event), then go back to back.
func (l *openLoop) sendDue(now time.Duration) error {
	if now >= l.cfg.Duration {
		return nil
	}
	for ; l.g < l.gEnd && l.at(l.g) <= now; l.g++ {
		if err := l.next(&l.flows[l.g%l.n], now); err != nil {
			return err
		}
	}
	return nil
}

// next sends f's next request if it is free and the request is due.
func (l *openLoop) next(f *openFlow, now time.Duration) error {
	g := f.k*l.n + f.i
	if f.busy || g >= l.gEnd || now >= l.cfg.Duration {
		return nil
	}
	at := l.at(g)
	if at > now {
		return nil
	}
	lag := now - at
	l.ol.Sent++
	if lag >= LateAfter {
		l.ol.Late++
	}
	l.maxLag = max(l.maxLag, lag)
	f.k++
	f.busy, f.at, f.sentAt, f.wOff, f.rOff = true, at, now, 0, 0
	l.busy++
	l.check = min(l.check, now+l.limit)
	switch {
	case l.cfg.Mode == "crr":
		return l.dial(f, now)
	case l.cfg.Proto == "udp":
		f.seq++
		f.word = reqWord(f.seq, at) // its intended time: a late answer is told apart
		putWord(l.req, f.word)
	}
	return l.write(f, now)
}

// dial starts f's connection (crr): non-blocking socket, SO_LINGER {on,
// 0} (close sends a RST: no TIME_WAIT, runCRR), non-blocking connect;
// the request goes out at once if the handshake is already done (a
// same-host peer answers it before connect returns), else when it is.
func (l *openLoop) dial(f *openFlow, now time.Duration) error {
	fd, err := unix.Socket(l.family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return l.failed(f, fmt.Errorf("socket: %w", err))
	}
	f.fd = fd
	if err := setLingerRaw(f.fd, &l.linger); err != nil {
		return l.failed(f, fmt.Errorf("SO_LINGER: %w", err))
	}
	if err := unix.Connect(f.fd, l.sa); err != nil && err != unix.EINPROGRESS {
		return l.failed(f, fmt.Errorf("connect: %w", err))
	}
	return l.write(f, now)
}

// write sends what is left of f's request, then waits for its answer; a
// full socket (or a handshake still under way) waits for room.
func (l *openLoop) write(f *openFlow, now time.Duration) error {
	for f.wOff < len(l.req) {
		n, e := sendRaw(f.fd, l.req[f.wOff:])
		switch {
		case again(e) || e == unix.ENOTCONN:
			return l.watch(f, true)
		case e == unix.EINTR:
			continue
		case e != 0:
			return l.failed(f, fmt.Errorf("send request %d: %w", l.ol.Sent, e))
		}
		f.wOff += n
	}
	return l.watch(f, false)
}

// watch sets what f's socket is watched for: readable, and writable while
// its request waits for room (or its connection for the handshake). A crr
// connection is added on its first call.
func (l *openLoop) watch(f *openFlow, out bool) error {
	if f.added && out == f.out {
		return nil
	}
	ev, op := uint32(unix.EPOLLIN), unix.EPOLL_CTL_MOD
	if out {
		ev |= unix.EPOLLOUT
	}
	if !f.added {
		op = unix.EPOLL_CTL_ADD
	}
	if err := l.p.ctl(op, f.fd, ev, int32(f.i)); err != nil {
		return l.failed(f, fmt.Errorf("epoll_ctl: %w", err))
	}
	f.added, f.out = true, out
	return nil
}

// event is what epoll said of f's socket at now.
func (l *openLoop) event(f *openFlow, ev uint32, now time.Duration) error {
	if !f.busy { // nothing in flight: a late UDP answer, or a TCP peer gone
		if f.fd < 0 {
			return nil
		}
		got, e := recvRaw(f.fd, l.resp)
		switch {
		case l.cfg.Proto == "udp" || again(e) || e == unix.EINTR:
			return nil
		case e != 0:
			return fmt.Errorf("flow %d: %w", f.i, e)
		case got == 0:
			return fmt.Errorf("flow %d: the server closed the connection", f.i)
		}
		return fmt.Errorf("flow %d: %d bytes with no request in flight", f.i, got)
	}
	if f.wOff < len(l.req) {
		if ev&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) == 0 {
			return nil
		}
		if err := l.write(f, now); err != nil || f.wOff < len(l.req) {
			return err
		}
	}
	for f.rOff < len(l.resp) {
		got, e := recvRaw(f.fd, l.resp[f.rOff:])
		switch {
		case again(e):
			return nil
		case e == unix.EINTR:
			continue
		case e != 0:
			return l.failed(f, fmt.Errorf("read response %d: %w", l.ol.Sent, e))
		case got == 0:
			return l.failed(f, fmt.Errorf("read response %d: %w", l.ol.Sent, io.ErrUnexpectedEOF))
		}
		if l.cfg.Proto == "udp" {
			if got == len(l.resp) && isAnswerTo(l.resp, f.word) {
				break
			}
			continue // a late answer to a request given up: read on
		}
		f.rOff += got
	}
	l.h.Record(now - f.at)
	l.last = now
	l.free(f)
	return nil
}

// free ends f's request (crr: its connection, which leaves the epoll
// instance as it is closed).
func (l *openLoop) free(f *openFlow) {
	f.busy = false
	l.busy--
	if l.cfg.Mode == "crr" && f.fd >= 0 {
		closeRaw(f.fd)
		f.fd, f.added, f.out = -1, false, false
	}
}

// failed ends f's request with err: a crr connection's failure is
// counted (the sample is then invalid), any other ends the run.
func (l *openLoop) failed(f *openFlow, err error) error {
	if l.cfg.Mode != "crr" {
		return err
	}
	l.rep.Errors++
	if l.rep.FirstError == "" {
		l.rep.FirstError = err.Error()
	}
	l.free(f)
	return nil
}

// expire gives up every request in flight past its deadline (udp: lost;
// crr: failed; tcp_rr: the run fails) and finds the next deadline.
func (l *openLoop) expire(now time.Duration) error {
	l.check = never
	for i := range l.flows {
		f := &l.flows[i]
		if !f.busy {
			continue
		}
		if dl := f.sentAt + l.limit; dl > now {
			l.check = min(l.check, dl)
			continue
		}
		switch {
		case l.cfg.Proto == "udp":
			l.rep.Lost++
			l.free(f)
		default:
			if err := l.failed(f, fmt.Errorf("read response %d: timed out after %s", f.k, l.limit)); err != nil {
				return err
			}
		}
		if err := l.next(f, now); err != nil {
			return err
		}
	}
	return nil
}
