package explain

import (
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
)

// loadCell is a tcp_rr cell at a rate point: offered/s open-loop, every
// sample achieving it with this p99, and usPerTrans of CPU a transaction.
func loadCell(mode, point string, offered, p99, usPerTrans float64) *results.Cell {
	c := &results.Cell{Mode: mode, Path: "pod", Point: point, Test: "tcp_rr", Unit: "trans/s"}
	for range 3 {
		s := results.Sample{Valid: true}
		s.Value, s.LatencySamples = offered, 20000
		s.Latency = map[string]float64{"p50": p99 / 4, "p99": p99}
		s.Schedule = &results.Schedule{Offered: offered, Flows: 1, Scheduled: 10, Sent: 10}
		s.Transfers = offered * 4
		s.CPU = &results.SampleCPU{SystemSec: usPerTrans * offered * 4 / 1e6}
		c.Samples = append(c.Samples, s)
	}
	analysis.Summarize(c, analysis.Options{})
	return c
}

// explain --knob rate: the path whose knee comes at the lowest offered rate
// against the one without a knee, with what a transaction costs each at the
// lowest load; a run without a rate sweep is refused.
func TestKneeSentences(t *testing.T) {
	f := &results.File{Metadata: results.Metadata{Settings: results.Settings{Sweep: &results.Sweep{Axes: []results.Axis{{Knobs: []string{"rate"}, Values: []string{"max", "10%", "50%", "90%"}}}}}}}
	f.Cells = []*results.Cell{
		loadCell("veth-routed", "rate=max", 0, 30, 14),
		loadCell("veth-routed", "rate=10%", 5000, 40, 14),
		loadCell("veth-routed", "rate=50%", 25000, 60, 14),
		loadCell("veth-routed", "rate=90%", 45000, 900, 14),
		loadCell("macvlan", "rate=10%", 6000, 40, 10),
		loadCell("macvlan", "rate=50%", 30000, 50, 10),
		loadCell("macvlan", "rate=90%", 54000, 70, 10),
	}
	s, err := KneeSentences(f, "", nil)
	if err != nil || len(s) != 1 {
		t.Fatalf("%q, %v: want one sentence", s, err)
	}
	for _, want := range []string{
		"tcp_rr: veth-routed's knee comes before macvlan's (veth-routed's at rate=90%, 45000/s offered: p99 900 µs, 22.5x the 40 µs at the lowest load",
		"; macvlan's none up to rate=90%, 54000/s offered)",
		"a transaction costs veth-routed 14.00 µs of the machine's CPU against 10.00 µs for macvlan (1.40x)",
		"runs out of it at a lower rate",
	} {
		if !strings.Contains(s[0], want) {
			t.Errorf("sentence lacks %q:\n%s", want, s[0])
		}
	}
	f.Metadata.Settings.Sweep = nil
	if _, err := KneeSentences(f, "", nil); err == nil || !strings.Contains(err.Error(), "did not sweep the rate") {
		t.Errorf("no sweep: %v", err)
	}
}
