package converge

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/results"
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
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := Probe(ctx, ProbeConfig{Node: "n1", Targets: []netip.AddrPort{udp.LocalAddr().(*net.UDPAddr).AddrPort()},
			Keep: ln.Addr().(*net.TCPAddr).AddrPort(), Interval: 10 * time.Millisecond, Timeout: 200 * time.Millisecond}, w)
		w.CloseWithError(err)
		done <- err
	}()
	events := make(chan results.Transition, 64)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			var tr results.Transition
			if json.Unmarshal(sc.Bytes(), &tr) == nil && tr.Event != "" {
				events <- tr
			}
		}
	}()
	next := func() results.Transition {
		select {
		case e := <-events:
			return e
		case <-time.After(10 * time.Second):
			t.Fatal("no kept connection's event within 10 s")
		}
		return results.Transition{}
	}
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
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
