package report

// A metric against a swept knob's values: one line per mode (and path),
// its 95% CI as a shaded band, the knee marked. Laid out as a scene, like
// BarChart and SeriesChart, so svg.go and png.go draw it; each line has a
// style of its own (seriesStyle) and a key in a legend that wraps.
// go-chart draws lines but fills only down to the axis, not between two
// bounds; gonum/plot could (plotter.Polygon) but would bring a second
// renderer with its own fonts and no tooltips, so these charts would not
// look or behave like the report's others.

import (
	"math"
)

// CurveChart is one metric against one swept knob.
type CurveChart struct {
	Title  string
	Unit   string
	XLabel string   // the knob: "streams", "gso+gro"
	X      []string // its values, in the sweep's order, evenly spaced
	Lines  []CurveLine
	// XAt, when it has a position (0 to 1) for each X, places them there
	// instead (a log axis: ConvergeChart).
	XAt []float64
	// LogY draws the values on a log axis, ticks at powers of ten (values
	// at or below zero sit at the bottom).
	LogY bool
}

// CurveLine is one mode's (and path's) values, one per X.
type CurveLine struct {
	Label  string
	Points []CurvePoint
	// Knee is the index of the knee: the value beyond which the next
	// gives no significant gain (-1: none within the sweep); KneeTip why.
	Knee    int
	KneeTip string
	// Own: a line of vnetlab's own proxy among others' (a scale chart),
	// drawn bolder, on top, its key in bold.
	Own bool
}

// CurvePoint is one cell on a line.
type CurvePoint struct {
	Value, Lo, Hi float64
	HasCI         bool
	Missing       bool // no cell at this value
	Failed        bool // no valid sample (or not applied): a cross at the bottom
	Tip           string
}

// SVG writes the chart as an SVG document (standalone: with the XML namespace).
func (c *CurveChart) SVG(standalone bool) string { return c.layout().svg(standalone) }

// PNG paints the chart.
func (c *CurveChart) PNG() ([]byte, error) { return c.layout().png() }

const bandOpacity = 0.18

// style is line i's: vnetlab's own drawn bolder.
func (c *CurveChart) style(i int) lineStyle { return seriesStyle(i, c.Lines[i].Own) }

// drawOrder is the lines' indexes, vnetlab's own last: on top.
func (c *CurveChart) drawOrder() []int {
	var others, own []int
	for i, l := range c.Lines {
		if l.Own {
			own = append(own, i)
		} else {
			others = append(others, i)
		}
	}
	return append(others, own...)
}

func (c *CurveChart) layout() *scene {
	s := newScene(c.Title)
	var keys []legendItem
	for i, l := range c.Lines {
		keys = append(keys, legendItem{label: l.Label, style: c.style(i), bold: l.Own})
	}
	top := s.addLegend(keys, plotLeft, legendTop) + unitRoom
	p := newValuePlot(top, len(c.X), c.ticks(), c.LogY)
	if len(c.XAt) == len(c.X) {
		p.at = c.XAt
	}
	p.drawFrame(s, c.Unit)
	s.h = p.drawXLabels(s, c.X, 1, 11, c.XLabel)
	for _, li := range c.drawOrder() {
		c.drawLine(s, p, li)
	}
	return s
}

// drawLine draws line li: its CI band, its points joined, its failed
// points' crosses and its knee.
func (c *CurveChart) drawLine(s *scene, p valuePlot, li int) {
	l, st := c.Lines[li], c.style(li)
	// The band: upper bounds left to right, lower bounds back, over each
	// run of consecutive points that have a CI.
	var run []int
	flush := func() {
		if len(run) >= 2 {
			var pts []float64
			for _, i := range run {
				pts = append(pts, p.xOf(i), p.yOf(l.Points[i].Hi))
			}
			for j := len(run) - 1; j >= 0; j-- {
				pts = append(pts, p.xOf(run[j]), p.yOf(l.Points[run[j]].Lo))
			}
			s.add(shape{kind: "poly", pts: pts, fill: st.color, opacity: bandOpacity, class: "ci"})
		}
		run = nil
	}
	for i, pt := range l.Points {
		if pt.Missing || pt.Failed || !pt.HasCI {
			flush()
			continue
		}
		run = append(run, i)
	}
	flush()
	prev := -1
	for i, pt := range l.Points {
		switch {
		case pt.Missing:
			continue
		case pt.Failed:
			addFailedCross(s, p.xOf(i), p.bottom, pt.Tip)
			continue
		}
		if prev >= 0 {
			s.add(shape{kind: "line", x: p.xOf(prev), y: p.yOf(l.Points[prev].Value), x2: p.xOf(i), y2: p.yOf(pt.Value), stroke: st.color, width: st.width, dash: st.dash})
		}
		s.add(shape{kind: "rect", x: p.xOf(i) - 3.5, y: p.yOf(pt.Value) - 3.5, w: 7, h: 7, fill: st.color, class: "point", tooltip: pt.Tip})
		prev = i
	}
	if k := l.Knee; k >= 0 && k < len(l.Points) && !l.Points[k].Missing && !l.Points[k].Failed {
		kx, ky := p.xOf(k), p.yOf(l.Points[k].Value)
		s.add(shape{kind: "line", x: kx, y: ky - 16, x2: kx, y2: p.bottom, stroke: st.color, width: 1.2, dash: markDash, tooltip: l.KneeTip})
		s.add(shape{kind: "text", x: kx + 4, y: ky - 18, text: "knee", size: 10, anchor: "start", fill: st.color})
	}
}

// ticks are the y axis' ticks: from 0 to round values over the largest,
// or on a log axis powers of ten around the chart's positive values.
func (c *CurveChart) ticks() []float64 {
	if c.LogY {
		return c.logTicks()
	}
	hi := 0.0
	for _, l := range c.Lines {
		for _, p := range l.Points {
			if !p.Missing && !p.Failed {
				hi = math.Max(hi, math.Max(p.Value, p.Hi))
			}
		}
	}
	ticks := rangeTicks(0, hi)
	if ticks[0] < 0 {
		ticks = ticks[1:]
	}
	return ticks
}

// logTicks are the powers of ten around the chart's positive values.
func (c *CurveChart) logTicks() []float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, l := range c.Lines {
		for _, p := range l.Points {
			for _, v := range []float64{p.Value, p.Lo, p.Hi} {
				if !p.Missing && !p.Failed && v > 0 {
					lo, hi = math.Min(lo, v), math.Max(hi, v)
				}
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1, 10
	}
	a, b := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if b <= a {
		b = a + 1
	}
	var ticks []float64
	for e := a; e <= b; e++ {
		ticks = append(ticks, math.Pow(10, e))
	}
	return ticks
}
