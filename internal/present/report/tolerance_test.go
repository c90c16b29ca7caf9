package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
)

// The tolerance section gives its floor, a line per check, and says so
// when no pod cell had a host cell to be checked against.
func TestTolerance(t *testing.T) {
	var b bytes.Buffer
	Tolerance(&b, 0.1, nil)
	if out := b.String(); !strings.Contains(out, "Tolerance 0.1:") || !strings.Contains(out, "under 0.90") || !strings.Contains(out, "nothing to check") {
		t.Errorf("no checks:\n%s", out)
	}
	h := analysis.HostCheck{Pod: results.CellID{Mode: "k", Path: "pod", Test: "tcp_stream"}, Tolerance: 0.1, Perf: 0.62}
	b.Reset()
	Tolerance(&b, 0.1, []analysis.HostCheck{h})
	if out := b.String(); !strings.Contains(out, "  "+h.String()+"\n") || strings.Contains(out, "nothing to check") {
		t.Errorf("one check:\n%s", out)
	}
}
