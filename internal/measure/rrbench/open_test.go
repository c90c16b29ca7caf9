package rrbench

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/results"
)

// serverEnv makes the test binary an rr server (TestMain): a process of its
// own, which a test can stop (SIGSTOP) as a stalled server.
const serverEnv = "RRBENCH_TEST_SERVER"

func TestMain(m *testing.M) {
	if flows := os.Getenv(serverEnv); flows != "" {
		n, _ := strconv.Atoi(flows)
		srv, err := Listen(ServerConfig{Proto: "tcp", Addr: "127.0.0.1:0", Size: 1, Flows: n, Open: true})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("port %d\n", srv.Port())
		_ = srv.Serve() // until the test kills it
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serverProcess starts the test binary as a TCP rr server serving flows
// at once, in the caller's thread's network namespace (a child inherits
// the namespace of the thread that forks it); it is killed at cleanup.
func serverProcess(t *testing.T, flows int) (addr string, pid int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serverEnv+"="+strconv.Itoa(flows))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT) // a stopped process dies only once continued
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	port, ok := strings.CutPrefix(strings.TrimSpace(line), "port ")
	if err != nil || !ok {
		t.Fatalf("server process said %q (%v)", line, err)
	}
	return "127.0.0.1:" + port, cmd.Process.Pid
}

// stallAfter stops process pid for about d, after wait; it returns how
// long it was stopped, on its channel.
func stallAfter(pid int, wait, d time.Duration) <-chan time.Duration {
	got := make(chan time.Duration, 1)
	go func() {
		time.Sleep(wait)
		t0 := time.Now()
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			got <- 0
			return
		}
		time.Sleep(d)
		_ = syscall.Kill(pid, syscall.SIGCONT)
		got <- time.Since(t0)
	}()
	return got
}

// atLeast counts h's values of at least v (by bucket: exact to 1/128).
func atLeast(h *Histogram, v time.Duration) uint64 {
	var n uint64
	for i, c := range h.counts {
		if lo, _ := bucketRange(i); lo >= uint64(v) {
			n += c
		}
	}
	return n
}

const (
	stallRate = 2000 // requests/s: 2 flows
	stallRun  = 3 * time.Second
	stall     = 100 * time.Millisecond
	slow      = 10 * time.Millisecond // a sample this slow was held up by the stall
)

// runStalled measures tcp_rr against a server process for stallRun,
// stopping the server once for about stall after a second when stalled,
// open-loop at stallRate when open, else closed-loop; it returns the
// histogram, the report and the stall's real length.
func runStalled(t *testing.T, open, stalled bool) (*Histogram, *Report, time.Duration) {
	t.Helper()
	addr, pid := serverProcess(t, OpenFlows(stallRate, 0))
	cfg := ClientConfig{Proto: "tcp", Mode: "rr", Addr: addr, Size: 1, Duration: stallRun}
	if open {
		cfg.Rate = stallRate
	}
	if err := cfg.check(); err != nil {
		t.Fatal(err)
	}
	sa, family, err := sockaddr(addr, false)
	if err != nil {
		t.Fatal(err)
	}
	var stopped <-chan time.Duration
	if stalled {
		stopped = stallAfter(pid, time.Second, stall)
	}
	var h *Histogram
	var rep *Report
	if open {
		h, rep, _, err = runOpen(cfg, sa, family)
	} else {
		h, rep = new(Histogram), &Report{}
		_, err = runTCP(cfg, sa, family, h, rep)
	}
	if err != nil {
		t.Fatal(err)
	}
	var d time.Duration
	if stalled {
		if d = <-stopped; d < stall {
			t.Fatalf("the server was not stopped (%s)", d)
		}
	}
	return h, rep, d
}

// A stalled server: the open loop records every request scheduled during
// the stall as waiting for the rest of it (measured from its intended
// send time); the closed loop stops asking and records one slow sample.
func TestOpenLoopMeasuresFromIntendedTime(t *testing.T) {
	inScratch(t, func() {
		p99 := func(h *Histogram) time.Duration { return time.Duration(h.Percentile(99)) }
		// The calm run is the reference the stall is judged against: on a
		// busy shared machine one calm run's own p99 can reach tens of ms
		// (load 6-7 here), so the calmest of up to three stands for it.
		calm, _, _ := runStalled(t, true, false)
		for try := 1; try < 3 && p99(calm) >= slow/2; try++ {
			if again, _, _ := runStalled(t, true, false); p99(again) < p99(calm) {
				calm = again
			}
		}
		open, rep, d := runStalled(t, true, true)
		closedCalm, _, _ := runStalled(t, false, false)
		closed, _, dc := runStalled(t, false, true)
		t.Logf("open loop %d/s: p99 %s calm, %s with a %s stall (%d samples >= %s of %d); closed loop: p99 %s calm, %s with a %s stall (%d samples >= %s of %d)",
			stallRate, p99(calm), p99(open), d.Round(time.Millisecond), atLeast(open, slow), slow, open.Count(),
			p99(closedCalm), p99(closed), dc.Round(time.Millisecond), atLeast(closed, slow), slow, closed.Count())

		// Requests scheduled in the stall's first d-slow waited slow or
		// more: R·(d - slow) of them. Those sent in the catch-up after it
		// wait for the backlog ahead of them too, so more may: up to 3x
		// (measured here on a busy machine: 1.0-1.7x).
		want := float64(stallRate) * (d - slow).Seconds()
		if n := float64(atLeast(open, slow)); n < 0.8*want || n > 3*want {
			t.Errorf("open loop: %.0f samples >= %s, want %.0f to %.0f (rate %d/s x (stall %s - %s), up to 3x with the catch-up)", n, slow, 0.8*want, 3*want, stallRate, d, slow)
		}
		if got := p99(open); got < d/4 || got < 10*p99(calm) {
			t.Errorf("open loop p99 %s with a %s stall: want >= %s and >= 10x the calm run's %s", got, d, d/4, p99(calm))
		}
		// One of them is the stall's (a busy shared machine adds a few
		// of its own), against the open loop's hundreds.
		if n := atLeast(closed, slow); n == 0 || 5*n > atLeast(open, slow) {
			t.Errorf("closed loop: %d samples >= %s with one stall, want 1 and far fewer than the open loop's %d (it stops asking while stalled)", n, slow, atLeast(open, slow))
		}
		if got := p99(closed); got >= slow {
			t.Errorf("closed loop p99 %s: the one stalled sample should not reach p99", got)
		}

		// The schedule: the backlog was sent late, then caught up.
		o := rep.Open
		if o == nil || o.Offered != stallRate || o.Flows != 2 {
			t.Fatalf("open loop report %+v: want offered %d over 2 flows", o, stallRate)
		}
		// The backlog is sent once the server wakes; a busy machine may
		// still leave the last few of the run unsent (at most 1%).
		if wantN := uint64(stallRate * stallRun.Seconds()); o.Scheduled != wantN || float64(o.Sent) < 0.99*float64(wantN) || o.Sent > wantN {
			t.Errorf("scheduled %d, sent %d: want %d scheduled and at least 99%% sent (the backlog sent once the server woke)", o.Scheduled, o.Sent, wantN)
		}
		if lateWant := 0.6 * float64(stallRate) * (d - LateAfter).Seconds(); float64(o.Late) < lateWant || !o.Behind {
			t.Errorf("late %d, behind %v: want >= %.0f late and behind (the stall's backlog)", o.Late, o.Behind, lateWant)
		}
		if lag := time.Duration(o.MaxLagUs * 1e3); lag < d/2 || lag > 2*d {
			t.Errorf("largest lag %s, want about the stall's %s", lag, d)
		}
		if got := float64(open.Count()) / stallRun.Seconds(); got < 0.99*stallRate || got > 1.01*stallRate {
			t.Errorf("answered %.0f/s, want the offered %d/s within 1%%", got, stallRate)
		}
	})
}

// Each test open-loop on loopback: every scheduled request is sent and
// answered, the achieved rate is the offered one within 1%, and the
// report says both.
func TestOpenLoopKeepsItsSchedule(t *testing.T) {
	const rate = 3000
	inScratch(t, func() {
		for _, c := range []struct{ proto, mode string }{{"tcp", "rr"}, {"udp", "rr"}, {"tcp", "crr"}} {
			srv, err := Listen(ServerConfig{Proto: c.proto, Addr: "127.0.0.1:0", Size: 64, Flows: OpenFlows(rate, 0), Open: true})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- srv.Serve() }()
			rep, err := Run(ClientConfig{Proto: c.proto, Mode: c.mode, Addr: "127.0.0.1:" + strconv.Itoa(srv.Port()),
				Size: 64, Duration: 2 * time.Second, Rate: rate})
			srv.Close()
			if serr := <-done; serr != nil {
				t.Errorf("Serve: %v", serr)
			}
			if err != nil {
				t.Fatalf("%s_%s: %v", c.proto, c.mode, err)
			}
			t.Logf("%s", rep.Text())
			o := rep.Open
			if o == nil || o.Offered != rate || o.Flows != 3 || rep.Flows != 3 {
				t.Fatalf("%s_%s: open loop %+v, flows %d: want offered %d over 3 flows", c.proto, c.mode, o, rep.Flows, rate)
			}
			// Every request is scheduled; on a machine busy with other
			// tests a flow may end a few behind (a 17 ms lag seen in CI
			// left 1 of 6000 unsent), and the report must then say so.
			if o.Scheduled != 2*rate || float64(o.Sent) < 0.99*float64(o.Scheduled) || o.Sent > o.Scheduled {
				t.Errorf("%s_%s: scheduled %d, sent %d: want %d scheduled and at least 99%% of them sent", c.proto, c.mode, o.Scheduled, o.Sent, 2*rate)
			}
			if o.Sent < o.Scheduled && (!o.Behind || !strings.Contains(rep.Text(), "BEHIND")) {
				t.Errorf("%s_%s: %d of %d scheduled left unsent, but the report does not say it fell behind:\n%s", c.proto, c.mode, o.Scheduled-o.Sent, o.Scheduled, rep.Text())
			}
			if rep.Rate < 0.99*rate || rep.Rate > 1.01*rate || rep.Transactions+rep.Lost+rep.Errors != o.Sent {
				t.Errorf("%s_%s: achieved %.1f/s (%d answered, %d lost, %d errors of %d sent): want %d/s within 1%%",
					c.proto, c.mode, rep.Rate, rep.Transactions, rep.Lost, rep.Errors, o.Sent, rate)
			}
			if !strings.Contains(rep.Text(), fmt.Sprintf("offered %d/s over 3 flows, achieved", rate)) {
				t.Errorf("%s_%s: the text does not say offered against achieved:\n%s", c.proto, c.mode, rep.Text())
			}
			checkOrdered(t, rep.Latency, rep.LatencySamples)
		}
	})
}

func TestOpenFlowsAndRates(t *testing.T) {
	for _, c := range []struct {
		rate    float64
		streams int
		want    int
	}{{1, 0, 1}, {999, 0, 1}, {1000, 0, 1}, {1001, 0, 2}, {20000, 0, 20}, {20000, 64, 64}, {MaxRate, 0, 50}, {3, 8, 3}} {
		if got := OpenFlows(c.rate, c.streams); got != c.want {
			t.Errorf("OpenFlows(%g, %d) = %d, want %d", c.rate, c.streams, got, c.want)
		}
	}
	for _, r := range []float64{0, -5, 0.5, MaxRate + 1} {
		if err := CheckRate(r); err == nil {
			t.Errorf("CheckRate(%g) accepted", r)
		}
	}
	if err := CheckRate(MaxRate); err != nil {
		t.Errorf("CheckRate(MaxRate): %v", err)
	}
}

// A quantile needs 10 samples beyond it: the summary leaves out p99.9
// under 10^4 samples (and says so in its text), p99 under 10^3.
func TestSummaryTooFewSamples(t *testing.T) {
	var mins []int
	for _, q := range results.LatencyQuantiles {
		mins = append(mins, q.MinSamples())
	}
	if fmt.Sprint(mins) != "[20 100 1000 10000]" {
		t.Fatalf("MinSamples of p50, p90, p99, p99.9: %v", mins)
	}
	var h Histogram
	for i := range 9999 {
		h.Record(time.Duration(i+1) * time.Microsecond)
	}
	s := h.Summary()
	if _, ok := s["p99.9"]; ok || s["p99"] == 0 || s["max"] != 9999 {
		t.Errorf("9999 samples: %v, want p99 and max but no p99.9", s)
	}
	h.Record(time.Millisecond)
	if s := h.Summary(); s["p99.9"] == 0 {
		t.Errorf("10^4 samples: %v, want a p99.9", s)
	}
	rep := Report{Proto: "tcp", Mode: "rr", Latency: map[string]float64{"p50": 1, "p99": 2}, LatencySamples: 4000}
	if txt := rep.Text(); !strings.Contains(txt, "p99.9 too few samples (4000 < 10000)") || !strings.Contains(txt, "(4000 samples)") {
		t.Errorf("text: %s", txt)
	}
}
