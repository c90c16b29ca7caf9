// Package report turns a results file into tables (and, later, documents).
package report

import (
	"fmt"
	"io"

	"github.com/jedib0t/go-pretty/v6/table"

	"github.com/vnetlab/vnetlab/internal/results"
)

// Table prints one row per cell: median, min, max over valid samples. When
// the run has a service path, provider and generated-service columns appear,
// and "vs pod" gives each service cell's median over the same mode's pod-path
// median (seed 002's clusterIP/podIP).
func Table(w io.Writer, f *results.File, markdown bool) {
	svc := false
	for _, c := range f.Cells {
		if c.Provider != "" {
			svc = true
		}
	}
	t := table.NewWriter()
	t.SetOutputMirror(w)
	header := table.Row{"mode", "path"}
	if svc {
		header = append(header, "provider", "+services")
	}
	header = append(header, "test", "median", "min", "max", "unit", "samples")
	if svc {
		header = append(header, "vs pod")
	}
	t.AppendHeader(header)
	var notes []string
	for _, c := range f.Cells {
		row := table.Row{c.Mode, c.Path}
		if svc {
			extra := ""
			if c.Provider != "" {
				extra = fmt.Sprintf("%d", c.ExtraServices)
			}
			row = append(row, c.Provider, extra)
		}
		n := fmt.Sprintf("%d", c.Valid)
		if c.Failed > 0 {
			n += fmt.Sprintf(" (%d FAILED)", c.Failed)
		}
		if c.Valid == 0 {
			row = append(row, c.Test, "FAILED", "", "", c.Unit, n)
		} else {
			row = append(row, c.Test, num(c.Median), num(c.Min), num(c.Max), c.Unit, n)
		}
		if svc {
			row = append(row, vsPod(f, c))
		}
		t.AppendRow(row)
		if c.Note != "" {
			notes = append(notes, fmt.Sprintf("note %s/%s(%s): %s", c.Mode, c.Path, c.Provider, c.Note))
		}
	}
	t.SetStyle(table.StyleLight)
	if markdown {
		t.RenderMarkdown()
	} else {
		t.Render()
	}
	for _, n := range dedup(notes) {
		fmt.Fprintln(w, n)
	}
	for _, s := range f.Metadata.Skipped {
		who := s.Mode
		if s.Provider != "" {
			who += " with " + s.Provider
		}
		fmt.Fprintf(w, "skipped %s: %s\n", who, s.Reason)
	}
}

// vsPod is a service cell's median over the pod-path median of its mode and test.
func vsPod(f *results.File, c *results.Cell) string {
	if c.Provider == "" || c.Valid == 0 {
		return ""
	}
	for _, b := range f.Cells {
		if b.Provider == "" && b.Path == "pod" && b.Mode == c.Mode && b.Test == c.Test && b.Valid > 0 && b.Median > 0 {
			return fmt.Sprintf("%.2f", c.Median/b.Median)
		}
	}
	return ""
}

func dedup(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
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
