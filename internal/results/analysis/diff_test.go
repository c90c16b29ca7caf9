package analysis

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/results"
)

// New against old, by CellID: a -20% change is Worse and a regression; a
// cell that stops working is Lost unless the new run predicted it.
func TestDiff(t *testing.T) {
	const why = "expected to fail: bridge_nf_call_iptables=off"
	failing := func(mode, note string) *results.Cell {
		return &results.Cell{Mode: mode, Path: "service", Provider: "iptables", Test: "tcp_stream", Unit: "Gbit/s", Note: note,
			Samples: []results.Sample{sample(0, false)}}
	}
	service := func(c *results.Cell) *results.Cell {
		c.Path, c.Provider = "service", "iptables"
		return c
	}
	// old: 10 10.1 9.9 10.05 9.95 (median 10); new: each value 0.8x (median 8).
	old := &results.File{Cells: []*results.Cell{cellOf("veth-routed", 10, 10.1, 9.9, 10.05, 9.95), service(cellOf("bridge", 10, 11)),
		service(cellOf("macvlan", 16, 16.1)), failing("bridge-nf-off", why)}}
	new := &results.File{Cells: []*results.Cell{cellOf("veth-routed", 8, 8.08, 7.92, 8.04, 7.96), failing("bridge", ""),
		failing("macvlan", why), failing("bridge-nf-off", why)}}
	fd := Diff(old, new)
	if len(fd.Deltas) != 4 || len(fd.OnlyOld)+len(fd.OnlyNew) != 0 {
		t.Fatalf("%d deltas, %d+%d unmatched", len(fd.Deltas), len(fd.OnlyOld), len(fd.OnlyNew))
	}
	reg, lost, predicted, both := fd.Deltas[0], fd.Deltas[1], fd.Deltas[2], fd.Deltas[3]
	// 5 vs 5 apart: p = 2/C(10,5) = 2/252; ratio exactly 0.8.
	if !within(reg.Pct(), -20, 1e-9) || !within(reg.P, 2.0/252, 1e-12) {
		t.Errorf("delta %g%% p %g, want -20%% and 2/252", reg.Pct(), reg.P)
	}
	if reg.Verdict != Worse || !reg.Measured() {
		t.Errorf("-20%%: verdict %v measured %v", reg.Verdict, reg.Measured())
	}
	if !lost.Lost || lost.Measured() || lost.Note != "FAILED in new" {
		t.Errorf("unpredicted failure in new: %+v", lost)
	}
	if predicted.Lost || predicted.Note != "failed as expected in new" {
		t.Errorf("predicted failure in new: lost %v note %q", predicted.Lost, predicted.Note)
	}
	if both.Lost || both.Note != "failed as expected in both" {
		t.Errorf("predicted failure in both: lost %v note %q", both.Lost, both.Note)
	}
	if r := fd.Regressions(5); len(r) != 2 || r[0] != reg || r[1] != lost {
		t.Errorf("regressions over 5%%: %v", r)
	}
	if r := fd.Regressions(25); len(r) != 1 || r[0] != lost {
		t.Errorf("regressions over 25%%: %v, want only the lost cell", r)
	}
}

// A file whose packets were counted inside its measured windows (by a vnetlab
// that attached its counter there) compared with one that proved them in a sample of their own
// gets a caveat naming that side; two files alike get none.
func TestDiffCounterCaveat(t *testing.T) {
	proven := func(counted bool) *results.File {
		c := cellOf("veth-routed", 10, 10.1, 9.9)
		c.Packets = &results.Packets{}
		if !counted {
			c.ProofSample = &results.Sample{Round: results.RoundProof}
		}
		return &results.File{Cells: []*results.Cell{c}}
	}
	if c := caveat(Diff(proven(true), proven(false))); !strings.Contains(c, "the old file was measured with vnetlab's packet counter") {
		t.Errorf("old counted in its windows: caveat %q", c)
	}
	if c := caveat(Diff(proven(false), proven(true))); !strings.Contains(c, "the new file was") {
		t.Errorf("new counted in its windows: caveat %q", c)
	}
	for _, counted := range []bool{true, false} {
		if c := caveat(Diff(proven(counted), proven(counted))); c != "" {
			t.Errorf("both alike (counted %v): caveat %q", counted, c)
		}
	}
}

func caveat(fd *FileDiff) string { return strings.Join(fd.Caveats, "\n") }

// Matched cells pinned differently (other CPUs, or one side unpinned: a
// file from before streams were pinned by default) get a caveat naming
// them; cells pinned alike get none.
func TestDiffPinCaveat(t *testing.T) {
	file := func(pins ...*results.CPUAffinity) *results.File {
		f := &results.File{}
		for i, p := range pins {
			c := cellOf(fmt.Sprintf("mode%d", i), 10, 10.1, 9.9)
			c.CPUAffinity = p
			f.Cells = append(f.Cells, c)
		}
		return f
	}
	last := &results.CPUAffinity{Client: 1, Server: 1}
	split := &results.CPUAffinity{Client: 0, Server: 1}
	if c := caveat(Diff(file(last, last), file(last, &results.CPUAffinity{Client: 1, Server: 1}))); c != "" {
		t.Errorf("pinned alike: caveat %q", c)
	}
	c := caveat(Diff(file(nil, last), file(last, split)))
	for _, want := range []string{"2 matched cells were pinned differently", "mode0|", "(unpinned, client CPU 1, server CPU 1)", "(client CPU 1, server CPU 1, client CPU 0, server CPU 1)"} {
		if !strings.Contains(c, want) {
			t.Errorf("caveat %q lacks %q", c, want)
		}
	}
}
