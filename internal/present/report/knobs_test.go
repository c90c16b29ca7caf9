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
}
