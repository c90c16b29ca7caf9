package report

// A metric against a swept knob's values: one line per mode
// (and path), its 95% CI as a shaded band, the knee marked. Laid out as a
// scene, like BarChart and SeriesChart, so svg.go and png.go draw it.
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

const (
	curvePlotHeight = 240.0
	curveLeft       = 70.0
	curveRight      = 30.0
	bandOpacity     = 0.18
)

func (c *CurveChart) layout() *scene {
	s := &scene{w: chartWidth, title: c.Title}
	add := func(sh shape) { s.shapes = append(s.shapes, sh) }
	add(shape{kind: "text", x: 10, y: 20, text: c.Title, size: 14, bold: true, anchor: "start", fill: "#222"})
	top := 34.0
	x := curveLeft
	for i, l := range c.Lines {
		add(shape{kind: "line", x: x, y: top + 6, x2: x + 16, y2: top + 6, stroke: colorOf(i), width: 2.5, class: "legend"})
		add(shape{kind: "text", x: x + 20, y: top + 10, text: l.Label, size: 11, anchor: "start", fill: "#333"})
		x += 20 + textWidth(l.Label, 11) + 18
	}
	top += 34
	bottom := top + curvePlotHeight
	plotW := chartWidth - curveLeft - curveRight

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
	yMin, yMax := ticks[0], ticks[len(ticks)-1]
	yOf := func(v float64) float64 { return bottom - curvePlotHeight*(v-yMin)/(yMax-yMin) }
	if c.LogY {
		ticks, yOf = c.logTicks(bottom)
	}
	step := plotW / float64(max(len(c.X), 1))
	xOf := func(i int) float64 { return curveLeft + step*(float64(i)+0.5) }
	if len(c.XAt) == len(c.X) && len(c.X) > 0 {
		xOf = func(i int) float64 { return curveLeft + step/2 + (plotW-step)*c.XAt[i] }
	}

	addValueAxes(add, curveLeft, plotW, top, bottom, ticks, yOf)
	add(shape{kind: "text", x: 14, y: top - 8, text: c.Unit, size: 11, anchor: "start", fill: "#333"})
	for i, v := range c.X {
		add(shape{kind: "text", x: xOf(i), y: bottom + 16, text: v, size: 11, anchor: "middle", fill: "#555"})
	}
	add(shape{kind: "text", x: curveLeft + plotW/2, y: bottom + 34, text: c.XLabel, size: 12, anchor: "middle", fill: "#333"})

	for li, l := range c.Lines {
		col := colorOf(li)
		// The band: upper bounds left to right, lower bounds back, over
		// each run of consecutive points that have a CI.
		var run []int
		flush := func() {
			if len(run) >= 2 {
				var pts []float64
				for _, i := range run {
					pts = append(pts, xOf(i), yOf(l.Points[i].Hi))
				}
				for j := len(run) - 1; j >= 0; j-- {
					pts = append(pts, xOf(run[j]), yOf(l.Points[run[j]].Lo))
				}
				add(shape{kind: "poly", pts: pts, fill: col, opacity: bandOpacity, class: "ci"})
			}
			run = nil
		}
		for i, p := range l.Points {
			if p.Missing || p.Failed || !p.HasCI {
				flush()
				continue
			}
			run = append(run, i)
		}
		flush()
		prev := -1
		for i, p := range l.Points {
			switch {
			case p.Missing:
				continue
			case p.Failed:
				addFailedCross(add, xOf(i), bottom, p.Tip)
				continue
			}
			if prev >= 0 {
				add(shape{kind: "line", x: xOf(prev), y: yOf(l.Points[prev].Value), x2: xOf(i), y2: yOf(p.Value), stroke: col, width: 2})
			}
			add(shape{kind: "rect", x: xOf(i) - 3.5, y: yOf(p.Value) - 3.5, w: 7, h: 7, fill: col, class: "point", tooltip: p.Tip})
			prev = i
		}
		if k := l.Knee; k >= 0 && k < len(l.Points) && !l.Points[k].Missing && !l.Points[k].Failed {
			kx, ky := xOf(k), yOf(l.Points[k].Value)
			add(shape{kind: "line", x: kx, y: ky - 16, x2: kx, y2: bottom, stroke: col, width: 1.2, dash: true, tooltip: l.KneeTip})
			add(shape{kind: "text", x: kx + 4, y: ky - 18, text: "knee", size: 10, anchor: "start", fill: col})
		}
	}
	s.h = bottom + 44
	return s
}

// logTicks are the powers of ten around the chart's positive values and
// the log scale's y.
func (c *CurveChart) logTicks(bottom float64) ([]float64, func(float64) float64) {
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
	return ticks, func(v float64) float64 {
		if v <= 0 {
			return bottom
		}
		return bottom - curvePlotHeight*(math.Log10(v)-a)/(b-a)
	}
}
