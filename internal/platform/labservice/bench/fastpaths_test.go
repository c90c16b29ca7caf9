// Package bench holds a documented benchmark of vnetlab's eBPF fast paths
// (docs/ebpf.md), not a test: no timing assertions.
//
//	VNETLAB_BENCH=1 go test -count=1 -v ./internal/platform/labservice/bench/
//
// tcp_stream (iperf3), tcp_rr (sockperf ping-pong, one connection, client
// and server pinned to one CPU: see pin) and tcp_crr (connect, 1 byte each
// way, close: a Go client process) from pod-b to pod-a, pod IP and
// clusterIP, on host, veth-routed, veth-ebpf, macvlan and macvlan-ebpf, the
// clusterIP through the tc programs (veth-ebpf, macvlan-ebpf) or at the
// socket (ebpf-sock on veth-routed and macvlan: clients in the lab's
// cgroup). Rounds interleaved; medians with bootstrap 95% CIs, ratios to
// veth-routed with their CIs and Mann-Whitney p, whole-machine CPU seconds
// per GB (streams) or per 1000 transactions. `vnetlab run --paths
// pod,service --providers ebpf,ebpf-sock` measures the same paths with the
// built-in engines; this adds sockperf pinned to one CPU (the steadiest
// tcp_rr here) and the macvlan-ebpf rows in one matrix.
//
// VNETLAB_BENCH_SECS (2), VNETLAB_BENCH_ROUNDS (5), VNETLAB_BENCH_TESTS
// (tcp_stream,tcp_rr,tcp_crr), VNETLAB_BENCH_CPUS ("1,1": sockperf's server
// and client CPUs; "none": unpinned).
package bench

import (
	"context"
	"encoding/json"
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

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/measure/cpu"
	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/labservice"
	"github.com/vnetlab/vnetlab/internal/platform/testnet"
	"github.com/vnetlab/vnetlab/internal/results/stats"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// Ports: the clusterIP's backends listen on ports of their own, so that a
// client port reused towards the clusterIP never meets the server's
// TIME_WAIT of a pod-IP connection with the same 4-tuple (PAWS would drop
// its SYN for a second: a real DNAT pitfall, not what is measured here).
const (
	rrPort, rrSvcPort   = 11111, 11113
	crrPort, crrSvcPort = 11112, 11114
)

var vip = netip.MustParseAddr("10.96.0.100")

// crrEnv makes this test binary a tcp_crr client: "addr secs".
const crrEnv = "VNETLAB_BENCH_CRR_CLIENT"

func TestMain(m *testing.M) {
	if v := os.Getenv(crrEnv); v != "" {
		f := strings.Fields(v)
		secs, _ := strconv.Atoi(f[1])
		n, elapsed, err := crrLoop(f[0], time.Duration(secs)*time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		_ = json.NewEncoder(os.Stdout).Encode(map[string]float64{"n": float64(n), "secs": elapsed.Seconds()})
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A case is one row: a lab's pod path, by pod IP or through a clusterIP.
type benchCase struct {
	label     string
	mode      string
	clusterIP string // "", "tc" (the mode's own programs) or "sock" (ebpf-sock)
	serverNS  string
	clientNS  string
	cgroup    string
	target    string
}

func TestBenchFastPaths(t *testing.T) {
	if os.Getenv("VNETLAB_BENCH") == "" {
		t.Skip("benchmark: set VNETLAB_BENCH=1 (see the package comment)")
	}
	secs, rounds := testnet.EnvInt("VNETLAB_BENCH_SECS", 2), testnet.EnvInt("VNETLAB_BENCH_ROUNDS", 5)
	tests := strings.Split(envStr("VNETLAB_BENCH_TESTS", "tcp_stream,tcp_rr,tcp_crr"), ",")
	rows := []struct{ label, mode, clusterIP string }{
		{"host", "host", ""},
		{"veth-routed", "veth-routed", ""},
		{"veth-routed svc ebpf-sock", "veth-routed", "sock"},
		{"veth-ebpf", "veth-ebpf", ""},
		{"veth-ebpf svc tc", "veth-ebpf", "tc"},
		{"macvlan", "macvlan", ""},
		{"macvlan svc ebpf-sock", "macvlan", "sock"},
		{"macvlan-ebpf", "macvlan-ebpf", ""},
		{"macvlan-ebpf svc tc", "macvlan-ebpf", "tc"},
	}
	labs := map[string]*lab.Lab{}
	var cases []*benchCase
	for _, r := range rows {
		l := labs[r.mode]
		if l == nil {
			l = upLab(t, fmt.Sprintf("fab%d-%d", os.Getpid()%1000, len(labs)), r.mode)
			labs[r.mode] = l
		}
		ep := l.State.Paths["pod"]
		c := &benchCase{label: r.label, mode: r.mode, clusterIP: r.clusterIP, serverNS: ep.ServerNS, clientNS: ep.ClientNS, target: ep.Target}
		if r.clusterIP != "" {
			c.target = vip.String()
			c.cgroup = services(t, l, r.clusterIP, netip.MustParseAddr(ep.Target))
		}
		cases = append(cases, c)
	}
	type sample struct{ value, cost float64 }
	got := map[string]map[string][]sample{}
	for _, test := range tests {
		got[test] = map[string][]sample{}
	}
	for r := 0; r < rounds; r++ {
		for _, c := range cases {
			for _, test := range tests {
				v, cost, err := measure(c, test, secs)
				if err != nil {
					t.Fatalf("%s %s: %v", c.label, test, err)
				}
				got[test][c.label] = append(got[test][c.label], sample{v, cost})
			}
		}
	}
	for _, test := range tests {
		var base []float64
		for _, s := range got[test]["veth-routed"] {
			base = append(base, s.value)
		}
		unit, costUnit := "trans/s", "s/1000"
		if test == "tcp_stream" {
			unit, costUnit = "Gbit/s", "s/GB"
		}
		for _, c := range cases {
			var vs, costs []float64
			for _, s := range got[test][c.label] {
				vs = append(vs, s.value)
				costs = append(costs, s.cost)
			}
			lo, hi, _ := stats.BootstrapMedianCI(vs)
			line := fmt.Sprintf("%-10s %-26s %9.2f %s [%.2f, %.2f]  CPU %.3f %s", test, c.label, stats.Median(vs), unit, lo, hi, stats.Median(costs), costUnit)
			if c.label != "veth-routed" && len(base) > 0 {
				rlo, rhi, _ := stats.RatioOfMediansCI(vs, base)
				p := 1.0
				if mw, err := stats.MannWhitney(vs, base); err == nil {
					p = mw.P
				}
				line += fmt.Sprintf("  vs veth-routed %.2fx [%.2f, %.2f] p=%.3f", stats.Median(vs)/stats.Median(base), rlo, rhi, p)
			}
			t.Log(line + fmt.Sprintf("  samples %.4g", vs))
		}
	}
}

// upLab builds a two-pod lab with sockperf and tcp_crr servers in pod-a
// (the pod path's server), both for the pod IP and the clusterIP's ports.
func upLab(t *testing.T, name, mode string) *lab.Lab {
	t.Helper()
	l, _ := testnet.UpLab(t, lab.Spec{Name: name, Mode: mode}, 2)
	ns := l.State.Paths["pod"].ServerNS
	for _, p := range []int{rrPort, rrSvcPort} {
		args := pin(0, "sockperf", "server", "--tcp", "-i", "0.0.0.0", "-p", strconv.Itoa(p))
		srv := proc.Command(context.Background(), ns, args[0], args[1:]...)
		srv.Stdout, srv.Stderr = io.Discard, io.Discard
		if err := srv.Start(); err != nil {
			t.Fatalf("sockperf server: %v", err)
		}
		t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	}
	for _, p := range []int{crrPort, crrSvcPort} {
		crrServer(t, ns, p)
	}
	time.Sleep(300 * time.Millisecond) // sockperf binds
	return l
}

// services adds the clusterIP's Services (iperf3's port, rr, crr) for the
// backend; with "sock" it also gives the lab socket-level Services and
// returns the cgroup its clients must start in.
func services(t *testing.T, l *lab.Lab, how string, backend netip.Addr) string {
	t.Helper()
	svcs := []tcbpf.Service{
		{VIP: vip, Port: engine.Iperf3Port, Proto: tcbpf.TCP, Backends: []tcbpf.Backend{{IP: backend, Port: engine.Iperf3Port}}},
		{VIP: vip, Port: rrPort, Proto: tcbpf.TCP, Backends: []tcbpf.Backend{{IP: backend, Port: rrSvcPort}}},
		{VIP: vip, Port: crrPort, Proto: tcbpf.TCP, Backends: []tcbpf.Backend{{IP: backend, Port: crrSvcPort}}},
	}
	if how == "sock" {
		// The ebpf-sock provider, as `vnetlab svc add --provider ebpf-sock` loads them.
		c := &labservice.Config{Provider: labservice.EBPFSock}
		for _, s := range svcs {
			b := s.Backends[0]
			c.Services = append(c.Services, labservice.Service{VIP: s.VIP, Port: s.Port, Proto: labservice.TCP, Backends: []labservice.Backend{{IP: b.IP, Port: b.Port}}})
		}
		if err := labservice.Commit(l.State, nil, c); err != nil {
			t.Fatal(err)
		}
		cg, err := labservice.ClientCgroup(l.State, labservice.EBPFSock)
		if err != nil {
			t.Fatal(err)
		}
		return cg
	}
	p, err := tcbpf.Open(l.State.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.AddServices(svcs); err != nil {
		t.Fatal(err)
	}
	return ""
}

// cpuWindow takes whole-machine CPU counters when the engine's client runs.
type cpuWindow struct{ start, end cpu.Snapshot }

func (w *cpuWindow) Start() { w.start, _ = cpu.Take() }
func (w *cpuWindow) End()   { w.end, _ = cpu.Take() }

// measure runs one sample: its value and its CPU cost.
func measure(c *benchCase, test string, secs int) (value, cost float64, err error) {
	dur := time.Duration(secs) * time.Second
	switch test {
	case "tcp_stream":
		d, _ := engine.Get("iperf3")
		w := &cpuWindow{}
		res, err := d.Run(engine.WithWindow(context.Background(), w),
			engine.Target{ServerNS: c.serverNS, ClientNS: c.clientNS, Addr: c.target, ClientCgroup: c.cgroup},
			engine.Spec{Test: engine.TCPStream, Duration: dur})
		if err != nil {
			return 0, 0, err
		}
		bytes := res.Bytes
		if bytes == 0 {
			bytes = res.Value * 1e9 / 8 * dur.Seconds()
		}
		return res.Value, w.end.Sub(w.start).BusySec() / (bytes / 1e9), nil
	case "tcp_rr":
		args := pin(1, "sockperf", "ping-pong", "--tcp", "-i", c.target, "-p", strconv.Itoa(rrPort), "-t", strconv.Itoa(secs))
		cmd := clientCmd(c, args[0], args[1:]...)
		return rate(cmd, parseSockperf)
	case "tcp_crr":
		cmd := clientCmd(c, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d", crrEnv, net.JoinHostPort(c.target, strconv.Itoa(crrPort)), secs))
		return rate(cmd, parseCRR)
	}
	return 0, 0, fmt.Errorf("unknown test %s", test)
}

func clientCmd(c *benchCase, name string, args ...string) *proc.Cmd {
	cmd := proc.Command(context.Background(), c.clientNS, name, args...)
	if c.cgroup != "" {
		_ = cmd.InCgroup(c.cgroup)
	}
	return cmd
}

// rate runs a transaction client: transactions/s and CPU s per 1000.
func rate(cmd *proc.Cmd, parse func([]byte) (n, secs float64, err error)) (float64, float64, error) {
	before, _ := cpu.Take()
	out, err := cmd.Output()
	after, _ := cpu.Take()
	if err != nil {
		return 0, 0, err
	}
	n, secs, err := parse(out)
	if err != nil {
		return 0, 0, err
	}
	return n / secs, after.Sub(before).BusySec() / (n / 1000), nil
}

var sockperfRE = regexp.MustCompile(`RunTime=([\d.]+) sec; SentMessages=\d+; ReceivedMessages=(\d+)`)

func parseSockperf(out []byte) (float64, float64, error) {
	m := sockperfRE.FindSubmatch(out)
	if m == nil {
		return 0, 0, fmt.Errorf("sockperf output: %q", out)
	}
	secs, _ := strconv.ParseFloat(string(m[1]), 64)
	n, _ := strconv.ParseFloat(string(m[2]), 64)
	return n, secs, nil
}

func parseCRR(out []byte) (float64, float64, error) {
	var v map[string]float64
	if err := json.Unmarshal(out, &v); err != nil {
		return 0, 0, fmt.Errorf("crr client output %q: %v", out, err)
	}
	return v["n"], v["secs"], nil
}

// crrServer answers one byte and closes first: TIME_WAIT stays on the
// server, so the client never runs out of ports.
func crrServer(t *testing.T, ns string, port int) {
	t.Helper()
	var ln net.Listener
	if err := nsutil.Do(ns, func() error {
		var err error
		ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", port))
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
				c.Close()
			}()
		}
	}()
}

// crrLoop: connect, 1 byte each way, wait for the server's FIN, close; for d.
func crrLoop(addr string, d time.Duration) (int, time.Duration, error) {
	b := []byte{1}
	n := 0
	start := time.Now()
	for time.Since(start) < d {
		c, err := net.DialTimeout("tcp4", addr, 5*time.Second)
		if err != nil {
			return n, time.Since(start), err
		}
		_, err = c.Write(b)
		if err == nil {
			_, err = io.ReadFull(c, b)
		}
		if err == nil {
			_, err = io.Copy(io.Discard, c)
		}
		c.Close()
		if err != nil {
			return n, time.Since(start), err
		}
		n++
	}
	return n, time.Since(start), nil
}

// pin runs sockperf's server and client under taskset, both on CPU 1 by
// default (VNETLAB_BENCH_CPUS="server,client"; "none": unpinned). Left to
// the scheduler a ping-pong here is bimodal (about 60k/s when both happen
// to share a CPU, 17k/s across CPUs: IPI wake-ups), and the median says
// more about the scheduler than the path. On one CPU the rate is the
// inverse of the whole transaction's CPU work: the path's cost, with a CV
// under 1% on a quiet machine (measured). Across CPUs ("0,1") it is at the
// mercy of whatever else runs on the two (5k/s and less, measured under
// load).
func pin(who int, args ...string) []string {
	v := envStr("VNETLAB_BENCH_CPUS", "1,1")
	s, c, ok := strings.Cut(v, ",")
	if !ok {
		return args // "none"
	}
	return append([]string{"taskset", "-c", []string{s, c}[who]}, args...)
}

func envStr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
