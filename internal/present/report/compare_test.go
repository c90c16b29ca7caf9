package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
	"github.com/vnetlab/vnetlab/internal/results/stats"
)

func mkCell(mode, path, provider, test, unit string, vals ...float64) *results.Cell {
	c := &results.Cell{Mode: mode, Path: path, Provider: provider, Test: test, Unit: unit}
	for _, v := range vals {
		s := results.Sample{Valid: true}
		s.Value = v
		c.Samples = append(c.Samples, s)
	}
	c.Valid, c.Median = len(vals), stats.Median(vals)
	return c
}

// compareFiles are two synthetic runs: one clearly regressed cell (-20%,
// tight), one unchanged but noisy cell (±10% spread, same distribution),
// one cell only in each file.
func compareFiles() (old, new *results.File) {
	old = &results.File{SchemaVersion: 1, Cells: []*results.Cell{
		mkCell("veth-routed", "pod", "", "tcp_stream", "Gbit/s", 10, 10.1, 9.9, 10.05, 9.95, 10.02, 9.98, 10.03),
		mkCell("bridge", "pod", "", "tcp_rr", "trans/s", 30000, 36000, 28000, 34000, 31000, 37000, 29000, 33000),
		mkCell("macvlan", "pod", "", "tcp_stream", "Gbit/s", 16, 16.1, 15.9, 16),
	}}
	new = &results.File{SchemaVersion: 1, Cells: []*results.Cell{
		mkCell("veth-routed", "pod", "", "tcp_stream", "Gbit/s", 8, 8.1, 7.9, 8.05, 7.95, 8.02, 7.98, 8.03),
		mkCell("bridge", "pod", "", "tcp_rr", "trans/s", 32000, 29500, 35500, 30500, 36500, 28500, 33500, 31500),
		mkCell("veth-ebpf", "pod", "", "tcp_stream", "Gbit/s", 18, 18.1, 17.9),
	}}
	return old, new
}

func TestCompareVerdicts(t *testing.T) {
	c := analysis.Diff(compareFiles())
	if len(c.Deltas) != 2 || len(c.OnlyOld) != 1 || len(c.OnlyNew) != 1 {
		t.Fatalf("deltas %d, only old %d, only new %d; want 2, 1, 1", len(c.Deltas), len(c.OnlyOld), len(c.OnlyNew))
	}
	reg, noisy := c.Deltas[0], c.Deltas[1]
	if reg.Verdict != analysis.Worse || !reg.Significant() || reg.Pct() > -19 || reg.Pct() < -21 {
		t.Errorf("regressed cell: verdict %v, significant %v, delta %.1f%%; want worse, true, -20%%", reg.Verdict, reg.Significant(), reg.Pct())
	}
	if lo, hi := reg.PctCI(); !reg.HasCI || hi > -15 || lo < -25 {
		t.Errorf("regressed cell CI [%.1f, %.1f]%%: want around -20%%", lo, hi)
	}
	if noisy.Verdict != analysis.Same || noisy.Significant() {
		t.Errorf("noisy unchanged cell: verdict %v (p=%.3f), want ~", noisy.Verdict, noisy.P)
	}
	if lo, hi := noisy.PctCI(); !noisy.HasCI || lo > 0 || hi < 0 {
		t.Errorf("noisy cell CI [%.1f, %.1f]%% should hold 0", lo, hi)
	}
	if r := c.Regressions(5); len(r) != 1 || r[0] != reg {
		t.Errorf("regressions over 5%%: %v", r)
	}
	if r := c.Regressions(30); len(r) != 0 {
		t.Errorf("regressions over 30%%: %v, want none", r)
	}
	var b bytes.Buffer
	PrintComparison(&b, c, "old.json", "new.json")
	for _, want := range []string{"only in old: macvlan|pod||tcp_stream", "only in new: veth-ebpf|pod||tcp_stream", "-20.0%"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}

// Latency is lower-is-better: a rise is worse.
func TestCompareDirection(t *testing.T) {
	old := &results.File{Cells: []*results.Cell{mkCell("host", "pod", "", "lat", "us", 20, 20.1, 19.9, 20.05, 19.95)}}
	new := &results.File{Cells: []*results.Cell{mkCell("host", "pod", "", "lat", "us", 25, 25.1, 24.9, 25.05, 24.95)}}
	if d := analysis.Diff(old, new).Deltas[0]; d.Verdict != analysis.Worse {
		t.Errorf("latency up 25%%: verdict %v, want worse", d.Verdict)
	}
	old.Cells[0].Unit, new.Cells[0].Unit = "Gbit/s", "Gbit/s"
	if d := analysis.Diff(old, new).Deltas[0]; d.Verdict != analysis.Better {
		t.Errorf("throughput up 25%%: verdict %v, want better", d.Verdict)
	}
}

func TestParsePercent(t *testing.T) {
	for in, want := range map[string]float64{"5%": 5, "5": 5, " 2.5 % ": 2.5} {
		if v, err := ParsePercent(in); err != nil || v != want {
			t.Errorf("%q: %v %v", in, v, err)
		}
	}
	for _, in := range []string{"abc", "-5%", ""} {
		if _, err := ParsePercent(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}
