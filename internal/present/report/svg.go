package report

import (
	"fmt"
	"html"
	"strings"
)

// SVG writes the chart as an SVG document. standalone adds the XML namespace
// a .svg file needs; SVG inlined in HTML does without it.
func (c *BarChart) SVG(standalone bool) string { return c.layout().svg(standalone) }

// svg writes a laid-out chart (any kind) as SVG.
func (s *scene) svg(standalone bool) string {
	var b strings.Builder
	ns := ""
	if standalone {
		ns = ` xmlns="http://www.w3.org/2000/svg"`
	}
	fmt.Fprintf(&b, `<svg%s class="chart" width="%s" height="%s" viewBox="0 0 %s %s" role="img" aria-label="%s" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">`+"\n",
		ns, f1(s.w), f1(s.h), f1(s.w), f1(s.h), esc(s.title))
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(s.title))
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%s" height="%s" fill="#ffffff"/>`+"\n", f1(s.w), f1(s.h))
	for _, sh := range s.shapes {
		class := ""
		if sh.class != "" {
			class = fmt.Sprintf(` class="%s"`, sh.class)
		}
		switch sh.kind {
		case "rect":
			fmt.Fprintf(&b, `<rect%s x="%s" y="%s" width="%s" height="%s" fill="%s"`, class, f1(sh.x), f1(sh.y), f1(sh.w), f1(sh.h), sh.fill)
			if sh.tooltip != "" {
				fmt.Fprintf(&b, "><title>%s</title></rect>\n", esc(sh.tooltip))
			} else {
				b.WriteString("/>\n")
			}
		case "line":
			dash := ""
			if len(sh.dash) > 0 {
				var d []string
				for _, v := range sh.dash {
					d = append(d, f1(v))
				}
				dash = ` stroke-dasharray="` + strings.Join(d, " ") + `"`
			}
			if sh.tooltip != "" {
				fmt.Fprintf(&b, `<line%s x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"%s><title>%s</title></line>`+"\n", class, f1(sh.x), f1(sh.y), f1(sh.x2), f1(sh.y2), sh.stroke, f1(sh.width), dash, esc(sh.tooltip))
				continue
			}
			fmt.Fprintf(&b, `<line%s x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"%s/>`+"\n", class, f1(sh.x), f1(sh.y), f1(sh.x2), f1(sh.y2), sh.stroke, f1(sh.width), dash)
		case "poly":
			var pts []string
			for i := 0; i+1 < len(sh.pts); i += 2 {
				pts = append(pts, f1(sh.pts[i])+","+f1(sh.pts[i+1]))
			}
			op := ""
			if sh.opacity > 0 {
				op = fmt.Sprintf(` fill-opacity="%.2f"`, sh.opacity)
			}
			fmt.Fprintf(&b, `<polygon%s points="%s" fill="%s"%s/>`+"\n", class, strings.Join(pts, " "), sh.fill, op)
		case "text":
			weight := ""
			if sh.bold {
				weight = ` font-weight="bold"`
			}
			fmt.Fprintf(&b, `<text x="%s" y="%s" font-size="%s" text-anchor="%s" fill="%s"%s>%s</text>`+"\n", f1(sh.x), f1(sh.y), f1(sh.size), sh.anchor, sh.fill, weight, esc(sh.text))
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func esc(s string) string { return html.EscapeString(s) }

// f1 prints a coordinate with at most one decimal.
func f1(v float64) string {
	s := fmt.Sprintf("%.1f", v)
	return strings.TrimSuffix(s, ".0")
}
