package polbpf

import "testing"

// BenchmarkVerdicts is the programs' own time per packet, as the kernel
// reports it for BPF_PROG_TEST_RUN repeated b.N times on one frame
// (ns/pkt), on the paths a packet takes: a flow's next packet and its
// reply (one flow-map lookup), and a packet between pods no policy
// isolates (no flow lookup). Pin it to one CPU (taskset) and compare
// builds in interleaved rounds.
func BenchmarkVerdicts(b *testing.B) {
	p := testPlane(b)
	if _, err := p.Load(testRules()); err != nil {
		b.Fatal(err)
	}
	out := frame{src: podA, dst: podB, proto: protoTCP, sport: 41000, dport: 8085}
	reply := frame{src: podB, dst: podA, proto: protoTCP, sport: 8085, dport: 41000}
	if got := run(b, p, true, out); got != tcActUnspec {
		b.Fatalf("the flow's first packet: verdict %d", got)
	}
	for _, c := range []struct {
		name   string
		egress bool
		f      frame
	}{
		{"flow-egress", true, out},
		{"reply-ingress", false, reply},
		{"unisolated", true, frame{src: podB, dst: podC, proto: protoTCP, sport: 43000, dport: 80}},
	} {
		b.Run(c.name, func(b *testing.B) {
			prog := p.progs.PolIngress
			if c.egress {
				prog = p.progs.PolEgress
			}
			ret, d, err := prog.Benchmark(c.f.bytes(), b.N, nil)
			if err != nil {
				b.Fatal(err)
			}
			if int32(ret) != tcActUnspec {
				b.Fatalf("verdict %d: the frame was dropped", int32(ret))
			}
			b.ReportMetric(float64(d.Nanoseconds()), "ns/pkt")
		})
	}
}
