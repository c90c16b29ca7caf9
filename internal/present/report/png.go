package report

import (
	"bytes"
	"fmt"
	"math"

	chart "github.com/wcharczuk/go-chart/v2"
	"github.com/wcharczuk/go-chart/v2/drawing"
)

// pngScale renders PNGs at twice the SVG size, sharp on high-density screens.
const pngScale = 2

// PNG paints the chart's scene through go-chart's raster renderer.
func (c *BarChart) PNG() ([]byte, error) { return c.layout().png() }

// png paints a laid-out chart (any kind).
func (s *scene) png() ([]byte, error) {
	w, h := int(math.Ceil(s.w*pngScale)), int(math.Ceil(s.h*pngScale))
	r, err := chart.PNG(w, h)
	if err != nil {
		return nil, err
	}
	font, err := chart.GetDefaultFont()
	if err != nil {
		return nil, fmt.Errorf("chart font: %w", err)
	}
	r.SetDPI(72) // font sizes in points are then pixels
	px := func(v float64) int { return int(math.Round(v * pngScale)) }
	rect := func(x, y, rw, rh float64, fill string) {
		r.ResetStyle()
		r.SetFillColor(drawing.ColorFromHex(fill[1:]))
		r.MoveTo(px(x), px(y))
		r.LineTo(px(x+rw), px(y))
		r.LineTo(px(x+rw), px(y+rh))
		r.LineTo(px(x), px(y+rh))
		r.Close()
		r.Fill()
	}
	rect(0, 0, s.w, s.h, "#ffffff")
	for _, sh := range s.shapes {
		switch sh.kind {
		case "rect":
			rect(sh.x, sh.y, sh.w, sh.h, sh.fill)
		case "line":
			r.ResetStyle()
			r.SetStrokeColor(drawing.ColorFromHex(sh.stroke[1:]))
			r.SetStrokeWidth(sh.width * pngScale)
			if len(sh.dash) > 0 {
				var d []float64
				for _, v := range sh.dash {
					d = append(d, v*pngScale)
				}
				r.SetStrokeDashArray(d)
			}
			r.MoveTo(px(sh.x), px(sh.y))
			r.LineTo(px(sh.x2), px(sh.y2))
			r.Stroke()
		case "poly":
			if len(sh.pts) < 6 {
				continue
			}
			r.ResetStyle()
			c := drawing.ColorFromHex(sh.fill[1:])
			if sh.opacity > 0 {
				c = c.WithAlpha(uint8(math.Round(255 * sh.opacity)))
			}
			r.SetFillColor(c)
			r.MoveTo(px(sh.pts[0]), px(sh.pts[1]))
			for i := 2; i+1 < len(sh.pts); i += 2 {
				r.LineTo(px(sh.pts[i]), px(sh.pts[i+1]))
			}
			r.Close()
			r.Fill()
		case "text":
			r.ResetStyle()
			r.SetFont(font)
			r.SetFontSize(sh.size * pngScale)
			r.SetFontColor(drawing.ColorFromHex(sh.fill[1:]))
			x := px(sh.x)
			tw := r.MeasureText(sh.text).Width()
			switch sh.anchor {
			case "middle":
				x -= tw / 2
			case "end":
				x -= tw
			}
			r.Text(sh.text, x, px(sh.y))
		}
	}
	var buf bytes.Buffer
	if err := r.Save(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
