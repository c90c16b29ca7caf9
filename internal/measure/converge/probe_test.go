package converge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A change at a known instant (a UDP server starting to answer on
// loopback, where until then the port refused) is seen by the first probe
// sent after it: the transition's send time lies within a probe interval
// of the instant (with the scheduler's slack on a loaded 2-vCPU machine),
// never before it.
func TestProbeResolution(t *testing.T) {
	// Refused until the server below starts. The port is below the
	// probes' source range: a port inside it is, for a moment of the
	// clock, a probe's own source port, and that probe would hold the
	// port the server binds.
	target := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), firstProbePort-24)

	const interval = time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := Probe(ctx, ProbeConfig{Node: "n1", Targets: []netip.AddrPort{target}, Interval: interval, Timeout: 50 * time.Millisecond}, w)
		w.CloseWithError(err)
		done <- err
	}()
	lines := make(chan Transition, 1024)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			var tr Transition
			if json.Unmarshal(sc.Bytes(), &tr) == nil && tr.Event != EventHeld { // changes only
				lines <- tr
			}
		}
		close(lines)
	}()
	first := <-lines
	if first.Answer != Refused || first.Node != "n1" || first.Seq != 1 {
		t.Fatalf("first transition %+v, want probe 1 refused on n1", first)
	}
	time.Sleep(100 * time.Millisecond)
	change := time.Now()
	srv, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(target))
	for errors.Is(err, syscall.EINTR) {
		change = time.Now()
		srv, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(target))
	}
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		buf := make([]byte, 64)
		for {
			_, from, err := srv.ReadFromUDP(buf)
			if err != nil {
				return
			}
			_, _ = srv.WriteToUDP([]byte("srv\n"), from)
		}
	}()
	var seen Transition
	select {
	case seen = <-lines:
	case <-time.After(10 * time.Second):
		t.Fatal("no transition within 10 s of the server starting")
	}
	if seen.Answer != "srv" {
		t.Fatalf("transition %+v, want srv's answer", seen)
	}
	lag := time.Duration(seen.Sent - change.UnixNano())
	t.Logf("change seen by probe %d, %s after it (interval %s)", seen.Seq, lag, interval)
	// The probe sent just before the bind may have been answered: its send
	// time is then at most one interval before the change. Later than an
	// interval is the scheduler's slack on a loaded machine, bounded here.
	if lag < -interval || lag > 50*interval {
		t.Errorf("seen %s after the change: want within the probe interval (%s, with slack)", lag, interval)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Probes run concurrently and may take their send times out of order: a
// transition is never dated before a probe started earlier (which saw the
// old state), so transitions' times follow their sequence.
func TestEmitDatesInOrder(t *testing.T) {
	got := emitted(t, heldRule{after: time.Second, probes: 100}, []probeAt{{0, "a"}, {5, "a"}, {3, "b"}, {4, "b"}, {9, "a"}})
	// Probe 3 saw b, sent at 3 ms, after probe 2 still saw a at 5 ms: b
	// is dated 5 ms.
	if want := "1:a@0 3:b@5 5:a@9"; got != want {
		t.Errorf("transitions %s, want %s", got, want)
	}
}

// An outcome that holds is said again (EventHeld) once it has held for
// the rule's time and probes since the last line: never while answers
// change, and not after a gap in which the prober sent too few probes (a
// starved prober), however long the gap.
func TestEmitHeld(t *testing.T) {
	ps := []probeAt{{0, "a"}, {1, "b"}, {2, "a"}}
	for ms := 30; ms <= 38; ms++ { // after a 28 ms gap: probe 8, the 5th since the last line, is the first held
		ps = append(ps, probeAt{ms, "a"})
	}
	ps = append(ps, probeAt{44, "a"}, probeAt{45, "b"}) // 10 ms and 5 probes after probe 8, then a change
	got := emitted(t, heldRule{after: 10 * time.Millisecond, probes: 5}, ps)
	if want := "1:a@0 2:b@1 3:a@2 8:a@34held 13:a@44held 14:b@45"; got != want {
		t.Errorf("lines %s, want %s", got, want)
	}
}

// probeAt is a crafted probe: its send time (ms) and answer.
type probeAt struct {
	ms     int
	answer string
}

// emitted is what emit writes for probes ps (numbered from 1, in order),
// each line as SEQ:ANSWER@MS and its event.
func emitted(t *testing.T, rule heldRule, ps []probeAt) string {
	t.Helper()
	base := time.Unix(1000, 0)
	probes := make(chan outcome, len(ps))
	for i, p := range ps {
		o := outcome{seq: uint64(i + 1), done: make(chan sent, 1)}
		o.done <- sent{at: base.Add(time.Duration(p.ms) * time.Millisecond), answer: p.answer}
		probes <- o
	}
	close(probes)
	var out bytes.Buffer
	if err := emit(probes, json.NewEncoder(&out), "n1", netip.MustParseAddrPort("10.0.0.1:53"), rule); err != nil {
		t.Fatal(err)
	}
	var got []string
	dec := json.NewDecoder(&out)
	for dec.More() {
		var tr Transition
		if err := dec.Decode(&tr); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d:%s@%d%s", tr.Seq, tr.Answer, time.Duration(tr.Sent-base.UnixNano())/time.Millisecond, tr.Event))
	}
	return strings.Join(got, " ")
}

// A probe's 5-tuple does not come back within conntrack's UDP timeout:
// the probes' source ports, as a server sees them, never repeat within a
// run nor across two runs one after the other (policy converge runs one
// prober per provider on one lab: a second prober that started its cycle
// where the first had, brought the first's flows back at once, accepted
// by conntrack as established after their policy was deleted); the range
// comes back only after ReuseAfter, more than the timeout at the shortest
// interval allowed, and a shorter interval is refused.
func TestProbeFlowsNotReused(t *testing.T) {
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	target := srv.LocalAddr().(*net.UDPAddr).AddrPort()
	ports := make(chan int, 8192)
	go func() {
		buf := make([]byte, 64)
		for {
			_, from, err := srv.ReadFromUDP(buf)
			if err != nil {
				close(ports)
				return
			}
			ports <- from.Port
			_, _ = srv.WriteToUDP([]byte("srv\n"), from)
		}
	}()
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err := Probe(ctx, ProbeConfig{Node: "n1", Targets: []netip.AddrPort{target}, Interval: time.Millisecond, Timeout: 50 * time.Millisecond}, io.Discard)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	srv.Close()
	seen := map[int]bool{}
	n := 0
	for p := range ports {
		if seen[p] {
			t.Fatalf("source port %d used twice in %d probes of two runs", p, n)
		}
		seen[p] = true
		n++
	}
	if n < 40 {
		t.Fatalf("the server saw %d probes in two runs of 300 ms at 1 ms", n)
	}
	if r := ReuseAfter(MinInterval); r <= UDPConntrackTimeout {
		t.Errorf("at the shortest interval a 5-tuple comes back after %s, within conntrack's %s", r, UDPConntrackTimeout)
	}
	err = Probe(context.Background(), ProbeConfig{Node: "n1", Targets: []netip.AddrPort{target}, Interval: MinInterval / 2, Timeout: 50 * time.Millisecond}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "conntrack") {
		t.Errorf("an interval of %s: %v, want refused naming conntrack", MinInterval/2, err)
	}
}

// A probe's port is its slot of the clock (a target's share of the range
// apart from another's), the next one when the clock has not moved on, and
// a port another socket holds is skipped.
func TestPortCycle(t *testing.T) {
	at := time.Unix(1700000000, 0)
	a, b := newPortCycle(0, 2, at), newPortCycle(1, 2, at)
	pa, pb := a.take(at), b.take(at)
	if want := firstProbePort + int((at.UnixNano()/int64(portSlot)+startSlots)%probePorts); pa != want {
		t.Errorf("first port %d, want %d (%d slots past the clock's)", pa, want, startSlots)
	}
	if d := (pb - pa + probePorts) % probePorts; d != probePorts/2 {
		t.Errorf("two targets' ports %d and %d: want half the range apart", pa, pb)
	}
	if p := a.take(at); p != pa+1 && !(pa == lastProbePort && p == firstProbePort) {
		t.Errorf("the clock has not moved: port %d after %d, want the next", p, pa)
	}
	if p := a.take(at.Add((startSlots + 10) * portSlot)); (p-pa+probePorts)%probePorts != 10 {
		t.Errorf("ten slots on: port %d after %d, want 10 on", p, pa)
	}
	c := newPortCycle(0, 1, time.Now())
	c.last = time.Now().Add(time.Hour).UnixNano() / int64(portSlot) // the clock cannot catch up during the test
	next := firstProbePort + int((c.last+1)%probePorts)
	busy, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: next})
	if err != nil {
		t.Skipf("port %d: %v", next, err)
	}
	defer busy.Close()
	conn, err := dialFrom(netip.MustParseAddrPort("127.0.0.1:9"), c)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := conn.LocalAddr().(*net.UDPAddr).Port; got == next || got != firstProbePort+int((c.last)%probePorts) {
		t.Errorf("port %d held by another socket: dialed from %d, want the one after it", next, got)
	}
}
