package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
)

func TestTableShowsVerdictsFailuresAndLegend(t *testing.T) {
	f := &results.File{SchemaVersion: 1}
	f.Metadata.Settings = results.Settings{Baseline: "host", CVThreshold: 0.1, CIMethod: "bootstrap-median"}
	f.Cells = []*results.Cell{
		{Mode: "host", Path: "pod", Test: "tcp_stream", Unit: "Gbit/s", Valid: 3, Median: 20, CI95: []float64{19, 21}, CV: 0.02,
			CIMethod: "bootstrap-median", CPU: &results.CPUCost{PerGB: 0.5},
			VsBaseline: &results.Comparison{Baseline: "host", Ratio: 1, Verdict: "baseline", MinPValue: 0.1}},
		{Mode: "bridge", Path: "pod", Test: "tcp_stream", Unit: "Gbit/s", Valid: 3, Failed: 1, Median: 15, CI95: []float64{10, 16}, CV: 0.25, Noisy: true,
			CIMethod: "bootstrap-median", CPU: &results.CPUCost{PerGB: 0.7},
			Samples:    []results.Sample{{Valid: true}, {Valid: false, Error: "iperf3 client: refused"}, {Valid: true}, {Valid: true}},
			VsBaseline: &results.Comparison{Baseline: "host", Ratio: 0.75, RatioCI95: []float64{0.5, 0.8}, Verdict: "~", PValue: 0.1, MinPValue: 0.1}},
		{Mode: "host", Path: "pod", Test: "tcp_rr", Unit: "trans/s", Valid: 0, Failed: 2},
	}
	var b bytes.Buffer
	Table(&b, f, false)
	out := b.String()
	for _, want := range []string{
		"VS HOST", "[19.0, 21.0]", "25.0% NOISY", "0.75 [0.50, 0.80] ~", "0.700 s/GB",
		"3 (1 failed)", "0 (2 failed)", "FAILED bridge/pod/tcp_stream sample 2: iperf3 client: refused",
		"percentile bootstrap of the median", "Mann-Whitney U",
		"cannot reach p < 0.05 with 3 vs 3 samples (smallest possible p 0.10)",
		"CPU affinity: tcp_stream unpinned; tcp_rr unpinned.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "│") && strings.Contains(line, "tcp_rr") && !strings.Contains(line, "│ FAILED │") {
			t.Errorf("a cell without valid samples must say FAILED as its median: %q", line)
		}
	}
	if strings.Contains(out, "packet counter") {
		t.Errorf("a file without packet counts warns of the counter:\n%s", out)
	}
	// A file whose packets were counted in its measured windows (by a
	// vnetlab that attached its counter there) says so under its table; one with a proof sample does not.
	for _, proof := range []*results.Sample{nil, {Round: results.RoundProof}} {
		f.Cells[0].Packets, f.Cells[0].ProofSample = &results.Packets{}, proof
		b.Reset()
		Table(&b, f, false)
		if warned := strings.Contains(b.String(), "warning: this run was measured with vnetlab's packet counter attached in its measured windows"); warned != (proof == nil) {
			t.Errorf("proof sample %v: warned %v:\n%s", proof, warned, b.String())
		}
	}
}

func TestSummaryHasSeed002Shape(t *testing.T) {
	cell := func(mode, path, prov string, v float64) *results.Cell {
		return &results.Cell{Mode: mode, Path: path, Provider: prov, Test: "tcp_stream", Unit: "Gbit/s", Median: v, Valid: 1}
	}
	f := &results.File{Cells: []*results.Cell{
		cell("veth-routed", "pod", "", 15.1), cell("veth-routed", "service", "iptables", 14.2), cell("veth-routed", "service", "ebpf", 15.0),
		cell("bridge", "pod", "", 14.9), {Mode: "bridge", Path: "service", Provider: "iptables", Test: "tcp_stream", Valid: 0, Failed: 3},
	}}
	var b strings.Builder
	Summary(&b, f)
	out := b.String()
	for _, want := range []string{"clusterIP iptables", "clusterIP ebpf", "15.1", "14.2", "FAILED"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	// The bridge row has no ebpf cell: a dash, not a number from another row.
	if !strings.Contains(out, "│ bridge      │ 14.9  │ FAILED             │ -") {
		t.Errorf("bridge row:\n%s", out)
	}
	// A cluster run: a row per placement, its kube-proxy mode as the provider.
	at := func(c *results.Cell, placement string) *results.Cell { c.Placement = placement; return c }
	b.Reset()
	Summary(&b, &results.File{Metadata: results.Metadata{Cluster: &results.Cluster{KubeProxyMode: "nftables"}}, Cells: []*results.Cell{
		at(cell("k", "pod", "", 11.8), "same-node"), at(cell("k", "service", "", 12.3), "same-node"),
		at(cell("k", "pod", "", 10.5), "cross-node"), at(cell("k", "service", "", 9.86), "cross-node")}})
	out = b.String()
	for _, want := range []string{"clusterIP nftables", "│ k@same-node  │ 11.8  │ 12.3", "│ k@cross-node │ 10.5  │ 9.86"} {
		if !strings.Contains(out, want) {
			t.Errorf("cluster summary lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	Summary(&b, &results.File{Cells: []*results.Cell{cell("host", "pod", "", 20)}})
	if b.Len() != 0 {
		t.Errorf("a run without service cells prints a summary:\n%s", b.String())
	}
}

// Under the table, each seed the run can be set beside: the rows it
// measured, the seed's ratio beside ours, and whether ours reproduces it;
// a seed whose baseline the run lacks is left to the report.
func TestTableSaysWhichSeedDifferencesReproduce(t *testing.T) {
	cell := func(mode string, vals ...float64) *results.Cell {
		c := &results.Cell{Mode: mode, Path: "pod", Test: "tcp_stream", Unit: "Gbit/s", Valid: len(vals), CIMethod: "bootstrap-median"}
		for _, v := range vals {
			c.Samples = append(c.Samples, results.Sample{Valid: true, Result: results.Result{Value: v}})
		}
		c.Median = vals[len(vals)/2]
		return c
	}
	f := &results.File{SchemaVersion: 2, Cells: []*results.Cell{
		cell("veth-routed", 15.6, 15.7, 15.8, 15.9, 16.0),
		cell("bridge", 15.5, 15.7, 15.9, 16.0, 16.1),
		cell("macvlan", 15.9, 16.0, 16.1, 16.2, 16.3),
		cell("macvlan-ebpf", 15.9, 16.0, 16.1, 16.2, 16.3),
		{Mode: "veth-routed", Path: "pod", Test: "tcp_rr", Unit: "trans/s", Valid: 1, Median: 1e5},
	}}
	var b bytes.Buffer
	Table(&b, f, false)
	out := b.String()
	for _, want := range []string{
		"Seed 002: Same-host pod connection modes",
		`ratios are to the seed's "veth, podIP" (66.0 Gbit/s) and to our veth-routed/pod/tcp_stream`,
		"  bridge, podIP, bridge-nf-call-iptables=1: seed 0.98, here 1.01 [0.98, 1.03]: agrees",
		"  macvlan, podIP: seed 1.26, here 1.02 [",
		"disagrees (ours 1.02 vs seed 1.26)",
		"  ipvlan+eBPF, podIP (here macvlan-ebpf/pod/tcp_stream (stands in for ipvlan-ebpf)): seed 1.26, here 1.02 [",
		"  1 agree, 2 disagree, 9 not compared (vnetlab report lists every row).",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Seed 001") {
		t.Errorf("seed 001's baseline (host) is not in the run, yet the table shows it:\n%s", out)
	}
}

// A cell's latency shows the latencies behind its quantiles, and "too few
// samples" where a quantile had too few; an open-loop cell that fell
// behind its schedule says by how much.
func TestTableLatencyCounts(t *testing.T) {
	f := &results.File{SchemaVersion: 3}
	f.Cells = []*results.Cell{
		{Mode: "host", Path: "pod", Test: "tcp_rr", Unit: "trans/s", Valid: 1, Median: 2000,
			Samples: []results.Sample{{Valid: true, Result: results.Result{Value: 1990,
				Schedule: &results.Schedule{Offered: 2000, Flows: 2, Scheduled: 4000, Sent: 3990, Late: 110, MaxLagUs: 98500, Behind: true}}}},
			Latency:        map[string]float64{"p50": 25, "p99": 45},
			LatencySamples: map[string]int{"p50": 6000, "p99": 6000}, LatencyTooFew: []string{"p99.9"}},
		{Mode: "bridge", Path: "pod", Test: "tcp_rr", Unit: "trans/s", Valid: 3, Median: 90000,
			Latency:        map[string]float64{"p50": 25, "p99": 45, "p99.9": 80},
			LatencySamples: map[string]int{"p50": 540000, "p99": 540000, "p99.9": 540000}},
	}
	var b bytes.Buffer
	Table(&b, f, false)
	for _, want := range []string{"p50 25.0, p99 45.0, p99.9 too few samples (n=6.0k)", "p50 25.0, p99 45.0, p99.9 80.0 (n=540k)",
		"warning: host/pod/tcp_rr behind its 2000/s schedule in 1 samples: up to 3.0% of requests late or unsent, largest lag 98.5 ms."} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// A precision run's table: each paired comparison with its half-width and
// whether it met the target (after how many rounds), and the legend says
// the method, the looks' confidence and how many met it; a run of fixed
// rounds whose comparisons are wider says how many rounds would do.
func TestTablePairedPrecision(t *testing.T) {
	cell := func(mode string, vals []float64) *results.Cell {
		c := &results.Cell{Mode: mode, Path: "pod", Test: "tcp_rr", Unit: "trans/s"}
		for i, v := range vals {
			c.Samples = append(c.Samples, results.Sample{Result: results.Result{Value: v}, Valid: true, RoundIndex: i + 1, Slot: 1,
				Start: time.Date(2026, 1, 1, 0, 0, 10*i, 0, time.UTC)})
		}
		return c
	}
	var base, tight, loose []float64
	for i := range 12 {
		drift := 1 + 0.1*float64(i%3)
		base = append(base, 100*drift)
		tight = append(tight, 110*drift*(1+0.002*float64(i%2)))
		loose = append(loose, 120*drift*(1+0.2*float64(i%2)))
	}
	loose[0] *= 1.3
	f := &results.File{SchemaVersion: results.SchemaVersion}
	f.Metadata.Settings = results.Settings{Baseline: "a", Precision: 0.02, MaxTime: "6m0s", Looks: []int{10, 12}}
	f.Cells = []*results.Cell{cell("a", base), cell("b", tight), cell("c", loose)}
	analysis.Analyze(f.Cells, analysis.Options{Baseline: "a", Precision: 0.02, Looks: []int{10, 12}})
	var b bytes.Buffer
	Table(&b, f, false)
	out := b.String()
	for _, want := range []string{"faster (p=0.000) ±0.1% met at 10", "signed-rank verdict at p < 0.035", "not met", "paired by round (2 comparisons)", "signed-rank 96.5% CI",
		"precision ±2%: 1 of 2 comparisons met it, after 10-10 rounds; the run took 12 rounds"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	f.Metadata.Settings = results.Settings{Baseline: "a"}
	analysis.Analyze(f.Cells, analysis.Options{Baseline: "a"})
	b.Reset()
	Table(&b, f, false)
	if !strings.Contains(b.String(), "rounds would bring every one within ±2%: run --precision 2%") {
		t.Errorf("a fixed run wider than ±2%% suggests no precision run:\n%s", b.String())
	}
}
