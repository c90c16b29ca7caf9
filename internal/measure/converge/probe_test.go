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
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/results"
)

// A change at a known instant (a UDP server starting to answer on
// loopback, where until then the port refused) is seen by the first probe
// sent after it: the transition's send time lies within a probe interval
// of the instant (with the scheduler's slack on a loaded 2-vCPU machine),
// never before it.
func TestProbeResolution(t *testing.T) {
	ln, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	target := ln.LocalAddr().(*net.UDPAddr).AddrPort()
	ln.Close() // refused until the server below starts

	const interval = time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := Probe(ctx, ProbeConfig{Node: "n1", Targets: []netip.AddrPort{netip.AddrPortFrom(target.Addr(), target.Port())}, Interval: interval, Timeout: 50 * time.Millisecond}, w)
		w.CloseWithError(err)
		done <- err
	}()
	lines := make(chan results.Transition, 1024)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			var tr results.Transition
			if json.Unmarshal(sc.Bytes(), &tr) == nil {
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
	var seen results.Transition
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
	base := time.Unix(1000, 0)
	probes := make(chan outcome, 8)
	for i, p := range []struct {
		ms     int
		answer string
	}{{0, "a"}, {5, "a"}, {3, "b"}, {4, "b"}, {9, "a"}} {
		o := outcome{seq: uint64(i + 1), done: make(chan sent, 1)}
		o.done <- sent{at: base.Add(time.Duration(p.ms) * time.Millisecond), answer: p.answer}
		probes <- o
	}
	close(probes)
	var out bytes.Buffer
	if err := emit(probes, json.NewEncoder(&out), "n1", netip.MustParseAddrPort("10.0.0.1:53")); err != nil {
		t.Fatal(err)
	}
	var got []string
	dec := json.NewDecoder(&out)
	for dec.More() {
		var tr results.Transition
		if err := dec.Decode(&tr); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d:%s@%d", tr.Seq, tr.Answer, time.Duration(tr.Sent-base.UnixNano())/time.Millisecond))
	}
	// Probe 3 saw b, sent at 3 ms, after probe 2 still saw a at 5 ms: b
	// is dated 5 ms.
	if want := "1:a@0 3:b@5 5:a@9"; strings.Join(got, " ") != want {
		t.Errorf("transitions %v, want %s", got, want)
	}
}

// Every probe is a flow of its own whose 5-tuple does not come back
// within conntrack's UDP timeout: the probes' source ports, as a server
// sees them, follow the cycle (each the one after the last, skipping one
// in use) and never repeat within a run; the cycle comes back only after
// ReuseAfter, more than the timeout at the shortest interval allowed, and
// a shorter interval is refused. The kernel's own choice of port (random,
// in its 28,232-port ephemeral range) repeated within seconds at 2,000
// probes a second, and a stale conntrack entry then decided probes.
func TestProbeFlowsNotReused(t *testing.T) {
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	// A port of the cycle held by another socket is skipped.
	busy, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: firstProbePort + 3})
	if err == nil {
		defer busy.Close()
	}
	target := srv.LocalAddr().(*net.UDPAddr).AddrPort()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	ports := make(chan int, 4096)
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
	if err := Probe(ctx, ProbeConfig{Node: "n1", Targets: []netip.AddrPort{target}, Interval: time.Millisecond, Timeout: 50 * time.Millisecond}, io.Discard); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	seen := map[int]bool{}
	var got []int
	for p := range ports {
		if seen[p] {
			t.Fatalf("source port %d used twice in %d probes", p, len(got))
		}
		seen[p] = true
		got = append(got, p)
	}
	if len(got) < 20 {
		t.Fatalf("the server saw %d probes in 300 ms at 1 ms", len(got))
	}
	slices.Sort(got)
	if got[0] != firstProbePort {
		t.Errorf("first source port %d, want %d (the cycle's first)", got[0], firstProbePort)
	}
	if busy != nil && seen[firstProbePort+3] {
		t.Errorf("port %d, held by another socket, was used", firstProbePort+3)
	}
	if r := ReuseAfter(MinInterval); r <= UDPConntrackTimeout {
		t.Errorf("at the shortest interval a 5-tuple comes back after %s, within conntrack's %s", r, UDPConntrackTimeout)
	}
	err = Probe(context.Background(), ProbeConfig{Node: "n1", Targets: []netip.AddrPort{target}, Interval: MinInterval / 2, Timeout: 50 * time.Millisecond}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "conntrack") {
		t.Errorf("an interval of %s: %v, want refused naming conntrack", MinInterval/2, err)
	}
}
