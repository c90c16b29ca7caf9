package report

// The table of a kube run over several cluster configurations
// (kube.clusters): one row per configuration and placement, each
// test's pod IP and ClusterIP medians beside clusterIP/podIP with its 95%
// CI, then the same with the extra Services present.

import (
	"fmt"
	"io"
	"slices"

	"github.com/jedib0t/go-pretty/v6/table"

	"github.com/vnetlab/vnetlab/internal/results"
)

// ConfigTable is that table, formatted.
type ConfigTable struct {
	Header []string
	Rows   [][]string
}

// column is one test, alone or with n extra Services.
type column struct {
	test  string
	extra int
}

// buildConfigTable is nil for a file of one cluster or a lab.
func buildConfigTable(f *results.File) *ConfigTable {
	if len(f.Metadata.Clusters) == 0 {
		return nil
	}
	var cols []column
	var placements []string
	find := func(mode, path, placement string, col column) *results.Cell {
		for _, c := range f.Cells {
			if c.Mode == mode && c.Path == path && c.Placement == placement && c.Test == col.test && c.ExtraServices == col.extra {
				return c
			}
		}
		return nil
	}
	for _, c := range f.Cells {
		if c.Path != "pod" && c.Path != "service" {
			continue
		}
		if col := (column{c.Test, c.ExtraServices}); !slices.Contains(cols, col) {
			cols = append(cols, col)
		}
		if !slices.Contains(placements, c.Placement) {
			placements = append(placements, c.Placement)
		}
	}
	// Tests alone first, then with extra Services.
	slices.SortStableFunc(cols, func(a, b column) int { return min(a.extra, 1) - min(b.extra, 1) })
	t := &ConfigTable{Header: []string{"configuration", "CNI", "proxy", "placement"}}
	for _, col := range cols {
		name := col.test
		if col.extra > 0 {
			name += fmt.Sprintf(" +%d Services", col.extra)
		}
		t.Header = append(t.Header, name+" podIP", name+" clusterIP", name+" clusterIP/podIP [95% CI]")
	}
	for _, cl := range f.Metadata.Clusters {
		for _, pl := range placements {
			row := []string{cl.Name, cl.CNI, cl.Network().ProxyText(), pl}
			for _, col := range cols {
				pod, svc := find(cl.Name, "pod", pl, col), find(cl.Name, "service", pl, col)
				row = append(row, cellMedian(pod), cellMedian(svc), cellRatio(svc, pod))
			}
			t.Rows = append(t.Rows, row)
		}
	}
	return t
}

func cellMedian(c *results.Cell) string {
	if c == nil {
		return "-"
	}
	return medianText(c) + " " + c.Unit
}

// cellRatio is num's median over den's with the bootstrap CI of the ratio
// (what `vnetlab ratio` prints for the pair).
func cellRatio(num, den *results.Cell) string {
	if num == nil || den == nil || len(num.Values()) == 0 || len(den.Values()) == 0 {
		return "-"
	}
	return ratioOf(num, den, 3)
}

// configTable prints the table on a terminal.
func configTable(w io.Writer, t *ConfigTable) {
	tw := table.NewWriter()
	tw.SetOutputMirror(w)
	tw.SetStyle(table.StyleLight)
	tw.SetTitle("configurations: medians, clusterIP/podIP [95%% CI]")
	var hdr table.Row
	for _, h := range t.Header {
		hdr = append(hdr, h)
	}
	tw.AppendHeader(hdr)
	for _, r := range t.Rows {
		var row table.Row
		for _, v := range r {
			row = append(row, v)
		}
		tw.AppendRow(row)
	}
	tw.Render()
}
