package report

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/vnetlab/vnetlab/internal/results"
)

// What `report` does with a results file results.Parse accepts (of every
// schema version: the golden files seed it): the table, the summary, the
// Markdown and HTML reports, all without a panic or an error; and what
// `converge-report` does with a convergence file.
func FuzzReport(f *testing.F) {
	files, _ := filepath.Glob("../../results/testdata/schema-v*.golden.json")
	files = append(files, "testdata/results.json")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
	}
	f.Add([]byte(`{"convergence_version": 1, "proxy": "iptables", "changes": [{"seq": 0, "kind": "endpoint-added", "target": "10.96.0.1:53", "latency_us": {"n1": 900}}],
		"rows": [{"kind": "endpoint-added", "node": "n1", "changes": 1, "p50_us": {"value": 900}, "p99_us": {"value": 900}}], "scale": {"services": 10, "endpoints": 1}}`), true)
	f.Fuzz(func(t *testing.T, b []byte, converge bool) {
		if converge {
			c, err := results.ParseConvergence("c.json", b)
			if err != nil {
				return
			}
			PrintConvergence(io.Discard, c)
			runs := []ConvergeRun{{File: "c.json", C: c}}
			PrintConvergeTable(io.Discard, runs, []string{"endpoint-added", "service-created"})
			ConvergeChart(runs, "endpoint-added").SVG(true)
			return
		}
		r, err := results.Parse("r.json", b)
		if err != nil {
			return
		}
		Table(io.Discard, r, false)
		Table(io.Discard, r, true)
		Summary(io.Discard, r)
		d := Build(r)
		Markdown(io.Discard, d)
		if err := HTML(io.Discard, d); err != nil {
			t.Fatalf("html: %v", err)
		}
	})
}
