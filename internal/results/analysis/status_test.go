package analysis

import (
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/results"
)

// A failure the run predicted is a result; an unpredicted failure, or a
// predicted one that did not happen, is a problem.
func TestStatusAndProblems(t *testing.T) {
	const why = "expected to fail: bridge_nf_call_iptables=off"
	ok := cellOf("bridge", 10, 11)
	expected := &results.Cell{Mode: "bridge-nf-off", Path: "service", Provider: "iptables", Test: "tcp_stream", Note: why,
		Samples: []results.Sample{sample(0, false), sample(0, false)}}
	cells := []*results.Cell{ok, expected}
	Analyze(cells, Options{})
	if StatusOf(ok) != OK || StatusOf(expected) != FailedAsExpected || expected.Status != "failed-as-expected" {
		t.Errorf("statuses %v %v (%s)", StatusOf(ok), StatusOf(expected), expected.Status)
	}
	if err := Problems(cells); err != nil {
		t.Errorf("a predicted failure is not a problem: %v", err)
	}

	dead := &results.Cell{Mode: "macvlan", Path: "service", Provider: "nftables", ExtraServices: 1000, Test: "tcp_crr", Samples: []results.Sample{sample(0, false)}}
	worked := &results.Cell{Mode: "bridge-nf-off", Path: "service", Provider: "nftables", Test: "tcp_stream", Note: why,
		Samples: []results.Sample{sample(0, false), sample(3, true)}}
	cells = append(cells, dead, worked)
	Analyze(cells, Options{})
	if StatusOf(dead) != Failed || StatusOf(worked) != WorkedUnexpectedly || worked.Status != "worked-unexpectedly" {
		t.Errorf("statuses %v %v", StatusOf(dead), StatusOf(worked))
	}
	err := Problems(cells)
	for _, want := range []string{
		"1 cell has no valid sample (macvlan/service(nftables+1000)/tcp_crr)",
		"1 cell was predicted to fail but measured (bridge-nf-off/service(nftables)/tcp_stream)",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems %v lack %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "iptables") {
		t.Errorf("the predicted failure is listed as a problem: %v", err)
	}
}
