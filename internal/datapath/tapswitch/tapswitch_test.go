package tapswitch

import (
	"bytes"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Each port is one end of a SOCK_SEQPACKET pair: like a TAP, it keeps frame
// boundaries (one frame per read and per write). The test holds the other
// ends. Cleanup closes the test's ends first, which stops every port
// goroutine (EOF), and the switch's ends only once they have stopped: a
// goroutine still reading a closed descriptor number would read whatever
// the next test opens under that number.
func newSwitch(t *testing.T, n, vnetHdr int) (*Switch, []int) {
	t.Helper()
	s := &Switch{VnetHdr: vnetHdr, Buf: NaiveFrame + vnetHdr}
	var peers []int
	t.Cleanup(func() {
		for _, fd := range peers {
			unix.Close(fd)
		}
		s.ports.Wait()
		for _, p := range s.Ports {
			unix.Close(p.FD)
		}
	})
	for i := 0; i < n; i++ {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		s.Ports = append(s.Ports, &Port{Name: string(rune('a' + i)), FD: fds[0]})
		peers = append(peers, fds[1])
	}
	return s, peers
}

func frame(hdr []byte, dst, src byte, payload string) []byte {
	f := append([]byte(nil), hdr...)
	f = append(f, 0x02, 0, 0, 0, 0, dst) // locally administered unicast
	if dst == 0xff {
		copy(f[len(hdr):], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	}
	f = append(f, 0x02, 0, 0, 0, 0, src, 0x08, 0x00)
	return append(f, payload...)
}

// recv reads the frame a peer is expected to get, waiting up to 5 s: the
// wait only costs time when the switch is broken.
func recv(t *testing.T, fd int) []byte {
	t.Helper()
	return recvWithin(t, fd, 5*time.Second)
}

// stray reads a frame a peer must not get, or nil. Its short wait can only
// let a misdirected frame go unseen, never fail a correct switch.
func stray(t *testing.T, fd int) []byte {
	t.Helper()
	return recvWithin(t, fd, 200*time.Millisecond)
}

// recvWithin polls until the frame comes or the wait is over.
func recvWithin(t *testing.T, fd int, wait time.Duration) []byte {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for end := time.Now().Add(wait); fds[0].Revents == 0; {
		left := time.Until(end)
		if left <= 0 {
			return nil
		}
		if err := retry(func() (err error) { _, err = unix.Poll(fds, int(left.Milliseconds())+1); return }); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 70000)
	var m int
	if err := retry(func() (err error) { m, err = unix.Read(fd, buf); return }); err != nil {
		t.Fatal(err)
	}
	return buf[:m]
}

func send(t *testing.T, fd int, f []byte) {
	t.Helper()
	if err := retry(func() (err error) { _, err = unix.Write(fd, f); return }); err != nil {
		t.Fatal(err)
	}
}

// retry calls a system call again while a signal interrupts it (EINTR:
// the Go runtime's preemption signals interrupt poll, for one).
func retry(call func() error) error {
	for {
		if err := call(); err != unix.EINTR {
			return err
		}
	}
}

func TestLearnAndFlood(t *testing.T) {
	s, peer := newSwitch(t, 3, 0)
	done := make(chan error, 1)
	go func() { done <- s.Run() }()

	// A (on port 0) to B: B is unknown, so every other port gets it.
	ab := frame(nil, 0xb, 0xa, "hello B")
	send(t, peer[0], ab)
	for _, p := range []int{1, 2} {
		if got := recv(t, peer[p]); !bytes.Equal(got, ab) {
			t.Errorf("port %d: flooded frame = %x, want %x", p, got, ab)
		}
	}
	if got := stray(t, peer[0]); got != nil {
		t.Errorf("a frame came back to its ingress port: %x", got)
	}
	// B answers from port 1: A was learned on port 0, so only port 0 gets it.
	ba := frame(nil, 0xa, 0xb, "hello A")
	send(t, peer[1], ba)
	if got := recv(t, peer[0]); !bytes.Equal(got, ba) {
		t.Errorf("port 0: %x, want %x", got, ba)
	}
	if got := stray(t, peer[2]); got != nil {
		t.Errorf("port 2 got a frame for a learned MAC: %x", got)
	}
	// Now B is known too: A -> B goes to port 1 only.
	send(t, peer[0], ab)
	if got := recv(t, peer[1]); !bytes.Equal(got, ab) {
		t.Errorf("port 1: %x, want %x", got, ab)
	}
	if got := stray(t, peer[2]); got != nil {
		t.Errorf("port 2 got a frame for a learned MAC: %x", got)
	}
	// Broadcast (ARP) from port 2 floods to 0 and 1.
	bc := frame(nil, 0xff, 0xc, "who has")
	send(t, peer[2], bc)
	for _, p := range []int{0, 1} {
		if got := recv(t, peer[p]); !bytes.Equal(got, bc) {
			t.Errorf("port %d: broadcast = %x, want %x", p, got, bc)
		}
	}
	if s.Floods.Load() != 2 {
		t.Errorf("floods = %d, want 2 (unknown unicast, broadcast)", s.Floods.Load())
	}
	// A port going away (its TAP removed) stops the switch with an error.
	// (shutdown, not close: the descriptor stays the test's until cleanup.)
	unix.Shutdown(peer[1], unix.SHUT_RDWR)
	select {
	case err := <-done:
		if err == nil {
			t.Error("Run returned nil after a port closed")
		}
	case <-time.After(2 * time.Second):
		t.Error("Run did not return after a port closed")
	}
}

// With a virtio_net_hdr, MACs are read after it and the header (GSO type,
// sizes, checksum offsets) reaches the other TAP byte for byte.
func TestVnetHdrPassThrough(t *testing.T) {
	s, peer := newSwitch(t, 2, VnetHdrLen)
	go func() { _ = s.Run() }()
	hdr := []byte{0x01, 0x01, 0x42, 0x00, 0xa8, 0x05, 0x22, 0x00, 0x10, 0x00, 0x00, 0x00}
	f := frame(hdr, 0xb, 0xa, "segment")
	send(t, peer[0], f)
	if got := recv(t, peer[1]); !bytes.Equal(got, f) {
		t.Fatalf("got %x, want %x", got, f)
	}
	s.mu.RLock()
	port, ok := s.fdb[[6]byte{0x02, 0, 0, 0, 0, 0xa}]
	s.mu.RUnlock()
	if !ok || port != 0 {
		t.Errorf("source MAC after the header not learned on port 0 (ok=%v port=%d)", ok, port)
	}
}

func TestRunNeedsTwoPorts(t *testing.T) {
	s, _ := newSwitch(t, 1, 0)
	if err := s.Run(); err == nil {
		t.Error("a one-port switch ran")
	}
}
