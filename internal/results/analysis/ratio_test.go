package analysis

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/results"
)

func ratioFile() *results.File {
	num := cellOf("veth-ebpf", 102, 104, 100, 103, 101)
	den := cellOf("macvlan", 100, 99, 101, 100, 98)
	svc := cellOf("veth-routed", 90, 91, 89, 92, 90)
	svc.Path, svc.Provider, svc.ExtraServices = "service", "ebpf", 10000
	pod := cellOf("veth-routed", 100, 101, 99, 100, 102)
	for i := range num.Samples { // CPU-s per GB: 2 s over 10 GB vs 2 s over 8 GB
		num.Samples[i].Bytes, num.Samples[i].CPU = 10e9, &results.SampleCPU{SystemSec: 2}
		den.Samples[i].Bytes, den.Samples[i].CPU = 8e9, &results.SampleCPU{SystemSec: 2}
	}
	den.Samples = append(den.Samples, results.Sample{Valid: false}) // never counted
	return &results.File{Cells: []*results.Cell{num, den, svc, pod}}
}

// The ratio's CI is the existing bootstrap of the ratio of medians (Compare),
// and the judgement is where that whole interval lies.
func TestRatioOfByHand(t *testing.T) {
	f := ratioFile()
	tgt := Target{Value: 1}
	r, err := RatioOf(f, "veth-ebpf/pod/tcp_stream", "macvlan/pod/tcp_stream", MetricValue, &tgt)
	if err != nil {
		t.Fatal(err)
	}
	if !within(r.Ratio, 102.0/100, 1e-9) || !r.HasCI {
		t.Fatalf("ratio %v (CI %v), want 1.02 with a CI", r.Ratio, r.HasCI)
	}
	if r.RatioCI[0] > r.Ratio || r.RatioCI[1] < r.Ratio {
		t.Fatalf("CI %v does not hold the ratio %v", r.RatioCI, r.Ratio)
	}
	if r.Outcome != Met {
		t.Fatalf("outcome %v, want MET (CI %v above 1)", r.Outcome, r.RatioCI)
	}
	line := r.String()
	for _, w := range []string{"veth-ebpf/pod/tcp_stream / macvlan/pod/tcp_stream", "1.020", "target >= 1.00", "MET"} {
		if !strings.Contains(line, w) {
			t.Errorf("line %q lacks %q", line, w)
		}
	}

	svc, err := RatioOf(f, "veth-routed/service(ebpf+10000)/tcp_stream", "veth-routed/pod/tcp_stream", MetricValue, &Target{Value: 0.97})
	if err != nil {
		t.Fatal(err)
	}
	if !within(svc.Ratio, 0.9, 1e-9) || svc.Outcome != Short {
		t.Fatalf("service ratio %v %v, want 0.90 SHORT", svc.Ratio, svc.Outcome)
	}

	cpu, err := RatioOf(f, "veth-ebpf/pod/tcp_stream", "macvlan/pod/tcp_stream", MetricCPUPerGB, &Target{Value: 1, AtMost: true})
	if err != nil {
		t.Fatal(err)
	}
	if !within(cpu.Ratio, 0.2/0.25, 1e-9) || cpu.Outcome != Met || !strings.Contains(cpu.String(), "(cpu-per-gb)") {
		t.Fatalf("cpu ratio %v %v %q, want 0.80 MET", cpu.Ratio, cpu.Outcome, cpu.String())
	}
}

func TestJudge(t *testing.T) {
	ge, le := Target{Value: 1}, Target{Value: 1, AtMost: true}
	cases := []struct {
		ci   [2]float64
		t    Target
		want Outcome
	}{
		{[2]float64{1.00, 1.05}, ge, Met},
		{[2]float64{0.99, 1.05}, ge, Unresolved},
		{[2]float64{0.90, 0.99}, ge, Short},
		{[2]float64{0.90, 1.00}, le, Met},
		{[2]float64{0.90, 1.01}, le, Unresolved},
		{[2]float64{1.01, 1.20}, le, Short},
	}
	for _, c := range cases {
		if got := Judge((c.ci[0]+c.ci[1])/2, c.ci, true, c.t); got != c.want {
			t.Errorf("Judge(%v, %s) = %v, want %v", c.ci, c.t, got, c.want)
		}
	}
	if got := Judge(2, [2]float64{}, false, ge); got != Unresolved {
		t.Errorf("no CI: %v, want UNRESOLVED", got)
	}
}

func TestParseTarget(t *testing.T) {
	for in, want := range map[string]Target{">=0.97": {Value: 0.97}, "<= 1": {Value: 1, AtMost: true}, "1.00": {Value: 1}} {
		got, err := ParseTarget(in)
		if err != nil || got != want {
			t.Errorf("ParseTarget(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "=>1", ">=x", "-1", ">=0"} {
		if _, err := ParseTarget(bad); err == nil {
			t.Errorf("ParseTarget(%q) accepted", bad)
		}
	}
}

func TestRatioOfErrors(t *testing.T) {
	f := ratioFile()
	if _, err := RatioOf(f, "nope/pod/tcp_rr", "macvlan/pod/tcp_stream", MetricValue, nil); err == nil || !strings.Contains(err.Error(), "macvlan/pod/tcp_stream") {
		t.Errorf("unknown cell: %v, want an error listing the cells", err)
	}
	// A missing cell of a mode the file has: that mode's cells, at most
	// six of them, and how many more.
	for i := range 10 {
		c := cellOf("bridge", 1, 2, 3)
		c.Point = fmt.Sprintf("policies=%d", i)
		f.Cells = append(f.Cells, c)
	}
	_, err := RatioOf(f, "bridge/pod:ebpf/tcp_rr", "macvlan/pod/tcp_stream", MetricValue, nil)
	if err == nil || strings.Contains(err.Error(), "macvlan") || !strings.Contains(err.Error(), "cells of bridge: bridge/pod{policies=0}/tcp_stream") ||
		strings.Contains(err.Error(), "policies=6}") || !strings.Contains(err.Error(), "and 4 more") {
		t.Errorf("missing cell of a known mode: %v", err)
	}
	if _, err := RatioOf(f, "veth-routed/pod/tcp_stream", "macvlan/pod/tcp_stream", MetricCPUPerGB, nil); err == nil {
		t.Error("a cell without CPU counters gave a CPU ratio")
	}
	if _, err := RatioOf(f, "veth-ebpf/pod/tcp_stream", "macvlan/pod/tcp_stream", "watts", nil); err == nil {
		t.Error("unknown metric accepted")
	}
}

// A ratio of the two families of one path names both sides alike
// ("ipv6" and "ipv4" written out), the IPv4 cell keeping its old name.
func TestRatioOfFamilies(t *testing.T) {
	v4 := cellOf("veth-routed", 100, 101, 99, 100, 102)
	v6 := cellOf("veth-routed", 90, 91, 89, 92, 90)
	v6.Family = "ipv6"
	f := &results.File{Cells: []*results.Cell{v4, v6}}
	r, err := RatioOf(f, "veth-routed/pod/ipv6/tcp_stream", "veth-routed/pod/ipv4/tcp_stream", MetricValue, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !within(r.Ratio, 0.9, 1e-9) || r.Den.Family != "" || r.Num.Family != "ipv6" {
		t.Errorf("ratio %v of %v over %v", r.Ratio, r.Num, r.Den)
	}
	if _, err := RatioOf(f, "veth-routed/pod/tcp_stream", "veth-routed/pod/ipv4/tcp_stream", MetricValue, nil); err != nil {
		t.Errorf("the IPv4 cell by its old name: %v", err)
	}
}

// A benchmark's row: the ratio of medians, its CI and the verdict.
func TestRatioLine(t *testing.T) {
	x, base := []float64{99, 100, 101, 100, 100}, []float64{100, 100, 100, 100, 100}
	if got, want := RatioLine(x, base, Target{Value: 0.99}), "1.000 [0.990, 1.010]  target >= 0.99  MET"; got != want {
		t.Errorf("RatioLine: %q, want %q", got, want)
	}
	if got, want := RatioText(x, base), "1.000 [0.990, 1.010]"; got != want {
		t.Errorf("RatioText: %q, want %q", got, want)
	}
	if got := RatioLine(x, base, Target{Value: 1.05}); !strings.HasSuffix(got, "SHORT") {
		t.Errorf("RatioLine against 1.05: %q, want SHORT", got)
	}
}
