package sock

// A documented benchmark, not a test (no timing assertions here):
//
//	VNETLAB_BENCH=1 VNETLAB_BIN=$PWD/bin/vnetlab go test -count=1 -run BenchSockCost -v ./internal/datapath/sock/
//
// What the socket programs cost per connection: the kernel's BPF run-time
// statistics (BPF_ENABLE_STATS, held by this process only while it runs:
// no sysctl is changed) around tcp_crr (vnetlab's rr engine, client and
// server pinned to CPU 1 as `run`'s default) from pod-b, started in the
// lab's cgroup, to pod-a of a veth-routed lab: once to the pod IP
// (connect4 runs and finds no Service) and once to the clusterIP. Rounds
// are interleaved; medians are printed. What the statistics cannot see:
// work the kernel does for the programs outside them, such as freeing a
// socket's storage when the socket goes (the rates say it).

import (
	"context"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/platform/testnet"
	"github.com/vnetlab/vnetlab/internal/results/stats"
	"github.com/vnetlab/vnetlab/internal/system/cpupin"
)

func TestBenchSockCost(t *testing.T) {
	if os.Getenv("VNETLAB_BENCH") == "" {
		t.Skip("benchmark: set VNETLAB_BENCH=1 (VNETLAB_BENCH_SECS, VNETLAB_BENCH_ROUNDS)")
	}
	secs, rounds := testnet.EnvInt("VNETLAB_BENCH_SECS", 2), testnet.EnvInt("VNETLAB_BENCH_ROUNDS", 3)
	runTime, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		t.Skipf("BPF run-time statistics: %v", err)
	}
	defer runTime.Close()

	s := upSockLab(t, "fab", "veth-routed", false)
	a, b := s.pod("pod-a"), s.pod("pod-b")
	be := tcbpf.Backend{IP: netip.MustParseAddr(a.IP), Port: engine.RRPort}
	if err := s.p.AddService(tcbpf.Service{VIP: vip, Port: engine.RRPort, Proto: tcbpf.TCP, Backends: []tcbpf.Backend{be}}); err != nil {
		t.Fatal(err)
	}
	d, err := engine.Get("rr")
	if err != nil {
		t.Fatal(err)
	}
	progs := s.p.hooks()
	type sample struct{ rate, connectNS, bpfPerConn float64 }
	targets := []string{a.IP, vip.String()}
	got := map[string][]sample{}
	for r := 0; r < rounds; r++ {
		for _, target := range targets {
			before := make([]ebpf.ProgramStats, len(progs))
			for i, h := range progs {
				st, err := h.prog.Stats()
				if err != nil {
					t.Fatal(err)
				}
				before[i] = *st
			}
			res, err := d.Run(context.Background(),
				engine.Target{ServerNS: a.NS, ClientNS: b.NS, Addr: target, ClientCgroup: s.cg},
				engine.Spec{Test: engine.TCPCRR, Duration: time.Duration(secs) * time.Second,
					CPU: cpupin.Pins{Pinned: true, Client: 1, Server: 1}})
			if err != nil {
				t.Fatalf("tcp_crr to %s: %v", target, err)
			}
			var sm sample
			sm.rate = res.Value
			var total time.Duration
			for i, h := range progs {
				st, err := h.prog.Stats()
				if err != nil {
					t.Fatal(err)
				}
				runs, ns := st.RunCount-before[i].RunCount, st.Runtime-before[i].Runtime
				total += ns
				if h.name == "connect4" && runs > 0 {
					sm.connectNS = float64(ns) / float64(runs)
				}
			}
			if res.Transfers > 0 {
				sm.bpfPerConn = float64(total) / res.Transfers
			}
			got[target] = append(got[target], sm)
		}
	}
	t.Logf("%-14s %10s %14s %18s", "to", "conn/s", "connect4 run", "BPF per conn")
	for _, target := range targets {
		var rate, conn, per []float64
		for _, sm := range got[target] {
			rate, conn, per = append(rate, sm.rate), append(conn, sm.connectNS), append(per, sm.bpfPerConn)
		}
		t.Logf("%-14s %10.0f %11.0f ns %15.0f ns   (rates %v)", target, stats.Median(rate), stats.Median(conn), stats.Median(per), rate)
	}
}
