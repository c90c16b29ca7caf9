// Package rrbench is vnetlab's request/response benchmark with netperf's
// TCP_RR, UDP_RR and TCP_CRR semantics: a server that answers every
// request of Size bytes with Size bytes, and a client that measures
// transactions per second and per-transaction latency. Both run as the
// hidden `vnetlab rr-server` / `vnetlab rr-client` commands inside pods.
//
// The hot loops use blocking system calls on raw fds, one goroutine per
// side, one clock read per transaction, no lock, and do not allocate (a
// test checks it).
package rrbench

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ServerConfig says what to serve.
type ServerConfig struct {
	Proto string // "tcp" or "udp"
	Addr  string // listen address, IP:PORT (":7001" = every IPv4 address)
	Size  int    // request and response size in bytes
	// Flows: clients connect this many flows at once (TCP: each served
	// in a goroutine of its own, serveFlows); 0 or 1: one at a time.
	Flows int
	// Open: the client runs an open loop (open.go): TCP is then served
	// by one event loop over every connection (serveOpen), as the client
	// runs its flows.
	Open bool
}

func (c ServerConfig) check() error {
	if c.Proto != "tcp" && c.Proto != "udp" {
		return fmt.Errorf("proto %q: use tcp or udp", c.Proto)
	}
	return checkSize(c.Proto, c.Size)
}

func checkSize(proto string, size int) error {
	max := 1 << 20
	if proto == "udp" {
		max = 65507 // largest IPv4 UDP payload
	}
	if size < 1 || size > max {
		return fmt.Errorf("size %d: use 1 to %d bytes for %s", size, max, proto)
	}
	return nil
}

// Server is a listening rr server.
type Server struct {
	cfg ServerConfig
	fd  int
	// The serving loop takes no lock: conn and done are atomics. Close
	// takes mu while it shuts the connection down, and a connection's end
	// that finds Close at work (conn is connClosing) takes mu too, so the
	// loop never closes a descriptor Close is shutting down.
	mu   sync.Mutex
	conn atomic.Int64 // the TCP connection being served, -1, or connClosing
	done atomic.Bool
	// flows are the connections serveFlows is serving (under mu).
	flows map[int]bool
}

const connClosing = -2

// Listen binds and (TCP) listens; the server is ready for clients when it returns.
func Listen(cfg ServerConfig) (*Server, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	sa, family, err := sockaddr(cfg.Addr, true)
	if err != nil {
		return nil, err
	}
	typ := unix.SOCK_STREAM
	if cfg.Proto == "udp" {
		typ = unix.SOCK_DGRAM
	}
	fd, err := socket(family, typ)
	if err != nil {
		return nil, err
	}
	// A server started right after the previous sample's must not fail to bind.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind %s/%s: %w", cfg.Proto, cfg.Addr, err)
	}
	if typ == unix.SOCK_STREAM {
		// Set once here, inherited by every accepted connection: no
		// setsockopt per crr connection.
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("listen %s: %w", cfg.Addr, err)
		}
	}
	srv := &Server{cfg: cfg, fd: fd}
	srv.conn.Store(-1)
	return srv, nil
}

// Port returns the bound port (useful with port 0).
func (s *Server) Port() int {
	sa, err := unix.Getsockname(s.fd)
	if err != nil {
		return 0
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return a.Port
	case *unix.SockaddrInet6:
		return a.Port
	}
	return 0
}

// Serve answers clients until Close; it returns nil after Close.
func (s *Server) Serve() error {
	defer spareP()()
	switch {
	case s.cfg.Proto == "udp":
		return s.serveUDP()
	case s.cfg.Open:
		return s.serveOpen()
	case s.cfg.Flows > 1:
		return s.serveFlows()
	}
	return s.serveTCP()
}

// Close wakes every blocked call (shutdown) and makes Serve return.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done.Swap(true) {
		return
	}
	// shutdown, not close: close does not wake a thread blocked in accept/recv.
	_ = unix.Shutdown(s.fd, unix.SHUT_RDWR)
	if c := s.conn.Load(); c >= 0 && s.conn.CompareAndSwap(c, connClosing) {
		_ = unix.Shutdown(int(c), unix.SHUT_RDWR)
	}
	for fd := range s.flows {
		_ = unix.Shutdown(fd, unix.SHUT_RDWR)
	}
}

// endConn closes the connection fd once Close cannot be shutting it down.
func (s *Server) endConn(fd int) {
	if !s.conn.CompareAndSwap(int64(fd), -1) {
		s.mu.Lock() // Close marked it: wait until its shutdown is done
		s.conn.Store(-1)
		s.mu.Unlock()
	}
	closeRaw(fd)
}

// serveTCP serves one connection at a time in this goroutine, like
// netperf's netserver: tcp_rr is one long connection, tcp_crr one short
// connection after another, and a goroutine per connection would cost a
// hand-off (and an allocation) per crr transaction. One server serves one
// client; the rr engine starts a server per sample.
func (s *Server) serveTCP() error {
	defer unix.Close(s.fd)
	buf := make([]byte, s.cfg.Size)
	y := newSparseYielder(startClock()) // across connections: see echoTCP
	for {
		// accept4 without a peer address: unix.Accept4 allocates one per call.
		r, _, e := unix.Syscall6(unix.SYS_ACCEPT4, uintptr(s.fd), 0, 0, unix.SOCK_CLOEXEC, 0, 0)
		nfd := int(r)
		if e != 0 {
			if s.done.Load() {
				return nil
			}
			if e == unix.EINTR || e == unix.ECONNABORTED {
				continue
			}
			return fmt.Errorf("accept: %w", e)
		}
		s.conn.Store(int64(nfd)) // so that Close can shut it down
		if !s.done.Load() {
			s.echoTCP(nfd, buf, y)
		}
		s.endConn(nfd)
	}
}

// echoTCP reads a request of Size bytes and writes Size bytes back, until
// the client closes (EOF) or resets (crr clients close with RST). The
// server never closes first, so it never holds TIME_WAIT. y spans
// connections: tcp_crr has one transaction per connection, and when the
// server counted transactions per connection it never yielded (then sysmon
// preempted it every 10 ms and woke every 20 us: measured, 0.75 sysmon
// sleeps and 1.4 futex calls per crr connection). By time, not by a fixed
// count (too often at high rates, too rare at low ones), the clock read
// every few transactions (sparseYielder).
func (s *Server) echoTCP(fd int, buf []byte, y *sparseYielder) {
	for readFull(fd, buf) == nil && writeFull(fd, buf) == nil {
		y.tick()
	}
}

// serveUDP echoes each datagram to its sender. recvfrom/sendto are called
// directly with a reused sockaddr buffer: x/sys/unix.Recvfrom allocates a
// Sockaddr per packet.
func (s *Server) serveUDP() error {
	defer unix.Close(s.fd)
	buf := make([]byte, s.cfg.Size)
	var from unix.RawSockaddrAny
	y := newSparseYielder(startClock())
	for {
		fromLen := uint32(unix.SizeofSockaddrAny)
		n, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(s.fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)),
			0, uintptr(unsafe.Pointer(&from)), uintptr(unsafe.Pointer(&fromLen)))
		if e != 0 || fromLen == 0 { // shutdown wakes recvfrom with 0 bytes and no sender
			if s.done.Load() {
				return nil
			}
			if e == 0 || e == unix.EINTR || e == unix.ECONNREFUSED {
				continue
			}
			return fmt.Errorf("recvfrom: %w", e)
		}
		// A failed echo is a lost response, counted by the client.
		_, _ = sendTo(s.fd, buf[:n], unsafe.Pointer(&from), fromLen)
		y.tick()
	}
}
