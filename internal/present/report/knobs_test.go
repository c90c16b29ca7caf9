package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
)

// streamCell is a tcp_stream cell at point with these samples, summarised.
func streamCell(mode, point string, vals ...float64) *results.Cell {
	c := &results.Cell{Mode: mode, Path: "pod", Point: point, Test: "tcp_stream", Unit: "Gbit/s"}
	for _, v := range vals {
		c.Samples = append(c.Samples, results.Sample{Valid: true})
		c.Samples[len(c.Samples)-1].Value = v
	}
	analysis.Summarize(c, analysis.Options{})
	return c
}

// The curves: a line per mode over the swept values, the knee where the
// next value stops helping significantly (or none), a not-applied value as
// such; and the latency-under-load rows with their inflation.
func TestKnobSections(t *testing.T) {
	streams, _ := knob.ParseAxisFlag("streams=1,2,4")
	load, _ := knob.ParseAxisFlag("load=0,2")
	f := &results.File{Metadata: results.Metadata{Settings: results.Settings{Sweep: &results.Sweep{Axes: []results.Axis{{Knobs: []string{"streams"}, Values: streams.Values}, {Knobs: []string{"load"}, Values: load.Values}}}}}}
	f.Cells = []*results.Cell{
		streamCell("veth-routed", "streams=1,load=0", 10, 10.2, 9.9, 10.1, 10),
		streamCell("veth-routed", "streams=2,load=0", 20, 20.3, 19.8, 20.1, 20.2),
		streamCell("veth-routed", "streams=4,load=0", 20.2, 19.9, 20, 20.1, 20.3),
		streamCell("macvlan", "streams=1,load=0", 10, 10.2, 9.9, 10.1, 10),
		streamCell("macvlan", "streams=2,load=0", 15, 15.1, 14.9, 15.2, 15),
		streamCell("macvlan", "streams=4,load=0", 18, 18.1, 17.9, 18.2, 18),
		{Mode: "bridge", Path: "pod", Point: "streams=4,load=0", Test: "tcp_stream", Unit: "Gbit/s", NotApplied: "mtu refused"},
	}
	for _, l := range []struct {
		point string
		p99   float64
	}{{"streams=1,load=0", 40}, {"streams=1,load=2", 400}} {
		f.Cells = append(f.Cells, &results.Cell{Mode: "veth-routed", Path: "pod", Point: l.point, Test: "tcp_rr", Unit: "trans/s",
			Latency: map[string]float64{"p50": l.p99 / 2, "p99": l.p99, "p99.9": l.p99 * 2}})
	}
	f.Cells = append(f.Cells, &results.Cell{Mode: "bridge", Path: "pod", PolicyProvider: "iptables", Point: "streams=1,load=0", Test: "tcp_crr", Unit: "conn/s",
		Policies: &results.PolicyProof{Policies: 1000, Objects: 1012, Want: 1012, Probe: "tcp 192.168.10.10:9: dropped", ProbeDenied: 1, Evaluated: 3, LoadSec: 0.5}})
	var buf bytes.Buffer
	Markdown(&buf, Build(f))
	out := buf.String()
	for _, want := range []string{
		"### tcp_stream against streams",
		"| veth-routed | 10.0 | 20.1 | 20.1 | knee at streams=2: streams=4 gives 1.00x (not significant",
		"| macvlan | 10.0 | 15.0 | 18.0 | no knee: every step up to streams=4 helped significantly |",
		"| bridge | - | - | not applied |",
		"As ratios to streams=1 (95% CI; ~ not significant):",
		"| macvlan | 1 | 1.500 [",
		"| bridge | - | - | not applied |\n",
		"## Policies in force",
		"| bridge/pod:iptables{streams=1,load=0}/tcp_crr | in force | 1012 of 1012 | tcp 192.168.10.10:9: dropped | 3 | 0.50 |",
		"## Latency under load",
		"| veth-routed | pod | tcp_rr | 2 | 20.0 | 200.0 | 10.0x | 40.0 | 400.0 | 10.0x |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(out)
	}
	// The terminal table names a cell's provider and point once, as its
	// name does (results.CellID.String).
	buf.Reset()
	Table(&buf, f, false)
	if tab := buf.String(); !strings.Contains(tab, "pod:iptables{streams=1,load=0} ") || strings.Contains(tab, "}{") {
		t.Errorf("the table's path column, want pod:iptables{streams=1,load=0} once:\n%s", tab)
	}
}

// rrCell is a tcp_rr cell at point, open-loop at offered/s: five samples
// achieving achieved/s with this p99 (give or take 2%), p50 a fifth of it,
// 20000 latencies each, summarised; m is what 100% was.
func rrCell(mode, point string, offered, achieved, p99 float64, m *results.RateMax) *results.Cell {
	c := &results.Cell{Mode: mode, Path: "pod", Point: point, Test: "tcp_rr", Unit: "trans/s", RateMax: m}
	for _, d := range []float64{0.98, 1, 1.02, 0.99, 1.01} {
		s := results.Sample{Valid: true}
		s.Value, s.LatencySamples = achieved*d, 20000
		s.Latency = map[string]float64{"p50": p99 * d / 5, "p99": p99 * d, "p99.9": 3 * p99 * d}
		s.Schedule = &results.Schedule{Offered: offered, Flows: 1, Scheduled: 100, Sent: 100}
		c.Samples = append(c.Samples, s)
	}
	analysis.Summarize(c, analysis.Options{})
	return c
}

// Latency against offered load: a rate sweep draws each
// quantile against the rate offered, a line per mode with its CIs and the
// latencies behind it; a line's knee is where p99 passes 2x the lowest
// load's (bridge) or the achieved rate falls behind the offered (macvlan);
// the closed loop (max) stays out of those curves; the table says what
// 100% was per path.
func TestLatencyAgainstLoad(t *testing.T) {
	f := &results.File{Metadata: results.Metadata{Settings: results.Settings{Sweep: &results.Sweep{Axes: []results.Axis{{Knobs: []string{"rate"}, Values: []string{"max", "10%", "50%", "90%"}}}}}}}
	share := func(s, max float64) *results.RateMax {
		return &results.RateMax{Share: s, ClosedLoop: []float64{max}, Max: max, Offered: s * max}
	}
	f.Cells = []*results.Cell{
		rrCell("bridge", "rate=max", 0, 50000, 30, nil),
		rrCell("bridge", "rate=10%", 5000, 5000, 40, share(0.1, 50000)),
		rrCell("bridge", "rate=50%", 25000, 25000, 70, share(0.5, 50000)),
		rrCell("bridge", "rate=90%", 45000, 45000, 900, share(0.9, 50000)),
		rrCell("macvlan", "rate=10%", 6000, 6000, 40, share(0.1, 60000)),
		rrCell("macvlan", "rate=50%", 30000, 28000, 60, share(0.5, 60000)),
	}
	d := Build(f)
	var p99 *CurveView
	for _, cv := range d.Curves {
		if cv.Metric == "p99 latency" {
			p99 = cv
		}
	}
	if p99 == nil {
		t.Fatalf("no p99 latency curve among %d curves", len(d.Curves))
	}
	if !p99.Chart.LogY {
		t.Error("the latency curve's y axis is linear: microseconds at low load and seconds past the knee need a log scale")
	}
	if x := strings.Join(p99.Chart.X, ","); x != "10%,50%,90%" {
		t.Errorf("x %s: want the offered rates without the closed loop", x)
	}
	for _, l := range p99.Chart.Lines {
		want := map[string]int{"bridge": 2, "macvlan": 1}[l.Label]
		if l.Knee != want {
			t.Errorf("%s: knee %d (%s), want %d", l.Label, l.Knee, l.KneeTip, want)
		}
		if p := l.Points[0]; !p.HasCI || p.Lo > p.Value || p.Hi < p.Value {
			t.Errorf("%s at 10%%: %+v, want a CI around the value", l.Label, p)
		}
	}
	// The achieved rate's own curve has the same knee (more offered load
	// is not "better": a Mann-Whitney knee would stop at the first step),
	// indexed on its axis, whose first value is the closed loop.
	for _, cv := range d.Curves {
		if cv.Metric != "" {
			continue
		}
		for _, l := range cv.Chart.Lines {
			if want := map[string]int{"bridge": 3, "macvlan": 2}[l.Label]; l.Knee != want || !strings.HasPrefix(l.KneeTip, "knee at rate=") {
				t.Errorf("achieved rate, %s: knee %d (%s), want %d as on the latency curves", l.Label, l.Knee, l.KneeTip, want)
			}
		}
	}
	var buf bytes.Buffer
	Markdown(&buf, d)
	out := buf.String()
	// Ratios to the first value only under the achieved rate's curve: a
	// latency curve's rows have none, and an empty table is not written.
	if n := strings.Count(out, "As ratios to rate="); n != 1 {
		t.Errorf("%d ratio tables, want 1 (the achieved rate's, none under a latency curve)", n)
	}
	buf.Reset()
	Table(&buf, f, false)
	out += buf.String()
	for _, want := range []string{
		"### tcp_rr p99 latency against rate",
		"| bridge | 40.0 [39.2, 40.8] (n=100k) | 70.0 [68.6, 71.4] (n=100k) | 900.0 [882.0, 918.0] (n=100k) | knee at rate=90%: p99 900 µs, 22.5x the 40 µs at the lowest load",
		"| macvlan | 40.0 [39.2, 40.8] (n=100k) | 60.0 [58.8, 61.2] (n=100k) | - | knee at rate=50%: achieved 28000/s, under 99% of the 30000/s offered",
		"rate: bridge/pod/tcp_rr: 100% = 50000 trans/s closed-loop (median of 1 samples before the rounds); offered 10% 5000/s 50% 25000/s 90% 45000/s.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(out)
	}
}

// A kube run with kube.lab and a policies sweep: the cluster's line beside
// the lab's on one curve, and under it each line's enforcer CPU from its
// profile: the lab cell's provider's stages, the cluster cell's through
// its enforcer's lab provider (results.Cluster.PolicyLabProvider).
func TestPolicyCurvesLabBesideCluster(t *testing.T) {
	axis, _ := knob.ParseAxisFlag("policies=0,1000")
	f := &results.File{Metadata: results.Metadata{
		Settings: results.Settings{Sweep: &results.Sweep{Axes: []results.Axis{{Knobs: []string{"policies"}, Values: axis.Values}}}},
		Cluster:  &results.Cluster{Name: "k", NetworkPolicy: "vnetlab", PolicyLabProvider: "ebpf"}}}
	profiled := func(c *results.Cell, bpf, total float64) *results.Cell {
		c.Test, c.Unit = "tcp_crr", "conn/s"
		c.Profile = &results.Profile{Unit: "transaction", DataPathUS: total, Stages: []results.StageCost{{Stage: "tc_bpf", US: bpf}, {Stage: "veth", US: total - bpf}}}
		return c
	}
	lab := func(point string, vals ...float64) *results.Cell {
		c := streamCell("veth-ebpf", point, vals...)
		c.PolicyProvider = "ebpf"
		return c
	}
	cl := func(point string, vals ...float64) *results.Cell {
		c := streamCell("k", point, vals...)
		c.Placement = "same-node"
		return c
	}
	f.Cells = []*results.Cell{
		profiled(lab("policies=0", 10, 10.1, 9.9, 10, 10.2), 1, 40), profiled(cl("policies=0", 8, 8.1, 7.9, 8, 8.2), 1.2, 50),
		profiled(lab("policies=1000", 9, 9.1, 8.9, 9, 9.2), 3, 50), profiled(cl("policies=1000", 7, 7.1, 6.9, 7, 7.2), 4, 80),
	}
	var buf bytes.Buffer
	Markdown(&buf, Build(f))
	out := buf.String()
	for _, want := range []string{
		"### tcp_crr against policies",
		"| veth-ebpf pod:ebpf | 10.0 | 9.00 |",
		"| k pod@same-node | 8.00 | 7.00 |",
		"The NetworkPolicy enforcer's CPU",
		"| veth-ebpf pod:ebpf | 1.00 µs, 2.5% | 3.00 µs, 6.0% | tc/BPF |",
		"| k pod@same-node | 1.20 µs, 2.4% | 4.00 µs, 5.0% | tc/BPF |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(out, "knee at policies") {
		t.Error("a knee on the policies axis: more policies never help, a cost axis has none")
	}
	if t.Failed() {
		t.Log(out)
	}
	// Without profiles there is no enforcer table.
	for _, c := range f.Cells {
		c.Profile = nil
	}
	buf.Reset()
	Markdown(&buf, Build(f))
	if strings.Contains(buf.String(), "The NetworkPolicy enforcer's CPU") {
		t.Error("an enforcer CPU table without profiled cells")
	}
}
