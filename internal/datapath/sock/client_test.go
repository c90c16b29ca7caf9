package sock

// The test client: this test binary re-executed with VNETLAB_SOCK_CLIENT
// set. It must be a process of its own, because the cgroup programs act on
// the sockets of the processes inside the lab's cgroup, and a process (not
// a thread) is what one starts in a cgroup.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const (
	clientEnv     = "VNETLAB_SOCK_CLIENT" // tcp, udp (unconnected), udp-connected, udp-many, udp-reconnect; tcp6, udp6, udp6-connected
	clientAddrEnv = "VNETLAB_SOCK_ADDR"
)

// clientResult is what the client prints as JSON.
type clientResult struct {
	Pod    string `json:"pod"`              // the server that answered
	SeenAs string `json:"seen_as"`          // the client address the server saw
	From   string `json:"from,omitempty"`   // recvfrom's source (unconnected UDP)
	Peer   string `json:"peer,omitempty"`   // getpeername (connected sockets)
	Cgroup string `json:"cgroup,omitempty"` // the client's cgroup v2 path
	// udp-many: "pod@source" of each answer, in the order of the addresses.
	Answers []string `json:"answers,omitempty"`
	Error   string   `json:"error,omitempty"`
}

func TestMain(m *testing.M) {
	if how := os.Getenv(clientEnv); how != "" {
		r := runClient(how, os.Getenv(clientAddrEnv))
		_ = json.NewEncoder(os.Stdout).Encode(r)
		if r.Error != "" {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runClient(how, addr string) (r clientResult) {
	b, _ := os.ReadFile("/proc/self/cgroup")
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			r.Cgroup = p
		}
	}
	fail := func(err error) clientResult { r.Error = err.Error(); return r }
	answer := func(s string) error {
		f := strings.Fields(s)
		if len(f) != 2 {
			return fmt.Errorf("bad answer %q", s)
		}
		r.Pod, r.SeenAs = f[0], f[1]
		return nil
	}
	switch how {
	case "tcp", "udp-connected":
		network := "tcp4"
		if how == "udp-connected" {
			network = "udp4"
		}
		c, err := net.DialTimeout(network, addr, 2*time.Second)
		if err != nil {
			return fail(err)
		}
		defer c.Close()
		if err := askConnected(c, how == "udp-connected", &r); err != nil {
			return fail(err)
		}
		return r
	case "udp":
		pc, err := net.ListenPacket("udp4", ":0")
		if err != nil {
			return fail(err)
		}
		defer pc.Close()
		to, err := net.ResolveUDPAddr("udp4", addr)
		if err != nil {
			return fail(err)
		}
		buf := make([]byte, 512)
		for try := 0; try < 3; try++ {
			if _, err := pc.WriteTo([]byte("hello\n"), to); err != nil {
				return fail(err)
			}
			_ = pc.SetReadDeadline(time.Now().Add(2 * time.Second))
			n, from, err := pc.ReadFrom(buf) // recvfrom: recvmsg4 restores the clusterIP
			if err != nil {
				continue
			}
			r.From = from.String()
			if err := answer(string(buf[:n])); err != nil {
				return fail(err)
			}
			return r
		}
		return fail(fmt.Errorf("no UDP answer from %s", addr))
	case "tcp6", "udp6-connected":
		if err := connect6(how == "udp6-connected", addr, &r); err != nil {
			return fail(err)
		}
		return r
	case "udp6":
		from, line, err := sendto6(addr)
		if err != nil {
			return fail(err)
		}
		r.From = from
		if err := answer(line); err != nil {
			return fail(err)
		}
		return r
	case "udp-many":
		if err := udpMany(strings.Split(addr, ","), &r); err != nil {
			return fail(err)
		}
		return r
	case "udp-reconnect":
		if err := udpReconnect(strings.Split(addr, ","), &r); err != nil {
			return fail(err)
		}
		return r
	}
	return fail(fmt.Errorf("unknown client %q", how))
}

// udpMany sends from one unconnected UDP socket to each address, twice
// round, and requires every answer to come from the address asked
// (recvfrom: recvmsg4 restores each clusterIP, however many the socket
// talks to).
func udpMany(addrs []string, r *clientResult) error {
	pc, err := net.ListenPacket("udp4", ":0")
	if err != nil {
		return err
	}
	defer pc.Close()
	asked := map[string]bool{}
	for _, a := range addrs {
		asked[a] = true
	}
	buf := make([]byte, 512)
	for round := 0; round < 2; round++ {
		for _, a := range addrs {
			to, err := net.ResolveUDPAddr("udp4", a)
			if err != nil {
				return err
			}
			got := ""
			for try := 0; try < 3 && got == ""; try++ { // the first datagram may wait for ARP
				if _, err := pc.WriteTo([]byte("hello\n"), to); err != nil {
					return err
				}
				deadline := time.Now().Add(time.Second)
				for got == "" {
					_ = pc.SetReadDeadline(deadline)
					n, from, err := pc.ReadFrom(buf)
					if err != nil {
						break // timeout: send again
					}
					if !asked[from.String()] {
						return fmt.Errorf("asked %s, an answer came from %s (no clusterIP)", a, from)
					}
					if from.String() != a {
						continue // late answer to an earlier try
					}
					f := strings.Fields(string(buf[:n]))
					if len(f) != 2 {
						return fmt.Errorf("bad answer %q", buf[:n])
					}
					got = f[0] + "@" + from.String()
				}
			}
			if got == "" {
				return fmt.Errorf("no UDP answer from %s", a)
			}
			if round == 1 {
				r.Answers = append(r.Answers, got)
			}
		}
	}
	return nil
}

// udpReconnect connects one UDP socket to each address in turn and talks
// to the last one: getpeername and the answer follow the new peer.
func udpReconnect(addrs []string, r *clientResult) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), "udp")
	defer f.Close()
	for _, a := range addrs {
		ap, err := netip.ParseAddrPort(a)
		if err != nil {
			return err
		}
		if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}); err != nil {
			return fmt.Errorf("connect %s: %w", a, err)
		}
	}
	c, err := net.FileConn(f)
	if err != nil {
		return err
	}
	defer c.Close()
	return askConnected(c, true, r)
}

// askConnected asks a connected socket's peer who answers: getpeername into
// r.Peer, then "hello" and the answer "<pod> <peer>" into r.Pod, r.SeenAs.
// UDP tries three times (the first datagram may wait for ARP).
func askConnected(c net.Conn, udp bool, r *clientResult) error {
	var err error
	if r.Peer, err = getpeername(c.(syscall.Conn)); err != nil {
		return err
	}
	for try := 0; try < 3; try++ {
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := fmt.Fprintf(c, "hello\n"); err != nil {
			return err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err == nil {
			f := strings.Fields(line)
			if len(f) != 2 {
				return fmt.Errorf("bad answer %q", line)
			}
			r.Pod, r.SeenAs = f[0], f[1]
			return nil
		}
		if !udp {
			return err
		}
	}
	return fmt.Errorf("no answer from %s", c.RemoteAddr())
}

// getpeername asks the kernel (Go's RemoteAddr may be what it dialed).
func getpeername(c syscall.Conn) (string, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return "", err
	}
	var (
		sa   unix.Sockaddr
		gerr error
	)
	if err := rc.Control(func(fd uintptr) { sa, gerr = unix.Getpeername(int(fd)) }); err != nil {
		return "", err
	}
	if gerr != nil {
		return "", gerr
	}
	return sockaddrString(sa)
}

// sockaddrString: 10.96.0.100:5201, [fd00:10:96::100]:5201 or
// [::ffff:10.96.0.100]:5201 (a v4-mapped address stays one).
func sockaddrString(sa unix.Sockaddr) (string, error) {
	switch in := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(in.Addr), uint16(in.Port)).String(), nil
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(in.Addr), uint16(in.Port)).String(), nil
	}
	return "", fmt.Errorf("peer %T", sa)
}

// socket6 is an AF_INET6 socket that also reaches IPv4 through v4-mapped
// addresses (IPV6_V6ONLY off), with 2 s receive and send timeouts. The
// clients use it directly: Go's net refuses to dial a v4-mapped address
// over tcp6/udp6.
func socket6(typ int, addr string) (int, *unix.SockaddrInet6, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return -1, nil, err
	}
	fd, err := unix.Socket(unix.AF_INET6, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, nil, err
	}
	tv := unix.NsecToTimeval((2 * time.Second).Nanoseconds())
	if err = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0); err == nil {
		err = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	}
	if err == nil {
		err = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	}
	if err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	return fd, &unix.SockaddrInet6{Addr: ap.Addr().As16(), Port: int(ap.Port())}, nil
}

// connect6: tcp or connected udp over an IPv6 socket (connect6, getpeername6).
func connect6(udp bool, addr string, r *clientResult) error {
	typ := unix.SOCK_STREAM
	if udp {
		typ = unix.SOCK_DGRAM
	}
	fd, sa, err := socket6(typ, addr)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), "sock6")
	defer f.Close()
	if err := retryEINTR(func() error { return unix.Connect(fd, sa) }); err != nil {
		return fmt.Errorf("connect %s: %w", addr, err)
	}
	c, err := net.FileConn(f)
	if err != nil {
		return err
	}
	defer c.Close()
	return askConnected(c, udp, r)
}

// sendto6: unconnected udp over an IPv6 socket (sendmsg6, recvmsg6): the
// answer's source and text. Three tries (the first datagram may wait for NDP).
func sendto6(addr string) (from, line string, err error) {
	fd, sa, err := socket6(unix.SOCK_DGRAM, addr)
	if err != nil {
		return "", "", err
	}
	defer unix.Close(fd)
	buf := make([]byte, 512)
	for try := 0; try < 3; try++ {
		if err := retryEINTR(func() error { return unix.Sendto(fd, []byte("hello\n"), 0, sa) }); err != nil {
			return "", "", fmt.Errorf("sendto %s: %w", addr, err)
		}
		var (
			n   int
			src unix.Sockaddr
		)
		err := retryEINTR(func() (err error) { n, src, err = unix.Recvfrom(fd, buf, 0); return err })
		if err != nil {
			continue // timeout: send again
		}
		from, err := sockaddrString(src)
		return from, string(buf[:n]), err
	}
	return "", "", fmt.Errorf("no UDP answer from %s", addr)
}

func retryEINTR(f func() error) error {
	for {
		if err := f(); err != unix.EINTR {
			return err
		}
	}
}
