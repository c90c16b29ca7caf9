package rrbench

import (
	"fmt"
	"math"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The open loop's two event loops (openloop.go, openserve.go) wait on an
// epoll instance of their own, not on Go's netpoller: one thread drives
// every socket, and a request costs no goroutine or thread wake-up of its
// own.
//
// epoll_wait's timeout is in milliseconds, which would send requests up
// to a millisecond late; the client's waits end at a nanosecond deadline
// through a timerfd in the same epoll instance instead (an hrtimer: no
// timer slack), re-armed only when the deadline moves.
//
// The timer is armed at an absolute time (TFD_TIMER_ABSTIME on
// CLOCK_MONOTONIC: the deadline's instant on the loop's clock, clock.abs),
// never for a duration from a "now": a relative timer counts from the
// moment it is armed, so any time spent between reading now and arming
// (the sends of sendDue, a preemption) made every deadline late by that
// much (a5af99a). An absolute deadline already past fires at once.

// timerData is the timerfd's data in its events (flows and connections
// are numbered from 0, the server's listener is -1).
const timerData = math.MinInt32

// epoller is an epoll instance, its timerfd and what a wait returns.
type epoller struct {
	fd     int
	tfd    int // -1 until a deadline is first set
	armed  time.Duration
	events []unix.EpollEvent
	ev     unix.EpollEvent // epoll_ctl's argument, on the heap: no allocation per call
	// clk is the clock deadlines are times of (startMonoClock: it knows
	// its start on CLOCK_MONOTONIC); a wait with a deadline needs it.
	clk clock
}

func newEpoller(size int) (*epoller, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	return &epoller{fd: fd, tfd: -1, armed: -1, events: make([]unix.EpollEvent, size)}, nil
}

func (p *epoller) close() {
	if p.tfd >= 0 {
		unix.Close(p.tfd)
	}
	unix.Close(p.fd)
}

// ctl adds (op EPOLL_CTL_ADD) or changes fd, with data (a flow or
// connection index) in its events.
func (p *epoller) ctl(op, fd int, events uint32, data int32) error {
	p.ev = unix.EpollEvent{Events: events, Fd: data}
	return unix.EpollCtl(p.fd, op, fd, &p.ev)
}

// wait waits for events until deadline, a time on p.clk (never: until one
// comes; at or before now: does not wait) and returns them; a signal
// returns none. now is only compared with deadline: a now read long
// before (before sendDue) delays nothing, since the timer is armed at the
// deadline's own instant. A timer's expiry comes back as an event with Fd
// timerData, to be skipped.
func (p *epoller) wait(deadline, now time.Duration) ([]unix.EpollEvent, error) {
	msec := -1
	switch {
	case deadline <= now:
		msec = 0
	case deadline != never && deadline != p.armed:
		if err := p.arm(deadline); err != nil {
			return nil, err
		}
		p.armed = deadline
	}
	n, err := unix.EpollWait(p.fd, p.events, msec)
	switch err {
	case nil:
	case unix.EINTR:
		return nil, nil
	default:
		return nil, fmt.Errorf("epoll_wait: %w", err)
	}
	evs := p.events[:n]
	for _, ev := range evs {
		if ev.Fd == timerData {
			p.armed = -1 // expired: the same deadline must be set again
		}
	}
	return evs, nil
}

// arm sets the timer to expire at deadline, a time on p.clk, as an
// absolute CLOCK_MONOTONIC time: a deadline already past expires at once.
// Edge-triggered: setting it resets its count of expiries, so its next
// expiry is an event again without a read.
func (p *epoller) arm(deadline time.Duration) error {
	if !p.clk.mono {
		return fmt.Errorf("timerfd: a deadline on a clock without its CLOCK_MONOTONIC start")
	}
	if p.tfd < 0 {
		tfd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
		if err != nil {
			return fmt.Errorf("timerfd_create: %w", err)
		}
		p.tfd = tfd
		if err := p.ctl(unix.EPOLL_CTL_ADD, tfd, unix.EPOLLIN|unix.EPOLLET, timerData); err != nil {
			return fmt.Errorf("epoll_ctl timerfd: %w", err)
		}
	}
	// Never a zero it_value: it disarms the timer (ABSTIME too), and the
	// wait would last until an answer came, or forever (clock.abs is at
	// least 1).
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(p.clk.abs(deadline))}
	if err := unix.TimerfdSettime(p.tfd, unix.TFD_TIMER_ABSTIME, &spec, nil); err != nil {
		return fmt.Errorf("timerfd_settime: %w", err)
	}
	return nil
}

// sendRaw and recvRaw never block (MSG_DONTWAIT), so they are raw calls
// as send's first try is (sock.go): the bytes moved, or the errno
// (EAGAIN: none now).
func sendRaw(fd int, b []byte) (int, unix.Errno) {
	r, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
		unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT, 0, 0)
	return int(r), e
}

func recvRaw(fd int, b []byte) (int, unix.Errno) {
	r, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
		unix.MSG_DONTWAIT, 0, 0)
	return int(r), e
}

// again: the call would have blocked.
func again(e unix.Errno) bool { return e == unix.EAGAIN || e == unix.EWOULDBLOCK }
