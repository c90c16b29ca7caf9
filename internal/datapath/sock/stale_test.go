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

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// TestEndStaleUDP: in a scratch namespace, UDP sockets of each family
// connected as connect4/connect6 leave them (their sock_conns or
// sock6_conns entry written by hand: backend, clusterIP): the one whose
// backend left its frontend is destroyed (its pending error says
// ECONNABORTED); the one whose backend stays, one that was never
// translated and one of another frontend are left alone. A second walk
// asks again with that backend gone too: its socket goes.
func TestEndStaleUDP(t *testing.T) {
	for _, c := range []struct {
		name                    string
		vip, other, gone, stays string
	}{
		{"ipv4", "10.96.0.10:53", "10.96.0.11:53", "127.0.0.1:5001", "127.0.0.1:5002"},
		{"ipv6", "[fd00:10:96::a]:53", "[fd00:10:96::b]:53", "[::1]:5001", "[::1]:5002"},
	} {
		t.Run(c.name, func(t *testing.T) {
			endStaleUDP(t, netip.MustParseAddrPort(c.vip), netip.MustParseAddrPort(c.other), netip.MustParseAddrPort(c.gone), netip.MustParseAddrPort(c.stays))
		})
	}
}

func endStaleUDP(t *testing.T, vip, other, gone, stays netip.AddrPort) {
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
	err = nsutil.Scratch(func() error {
		if err := nsutil.WriteSysctl("net.ipv6.conf.lo.disable_ipv6", "0"); err != nil {
			return err
		}
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		// connected opens a UDP socket connected to backend; translatedFrom
		// (valid) writes the entry connect4 or connect6 would have.
		connected := func(backend, translatedFrom netip.AddrPort) int {
			af, sa := unix.AF_INET6, unix.Sockaddr(&unix.SockaddrInet6{Addr: backend.Addr().As16(), Port: int(backend.Port())})
			if backend.Addr().Is4() {
				af, sa = unix.AF_INET, &unix.SockaddrInet4{Addr: backend.Addr().As4(), Port: int(backend.Port())}
			}
			fd, err := unix.Socket(af, unix.SOCK_DGRAM, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Close(fd) })
			if err := unix.Connect(fd, sa); err != nil {
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
		// A second walk, with the iterator the first loaded: what the first
		// kept is not kept any more. Now the other backend left: the socket
		// it kept goes (its backend still marked kept from the first walk, it
		// would stay).
		n, err = p.EndStaleUDP(map[netip.AddrPort][]tcbpf.Backend{vip: {{IP: gone.Addr(), Port: gone.Port()}}}, []string{""})
		if err != nil {
			return err
		}
		if n != 1 {
			t.Errorf("second walk: ended %d sockets, want 1", n)
		}
		if err := sockErr(kept); !errors.Is(err, unix.ECONNABORTED) {
			t.Errorf("second walk: the socket whose backend left now: error %v, want ECONNABORTED", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// remember writes the sock_conns (IPv4) or sock6_conns entry connect4 or
// connect6 leaves for a socket it connected to backend in place of vip
// (bpf/sock.c's struct sock_conn, sock6_conn: cookie, backend, vip, their
// ports, pad).
func (p *Plane) remember(t *testing.T, fd int, backend, vip netip.AddrPort) {
	t.Helper()
	cookie, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_COOKIE)
	if err != nil {
		t.Fatal(err)
	}
	m, n := p.objs.SockConns, 4
	if vip.Addr().Is6() {
		m, n = p.objs.Sock6Conns, 16
	}
	v := make([]byte, 8+2*n+8)
	binary.NativeEndian.PutUint64(v[0:8], cookie)
	copy(v[8:8+n], backend.Addr().AsSlice())
	copy(v[8+n:8+2*n], vip.Addr().AsSlice())
	binary.BigEndian.PutUint16(v[8+2*n:], backend.Port())
	binary.BigEndian.PutUint16(v[8+2*n+2:], vip.Port())
	if err := m.Put(uint32(cookie&(1<<18-1)), v); err != nil {
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
