// Package tapswitch is the userspace half of the tap modes: a tiny learning
// L2 switch between TAP file descriptors, standing in for qemu's tap backend
// plus the host bridge of seed 000 (every VM frame crosses a user process).
// It runs as the hidden verb `vnetlab tap-switch`, started by internal/datapath/modes
// with the TAPs already open.
package tapswitch

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// NaiveFrame is the naive switch's buffer: one Ethernet frame of a 1500-byte
// MTU (1500 + 14 header + 4 VLAN tag). Seed 000's C program reads TUN packets
// into char buffer[1500]; a TAP frame carries the Ethernet header on top.
const NaiveFrame = 1518

// OffloadFrame is the buffer when the TAPs carry a virtio_net_hdr: the
// largest GSO frame (64 KB) plus Ethernet header and VLAN tag.
const OffloadFrame = 65535 + 14 + 4

// Port is one TAP, open in blocking mode.
type Port struct {
	Name string
	FD   int

	RxFrames, RxBytes, TxFrames, TxErrors atomic.Uint64
}

// Switch forwards every frame read from a port to the port that last sent
// from its destination MAC, or floods it to every other port when the
// destination is unknown, broadcast or multicast.
type Switch struct {
	Ports []*Port
	// VnetHdr is the size of the virtio_net_hdr before each frame (0: none).
	// The header is passed through unchanged, so a GSO frame read from one
	// TAP is written whole to another and segmented, if ever, by the kernel.
	VnetHdr int
	// Buf is the read buffer size: at most one frame per read and per write.
	Buf int

	mu  sync.RWMutex
	fdb map[[6]byte]int // MAC -> port index
	// ports counts the port goroutines, so that a test can wait for them to
	// stop before it closes their descriptors (which the kernel then reuses).
	ports sync.WaitGroup
	// Floods counts frames sent to every other port.
	Floods atomic.Uint64
}

// Run forwards until a port fails to read (its TAP was removed, or the file
// was closed); it returns that error. One goroutine per port: a blocking
// read, then a write per destination, like a simple vhost-less qemu.
func (s *Switch) Run() error {
	if len(s.Ports) < 2 {
		return errors.New("tap-switch needs at least two ports")
	}
	if s.Buf <= s.VnetHdr+14 {
		return fmt.Errorf("buffer of %d bytes cannot hold a frame", s.Buf)
	}
	s.fdb = map[[6]byte]int{}
	errc := make(chan error, len(s.Ports))
	for i := range s.Ports {
		s.ports.Add(1)
		go func(i int) {
			defer s.ports.Done()
			errc <- s.serve(i)
		}(i)
	}
	return <-errc
}

func (s *Switch) serve(in int) error {
	p := s.Ports[in]
	buf := make([]byte, s.Buf)
	for {
		n, err := unix.Read(p.FD, buf)
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", p.Name, err)
		}
		if n == 0 {
			return fmt.Errorf("read %s: %w", p.Name, io.EOF)
		}
		if n < s.VnetHdr+14 {
			continue // runt: no Ethernet header
		}
		p.RxFrames.Add(1)
		p.RxBytes.Add(uint64(n))
		s.forward(in, buf[:n])
	}
}

// forward learns the source and sends the frame on.
func (s *Switch) forward(in int, frame []byte) {
	eth := frame[s.VnetHdr:]
	var dst, src [6]byte
	copy(dst[:], eth[0:6])
	copy(src[:], eth[6:12])
	if src[0]&1 == 0 { // learn unicast sources only
		s.mu.RLock()
		known, ok := s.fdb[src]
		s.mu.RUnlock()
		if !ok || known != in {
			s.mu.Lock()
			s.fdb[src] = in
			s.mu.Unlock()
		}
	}
	if dst[0]&1 == 0 {
		s.mu.RLock()
		out, ok := s.fdb[dst]
		s.mu.RUnlock()
		if ok {
			if out != in {
				s.send(out, frame)
			}
			return
		}
	}
	s.Floods.Add(1)
	for out := range s.Ports {
		if out != in {
			s.send(out, frame)
		}
	}
}

func (s *Switch) send(out int, frame []byte) {
	p := s.Ports[out]
	for {
		_, err := unix.Write(p.FD, frame)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			// The TAP is down (EIO) or refused the frame: dropped, as a
			// switch drops on a dead port.
			p.TxErrors.Add(1)
			return
		}
		p.TxFrames.Add(1)
		return
	}
}

// Stats is one line per port, for the log.
func (s *Switch) Stats() string {
	out := fmt.Sprintf("floods %d", s.Floods.Load())
	for _, p := range s.Ports {
		out += fmt.Sprintf("; %s rx %d frames %d bytes, tx %d frames %d errors",
			p.Name, p.RxFrames.Load(), p.RxBytes.Load(), p.TxFrames.Load(), p.TxErrors.Load())
	}
	return out
}
