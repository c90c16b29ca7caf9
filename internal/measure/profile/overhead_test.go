package profile

import (
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The profiler's overhead on loopback TCP, with and without a window open,
// alternated: VNETLAB_PROFILE_OVERHEAD=ROUNDSxSECONDS (e.g. 8x2) go test
// -count=1 -v -run TestOverheadLoopback ./internal/measure/profile. A benchmark, not
// a test: it prints medians and never fails on timing. Loopback lives in
// the root namespace, so the tracepoint programs fire and check every
// packet's namespace but count nothing: the same work as in a lab, minus
// one map update.
func TestOverheadLoopback(t *testing.T) {
	spec := os.Getenv("VNETLAB_PROFILE_OVERHEAD")
	if spec == "" || os.Geteuid() != 0 {
		t.Skip("benchmark: set VNETLAB_PROFILE_OVERHEAD=ROUNDSxSECONDS, as root")
	}
	r, s, _ := strings.Cut(spec, "x")
	rounds, err1 := strconv.Atoi(r)
	secs, err2 := strconv.ParseFloat(s, 64)
	if err1 != nil || err2 != nil || rounds < 1 || secs <= 0 {
		t.Fatalf("VNETLAB_PROFILE_OVERHEAD=%q: want ROUNDSxSECONDS, e.g. 8x2", spec)
	}
	d := time.Duration(secs * float64(time.Second))
	sampler, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	defer sampler.Close()
	for _, w := range []struct {
		name string
		run  func(time.Duration) float64
	}{{"tcp_rr trans/s", func(d time.Duration) float64 { return loopbackRR(t, d) }},
		{"tcp_stream Gbit/s", func(d time.Duration) float64 { return loopbackStream(t, d) }}} {
		var off, on, stacks []float64
		profiled := func(stacksOnly bool) float64 {
			sampler.stacksOnly = stacksOnly
			if err := sampler.Start(); err != nil {
				t.Fatal(err)
			}
			v := w.run(d)
			if _, err := sampler.Stop(); err != nil {
				t.Fatal(err)
			}
			return v
		}
		for i := 0; i < rounds; i++ {
			off = append(off, w.run(d))
			on = append(on, profiled(false))
			stacks = append(stacks, profiled(true))
		}
		mOff, mOn, mStacks := median(off), median(on), median(stacks)
		t.Logf("%s over %d alternated rounds of %v: without %.4g, with the profiler %.4g (%.3fx), sampling stacks only %.4g (%.3fx); all: %s / %s / %s",
			w.name, rounds, d, mOff, mOn, mOn/mOff, mStacks, mStacks/mOff, fmtAll(off), fmtAll(on), fmtAll(stacks))
	}
}

func median(v []float64) float64 {
	s := append([]float64{}, v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fmtAll(v []float64) string {
	var out []string
	for _, x := range v {
		out = append(out, fmt.Sprintf("%.4g", x))
	}
	return strings.Join(out, " ")
}

// loopbackRR: one-byte request/response over loopback TCP for d; trans/s.
func loopbackRR(t *testing.T, d time.Duration) float64 {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b := make([]byte, 1)
		for {
			if _, err := io.ReadFull(c, b); err != nil {
				return
			}
			if _, err := c.Write(b); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := make([]byte, 1)
	n := 0
	start := time.Now()
	for end := start.Add(d); time.Now().Before(end); n++ {
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
	}
	return float64(n) / time.Since(start).Seconds()
}

// loopbackStream: 64 KiB writes over loopback TCP for d; Gbit/s received.
func loopbackStream(t *testing.T, d time.Duration) float64 {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- 0
			return
		}
		defer c.Close()
		n, _ := io.Copy(io.Discard, c)
		got <- n
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	start := time.Now()
	for end := start.Add(d); time.Now().Before(end); {
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	n := <-got
	return float64(n) * 8 / 1e9 / time.Since(start).Seconds()
}
