package converge

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recording is a listener that keeps what it accepted, so that the test
// can break a kept connection at a known instant.
type recording struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (r *recording) Accept() (net.Conn, error) {
	c, err := r.Listener.Accept()
	if err == nil {
		r.mu.Lock()
		r.conns = append(r.conns, c)
		r.mu.Unlock()
	}
	return c, err
}

// A kept connection to a backend (ServeKeep) is reported open with the
// backend's name; closed by the backend at a known instant, it is reported
// broken by the first line after it: within a keeping period of the
// instant (with the scheduler's slack), never before it.
func TestKeepReportsABrokenConnection(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recording{Listener: ln}
	go func() { _ = ServeKeep(rec, "srv") }()
	defer ln.Close()
	_, next, stop := keepEvents(t, ln.Addr().(*net.TCPAddr).AddrPort())
	defer stop()
	if e := next(); e.Event != EventOpen || e.Answer != "srv" || e.Node != "n1" {
		t.Fatalf("first event %+v, want srv's connection open on n1", e)
	}
	time.Sleep(100 * time.Millisecond)
	rec.mu.Lock()
	broke := time.Now()
	for _, c := range rec.conns {
		c.Close()
	}
	rec.mu.Unlock()
	e := next()
	if e.Event != EventBroken || e.Answer != "srv" {
		t.Fatalf("event %+v, want srv's connection broken", e)
	}
	lag := time.Duration(e.Sent - broke.UnixNano())
	t.Logf("broken (%s) %s after the close", e.Detail, lag)
	// The line sent just before the close may be the one that failed (its
	// answer lost): at most one keeping period earlier. Later than a few
	// periods is the scheduler's slack on a loaded machine, bounded here.
	if lag < -keepEvery || lag > 50*keepEvery {
		t.Errorf("broken %s after the close: want within %s (with slack)", lag, keepEvery)
	}
}

// keepEvents runs a prober (one UDP target of its own, no answers) whose
// kept connections go to keep, and hands out its connections' events; stop
// ends it, failing the test if it failed.
func keepEvents(t *testing.T, keep netip.AddrPort) (events chan Transition, next func() Transition, stop func()) {
	t.Helper()
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := Probe(ctx, ProbeConfig{Node: "n1", Targets: []netip.AddrPort{udp.LocalAddr().(*net.UDPAddr).AddrPort()},
			Keep: keep, Interval: 10 * time.Millisecond, Timeout: 100 * time.Millisecond}, w)
		w.CloseWithError(err)
		done <- err
	}()
	events = make(chan Transition, 64)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			var tr Transition
			// held lines are the UDP target's: this test reads the connections'
			if json.Unmarshal(sc.Bytes(), &tr) == nil && tr.Event != "" && tr.Event != EventHeld {
				events <- tr
			}
		}
	}()
	next = func() Transition {
		t.Helper()
		select {
		case e := <-events:
			return e
		case <-time.After(10 * time.Second):
			t.Fatal("no kept connection's event within 10 s")
		}
		return Transition{}
	}
	stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		udp.Close()
	}
	return events, next, stop
}

// A kept connection whose backend answers one line 300 ms late (beyond the
// 100 ms probe timeout, within breakAfter) stalled: reported as such with
// how long the answer took, and it goes on, neither broken nor dialled again.
func TestKeepReportsAStall(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const late = 300 * time.Millisecond
	var (
		slow     atomic.Bool
		accepted atomic.Int32
	)
	go func() { _ = ServeKeep(lateListener{ln, &slow, late, &accepted}, "srv") }()
	events, next, stop := keepEvents(t, ln.Addr().(*net.TCPAddr).AddrPort())
	defer stop()
	if e := next(); e.Event != EventOpen || e.Answer != "srv" {
		t.Fatalf("first event %+v, want srv's connection open", e)
	}
	time.Sleep(50 * time.Millisecond)
	slow.Store(true)
	e := next()
	if e.Event != EventStalled || e.Answer != "srv" {
		t.Fatalf("event %+v, want srv's connection stalled", e)
	}
	if took := time.Duration(e.StallUS) * time.Microsecond; took < late || took > late+2*time.Second {
		t.Errorf("the stalled line's answer took %s, want %s or a little more", took, late)
	}
	select {
	case e := <-events:
		t.Errorf("after the stall: %+v, want the connection held with no event", e)
	case <-time.After(time.Second):
	}
}

// lateListener's first connection (the one the prober holds) writes its
// next answer late by d once slow is set (clearing it). Later connections
// are the prober's dials for a second backend (this one answering again,
// closed at once): never late, so the late answer is the held one's.
type lateListener struct {
	net.Listener
	slow     *atomic.Bool
	d        time.Duration
	accepted *atomic.Int32
}

func (l lateListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil || l.accepted.Add(1) > 1 {
		return c, err
	}
	return lateConn{c, l}, nil
}

type lateConn struct {
	net.Conn
	l lateListener
}

func (c lateConn) Write(b []byte) (int, error) {
	if c.l.slow.CompareAndSwap(true, false) {
		time.Sleep(c.l.d)
	}
	return c.Conn.Write(b)
}
