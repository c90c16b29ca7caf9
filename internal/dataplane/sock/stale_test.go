package sock

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/dataplane/tcbpf"
	"github.com/vnetlab/vnetlab/internal/nsutil"
)

// TestEndStaleUDP: in a scratch namespace, UDP sockets connected as
// connect4 leaves them (their sock_conns entry written by hand: backend,
// clusterIP): the one whose backend left its frontend is destroyed (its
// pending error says ECONNABORTED); the one whose backend stays, one that
// was never translated and one of another frontend are left alone.
func TestEndStaleUDP(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (BPF, namespaces)")
	}
	lab := fmt.Sprintf("sockstale%d", os.Getpid()%10000)
	p, err := Open(lab)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Close()
		_ = tcbpf.Remove(lab)
	})
	vip, other := netip.MustParseAddrPort("10.96.0.10:53"), netip.MustParseAddrPort("10.96.0.11:53")
	gone, stays := netip.MustParseAddrPort("127.0.0.1:5001"), netip.MustParseAddrPort("127.0.0.1:5002")
	err = nsutil.Scratch(func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		// connected opens a UDP socket connected to backend; translatedFrom
		// (valid) writes the entry connect4 would have.
		connected := func(backend, translatedFrom netip.AddrPort) int {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Close(fd) })
			if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: backend.Addr().As4(), Port: int(backend.Port())}); err != nil {
				t.Fatal(err)
			}
			if translatedFrom.IsValid() {
				p.remember(t, fd, backend, translatedFrom)
			}
			return fd
		}
		stale := connected(gone, vip)
		kept := connected(stays, vip)
		direct := connected(gone, netip.AddrPort{})
		elsewhere := connected(gone, other)
		n, err := p.EndStaleUDP(map[netip.AddrPort][]tcbpf.Backend{vip: {{IP: stays.Addr(), Port: stays.Port()}}}, []string{""})
		if err != nil {
			return err
		}
		if n != 1 {
			t.Errorf("ended %d sockets, want 1", n)
		}
		if err := sockErr(stale); !errors.Is(err, unix.ECONNABORTED) {
			t.Errorf("the socket whose backend left: error %v, want ECONNABORTED", err)
		}
		for name, fd := range map[string]int{"backend stays": kept, "never translated": direct, "another frontend": elsewhere} {
			if err := sockErr(fd); err != nil {
				t.Errorf("%s: error %v, want the socket untouched", name, err)
			}
			if sa, err := unix.Getpeername(fd); err != nil || sa == nil {
				t.Errorf("%s: no longer connected (%v)", name, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// remember writes the sock_conns entry connect4 leaves for a socket it
// connected to backend in place of vip (bpf/sock.c's struct sock_conn).
func (p *Plane) remember(t *testing.T, fd int, backend, vip netip.AddrPort) {
	t.Helper()
	cookie, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_COOKIE)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]byte, 24)
	binary.NativeEndian.PutUint64(v[0:8], cookie)
	b, a := backend.Addr().As4(), vip.Addr().As4()
	copy(v[8:12], b[:])
	copy(v[12:16], a[:])
	binary.BigEndian.PutUint16(v[16:18], backend.Port())
	binary.BigEndian.PutUint16(v[18:20], vip.Port())
	if err := p.objs.SockConns.Put(uint32(cookie&(1<<18-1)), v); err != nil {
		t.Fatal(err)
	}
}

// sockErr reads a socket's pending error (SO_ERROR, which also clears it).
func sockErr(fd int) error {
	e, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err != nil {
		return err
	}
	if e != 0 {
		return unix.Errno(e)
	}
	return nil
}
