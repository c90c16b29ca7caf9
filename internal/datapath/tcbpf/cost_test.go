package tcbpf_test

// A documented benchmark, not a test (no timing assertions here):
//
//	VNETLAB_BENCH=1 VNETLAB_BIN=$PWD/bin/vnetlab go test -count=1 -run BenchProgramCost -v ./internal/datapath/tcbpf/
//
// What the Service programs cost on real traffic, per packet and per
// transaction: the kernel's own BPF run-time statistics (BPF_ENABLE_STATS,
// held by this process only while it runs: no sysctl is changed) around
// tcp_crr (vnetlab's rr engine) and tcp_stream (iperf3), from pod-b to
// pod-a of a veth-routed lab with the programs on every pod's node-side
// veth: once to the pod IP (every packet passes the programs untranslated)
// and once to the clusterIP. Rounds are interleaved; medians are printed.
// The statistics add two clock reads to every run (about 30 ns here): the
// numbers are an upper bound.

import (
	"context"
	"os"
	"testing"
	"time"

	dp "github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/platform/testnet"
	"github.com/vnetlab/vnetlab/internal/results/stats"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
)

// progRuns reads a program's run count and total run time.
func progRuns(t *testing.T, p *ebpf.Program) (count uint64, ns time.Duration) {
	t.Helper()
	st, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st.RunCount, st.Runtime
}

func TestBenchProgramCost(t *testing.T) {
	if os.Getenv("VNETLAB_BENCH") == "" {
		t.Skip("benchmark: set VNETLAB_BENCH=1 (VNETLAB_BENCH_SECS, VNETLAB_BENCH_ROUNDS)")
	}
	secs, rounds := testnet.EnvInt("VNETLAB_BENCH_SECS", 2), testnet.EnvInt("VNETLAB_BENCH_ROUNDS", 3)
	runTime, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		t.Skipf("BPF run-time statistics: %v", err)
	}
	defer runTime.Close()

	tl := upLab(t, "bpc", false)
	p := openPlane(t, tl)
	a, b := tl.pod("pod-a"), tl.pod("pod-b")
	for _, port := range []uint16{engine.RRPort, engine.Iperf3Port} {
		if err := p.AddService(dp.Service{VIP: vip, Port: port, Proto: dp.TCP, Backends: []dp.Backend{{IP: tl.addr("pod-a"), Port: port}}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, pod := range []string{"pod-a", "pod-b"} {
		attach(t, tl, p, pod, dp.NodeSide)
	}

	type cell struct {
		test   engine.Test
		driver string
		target string
	}
	var cells []cell
	for _, test := range []engine.Test{engine.TCPCRR, engine.TCPStream} {
		drv := "rr"
		if test == engine.TCPStream {
			drv = "iperf3"
		}
		for _, target := range []string{a.IP, vip.String()} {
			cells = append(cells, cell{test, drv, target})
		}
	}
	type sample struct{ rate, fromNS, toNS, runsPerUnit float64 }
	got := map[cell][]sample{}
	for r := 0; r < rounds; r++ {
		for _, c := range cells {
			d, err := engine.Get(c.driver)
			if err != nil {
				t.Fatal(err)
			}
			f0, fd0 := progRuns(t, p.Objects().FromPod)
			t0, td0 := progRuns(t, p.Objects().ToPod)
			res, err := d.Run(context.Background(), engine.Target{ServerNS: a.NS, ClientNS: b.NS, Addr: c.target},
				engine.Spec{Test: c.test, Duration: time.Duration(secs) * time.Second})
			if err != nil {
				t.Fatalf("%s to %s: %v", c.test, c.target, err)
			}
			f1, fd1 := progRuns(t, p.Objects().FromPod)
			t1, td1 := progRuns(t, p.Objects().ToPod)
			units := res.Transfers // connections (crr)
			if c.test == engine.TCPStream {
				units = res.Bytes / (1 << 20) // MiB
			}
			s := sample{rate: res.Value}
			if f1 > f0 {
				s.fromNS = float64(fd1-fd0) / float64(f1-f0)
			}
			if t1 > t0 {
				s.toNS = float64(td1-td0) / float64(t1-t0)
			}
			if units > 0 {
				s.runsPerUnit = float64(f1 - f0 + t1 - t0)
				s.runsPerUnit /= units
			}
			got[c] = append(got[c], s)
		}
	}
	t.Logf("%-10s %-14s %10s %12s %10s %10s %16s", "test", "to", "rate", "runs/unit", "from_pod", "to_pod", "BPF per unit")
	for _, c := range cells {
		var rate, from, to, runs []float64
		for _, s := range got[c] {
			rate, from, to, runs = append(rate, s.rate), append(from, s.fromNS), append(to, s.toNS), append(runs, s.runsPerUnit)
		}
		unit := "conn"
		if c.test == engine.TCPStream {
			unit = "MiB"
		}
		// Each packet passes one from_pod and one to_pod: half the runs each.
		perUnit := stats.Median(runs) / 2 * (stats.Median(from) + stats.Median(to)) / 1000
		t.Logf("%-10s %-14s %10.1f %8.1f/%-4s %7.0f ns %7.0f ns %10.2f µs/%s", c.test, c.target, stats.Median(rate), stats.Median(runs), unit, stats.Median(from), stats.Median(to), perUnit, unit)
	}
}
