package ebpf

// A documented benchmark, not a test (no timing assertions):
//
//	VNETLAB_BENCH=1 go test -count=1 -run BenchHostRouting -v ./internal/service/ebpf/
//
// tcp_rr (sockperf ping-pong, 1 connection) and tcp_crr (connect, 1 byte
// each way, close; a Go client and server) from pod-b to pod-a on host,
// veth-routed, veth-ebpf (pod IP and clusterIP) and macvlan; rounds
// interleaved; medians, ratios to veth-routed and whole-machine CPU seconds
// per 1000 transactions. It stands in for `vnetlab run --tests tcp_rr,tcp_crr`
// until the built-in rr engine is on main. VNETLAB_BENCH_SECS (default 2)
// and VNETLAB_BENCH_ROUNDS (default 5) size it; sockperf runs pinned (see
// benchCPUs).

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/cpu"
	"github.com/vnetlab/vnetlab/internal/lab"
	"github.com/vnetlab/vnetlab/internal/nsutil"
	"github.com/vnetlab/vnetlab/internal/proc"
	"github.com/vnetlab/vnetlab/internal/topo"
)

// The clusterIP cases use backend ports of their own: behind a DNAT, a
// client port reused towards the clusterIP would meet the server's
// TIME_WAIT of a pod-IP connection with the same 4-tuple, and a timestamp
// that PAWS rejects (a 1 s SYN retransmission: a real kube-proxy pitfall,
// not what this benchmark measures).
const (
	rrPort     = 11111
	crrPort    = 11112
	rrSvcPort  = 11113
	crrSvcPort = 11114
)

type benchCase struct {
	name string
	ep   topo.Endpoint
}

func TestBenchHostRouting(t *testing.T) {
	if os.Getenv("VNETLAB_BENCH") == "" {
		t.Skip("benchmark: set VNETLAB_BENCH=1 (VNETLAB_BENCH_SECS, VNETLAB_BENCH_ROUNDS)")
	}
	secs, rounds := envInt("VNETLAB_BENCH_SECS", 2), envInt("VNETLAB_BENCH_ROUNDS", 5)
	var cases []benchCase
	for i, mode := range []string{"host", "veth-routed", "veth-ebpf", "macvlan"} {
		pods, _ := lab.DefaultPodSpecs(2, lab.DefaultPodCIDR, 1)
		name := fmt.Sprintf("fab%d-%d", os.Getpid()%1000, i)
		l, err := lab.Up(context.Background(), lab.Spec{Name: name, Mode: mode, Pods: pods}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Release(); _ = lab.Down(name, nil) })
		ep := l.State.Paths["pod"]
		cases = append(cases, benchCase{mode, ep})
		startRRServers(t, ep.ServerNS, rrPort, crrPort)
		if mode == "veth-ebpf" {
			p, err := Open(name)
			if err != nil {
				t.Fatal(err)
			}
			be := netip.MustParseAddr(ep.Target)
			startRRServers(t, ep.ServerNS, rrSvcPort, crrSvcPort)
			for front, back := range map[uint16]uint16{rrPort: rrSvcPort, crrPort: crrSvcPort} {
				if err := p.AddService(Service{VIP: vip, Port: front, Proto: TCP, Backends: []Backend{{IP: be, Port: back}}}); err != nil {
					t.Fatal(err)
				}
			}
			p.Close()
			svc := ep
			svc.Target = vip.String()
			cases = append(cases, benchCase{mode + " clusterIP", svc})
		}
	}
	type sample struct{ rate, cpuPerK float64 }
	got := map[string]map[string][]sample{"tcp_rr": {}, "tcp_crr": {}}
	for r := 0; r < rounds; r++ {
		for _, c := range cases {
			for test, run := range map[string]func(topo.Endpoint, int) (float64, error){"tcp_rr": sockperfRR, "tcp_crr": goCRR} {
				before, _ := cpu.Take()
				rate, err := run(c.ep, secs)
				after, _ := cpu.Take()
				if err != nil {
					t.Fatalf("%s %s: %v", c.name, test, err)
				}
				d := after.Sub(before)
				busy := d.UserSec + d.SystemSec + d.IRQSec + d.SoftirqSec
				got[test][c.name] = append(got[test][c.name], sample{rate, busy / (rate * d.Wall.Seconds() / 1000)})
			}
		}
	}
	for _, test := range []string{"tcp_rr", "tcp_crr"} {
		base := 0.0
		for _, c := range cases {
			var rates, costs []float64
			for _, s := range got[test][c.name] {
				rates = append(rates, s.rate)
				costs = append(costs, s.cpuPerK)
			}
			m := median(rates)
			if c.name == "veth-routed" {
				base = m
			}
			ratio := "   -"
			if base > 0 {
				ratio = fmt.Sprintf("%.2f", m/base)
			}
			t.Logf("%-7s %-21s median %8.0f /s  (%s of veth-routed)  CPU %.3f s per 1000  samples %.0f", test, c.name, m, ratio, median(costs), rates)
		}
	}
}

// startRRServers: sockperf's server for tcp_rr, a Go one for tcp_crr.
func startRRServers(t *testing.T, ns string, rr, crr int) {
	t.Helper()
	srv := proc.Command(context.Background(), ns, "taskset", "-c", serverCPU, "sockperf", "server", "--tcp", "-i", "0.0.0.0", "-p", strconv.Itoa(rr))
	srv.Stdout, srv.Stderr = io.Discard, io.Discard
	if err := srv.Start(); err != nil {
		t.Fatalf("sockperf server: %v", err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	var ln net.Listener
	if err := nsutil.Do(ns, func() error {
		var err error
		ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", crr))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				b := make([]byte, 1)
				if _, err := io.ReadFull(c, b); err == nil {
					_, _ = c.Write(b)
				}
				c.Close() // the server closes first: TIME_WAIT stays here, not on the client's ports
			}()
		}
	}()
	time.Sleep(200 * time.Millisecond) // sockperf's server binds
}

// sockperf's client and server are pinned to different CPUs: left to the
// scheduler, a ping-pong is bimodal here (about 60k/s when both share a CPU,
// 15-25k/s across CPUs), which hides any difference between modes.
// VNETLAB_BENCH_CPUS="server,client" changes the pair ("0,0": same CPU).
var serverCPU, clientCPU = benchCPUs()

func benchCPUs() (string, string) {
	if v := os.Getenv("VNETLAB_BENCH_CPUS"); v != "" {
		if s, c, ok := strings.Cut(v, ","); ok {
			return s, c
		}
	}
	return "0", "1"
}

var sockperfRE = regexp.MustCompile(`RunTime=([\d.]+) sec; SentMessages=\d+; ReceivedMessages=(\d+)`)

// sockperfRR: transactions per second of a sockperf TCP ping-pong.
func sockperfRR(ep topo.Endpoint, secs int) (float64, error) {
	out, err := proc.Command(context.Background(), ep.ClientNS, "taskset", "-c", clientCPU, "sockperf", "ping-pong", "--tcp", "-i", ep.Target,
		"-p", strconv.Itoa(rrPort), "-t", strconv.Itoa(secs)).Output()
	if err != nil {
		return 0, err
	}
	m := sockperfRE.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("sockperf output: %q", out)
	}
	rt, _ := strconv.ParseFloat(string(m[1]), 64)
	n, _ := strconv.ParseFloat(string(m[2]), 64)
	return n / rt, nil
}

// goCRR: connections per second, one at a time: connect, 1 byte each way, close.
func goCRR(ep topo.Endpoint, secs int) (float64, error) {
	addr := net.JoinHostPort(ep.Target, strconv.Itoa(crrPort))
	n := 0
	start := time.Now()
	deadline := start.Add(time.Duration(secs) * time.Second)
	err := nsutil.Do(ep.ClientNS, func() error {
		b := []byte{1}
		for time.Now().Before(deadline) {
			c, err := net.DialTimeout("tcp4", addr, 5*time.Second)
			if err != nil {
				return err
			}
			if _, err := c.Write(b); err != nil {
				c.Close()
				return err
			}
			if _, err := io.ReadFull(c, b); err != nil {
				c.Close()
				return err
			}
			_, _ = io.Copy(io.Discard, c) // wait for the server's FIN
			c.Close()
			n++
		}
		return nil
	})
	return float64(n) / time.Since(start).Seconds(), err
}
