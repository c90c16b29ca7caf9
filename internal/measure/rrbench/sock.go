package rrbench

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The loops use raw, blocking socket fds (socket/connect/sendto/recvfrom system
// calls) instead of net.Conn: Go's netpoller would turn every blocking read
// into EAGAIN + epoll_wait + a goroutine switch, two extra system calls per
// transaction that netperf and sockperf do not pay.

// sockaddr parses "ip:port" (no host names: labs dial addresses); port 0
// only for a listener (any free port).
func sockaddr(hostport string, listen bool) (unix.Sockaddr, int, error) {
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, 0, fmt.Errorf("address %q: want IP:PORT (%v)", hostport, err)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 0 || port > 65535 || (port == 0 && !listen) {
		return nil, 0, fmt.Errorf("address %q: port must be 1-65535", hostport)
	}
	ip := net.ParseIP(host)
	if host == "" {
		ip = net.IPv4zero
	}
	if ip == nil {
		return nil, 0, fmt.Errorf("address %q: %q is not an IP address", hostport, host)
	}
	if ip4 := ip.To4(); ip4 != nil {
		sa := &unix.SockaddrInet4{Port: port}
		copy(sa.Addr[:], ip4)
		return sa, unix.AF_INET, nil
	}
	sa := &unix.SockaddrInet6{Port: port}
	copy(sa.Addr[:], ip.To16())
	return sa, unix.AF_INET6, nil
}

func socket(family, typ int) (int, error) {
	fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	return fd, nil
}

// connect is a blocking connect that survives signals: after EINTR the
// handshake goes on in the kernel, and connecting again waits for it
// (EISCONN: it already completed).
func connect(fd int, sa unix.Sockaddr) error {
	err := unix.Connect(fd, sa)
	for err == unix.EINTR {
		if err = unix.Connect(fd, sa); err == unix.EISCONN {
			return nil
		}
	}
	return err
}

// recv and send are recvfrom/sendto without an address, as sockperf
// calls them: read/write on a socket also pass through the VFS layer,
// measured here at ~0.4 us more per round trip.
func recv(fd int, b []byte) (int, error) {
	return syscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0, 0, 0)
}

// send never raises SIGPIPE (MSG_NOSIGNAL): a vanished peer is an error.
//
// It first tries a raw, non-blocking send (MSG_DONTWAIT): a request or
// response fits the socket's buffer, so that is nearly always all it
// takes, without the runtime's system-call entry and exit (~40 ns here).
// A raw call must never block (a blocked raw call holds its P, and a
// stop-the-world would wait for the peer), so a full buffer (EAGAIN) or a
// signal falls back to the ordinary, blocking send.
func send(fd int, b []byte) (int, error) { return sendTo(fd, b, nil, 0) }

// sendTo is send to an address (to, toLen: a raw sockaddr; nil on a
// connected socket), as the UDP server answers a datagram's sender.
func sendTo(fd int, b []byte, to unsafe.Pointer, toLen uint32) (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
		unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT, uintptr(to), uintptr(toLen))
	switch e {
	case 0:
		return int(r), nil
	case unix.EAGAIN, unix.EINTR:
		blockingSends.Add(1)
		return syscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
			unix.MSG_NOSIGNAL, uintptr(to), uintptr(toLen))
	}
	return 0, e
}

// blockingSends counts sends that had to wait for buffer space (a test
// checks the fallback).
var blockingSends atomic.Uint64

// syscall6 makes a system call, again after EINTR (a signal, such as the Go
// runtime's preemption, interrupts it), and returns its result or errno.
//
// Its arguments may be pointers converted to uintptr: go:uintptrescapes
// moves what they point to onto the heap, where a stack copy (syscall6 is
// an ordinary function, its prologue may grow the stack) cannot move it.
//
//go:uintptrescapes
func syscall6(trap, a1, a2, a3, a4, a5, a6 uintptr) (int, error) {
	for {
		r, _, e := unix.Syscall6(trap, a1, a2, a3, a4, a5, a6)
		switch e {
		case 0:
			return int(r), nil
		case unix.EINTR:
			continue
		}
		return 0, e
	}
}

// readFull reads exactly len(b) bytes; a peer that closes mid-way is io.ErrUnexpectedEOF.
func readFull(fd int, b []byte) error {
	for got := 0; got < len(b); {
		n, err := recv(fd, b[got:])
		if err != nil {
			return err
		}
		if n == 0 {
			if got == 0 {
				return io.EOF
			}
			return io.ErrUnexpectedEOF
		}
		got += n
	}
	return nil
}

// writeFull writes all of b.
func writeFull(fd int, b []byte) error {
	for sent := 0; sent < len(b); {
		n, err := send(fd, b[sent:])
		if err != nil {
			return err
		}
		sent += n
	}
	return nil
}
