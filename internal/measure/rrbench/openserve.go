package rrbench

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// serveOpen serves an open-loop client's TCP connections (tcp_rr: one per
// flow; tcp_crr: one per request, many at once) from one event loop, as
// the client sends them (openloop.go): the listener and every connection
// in one epoll instance, level-triggered, on one thread, so that a
// connection costs no goroutine or thread of its own and a wake-up can
// serve many. A connection reads its request, writes the answer back (a
// full socket waits for room) and is closed when its client closes or
// resets it: the server never closes first (no TIME_WAIT), as serveTCP.
func (s *Server) serveOpen() error {
	if err := unix.SetNonblock(s.fd, true); err != nil {
		unix.Close(s.fd)
		return fmt.Errorf("listener: %w", err)
	}
	p, err := newEpoller(64)
	if err != nil {
		unix.Close(s.fd)
		return err
	}
	o := &openServer{s: s, p: p}
	defer o.close()
	if err := p.ctl(unix.EPOLL_CTL_ADD, s.fd, unix.EPOLLIN, -1); err != nil {
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	y := newSparseYielder(startClock())
	for {
		evs, err := p.wait(never, 0)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if ev.Fd < 0 {
				if err := o.accept(); err != nil {
					return err
				}
				continue
			}
			o.serve(int(ev.Fd))
			y.tick()
		}
		if s.done.Load() {
			return nil
		}
	}
}

// openServer is serveOpen's state: its connections, by descriptor.
type openServer struct {
	s     *Server
	p     *epoller
	conns []srvConn
}

// srvConn is one connection's request or answer in progress.
type srvConn struct {
	open, added, out bool
	writing          bool // the request is in: its answer is going out
	off              int  // bytes of the request read, or of the answer sent
	buf              []byte
}

// accept takes the connections waiting (a few at a time: the loop comes
// back for the rest) and serves each one's request if it is already in.
func (o *openServer) accept() error {
	for range 16 {
		r, _, e := unix.RawSyscall6(unix.SYS_ACCEPT4, uintptr(o.s.fd), 0, 0, unix.SOCK_CLOEXEC, 0, 0)
		switch {
		case e != 0 && o.s.done.Load(): // Close shut the listener down
			return nil
		case again(e):
			return nil
		case e == unix.EINTR || e == unix.ECONNABORTED:
			continue
		case e != 0:
			return fmt.Errorf("accept: %w", e)
		}
		fd := int(r)
		for fd >= len(o.conns) {
			o.conns = append(o.conns, srvConn{})
		}
		c := &o.conns[fd]
		if c.buf == nil {
			c.buf = make([]byte, o.s.cfg.Size)
		}
		c.open, c.writing, c.off = true, false, 0
		o.serve(fd)
		if c.open {
			o.watch(fd, c.out)
		}
	}
	return nil
}

// serve moves connection fd's request or answer on as far as its socket
// lets it; after an answer, the next request waits for epoll to say so.
func (o *openServer) serve(fd int) {
	c := &o.conns[fd]
	if !c.open {
		return
	}
	for {
		if c.writing {
			for c.off < len(c.buf) {
				n, e := sendRaw(fd, c.buf[c.off:])
				switch {
				case again(e):
					o.watch(fd, true)
					return
				case e == unix.EINTR:
					continue
				case e != 0:
					o.drop(fd)
					return
				}
				c.off += n
			}
			c.writing, c.off = false, 0
			o.watch(fd, false)
			return
		}
		n, e := recvRaw(fd, c.buf[c.off:])
		switch {
		case again(e):
			return
		case e == unix.EINTR:
			continue
		case e != 0 || n == 0: // the client closed or reset it
			o.drop(fd)
			return
		}
		if c.off += n; c.off == len(c.buf) {
			c.writing, c.off = true, 0
		}
	}
}

// watch sets what connection fd is watched for (once added: a new
// connection is added once its first request is served, or waits).
func (o *openServer) watch(fd int, out bool) {
	c := &o.conns[fd]
	if c.added && c.out == out {
		return
	}
	ev, op := uint32(unix.EPOLLIN), unix.EPOLL_CTL_MOD
	if out {
		ev |= unix.EPOLLOUT
	}
	if !c.added {
		op = unix.EPOLL_CTL_ADD
	}
	if err := o.p.ctl(op, fd, ev, int32(fd)); err != nil {
		o.drop(fd)
		return
	}
	c.added, c.out = true, out
}

// drop closes connection fd (out of the epoll instance with it).
func (o *openServer) drop(fd int) {
	c := &o.conns[fd]
	closeRaw(fd)
	c.open, c.added, c.out, c.writing, c.off = false, false, false, false, 0
}

// close closes every connection, the epoll instance and the listener
// (once Close, which shuts it down under mu, is done with it).
func (o *openServer) close() {
	for fd := range o.conns {
		if o.conns[fd].open {
			o.drop(fd)
		}
	}
	o.p.close()
	o.s.mu.Lock()
	unix.Close(o.s.fd)
	o.s.mu.Unlock()
}
