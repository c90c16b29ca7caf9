package report

import (
	"fmt"
	"html"
	"io"
	"strings"

	"github.com/vnetlab/vnetlab/internal/measure/profile"
	"github.com/vnetlab/vnetlab/internal/results"
)

// barRow is one cell in a stage bar chart.
type barRow struct {
	Label string
	S     *results.Profile
}

// writeStageBars draws one horizontal bar per row: its data-path CPU per
// unit stacked by stage, same scale for every row, a legend, and a <title>
// on each segment (stage, µs per unit, share) for hovering. Plain SVG.
func writeStageBars(w io.Writer, rows []barRow, r *profile.Rules) error {
	const (
		width  = 900
		left   = 190
		right  = 70
		barH   = 20
		gap    = 8
		top    = 30
		legend = 18
	)
	var maxUS float64
	unit := ""
	for _, row := range rows {
		if row.S == nil {
			continue
		}
		maxUS = max(maxUS, row.S.DataPathUS)
		unit = row.S.Unit
	}
	order := r.Order()
	used := map[string]bool{}
	for _, row := range rows {
		if row.S == nil {
			continue
		}
		for _, c := range row.S.Stages {
			if profile.Counted(c.Kind) {
				used[c.Stage] = true
			}
		}
	}
	var legendIDs []string
	for _, id := range order {
		if used[id] {
			legendIDs = append(legendIDs, id)
		}
	}
	perLine := 4
	legendLines := (len(legendIDs) + perLine - 1) / perLine
	height := top + len(rows)*(barH+gap) + 10 + legendLines*legend + 10
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="13">data-path CPU per %s by stage (µs, all CPUs; hover for values)</text>`+"\n", left, html.EscapeString(unit))
	if maxUS <= 0 {
		maxUS = 1
	}
	scale := float64(width-left-right) / maxUS
	for i, row := range rows {
		y := top + i*(barH+gap)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-8, y+barH-5, html.EscapeString(row.Label))
		if row.S == nil {
			fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#888">not profiled</text>`+"\n", left, y+barH-5)
			continue
		}
		x := float64(left)
		for _, id := range order {
			c := row.S.Stage(id)
			if !profile.Counted(c.Kind) || c.US <= 0 {
				continue
			}
			wd := c.US * scale
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s — %s: %.2f µs/%s (%.0f%% of the data path)</title></rect>`+"\n",
				x, y, wd, barH, profile.StageColor(id), html.EscapeString(row.Label), html.EscapeString(c.Name), c.US, html.EscapeString(unit), 100*c.Share)
			x += wd
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%.1f</text>`+"\n", x+4, y+barH-5, row.S.DataPathUS)
	}
	ly := top + len(rows)*(barH+gap) + 10
	colW := (width - 20) / perLine
	for i, id := range legendIDs {
		x := 10 + (i%perLine)*colW
		y := ly + (i/perLine)*legend
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			x, y, profile.StageColor(id), x+16, y+11, html.EscapeString(r.Name(id)))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
