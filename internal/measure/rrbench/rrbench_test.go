package rrbench

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

func TestHistogramPercentiles(t *testing.T) {
	var h Histogram
	for i := 1; i <= 10000; i++ { // 1 us .. 10 ms
		h.Record(time.Duration(i) * time.Microsecond)
	}
	s := h.Summary()
	want := map[string]float64{"min": 1, "mean": 5000.5, "p50": 5000, "p90": 9000, "p99": 9900, "p99.9": 9990, "max": 10000}
	for k, w := range want {
		if got := s[k]; math.Abs(got-w)/w > 1.0/128 {
			t.Errorf("%s = %.3f us, want %.3f within 1/128", k, got, w)
		}
	}
	// min, mean and max are exact.
	for _, k := range []string{"min", "mean", "max"} {
		if s[k] != want[k] {
			t.Errorf("%s = %v, want exactly %v", k, s[k], want[k])
		}
	}
}

func TestHistogramBuckets(t *testing.T) {
	prev := -1
	for _, v := range []uint64{0, 1, 127, 128, 129, 255, 256, 257, 1000, 1 << 20, 1<<20 + 1, 123456789, 1 << 40, 1<<41 - 1} {
		i := bucketOf(v)
		if i < prev {
			t.Errorf("bucketOf(%d) = %d, below the previous value's %d", v, i, prev)
		}
		prev = i
		lo, hi := bucketRange(i)
		if v < lo || v >= hi {
			t.Errorf("value %d in bucket %d [%d, %d)", v, i, lo, hi)
		}
		if v >= subCount && float64(hi-lo)/float64(lo) > 1.0/subCount {
			t.Errorf("bucket %d [%d, %d) wider than 1/%d", i, lo, hi, subCount)
		}
	}
	if i := bucketOf(math.MaxUint64); i != histBuckets-1 {
		t.Errorf("huge values go to bucket %d, want the last (%d)", i, histBuckets-1)
	}
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
}

// inScratch runs fn in a throwaway network namespace with loopback up:
// sockets made there stay there, whichever thread uses them later.
func inScratch(t *testing.T, fn func()) {
	t.Helper()
	needRoot(t)
	err := nsutil.Scratch(func() error {
		if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
			t.Fatalf("lo up: %v: %s", err, out)
		}
		fn()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func serve(t *testing.T, proto string, size int) (addr string) {
	t.Helper()
	srv, err := Listen(ServerConfig{Proto: proto, Addr: "127.0.0.1:0", Size: size})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "127.0.0.1:" + strconv.Itoa(srv.Port())
}

// checkOrdered: min, the quantiles and max ascend; a quantile with too
// few of the n latencies behind it is left out instead.
func checkOrdered(t *testing.T, lat map[string]float64, n uint64) {
	t.Helper()
	prev := 0.0
	for _, k := range []string{"min", "p50", "p90", "p99", "p99.9", "max"} {
		if i := slices.IndexFunc(results.LatencyQuantiles, func(q results.Quantile) bool { return q.Key == k }); i >= 0 && n < uint64(results.LatencyQuantiles[i].MinSamples()) {
			if _, ok := lat[k]; ok {
				t.Errorf("latency %s from %d latencies, under its %d", k, n, results.LatencyQuantiles[i].MinSamples())
			}
			continue
		}
		v, ok := lat[k]
		if !ok || v <= 0 {
			t.Fatalf("latency %s missing or not positive: %v", k, lat)
		}
		if v < prev {
			t.Errorf("latency not ordered: %s = %v below the previous %v (%v)", k, v, prev, lat)
		}
		prev = v
	}
	if lat["mean"] < lat["min"] || lat["mean"] > lat["max"] {
		t.Errorf("mean %v outside [min, max] (%v)", lat["mean"], lat)
	}
}

// Each mode on loopback, with the allocation count of client and server
// together: the loops must not allocate per transaction.
func TestLoopbackNoAllocation(t *testing.T) {
	for _, c := range []struct{ proto, mode string }{{"tcp", "rr"}, {"udp", "rr"}, {"tcp", "crr"}} {
		t.Run(c.proto+"_"+c.mode, func(t *testing.T) {
			inScratch(t, func() {
				addr := serve(t, c.proto, 32)
				// A generous UDP timeout: on a busy machine a late answer is not a loss.
				cfg := ClientConfig{Proto: c.proto, Mode: c.mode, Addr: addr, Size: 32, Duration: 500 * time.Millisecond, Timeout: 5 * time.Second}
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				rep, err := Run(cfg)
				runtime.ReadMemStats(&after)
				if err != nil {
					t.Fatal(err)
				}
				allocs := after.Mallocs - before.Mallocs
				t.Logf("%s: %.0f/s, %d transactions, %d allocations, latency %v", c.proto+"_"+c.mode, rep.Rate, rep.Transactions, allocs, rep.Latency)
				if rep.Transactions == 0 || rep.Rate <= 0 || rep.Errors != 0 || rep.Lost != 0 {
					t.Fatalf("bad report: %+v", rep)
				}
				checkOrdered(t, rep.Latency, rep.LatencySamples)
				// Setup allocates a few dozen objects; per-transaction allocation would be thousands.
				if allocs > 200 || allocs*10 > rep.Transactions {
					t.Errorf("%d allocations for %d transactions: the hot loop allocates", allocs, rep.Transactions)
				}
			})
		})
	}
}

// A UDP datagram dropped in either direction must cost one timeout, be
// counted lost exactly once, and never hang the client: iptables in the
// scratch namespace drops every 100th datagram (requests and responses both
// pass its INPUT chain on loopback), and the client's losses must equal the
// rule's count. A response later than the timeout would count a loss the
// rule did not make: 200 ms is far above any round trip here.
func TestUDPLossDoesNotHang(t *testing.T) {
	inScratch(t, func() {
		if out, err := exec.Command("iptables", "-A", "INPUT", "-p", "udp", "--dport", "1:65535", "-m", "statistic",
			"--mode", "nth", "--every", "100", "--packet", "0", "-j", "DROP").CombinedOutput(); err != nil {
			t.Skipf("iptables statistic match unavailable: %v: %s", err, out)
		}
		addr := serve(t, "udp", 1)
		const timeout = 200 * time.Millisecond
		rep, err := runGuarded(t, ClientConfig{Proto: "udp", Mode: "rr", Addr: addr, Size: 1, Duration: 1500 * time.Millisecond, Timeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		dropped := droppedByFirstRule(t)
		t.Logf("%d answered, %d lost in %.2f s; iptables dropped %d; latency %v", rep.Transactions, rep.Lost, rep.Seconds, dropped, rep.Latency)
		if rep.Transactions == 0 || dropped == 0 || rep.Lost != dropped {
			t.Errorf("want answered requests and one loss per dropped datagram (%d), got %+v", dropped, rep)
		}
		// Each loss waited one timeout, and that wait stays in the elapsed time.
		if waited := time.Duration(rep.Lost) * timeout; time.Duration(rep.Seconds*float64(time.Second)) < waited {
			t.Errorf("%.2f s elapsed for %d losses of %s each", rep.Seconds, rep.Lost, timeout)
		}
	})
}

// droppedByFirstRule reads the packet count of the first rule of the
// current namespace's INPUT chain.
func droppedByFirstRule(t *testing.T) uint64 {
	t.Helper()
	out, err := exec.Command("iptables", "-L", "INPUT", "-n", "-v", "-x").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables -L: %v: %s", err, out)
	}
	lines := strings.Split(string(out), "\n") // "Chain INPUT ...", the header, the rules
	if len(lines) < 3 {
		t.Fatalf("no rule in INPUT:\n%s", out)
	}
	n, err := strconv.ParseUint(strings.Fields(lines[2])[0], 10, 64)
	if err != nil {
		t.Fatalf("packet count of %q: %v", lines[2], err)
	}
	return n
}

// runGuarded runs the client on the calling thread (inScratch's, in the
// scratch namespace) and fails the test binary, instead of letting it
// hang, if the client has not returned 15 s after its sample should have.
func runGuarded(t *testing.T, cfg ClientConfig) (*Report, error) {
	t.Helper()
	limit := cfg.Duration + cfg.Timeout + 15*time.Second
	guard := time.AfterFunc(limit, func() {
		panic(fmt.Sprintf("%s client still running after %s (a %s sample, timeout %s)", cfg.Proto, limit, cfg.Duration, cfg.Timeout))
	})
	defer guard.Stop()
	return Run(cfg)
}

// The loss watcher sends the next request itself when one goes
// unanswered: against a server that ignores the first 3 requests, the
// client must give up exactly those 3 (each after one timeout), go on with
// the 4th, time each transaction from its own send (not from a request
// given up before it), and hang never.
func TestUDPLossWatcherResends(t *testing.T) {
	inScratch(t, func() {
		const ignored, timeout = 3, 100 * time.Millisecond
		fd, addr := loopbackSocket(t, unix.SOCK_DGRAM)
		var got, echoed int
		served := make(chan struct{})
		go func() { // ends when the socket is shut down below
			defer close(served)
			buf := make([]byte, 64)
			for {
				n, from, err := unix.Recvfrom(fd, buf, 0)
				if err == unix.EINTR {
					continue
				}
				if err != nil || n == 0 {
					return
				}
				if got++; got > ignored {
					echoed++
					_ = unix.Sendto(fd, buf[:n], 0, from)
				}
			}
		}()
		defer func() { _ = unix.Shutdown(fd, unix.SHUT_RDWR); <-served }()
		rep, err := runGuarded(t, ClientConfig{Proto: "udp", Mode: "rr", Addr: addr, Size: 8, Duration: time.Second, Timeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d answered, %d lost in %.2f s, latency %v", rep.Transactions, rep.Lost, rep.Seconds, rep.Latency)
		if rep.Lost != ignored || rep.Transactions == 0 {
			t.Errorf("lost %d, answered %d: want exactly the %d ignored requests lost and the rest answered", rep.Lost, rep.Transactions, ignored)
		}
		if rep.Seconds < (ignored * timeout).Seconds() {
			t.Errorf("%.2f s elapsed: the %d losses of %s each are missing from it", rep.Seconds, ignored, timeout)
		}
		// The 4th request's answer came ignored*timeout after the first send.
		if max := rep.Latency["max"]; max >= float64(timeout.Microseconds()) {
			t.Errorf("slowest transaction %.0f us: timed from a request given up before it", max)
		}
	})
}

func TestClientErrors(t *testing.T) {
	inScratch(t, func() {
		// Nothing listens: tcp fails at connect, crr counts errors then fails, udp sees ECONNREFUSED.
		for _, c := range []struct{ proto, mode, want string }{
			{"tcp", "rr", "connection refused"},
			{"tcp", "crr", "no connection"},
			{"udp", "rr", "connection refused"},
		} {
			_, err := Run(ClientConfig{Proto: c.proto, Mode: c.mode, Addr: "127.0.0.1:9", Size: 1, Duration: 100 * time.Millisecond})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s %s against a closed port: err = %v, want %q", c.proto, c.mode, err, c.want)
			}
		}
	})
	for _, cfg := range []ClientConfig{
		{Proto: "sctp", Mode: "rr", Addr: "127.0.0.1:1", Size: 1, Duration: time.Second},
		{Proto: "udp", Mode: "crr", Addr: "127.0.0.1:1", Size: 1, Duration: time.Second},
		{Proto: "tcp", Mode: "rr", Addr: "localhost:1", Size: 1, Duration: time.Second},
		{Proto: "udp", Mode: "rr", Addr: "127.0.0.1:1", Size: 70000, Duration: time.Second},
	} {
		if _, err := Run(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

// A crr server that stops answering must cost each connection one deadline
// (the watchdog shuts the stuck socket down), be counted as errors, and
// never hang the client: first a response that never comes, then a connect
// that never completes (the listener's accept queue is full, so its SYNs
// are dropped).
func TestCRRDeadlineWithoutSocketTimeouts(t *testing.T) {
	old := tcpTimeout
	tcpTimeout = 300 * time.Millisecond
	defer func() { tcpTimeout = old }()
	inScratch(t, func() {
		addr := unacceptedListener(t, 0) // one connection fills the queue
		start := time.Now()
		_, err := Run(ClientConfig{Proto: "tcp", Mode: "crr", Addr: addr, Size: 1, Duration: time.Second})
		took := time.Since(start)
		t.Logf("after %s: %v", took.Round(time.Millisecond), err)
		if err == nil || !strings.Contains(err.Error(), "read response: EOF") || !strings.Contains(err.Error(), "timed out after 300ms") {
			t.Errorf("err = %v, want the first error to be the response timing out", err)
		}
		// 1 s of sample, then at most one deadline more (plus the watcher's period).
		if took > time.Second+2*tcpTimeout {
			t.Errorf("took %s for a 1 s sample with a %s deadline", took, tcpTimeout)
		}
		// Was the stuck connect cut too? Errors are counted per connection.
		rep, err := runErrors(addr)
		if err != nil || rep < 3 {
			t.Errorf("errors %d (%v): want about one per deadline", rep, err)
		}
	})
}

// runErrors counts a crr sample's errors against addr (it must fail).
func runErrors(addr string) (uint64, error) {
	rep := &Report{}
	sa, family, err := sockaddr(addr, false)
	if err != nil {
		return 0, err
	}
	_, err = runCRR(ClientConfig{Proto: "tcp", Mode: "crr", Addr: addr, Size: 1, Duration: time.Second}, sa, family, new(Histogram), rep)
	if err == nil {
		return rep.Errors, fmt.Errorf("no error")
	}
	return rep.Errors, nil
}

// TCP_NODELAY is set once on the listener and every accepted connection
// inherits it (no setsockopt per crr connection).
func TestAcceptedConnectionsInheritNoDelay(t *testing.T) {
	inScratch(t, func() {
		srv, err := Listen(ServerConfig{Proto: "tcp", Addr: "127.0.0.1:0", Size: 1})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- srv.Serve() }()
		defer func() { srv.Close(); <-done }()
		sa, family, _ := sockaddr("127.0.0.1:"+strconv.Itoa(srv.Port()), false)
		fd, err := socket(family, unix.SOCK_STREAM)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		b := []byte{1}
		if err := connect(fd, sa); err != nil {
			t.Fatal(err)
		}
		if err := writeFull(fd, b); err != nil {
			t.Fatal(err)
		}
		if err := readFull(fd, b); err != nil { // answered: the server holds the connection now
			t.Fatal(err)
		}
		conn := int(srv.conn.Load())
		v, err := unix.GetsockoptInt(conn, unix.IPPROTO_TCP, unix.TCP_NODELAY)
		if err != nil || v == 0 {
			t.Errorf("accepted connection: TCP_NODELAY = %d (%v), want it set", v, err)
		}

	})
}

// signalStorm sends SIGURG (the Go runtime's preemption signal, harmless
// otherwise) to thread tid every millisecond until stop is closed: what
// sysmon does, every 10 ms, to a goroutine blocked in a raw system call.
// A blocking socket call with a timeout fails with EINTR on each one.
func signalStorm(tid int, stop <-chan struct{}) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			_ = unix.Tgkill(unix.Getpid(), tid, unix.SIGURG)
		}
	}
}

// A tcp_rr or udp_rr client whose server stops answering must fail within
// its timeout, even when signals hit its blocked receive a thousand times a
// second (a receive without a socket timeout is restarted after each: the
// watchdog's shutdown must still end it): against a TCP listener that never
// accepts (the kernel completes the handshake and queues the request,
// nobody answers) and a UDP socket that never reads (the loss watcher gives
// the request up after its timeout, past the sample's 500 ms, and ends it).
func TestDeadPeerTimesOutUnderSignals(t *testing.T) {
	old := tcpTimeout
	tcpTimeout = 2 * time.Second
	defer func() { tcpTimeout = old }()
	for _, c := range []struct {
		proto   string
		typ     int
		timeout time.Duration // the client's wait for an answer
		want    string
	}{
		{"tcp", unix.SOCK_STREAM, tcpTimeout, "read response 1: timed out after 2s"},
		{"udp", unix.SOCK_DGRAM, time.Second, "no response from"},
	} {
		t.Run(c.proto, func(t *testing.T) {
			inScratch(t, func() {
				fd, addr := loopbackSocket(t, c.typ)
				if c.typ == unix.SOCK_STREAM {
					if err := unix.Listen(fd, 1); err != nil {
						t.Fatal(err)
					}
				}
				// The client runs here, on inScratch's locked thread (in the
				// scratch namespace): the storm's target.
				stop := make(chan struct{})
				go signalStorm(unix.Gettid(), stop)
				start := time.Now()
				_, err := runGuarded(t, ClientConfig{Proto: c.proto, Mode: "rr", Addr: addr, Size: 1, Duration: 500 * time.Millisecond, Timeout: c.timeout})
				close(stop)
				took := time.Since(start)
				t.Logf("after %s: %v", took.Round(time.Millisecond), err)
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("err = %v, want %q", err, c.want)
				}
				if took < c.timeout*9/10 || took > c.timeout+3*time.Second {
					t.Errorf("failed after %s, want about its %s timeout", took.Round(time.Millisecond), c.timeout)
				}
			})
		})
	}
}

// A client or server blocked in a receive must not hold up a
// stop-the-world (a raw system call without a socket timeout would: it
// holds its P and signals restart it), or a garbage collection started
// meanwhile would stop the whole process until the peer answers (for the
// udp_rr client for good: its loss watcher stops with the world).
func TestStopTheWorldDoesNotWaitForABlockedClient(t *testing.T) {
	old := tcpTimeout
	tcpTimeout = 3 * time.Second
	defer func() { tcpTimeout = old }()
	inScratch(t, func() {
		for _, c := range []struct {
			proto, addr string
		}{
			{"tcp", unacceptedListener(t, 1)}, // never accepted, never answered
			{"udp", silentUDP(t)},
		} {
			gcTook := make(chan time.Duration, 1)
			go func() {
				time.Sleep(time.Second) // the client is blocked in its receive by now
				start := time.Now()
				runtime.GC()
				gcTook <- time.Since(start)
			}()
			_, err := Run(ClientConfig{Proto: c.proto, Mode: "rr", Addr: c.addr, Size: 1, Duration: time.Second, Timeout: 3 * time.Second})
			if err == nil {
				t.Fatalf("%s: a client whose server never answers succeeded", c.proto)
			}
			took := <-gcTook
			t.Logf("%s: runtime.GC took %s while the client waited; client: %v", c.proto, took, err)
			if took > time.Second {
				t.Errorf("%s: runtime.GC took %s while the client was blocked: its receive held up the stop-the-world", c.proto, took)
			}
		}

		// The same for the server, blocked in its receive on a connected, silent client.
		srvAddr, _, _ := sockaddr(serve(t, "tcp", 1), false)
		cfd, err := socket(unix.AF_INET, unix.SOCK_STREAM)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(cfd)
		if err := connect(cfd, srvAddr); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond) // the server has accepted and waits for a request
		start := time.Now()
		runtime.GC()
		if took := time.Since(start); took > time.Second {
			t.Errorf("runtime.GC took %s while the server was blocked: its raw receive held up the stop-the-world", took)
		}
	})
}

// silentUDP is a UDP socket on 127.0.0.1 that never reads (closed when the
// test ends); its address.
func silentUDP(t *testing.T) string {
	t.Helper()
	_, addr := loopbackSocket(t, unix.SOCK_DGRAM)
	return addr
}

// A request that does not fit the socket buffers of a peer that never
// reads: the raw, non-blocking first try of send comes back with EAGAIN,
// and the ordinary blocking send must take over and wait (here until the
// socket is shut down, as the watchdog would), neither fail nor spin.
func TestFullBufferFallsBackToABlockingSend(t *testing.T) {
	inScratch(t, func() {
		lfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(lfd)
		_ = unix.SetsockoptInt(lfd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) // inherited by the connection
		if err := unix.Bind(lfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			t.Fatal(err)
		}
		if err := unix.Listen(lfd, 1); err != nil { // never accepted, never read
			t.Fatal(err)
		}
		sa, _ := unix.Getsockname(lfd)
		fd, err := socket(unix.AF_INET, unix.SOCK_STREAM)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4096)
		if err := connect(fd, sa); err != nil {
			t.Fatal(err)
		}
		const wait = time.Second
		go func() { time.Sleep(wait); _ = unix.Shutdown(fd, unix.SHUT_RDWR) }()
		before := blockingSends.Load()
		start := time.Now()
		err = writeFull(fd, make([]byte, 1<<20))
		took := time.Since(start)
		n := blockingSends.Load() - before
		t.Logf("after %s, %d blocking sends: %v", took.Round(time.Millisecond), n, err)
		if n == 0 {
			t.Errorf("no blocking send: the raw non-blocking send never found the buffer full")
		}
		if err == nil || took < wait*9/10 {
			t.Errorf("send of 1 MiB to a peer that never reads returned %v after %s: want it to wait until the shutdown (%s)", err, took, wait)
		}
	})
}

// unacceptedListener is a TCP listener on 127.0.0.1 with the given backlog
// that never accepts (closed when the test ends); its address.
func unacceptedListener(t *testing.T, backlog int) string {
	t.Helper()
	fd, addr := loopbackSocket(t, unix.SOCK_STREAM)
	if err := unix.Listen(fd, backlog); err != nil {
		t.Fatal(err)
	}
	return addr
}

// loopbackSocket is a socket of type typ bound to a free port of 127.0.0.1
// (closed when the test ends), and its address.
func loopbackSocket(t *testing.T, typ int) (fd int, addr string) {
	t.Helper()
	fd, err := socket(unix.AF_INET, typ)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fd, "127.0.0.1:" + strconv.Itoa(sa.(*unix.SockaddrInet4).Port)
}

// The servers' yielder reads the clock every few transactions: the stride
// grows to maxStride while transactions come fast and falls back to 1 when
// they come slowly, so a slowdown never leaves the loop long without a yield.
func TestSparseYielderStride(t *testing.T) {
	y := newSparseYielder(startClock())
	for i := 0; i < 100*maxStride; i++ {
		y.tick()
	}
	if y.stride != maxStride {
		t.Fatalf("stride %d after fast transactions, want %d", y.stride, maxStride)
	}
	// Each transaction a third of a yield period: every reading comes more
	// than a quarter apart, every reading halves the stride (126 ticks).
	for i := 0; i < 4*maxStride && y.stride > 1; i++ {
		time.Sleep(yieldPeriod / 3)
		y.tick()
	}
	if y.stride != 1 {
		t.Fatalf("stride %d after slow transactions, want 1", y.stride)
	}
}
