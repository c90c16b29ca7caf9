// Package report turns a results file into tables (and, later, documents).
package report

import (
	"fmt"
	"io"

	"github.com/jedib0t/go-pretty/v6/table"

	"github.com/vnetlab/vnetlab/internal/results"
)

// Table prints one row per cell: median, min, max over valid samples.
func Table(w io.Writer, f *results.File, markdown bool) {
	t := table.NewWriter()
	t.SetOutputMirror(w)
	t.AppendHeader(table.Row{"mode", "path", "test", "median", "min", "max", "unit", "samples"})
	for _, c := range f.Cells {
		n := fmt.Sprintf("%d", c.Valid)
		if c.Failed > 0 {
			n += fmt.Sprintf(" (%d FAILED)", c.Failed)
		}
		if c.Valid == 0 {
			t.AppendRow(table.Row{c.Mode, c.Path, c.Test, "FAILED", "", "", c.Unit, n})
			continue
		}
		t.AppendRow(table.Row{c.Mode, c.Path, c.Test, num(c.Median), num(c.Min), num(c.Max), c.Unit, n})
	}
	t.SetStyle(table.StyleLight)
	if markdown {
		t.RenderMarkdown()
	} else {
		t.Render()
	}
	for _, s := range f.Metadata.Skipped {
		fmt.Fprintf(w, "skipped %s: %s\n", s.Mode, s.Reason)
	}
}

func num(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 100:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}
