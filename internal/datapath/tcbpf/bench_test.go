package tcbpf_test

// A documented benchmark, not a test (no timing assertions here):
//
//	VNETLAB_BENCH=1 go test -count=1 -run Bench -v ./internal/datapath/tcbpf/
//
// iperf3 TCP, one stream, pod-b -> pod-a on veth-routed: pod IP without
// programs, pod IP and clusterIP with the programs in the pod (eth0) or on
// the node side (veth); rounds interleaved, medians printed.

import (
	"context"
	"os"
	"testing"
	"time"

	dp "github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/platform/testnet"
	"github.com/vnetlab/vnetlab/internal/results/stats"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
)

func TestBenchIperf3ClusterIP(t *testing.T) {
	if os.Getenv("VNETLAB_BENCH") == "" {
		t.Skip("benchmark: set VNETLAB_BENCH=1 (VNETLAB_BENCH_SECS, VNETLAB_BENCH_ROUNDS)")
	}
	secs, rounds := testnet.EnvInt("VNETLAB_BENCH_SECS", 2), testnet.EnvInt("VNETLAB_BENCH_ROUNDS", 3)
	tl := upLab(t, "bpn", false)
	p := openPlane(t, tl)
	a, b := tl.pod("pod-a"), tl.pod("pod-b")
	// iperf3 dials the clusterIP on its own port: 10.96.0.100:5201 -> pod-a:5201.
	if err := p.AddService(dp.Service{VIP: vip, Port: engine.Iperf3Port, Proto: dp.TCP, Backends: []dp.Backend{{IP: tl.addr("pod-a"), Port: engine.Iperf3Port}}}); err != nil {
		t.Fatal(err)
	}
	type config struct {
		name   string
		pl     dp.Placement // "" = no programs
		target string
	}
	configs := []config{
		{"podIP, no programs", "", a.IP},
		{"podIP, programs in pod", dp.InPod, a.IP},
		{"clusterIP, programs in pod", dp.InPod, vip.String()},
		{"podIP, programs on node veth", dp.NodeSide, a.IP},
		{"clusterIP, programs on node veth", dp.NodeSide, vip.String()},
	}
	drv, err := engine.Get("iperf3")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]float64{}
	for r := 0; r < rounds; r++ {
		for _, c := range configs {
			if c.pl != "" {
				attach(t, tl, p, "pod-b", c.pl)
			}
			res, err := drv.Run(context.Background(), engine.Target{ServerNS: a.NS, ClientNS: b.NS, Addr: c.target},
				engine.Spec{Test: engine.TCPStream, Duration: time.Duration(secs) * time.Second})
			if c.pl != "" {
				ns, ifn := tl.endpoint("pod-b", c.pl)
				if derr := p.DetachEndpoint(ns, ifn); derr != nil {
					t.Fatal(derr)
				}
			}
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			got[c.name] = append(got[c.name], res.Value)
		}
	}
	base := stats.Median(got[configs[0].name])
	for _, c := range configs {
		m := stats.Median(got[c.name])
		t.Logf("%-34s median %6.2f Gbit/s  (%.2f of podIP without programs)  samples %v", c.name, m, m/base, got[c.name])
	}
}
