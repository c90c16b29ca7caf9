package readiness

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"
)

func listenUDP(t *testing.T, addr *net.UDPAddr) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp4", addr)
	for errors.Is(err, syscall.EINTR) {
		c, err = net.ListenUDP("udp4", addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A pod's hello keeps sending while nothing listens (the port refuses),
// stops once answered, and the listener names it once, stamped after the
// listener began reading.
func TestHelloUntilAnswered(t *testing.T) {
	// The listener's own port, below the ephemeral range: a port let go
	// there could come back as a hello socket's own source port, which
	// would then talk to itself and hold the port the listener binds.
	to := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), Port)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hello := make(chan error, 2)
	for range 2 {
		go func() { hello <- Hello(ctx, to, "pod-a", time.Millisecond) }()
	}
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-hello:
		t.Fatalf("hello returned before anything listened: %v", err)
	default:
	}

	conn := listenUDP(t, net.UDPAddrFromAddrPort(to))
	began := time.Now()
	lctx, stop := context.WithCancel(ctx)
	arrivals := make(chan Arrival, 8)
	done := make(chan error, 1)
	go func() { done <- Listen(lctx, conn, func(a Arrival) { arrivals <- a }) }()
	for range 2 {
		if err := <-hello; err != nil {
			t.Fatalf("hello: %v", err)
		}
	}
	a := <-arrivals
	if a.Name != "pod-a" || a.AtNS < began.UnixNano() || a.AtNS > time.Now().UnixNano() {
		t.Fatalf("arrival %+v, want pod-a stamped after %d", a, began.UnixNano())
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("listen: %v", err)
	}
	select {
	case a := <-arrivals:
		t.Fatalf("a name reported twice: %+v", a)
	default:
	}
}

// Hello gives up with ctx's error when never answered, and refuses an
// empty or over-long name before sending.
func TestHelloEnds(t *testing.T) {
	probe := listenUDP(t, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	to := probe.LocalAddr().(*net.UDPAddr).AddrPort()
	defer probe.Close() // reads nothing: never answered
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := Hello(ctx, to, "pod-b", 10*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unanswered hello: %v, want the deadline", err)
	}
	for _, name := range []string{"", string(make([]byte, MaxName+1))} {
		if err := Hello(context.Background(), to, name, time.Millisecond); err == nil {
			t.Errorf("name of %d bytes accepted", len(name))
		}
	}
}
