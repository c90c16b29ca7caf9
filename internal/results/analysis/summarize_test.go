package analysis

import (
	"maps"
	"math"
	"slices"
	"testing"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/stats"
)

func sample(v float64, valid bool) results.Sample {
	s := results.Sample{Result: results.Result{Value: v}, Valid: valid}
	if !valid {
		s.Error = "boom"
	}
	return s
}

func cellOf(mode string, vals ...float64) *results.Cell {
	c := &results.Cell{Mode: mode, Path: "pod", Test: "tcp_stream", Unit: "Gbit/s"}
	for _, v := range vals {
		c.Samples = append(c.Samples, sample(v, true))
	}
	return c
}

// A failed sample must be counted as failed and nowhere else: not in the
// median, the mean, the min (a zero would drag it down) or the CPU cost.
func TestSummarizeIgnoresFailedSamples(t *testing.T) {
	c := cellOf("host", 10, 11, 12, 13, 14)
	bad := sample(0, false)
	bad.CPU = &results.SampleCPU{SystemSec: 100}
	c.Samples = append(c.Samples, bad)
	for i := range c.Samples[:5] {
		c.Samples[i].Bytes = 2e9
		c.Samples[i].CPU = &results.SampleCPU{UserSec: 0.5, SystemSec: 1, IRQSec: 0, SoftirqSec: 0.5 + float64(i)*0.1, NetRx: 1000}
	}
	Summarize(c, Options{CIMethod: stats.MethodStudentTMean})
	if c.Valid != 5 || c.Failed != 1 || c.Status != "ok" {
		t.Fatalf("valid=%d failed=%d status=%s, want 5/1 ok", c.Valid, c.Failed, c.Status)
	}
	if c.Median != 12 || c.Mean != 12 || c.Min != 10 || c.Max != 14 {
		t.Errorf("median/mean/min/max = %g/%g/%g/%g, want 12/12/10/14", c.Median, c.Mean, c.Min, c.Max)
	}
	// Same 5 values as the hand-checked t interval in internal/results/stats.
	if c.CIMethod != stats.MethodStudentTMean || math.Abs(c.CI95[0]-10.036757) > 1e-5 || math.Abs(c.CI95[1]-13.963243) > 1e-5 {
		t.Errorf("ci95 %v (%s), want [10.0368, 13.9632] student-t-mean", c.CI95, c.CIMethod)
	}
	// cv 0.1318 > 0.10 -> noisy.
	if !c.Noisy || math.Abs(c.CV-0.131762) > 1e-6 {
		t.Errorf("cv=%g noisy=%v, want 0.1318 noisy", c.CV, c.Noisy)
	}
	// Busy per sample 2.0..2.4 s for 2 GB: median 2.2 s -> 1.1 s/GB; 500 NET_RX per GB.
	if c.CPU == nil || c.CPU.Samples != 5 || math.Abs(c.CPU.PerGB-1.1) > 1e-9 || c.CPU.NetRxPerGB != 500 || c.CPU.SystemSec != 1 {
		t.Errorf("cpu block %+v", c.CPU)
	}
	Summarize(c, Options{CVThreshold: 0.2})
	if c.Noisy || c.CIMethod != stats.MethodBootstrapMedian || c.CI95[0] > c.Median || c.CI95[1] < c.Median {
		t.Errorf("threshold 0.2: noisy=%v ci=%v %s", c.Noisy, c.CI95, c.CIMethod)
	}
	// One valid value has no interval, whatever the method.
	one := cellOf("host", 7)
	Summarize(one, Options{})
	if one.CI95 != nil || one.Median != 7 {
		t.Errorf("one sample: ci %v median %g, want no CI", one.CI95, one.Median)
	}
}

func TestSummarizeLatencyAndTransactions(t *testing.T) {
	c := &results.Cell{Mode: "host", Test: "tcp_rr"}
	for i, p99 := range []float64{40, 50, 45} {
		s := sample(20000, true)
		s.Transfers = 40000
		s.Latency = map[string]float64{"p50": 25, "p99": p99}
		s.CPU = &results.SampleCPU{SystemSec: 1 + float64(i), NetRx: 80000}
		c.Samples = append(c.Samples, s)
	}
	Summarize(c, Options{})
	if c.Latency["p99"] != 45 || c.Latency["p50"] != 25 {
		t.Errorf("latency %v, want p50 25 p99 45", c.Latency)
	}
	// busy 2 s (median) over 40 k transactions = 0.05 s per 1k; 2 NET_RX each.
	if math.Abs(c.CPU.PerKTrans-0.05) > 1e-12 || c.CPU.NetRxPerTrans != 2 || c.CPU.PerGB != 0 {
		t.Errorf("cpu block %+v", c.CPU)
	}
}

func TestCompareToBaseline(t *testing.T) {
	host := cellOf("host", 10, 11, 12, 13)
	fast := cellOf("veth", 20, 21, 22, 23)   // no overlap, 4 vs 4: p = 2/70
	same := cellOf("bridge", 11, 12, 13, 10) // same values
	few := cellOf("macvlan", 30, 31, 32)     // 3 vs 4: min p = 2/35 > 0.05
	dead := &results.Cell{Mode: "ipvlan", Path: "pod", Test: "tcp_stream", Samples: []results.Sample{sample(0, false)}}
	other := &results.Cell{Mode: "veth", Path: "pod", Test: "tcp_rr", Samples: []results.Sample{sample(1, true)}}
	cells := []*results.Cell{host, fast, same, few, dead, other}
	Analyze(cells, Options{})
	if v := host.VsBaseline; v == nil || v.Verdict != "baseline" || v.Ratio != 1 {
		t.Fatalf("baseline cell: %+v", v)
	}
	v := fast.VsBaseline
	if v.Verdict != "faster" || !v.Significant || math.Abs(v.PValue-2.0/70) > 1e-12 || math.Abs(v.Ratio-21.5/11.5) > 1e-12 {
		t.Errorf("fast: %+v", v)
	}
	if v.RatioCI95[0] > v.Ratio || v.RatioCI95[1] < v.Ratio {
		t.Errorf("ratio CI %v does not bracket %g", v.RatioCI95, v.Ratio)
	}
	if same.VsBaseline.Verdict != "~" || same.VsBaseline.PValue != 1 {
		t.Errorf("same: %+v", same.VsBaseline)
	}
	if v := few.VsBaseline; v.Verdict != "~" || math.Abs(v.MinPValue-2.0/35) > 1e-12 {
		t.Errorf("3 vs 4 must be '~' (min p %g): %+v", 2.0/35, v)
	}
	if dead.VsBaseline.Verdict != "n/a" || dead.Valid != 0 || dead.Failed != 1 || dead.Status != "failed" {
		t.Errorf("dead: %+v status %s", dead.VsBaseline, dead.Status)
	}
	if other.VsBaseline != nil {
		t.Errorf("tcp_rr has no host cell, yet got %+v", other.VsBaseline)
	}
	Analyze(cells, Options{Baseline: "veth"})
	if host.VsBaseline.Verdict != "slower" || fast.VsBaseline.Verdict != "baseline" || other.VsBaseline.Verdict != "baseline" {
		t.Errorf("--baseline veth: host %+v, veth %+v", host.VsBaseline, fast.VsBaseline)
	}
}

// A service cell is compared with its mode's pod cell (clusterIP/podIP);
// generated services do not change which pod cell that is.
func TestCompareToPod(t *testing.T) {
	pod := cellOf("bridge", 10, 11, 12, 13)
	svc := cellOf("bridge", 5, 5.5, 6, 6.5)
	svc.Path, svc.Provider = "service", "iptables"
	big := cellOf("bridge", 5, 5.5, 6, 6.5)
	big.Path, big.Provider, big.ExtraServices = "service", "iptables", 1000
	other := cellOf("veth-routed", 9, 9, 9)
	other.Path, other.Provider = "service", "iptables"
	Analyze([]*results.Cell{pod, svc, big, other}, Options{})
	for _, c := range []*results.Cell{svc, big} {
		v := c.VsPod
		// medians 5.75 / 11.5 = 0.5; no overlap 4 vs 4: p = 2/70.
		if v == nil || v.Baseline != "bridge/pod" || v.Ratio != 0.5 || v.Verdict != "slower" {
			t.Errorf("%s vs pod: %+v", c.ID(), v)
		}
	}
	if pod.VsPod != nil || other.VsPod != nil {
		t.Errorf("vs pod on a pod cell (%+v) or a mode without pod cell (%+v)", pod.VsPod, other.VsPod)
	}
}

// A cluster cell's CPU block has each node's medians and cost per unit
// beside the cell's own; failed samples count for no node.
func TestSummarizeNodeCPU(t *testing.T) {
	c := cellOf("k", 10, 11, 12)
	for i := range c.Samples {
		c.Samples[i].Bytes = 2e9
		c.Samples[i].CPU = &results.SampleCPU{SystemSec: 1}
		c.Samples[i].NodeCPU = map[string]*results.SampleCPU{
			"k-1": {UserSec: 0.2, SystemSec: 0.6 + float64(i)/10, SoftirqSec: 0.1},
			"k-2": {SystemSec: 0.2},
		}
	}
	bad := sample(0, false)
	bad.NodeCPU = map[string]*results.SampleCPU{"k-1": {SystemSec: 100}}
	c.Samples = append(c.Samples, bad)
	Summarize(c, Options{})
	n1, n2 := c.CPU.Nodes["k-1"], c.CPU.Nodes["k-2"]
	if n1 == nil || n2 == nil || len(c.CPU.Nodes) != 2 {
		t.Fatalf("nodes %+v", c.CPU.Nodes)
	}
	if n1.Samples != 3 || !within(n1.SystemSec, 0.7, 1e-9) || !within(n1.BusySec, 1.0, 1e-9) || !within(n1.PerGB, 0.5, 1e-9) || !within(n2.PerGB, 0.1, 1e-9) {
		t.Errorf("k-1 %+v, k-2 %+v; want k-1 1.0 s busy (0.5 s/GB), k-2 0.1 s/GB", n1, n2)
	}
}

// Tails you can trust: a cell's quantile says how many
// latencies are behind it, and a quantile that a sample left out for too
// few latencies is left out of the cell and named, even when the other
// samples had enough; without counts (an engine that does not say) the
// medians stand as they are.
func TestSummarizeLatencyCounts(t *testing.T) {
	c := &results.Cell{Mode: "host", Test: "tcp_rr"}
	for _, n := range []int{12000, 9000, 15000} {
		s := sample(2000, true)
		s.LatencySamples = n
		s.Latency = map[string]float64{"p50": 25, "p99": 45, "mean": 30}
		if n >= 10000 {
			s.Latency["p99.9"] = 90
		}
		c.Samples = append(c.Samples, s)
	}
	c.Samples = append(c.Samples, sample(0, false)) // an invalid one counts for nothing
	Summarize(c, Options{})
	if want := map[string]int{"p50": 36000, "p99": 36000}; !maps.Equal(c.LatencySamples, want) {
		t.Errorf("latency samples %v, want %v", c.LatencySamples, want)
	}
	if _, ok := c.Latency["p99.9"]; ok || !slices.Equal(c.LatencyTooFew, []string{"p99.9"}) || c.Latency["p99"] != 45 {
		t.Errorf("latency %v, too few %v: want p99 45 and p99.9 left out as too few", c.Latency, c.LatencyTooFew)
	}
	for i := range c.Samples {
		c.Samples[i].LatencySamples = 0 // sockperf's: no count
	}
	Summarize(c, Options{})
	if c.LatencySamples != nil || c.LatencyTooFew != nil || c.Latency["p99.9"] != 90 {
		t.Errorf("without counts: samples %v, too few %v, latency %v: want the medians as they are", c.LatencySamples, c.LatencyTooFew, c.Latency)
	}
}

// Each quantile of a cell comes with its 95% CI: the bootstrap
// of the median over the samples' values, so on samples whose p99 is
// known to be 100 µs give or take noise the CI holds 100 and lies within
// the samples' range; a quantile left out has none, and one sample gives
// the value without an interval.
func TestSummarizeLatencyCI(t *testing.T) {
	c := &results.Cell{Mode: "host", Test: "tcp_rr"}
	for _, p99 := range []float64{96, 104, 100, 92, 108, 99, 101} {
		s := sample(2000, true)
		s.LatencySamples = 5000
		s.Latency = map[string]float64{"p50": 25, "p99": p99}
		c.Samples = append(c.Samples, s)
	}
	Summarize(c, Options{})
	q, ok := c.LatencyCI["p99"]
	if !ok || q.Value != 100 || q.CI[0] > 100 || q.CI[1] < 100 || q.CI[0] < 92 || q.CI[1] > 108 || q.CI[0] == q.CI[1] {
		t.Errorf("p99 %+v: want 100 with a CI inside [92, 108] holding it", q)
	}
	if p50 := c.LatencyCI["p50"]; p50.Value != 25 || p50.CI != [2]float64{25, 25} {
		t.Errorf("p50 %+v: want 25 [25, 25] (every sample said 25)", p50)
	}
	if _, ok := c.LatencyCI["p99.9"]; ok {
		t.Errorf("p99.9 has a CI %+v, but 5000 latencies are too few for it", c.LatencyCI["p99.9"])
	}
	c.Samples = c.Samples[:1]
	Summarize(c, Options{})
	if q := c.LatencyCI["p99"]; q.Value != 96 || q.CI != [2]float64{} {
		t.Errorf("one sample: p99 %+v, want 96 without an interval", q)
	}
}
