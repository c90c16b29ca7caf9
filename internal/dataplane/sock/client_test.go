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
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const (
	clientEnv     = "VNETLAB_SOCK_CLIENT" // tcp, udp (unconnected), udp-connected
	clientAddrEnv = "VNETLAB_SOCK_ADDR"
)

// clientResult is what the client prints as JSON.
type clientResult struct {
	Pod    string `json:"pod"`              // the server that answered
	SeenAs string `json:"seen_as"`          // the client address the server saw
	From   string `json:"from,omitempty"`   // recvfrom's source (unconnected UDP)
	Peer   string `json:"peer,omitempty"`   // getpeername (connected sockets)
	Cgroup string `json:"cgroup,omitempty"` // the client's cgroup v2 path
	Error  string `json:"error,omitempty"`
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
		if r.Peer, err = getpeername(c.(syscall.Conn)); err != nil {
			return fail(err)
		}
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		for try := 0; try < 3; try++ { // UDP: the first datagram may wait for ARP
			if _, err := fmt.Fprintf(c, "hello\n"); err != nil {
				return fail(err)
			}
			if how == "udp-connected" {
				_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			}
			line, err := bufio.NewReader(c).ReadString('\n')
			if err == nil {
				if err := answer(line); err != nil {
					return fail(err)
				}
				return r
			}
			if how == "tcp" {
				return fail(err)
			}
		}
		return fail(fmt.Errorf("no answer from %s", addr))
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
			_ = pc.SetReadDeadline(time.Now().Add(700 * time.Millisecond))
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
	}
	return fail(fmt.Errorf("unknown client %q", how))
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
	in, ok := sa.(*unix.SockaddrInet4)
	if !ok {
		return "", fmt.Errorf("peer %T", sa)
	}
	return fmt.Sprintf("%s:%d", net.IP(in.Addr[:]), in.Port), nil
}
