// Package converge measures network programming latency: how
// long a change written through the API takes to reach the packets of every
// node. Probers in a pod on each node (Probe, run as `vnetlab kube probe`)
// send a UDP probe to a Service every interval from a fresh socket and
// print each change of what answers (Transition); the driver (Cycle) writes
// changes through the API, timestamped at the write, and Pair pairs each
// with the first probe, per node, whose answer shows it. What a run
// measured is a Run, in this package's types; internal/runner files it.
package converge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// What a probe saw, besides the name of the backend that answered.
const (
	Silent  = ""        // no answer within the probe's timeout
	Refused = "refused" // an ICMP port unreachable: ECONNREFUSED (a Service without endpoints, REJECT)
)

// EventHeld marks a prober's line that reports no change: its target's
// answer has held, unchanged, for at least Settle of the probes' send time
// and at least half the probes sent in that time (heldRule), since the
// target's last line. It is the evidence the driver waits for after a
// backend's removal or a Service's deletion (Seen.shownEverywhere): a
// prober starved of CPU sends nothing, and time passing without an answer
// from the removed backend, or the deleted Service, proves nothing then. Seen keeps only each target's latest held line, not
// among a run's transitions. A target whose answer keeps changing (two
// backends answering in turn) has none.
const EventHeld = "held"

// Settle is how long after a removed backend's last answer a probe
// answered by another backend (after a deleted Service's, a probe not
// answered) must have been sent before the change counts as done, for probes that time out after timeout: twice that, as
// an answer still in flight may come up to a timeout late.
func Settle(timeout time.Duration) time.Duration { return 2 * timeout }

// heldRule is when a prober writes a held line: after this much send time
// and this many probes since its target's last line.
type heldRule struct {
	after  time.Duration
	probes uint64
}

// heldRuleOf is c's: Settle of its timeout, and half the probes sent at
// its interval in that time (at least one).
func heldRuleOf(c ProbeConfig) heldRule {
	after := Settle(c.Timeout)
	return heldRule{after: after, probes: max(1, uint64(after/c.Interval/2))}
}

// ProbeConfig is one prober.
type ProbeConfig struct {
	Node     string           // named in every Transition
	Targets  []netip.AddrPort // UDP Service ports whose backends say who they are (vnetlab whoami --udp), each probed every Interval
	Interval time.Duration    // between probes' sends
	Timeout  time.Duration    // a probe unanswered for this long was Silent
	// Keep, when valid, is a TCP Service port whose backends answer every
	// line on a connection (vnetlab whoami --tcp-keep): the prober holds a
	// connection to each backend it reaches there and reports when one
	// opens and when it breaks (Keep).
	Keep netip.AddrPort
}

// Probe probes every target of c (and keeps connections to c.Keep) until
// ctx ends, writing their lines to out.
func Probe(ctx context.Context, c ProbeConfig, out io.Writer) error {
	if c.Interval <= 0 || c.Timeout <= 0 || len(c.Targets) == 0 {
		return fmt.Errorf("probe interval %s, timeout %s and %d targets: all must be positive", c.Interval, c.Timeout, len(c.Targets))
	}
	if c.Interval < MinInterval {
		return fmt.Errorf("probe interval %s: use %s or more (a probe's source port comes back after %s, within conntrack's %s UDP timeout)", c.Interval, MinInterval, ReuseAfter(c.Interval), UDPConntrackTimeout)
	}
	w := &lockedWriter{w: out}
	errs := make(chan error, len(c.Targets)+1)
	for k, t := range c.Targets {
		go func() { errs <- probeTarget(ctx, c, t, newPortCycle(k, len(c.Targets), time.Now()), w) }()
	}
	n := len(c.Targets)
	if c.Keep.IsValid() {
		n++
		go func() { errs <- keep(ctx, c, w) }()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// lockedWriter writes whole lines from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// Probes' source ports: a probe's port is the slot of the clock it is sent
// in (slots of portSlot, counted from the Unix epoch, taken modulo the
// range; a target's ports shifted by its share of the range, so that two
// targets' sockets do not contend for one port), or the slot after its
// target's last when the clock has not moved on. A flow's 5-tuple thus
// comes back only after the whole range, ReuseAfter, never within
// conntrack's UDP timeout, also across probers: a prober started seconds
// after another (policy converge with one provider after another, on one
// lab) begins where the clock is, past every port the earlier one used.
// An entry an earlier probe left (translated to a backend that has left,
// or accepted as established by a policy since deleted) would otherwise
// decide a probe's path whatever the rules now say. The kernel's own
// choice (its ephemeral range, 28,232 ports by default, picked at random)
// brought a port back within seconds at 2,000 probes a second; a cycle
// starting at the range's first port at every start brought the previous
// prober's ports back at once.
const (
	firstProbePort = 1024
	lastProbePort  = 65535
	probePorts     = lastProbePort - firstProbePort + 1
	portSlot       = MinInterval
	// UDPConntrackTimeout is the kernel's nf_conntrack_udp_timeout (its
	// default: an entry of a flow that never became a stream); kube-proxy
	// leaves it as it is.
	UDPConntrackTimeout = 30 * time.Second
)

// ReuseAfter is how long a probe's 5-tuple is not used again when probes
// are sent every interval: the range's slots of the clock, or less for a
// prober faster than a slot (it runs ahead of the clock, a port a probe).
func ReuseAfter(interval time.Duration) time.Duration {
	return probePorts * min(interval, portSlot)
}

// portCycle hands out a target's source ports: offset is its shift in the
// range, last the last slot taken.
type portCycle struct{ offset, last int64 }

// startSlots: a prober's first port is this many slots past the clock's,
// past the last ports of a prober that ended a moment before (it may have
// run a few slots ahead of the clock, taking the next when two probes
// fell in one slot).
const startSlots = 16

// newPortCycle is the cycle of target k of n, started at now.
func newPortCycle(k, n int, now time.Time) *portCycle {
	return &portCycle{offset: int64(k) * probePorts / int64(max(n, 1)), last: now.UnixNano()/int64(portSlot) + startSlots - 1}
}

func (p *portCycle) take(now time.Time) int {
	s := max(now.UnixNano()/int64(portSlot), p.last+1)
	p.last = s
	return firstProbePort + int((s+p.offset)%probePorts)
}

// probeTarget sends a probe every c.Interval until ctx ends, each from a socket
// of its own on the port ports gives (a new flow: no conntrack or affinity
// entry of an earlier probe decides its path), and writes a Transition to out whenever a probe's
// outcome differs from the probe before it, in send order (a
// Transition: the send time of the first probe that saw Answer,
// Unix ns on the prober's clock); the first probe's outcome is the first
// line, and an outcome that holds long enough is said again (EventHeld).
// A probe the kernel refused to send (no route:
// the Service's address is unknown) counts as Silent.
func probeTarget(ctx context.Context, c ProbeConfig, target netip.AddrPort, ports *portCycle, out io.Writer) error {
	enc := json.NewEncoder(out)
	probes := make(chan outcome, int(c.Timeout/c.Interval)+16)
	var wg sync.WaitGroup
	emitted := make(chan error, 1)
	go func() { emitted <- emit(probes, enc, c.Node, target, heldRuleOf(c)) }()
	tick := time.NewTicker(c.Interval)
	defer tick.Stop()
	var seq uint64
	for ctx.Err() == nil {
		seq++
		o := outcome{seq: seq, done: make(chan sent, 1)}
		probes <- o
		// The socket is made here, in turn (its port the cycle's next);
		// the datagram and its answer on a goroutine of its own.
		conn, err := dialFrom(target, ports)
		wg.Add(1)
		go func() { defer wg.Done(); o.done <- probeOnce(conn, err, c.Timeout) }()
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	wg.Wait()
	close(probes)
	return <-emitted
}

// outcome is one probe in flight: its send time and answer arrive on done.
type outcome struct {
	seq  uint64
	done chan sent
}

// sent is a probe's send time (taken just before its datagram left) and
// what answered.
type sent struct {
	at     time.Time
	answer string
}

// emit writes the transitions of the probes, taken in the order they were
// started, and a held line (EventHeld) whenever an outcome has held as
// long as hold says since the last line. Each probe runs on a goroutine of
// its own, so a probe may take its send time a moment after the next one:
// a line's time is never earlier than that of any probe started before it
// (a later probe that already saw the new state is dated when the earlier
// one, which still saw the old, was sent), so the lines' times follow
// their order.
func emit(probes <-chan outcome, enc *json.Encoder, node string, target netip.AddrPort, hold heldRule) error {
	last, first := "", true
	var latest, lastLine time.Time
	var lastSeq uint64
	name := target.String()
	for o := range probes {
		s := <-o.done
		if s.at.After(latest) {
			latest = s.at
		}
		event := ""
		switch {
		case first || s.answer != last:
			first, last = false, s.answer
		case latest.Sub(lastLine) >= hold.after && o.seq-lastSeq >= hold.probes:
			event = EventHeld
		default:
			continue
		}
		lastLine, lastSeq = latest, o.seq
		if err := enc.Encode(Transition{Node: node, Target: name, Sent: latest.UnixNano(), Seq: o.seq, Answer: s.answer, Event: event}); err != nil {
			return err
		}
	}
	return nil
}

// probeOnce sends one datagram on c, a new socket connected to the target
// (dialFrom; err its error), and returns when it was sent and the answer's
// first word (the backend's name), Refused or Silent.
func probeOnce(c *net.UDPConn, err error, timeout time.Duration) sent {
	if err != nil {
		return sent{at: time.Now(), answer: Silent}
	}
	defer c.Close()
	at := time.Now()
	_ = c.SetDeadline(at.Add(timeout))
	if _, err := c.Write([]byte("?")); err != nil {
		return sent{at: at, answer: answerOf(nil, err)}
	}
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	return sent{at: at, answer: answerOf(buf[:n], err)}
}

// dialFrom connects a UDP socket to target from the port the cycle gives
// now, or the next free one (a port another socket holds is skipped). A
// cycle is one target's, used by one goroutine.
func dialFrom(target netip.AddrPort, ports *portCycle) (*net.UDPConn, error) {
	var err error
	for range 64 {
		var c *net.UDPConn
		c, err = net.DialUDP("udp", &net.UDPAddr{Port: ports.take(time.Now())}, net.UDPAddrFromAddrPort(target))
		if !errors.Is(err, syscall.EADDRINUSE) {
			return c, err
		}
	}
	return nil, err
}

// answerOf names a probe's outcome from its reply or error.
func answerOf(reply []byte, err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return Refused
	case err != nil:
		return Silent
	}
	for i, b := range reply {
		if b == '\n' || b == ' ' {
			return string(reply[:i])
		}
	}
	return string(reply)
}
