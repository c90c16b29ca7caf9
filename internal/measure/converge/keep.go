package converge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// What a kept connection's Transition says (its Event; Answer is the
// backend it reached).
const (
	EventOpen    = "open"    // a connection to the backend was established through the Service
	EventBroken  = "broken"  // it stopped answering (Detail: reset, timeout, closed)
	EventStalled = "stalled" // a line was answered, but later than the probe timeout (StallUS: when)
)

// breakAfter is how long a kept connection's line may go unanswered before
// the connection is broken ("timeout"). A line answered later than the probe
// timeout but within it stalled the connection (a lost segment's
// retransmission, a busy CPU), which goes on: told apart from a break.
const breakAfter = 3 * time.Second

// Keeping: a connection's line every keepEvery; a new connection tried
// every dialEvery while fewer than keepBackends are held (the measured
// Service has at most two backends).
const (
	keepEvery    = 10 * time.Millisecond
	dialEvery    = 20 * time.Millisecond
	keepBackends = 2
)

// keep holds one connection through c.Keep to each backend it reaches (at
// most keepBackends), sends a line on each every keepEvery and reads the
// backend's answer, and writes a Transition when one opens (its connect
// time), when one stalls (a line answered later than c.Timeout: its send
// time and how long it took) and when one breaks (the send time of the
// first line not answered within breakAfter, or whose answer was an error):
// what a change did to established connections.
func keep(ctx context.Context, c ProbeConfig, out io.Writer) error {
	enc := json.NewEncoder(out)
	var (
		mu   sync.Mutex
		held = map[string]bool{}
		wg   sync.WaitGroup
		werr error
	)
	write := func(tr Transition) {
		tr.Node, tr.Target = c.Node, c.Keep.String()
		mu.Lock()
		defer mu.Unlock()
		if err := enc.Encode(tr); err != nil && werr == nil {
			werr = err
		}
	}
	tick := time.NewTicker(dialEvery)
	defer tick.Stop()
	for ctx.Err() == nil {
		mu.Lock()
		need := len(held) < keepBackends
		mu.Unlock()
		if need {
			if conn, name, at, err := dialKeep(ctx, c); err == nil {
				mu.Lock()
				dup := held[name]
				if !dup {
					held[name] = true
				}
				mu.Unlock()
				if dup {
					conn.Close()
				} else {
					write(Transition{Sent: at.UnixNano(), Answer: name, Event: EventOpen})
					wg.Add(1)
					go func() {
						defer wg.Done()
						at, why := hold(ctx, conn, name, c.Timeout, write)
						if ctx.Err() == nil {
							write(Transition{Sent: at.UnixNano(), Answer: name, Event: EventBroken, Detail: why})
						}
						mu.Lock()
						delete(held, name)
						mu.Unlock()
					}()
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	wg.Wait()
	return werr
}

// dialKeep connects to c.Keep and asks who answers.
func dialKeep(ctx context.Context, c ProbeConfig) (net.Conn, string, time.Time, error) {
	d := net.Dialer{Timeout: c.Timeout}
	at := time.Now()
	conn, err := d.DialContext(ctx, "tcp", c.Keep.String())
	if err != nil {
		return nil, "", at, err
	}
	name, _, err := ask(bufio.NewReader(conn), conn, c.Timeout)
	if err != nil {
		conn.Close()
		return nil, "", at, err
	}
	// The reader is dropped: a whole answer was read, nothing is buffered.
	return conn, name, at, nil
}

// ask sends a line and reads the answer's first word, waiting up to limit;
// took is how long the answer took.
func ask(r *bufio.Reader, conn net.Conn, limit time.Duration) (name string, took time.Duration, err error) {
	at := time.Now()
	_ = conn.SetDeadline(at.Add(limit))
	if _, err := conn.Write([]byte("?\n")); err != nil {
		return "", 0, err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return "", time.Since(at), err
	}
	return answerOf([]byte(line), nil), time.Since(at), nil
}

// hold asks on conn every keepEvery until an answer fails (within
// breakAfter) or is not name's (then the send time of that line and why) or
// ctx ends. A line answered later than timeout is reported as a stall.
func hold(ctx context.Context, conn net.Conn, name string, timeout time.Duration, report func(Transition)) (time.Time, string) {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	r := bufio.NewReader(conn)
	tick := time.NewTicker(keepEvery)
	defer tick.Stop()
	for {
		at := time.Now()
		got, took, err := ask(r, conn, breakAfter)
		switch {
		case ctx.Err() != nil:
			return time.Now(), "ended"
		case err != nil:
			return at, why(err)
		case got != name:
			return at, "answered by " + got
		case took > timeout:
			report(Transition{Sent: at.UnixNano(), Answer: name, Event: EventStalled, StallUS: took.Microseconds()})
		}
		select {
		case <-ctx.Done():
			return time.Now(), "ended"
		case <-tick.C:
		}
	}
}

// why names a broken connection's error.
func why(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNRESET):
		return "reset"
	case errors.Is(err, io.EOF):
		return "closed"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return err.Error()
}

// ServeKeep answers every line on every connection ln accepts with name
// (vnetlab whoami --tcp-keep: the backend of kept connections), until ln
// is closed.
func ServeKeep(ln net.Listener, name string) error {
	msg := []byte(name + "\n")
	for {
		conn, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer conn.Close()
			r := bufio.NewReader(conn)
			for {
				if _, err := r.ReadString('\n'); err != nil {
					return
				}
				if _, err := conn.Write(msg); err != nil {
					return
				}
			}
		}()
	}
}
