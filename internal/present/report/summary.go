package report

import (
	"fmt"
	"io"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"

	"github.com/vnetlab/vnetlab/internal/results"
)

// Summary prints seed 002's table shape: one row per mode (and placement), pod IP beside
// clusterIP per provider, medians, for each test of a run that measured
// both paths. It prints nothing for runs without a service path.
func Summary(w io.Writer, f *results.File) {
	if t := buildConfigTable(f); t != nil { // several clusters: a row per configuration
		configTable(w, t)
		return
	}
	type key struct{ mode, test, col string }
	val := map[key]string{}
	var modes, tests, providers []string
	seen := map[string]bool{}
	add := func(list *[]string, kind, v string) {
		if !seen[kind+v] {
			seen[kind+v] = true
			*list = append(*list, v)
		}
	}
	hasService := false
	for _, c := range f.Cells {
		if c.ExtraServices > 0 || (c.Path != "pod" && c.Path != "service") {
			continue
		}
		col := "podIP"
		if c.Path == "service" {
			hasService = true
			prov := c.Provider
			if prov == "" && f.Metadata.Cluster != nil {
				prov = f.Metadata.Cluster.Network().ProxyText() // a cluster's Services: its proxy
			}
			col = "clusterIP " + prov
			add(&providers, "p", prov)
		}
		// A cluster run measures each path at two placements: a row each.
		row := c.Mode
		if c.Placement != "" {
			row += "@" + c.Placement
		}
		if c.Family != "" {
			row += " " + c.Family
		}
		add(&modes, "m", row)
		add(&tests, "t", c.Test)
		val[key{row, c.Test, col}] = medianText(c)
	}
	if !hasService {
		return
	}
	for _, t := range tests {
		tw := table.NewWriter()
		tw.SetOutputMirror(w)
		tw.SetStyle(table.StyleLight)
		tw.Style().Format.Header = text.FormatDefault
		tw.SetTitle(fmt.Sprintf("%s medians (%s)", t, unitOf(f, t)))
		hdr := table.Row{"mode", "podIP"}
		for _, p := range providers {
			hdr = append(hdr, "clusterIP "+p)
		}
		tw.AppendHeader(hdr)
		for _, m := range modes {
			row := table.Row{m, orDash(val[key{m, t, "podIP"}])}
			for _, p := range providers {
				row = append(row, orDash(val[key{m, t, "clusterIP " + p}]))
			}
			tw.AppendRow(row)
		}
		tw.Render()
	}
}

func unitOf(f *results.File, test string) string {
	for _, c := range f.Cells {
		if c.Test == test {
			return c.Unit
		}
	}
	return ""
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
