package rrbench

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The udp_rr client sends and receives with raw system calls (RawSyscall:
// no entersyscall/exitsyscall around them), as a C program does. The Go
// runtime then takes the goroutine for running while it blocks, which is
// safe here because the kernel bounds every such call:
//
//   - the socket carries SO_RCVTIMEO and SO_SNDTIMEO (the client's timeout:
//     udp_rr needs its own per request anyway, for lost datagrams), so a
//     stuck call comes back by itself; meanwhile the process's other
//     goroutines keep the spare P (see spareP);
//   - a socket call with a timeout is never restarted by the kernel after
//     a signal: it fails with EINTR. So the signal with which the runtime
//     preempts a goroutine (for a stop-the-world, or from sysmon) gets it
//     out of a blocked raw call at once (a test checks it);
//   - sysmon sends that signal every 10 ms to a goroutine that holds its P
//     for 10 ms, as a raw call waiting for a lost answer does. Calling
//     again with the full timeout would let a dead peer hang the client
//     forever (main's syscall6 did, with ordinary calls, under enough
//     signals), so the client keeps an absolute deadline per request and,
//     after EINTR, calls again with only what is left of it as the
//     socket's timeout (interrupted).
//
// TCP keeps ordinary system calls and no socket timeouts: a socket timeout
// arms and cancels a kernel timer in every receive that waits (profiled
// here: ~0.8% of each side's CPU time), so tcp_rr and tcp_crr keep their
// deadline with a watchdog goroutine (watchdog.go), which must be able to
// run while the loop blocks: without a socket timeout a signal does not
// interrupt a raw call (SA_RESTART), and a stop-the-world would wait for it.

// errTimedOut is a transaction that outlived the client's timeout (EAGAIN:
// what the kernel's SO_RCVTIMEO returns, so isTimeout knows both).
var errTimedOut = unix.EAGAIN

// timedSock is a client socket whose blocking calls end by an absolute
// deadline: SO_RCVTIMEO and SO_SNDTIMEO are limit, and at is the clock
// time by which the current transaction must be done.
type timedSock struct {
	fd    int
	clk   clock
	limit time.Duration
	at    time.Duration
}

func newTimedSock(fd int, clk clock, limit time.Duration, send bool) (*timedSock, error) {
	snd := time.Duration(0)
	if send {
		snd = limit
	}
	if err := setTimeouts(fd, limit, snd); err != nil {
		return nil, err
	}
	return &timedSock{fd: fd, clk: clk, limit: limit}, nil
}

// start sets the deadline of a transaction that starts at now.
func (s *timedSock) start(now time.Duration) { s.at = now + s.limit }

func (s *timedSock) recv(b []byte) (int, error) {
	return s.call(unix.SYS_RECVFROM, unix.SO_RCVTIMEO, b, 0)
}

// send never raises SIGPIPE (MSG_NOSIGNAL): a vanished peer is an error.
func (s *timedSock) send(b []byte) (int, error) {
	return s.call(unix.SYS_SENDTO, unix.SO_SNDTIMEO, b, unix.MSG_NOSIGNAL)
}

func (s *timedSock) call(trap uintptr, opt int, b []byte, flags uintptr) (int, error) {
	r, _, e := unix.RawSyscall6(trap, uintptr(s.fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), flags, 0, 0)
	switch e {
	case 0:
		return int(r), nil
	case unix.EINTR:
		interruptions.Add(1)
		return s.interrupted(trap, opt, b, flags)
	}
	return 0, e
}

// interrupted calls again after EINTR with what is left of the deadline as
// the socket's timeout (so signals cannot stretch it), then puts the full
// timeout back for the next transaction.
func (s *timedSock) interrupted(trap uintptr, opt int, b []byte, flags uintptr) (int, error) {
	defer s.setTimeout(opt, s.limit)
	for {
		// Let the preemption the signal asked for happen (a raw call is
		// no preemption point, and this loop might otherwise never reach one).
		runtime.Gosched()
		left := s.at - s.clk.now()
		if left <= 0 {
			return 0, errTimedOut
		}
		if err := s.setTimeout(opt, left); err != nil {
			return 0, err
		}
		r, _, e := unix.RawSyscall6(trap, uintptr(s.fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), flags, 0, 0)
		if e == 0 {
			return int(r), nil
		}
		if e != unix.EINTR {
			return 0, e
		}
		interruptions.Add(1)
	}
}

// interruptions counts the udp_rr client's raw calls that came back with
// EINTR (a test checks that its signals reached the deadline's slow path).
var interruptions atomic.Uint64

func (s *timedSock) setTimeout(opt int, d time.Duration) error {
	// A zero timeval means "no timeout": never round down to it.
	tv := unix.NsecToTimeval(max(d, time.Microsecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(s.fd, unix.SOL_SOCKET, opt, &tv); err != nil {
		return fmt.Errorf("set the socket timeout: %w", err)
	}
	return nil
}

// setLingerRaw and closeRaw: tcp_crr's calls that never block (SO_LINGER
// {on, 0} makes close send a RST and return; the server's close of a
// connection its client reset or ended is immediate too).
func setLingerRaw(fd int, l *unix.Linger) error {
	_, _, e := unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_LINGER,
		uintptr(unsafe.Pointer(l)), unsafe.Sizeof(*l), 0)
	if e != 0 {
		return e
	}
	return nil
}

func closeRaw(fd int) { _, _, _ = unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0) }
