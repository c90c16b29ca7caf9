package report

// A time-series chart for `vnetlab history`: one cell's median per run,
// left to right in time order, with its 95% CI as a whisker, the level of
// each segment between change points, and marked boundaries where the
// machine or vnetlab changed. Laid out as a scene, like BarChart, so svg.go
// and png.go draw it.

import (
	"math"
)

// SeriesChart is one cell over many runs.
type SeriesChart struct {
	Title    string
	Unit     string
	Points   []SeriesPoint
	Levels   []SeriesLevel // a horizontal line per segment (its median)
	Marks    []SeriesMark  // boundaries and change points, before a point
	Subtitle string        // one line under the title (what the marks mean)
}

// SeriesPoint is one run's value.
type SeriesPoint struct {
	Label  string // x-axis label (a short date); drawn for some points only when crowded
	Value  float64
	Lo, Hi float64 // 95% CI, when HasCI
	HasCI  bool
	Failed bool   // no valid sample: a red cross at the bottom
	Tip    string // tooltip
}

// SeriesLevel is a segment's level from point From to point To (inclusive).
type SeriesLevel struct {
	From, To int
	Value    float64
	Tip      string
}

// SeriesMark is a vertical line just before point Before.
type SeriesMark struct {
	Before int
	Label  string
	Change bool // a change point (red, solid); otherwise a boundary (grey, dashed)
	Tip    string
}

// SVG writes the chart as an SVG document (standalone: with the XML namespace).
func (c *SeriesChart) SVG(standalone bool) string { return c.layout().svg(standalone) }

// PNG paints the chart.
func (c *SeriesChart) PNG() ([]byte, error) { return c.layout().png() }

const (
	seriesPlotHeight = 240.0
	seriesLeft       = 70.0
	seriesRight      = 20.0
)

func (c *SeriesChart) layout() *scene {
	s := &scene{w: chartWidth, title: c.Title}
	add := func(sh shape) { s.shapes = append(s.shapes, sh) }
	add(shape{kind: "text", x: 10, y: 20, text: c.Title, size: 14, bold: true, anchor: "start", fill: "#222"})
	top := 34.0
	if c.Subtitle != "" {
		add(shape{kind: "text", x: 10, y: 38, text: c.Subtitle, size: 11, anchor: "start", fill: "#555"})
		top = 50
	}
	top += 16 // room for the marks' labels
	bottom := top + seriesPlotHeight
	plotW := chartWidth - seriesLeft - seriesRight

	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range c.Points {
		if p.Failed {
			continue
		}
		lo, hi = math.Min(lo, p.Value), math.Max(hi, p.Value)
		if p.HasCI {
			lo, hi = math.Min(lo, p.Lo), math.Max(hi, p.Hi)
		}
	}
	ticks := rangeTicks(lo, hi)
	yMin, yMax := ticks[0], ticks[len(ticks)-1]
	yOf := func(v float64) float64 { return bottom - seriesPlotHeight*(v-yMin)/(yMax-yMin) }
	n := len(c.Points)
	step := plotW / float64(max(n, 1))
	xOf := func(i int) float64 { return seriesLeft + step*(float64(i)+0.5) }

	addValueAxes(add, seriesLeft, plotW, top, bottom, ticks, yOf)
	add(shape{kind: "text", x: 14, y: top - 14, text: c.Unit, size: 11, anchor: "start", fill: "#333"})

	for _, m := range c.Marks {
		x := seriesLeft + step*float64(m.Before)
		color, label := "#888888", "#555"
		if m.Change {
			color, label = "#d62728", "#b00020"
		}
		add(shape{kind: "line", x: x, y: top - 4, x2: x, y2: bottom, stroke: color, width: 1.5, dash: !m.Change, tooltip: m.Tip})
		add(shape{kind: "text", x: x + 3, y: top - 6, text: m.Label, size: 10, anchor: "start", fill: label})
	}
	for _, l := range c.Levels {
		y := yOf(l.Value)
		add(shape{kind: "line", x: xOf(l.From) - step/2, y: y, x2: xOf(l.To) + step/2, y2: y, stroke: colorOf(1), width: 2, tooltip: l.Tip})
	}
	prev := -1
	for i, p := range c.Points {
		x := xOf(i)
		if p.Failed {
			addFailedCross(add, x, bottom, p.Tip)
			continue
		}
		if p.HasCI {
			add(shape{kind: "line", x: x, y: yOf(p.Lo), x2: x, y2: yOf(p.Hi), stroke: "#222", width: 1.2, class: "ci"})
			add(shape{kind: "line", x: x - 3, y: yOf(p.Lo), x2: x + 3, y2: yOf(p.Lo), stroke: "#222", width: 1.2, class: "ci"})
			add(shape{kind: "line", x: x - 3, y: yOf(p.Hi), x2: x + 3, y2: yOf(p.Hi), stroke: "#222", width: 1.2, class: "ci"})
		}
		if prev >= 0 {
			add(shape{kind: "line", x: xOf(prev), y: yOf(c.Points[prev].Value), x2: x, y2: yOf(p.Value), stroke: colorOf(0), width: 1})
		}
		add(shape{kind: "rect", x: x - 3.5, y: yOf(p.Value) - 3.5, w: 7, h: 7, fill: colorOf(0), class: "point", tooltip: p.Tip})
		prev = i
	}
	every := int(math.Ceil(float64(n) * 70 / plotW)) // a label per ~70 px
	for i, p := range c.Points {
		if every > 0 && i%every == 0 {
			add(shape{kind: "text", x: xOf(i), y: bottom + 16, text: p.Label, size: 10, anchor: "middle", fill: "#555"})
		}
	}
	s.h = bottom + 30
	return s
}

// addValueAxes draws a value-against-position plot's frame, shared by the
// series and curve charts: a grid line and label per tick, the y and x axes.
func addValueAxes(add func(shape), left, plotW, top, bottom float64, ticks []float64, yOf func(float64) float64) {
	for _, t := range ticks {
		y := yOf(t)
		add(shape{kind: "line", x: left, y: y, x2: left + plotW, y2: y, stroke: "#e3e3e3", width: 1})
		add(shape{kind: "text", x: left - 6, y: y + 4, text: fmtTick(t, ticks[1]-ticks[0]), size: 11, anchor: "end", fill: "#555"})
	}
	add(shape{kind: "line", x: left, y: top, x2: left, y2: bottom, stroke: "#888", width: 1})
	add(shape{kind: "line", x: left, y: bottom, x2: left + plotW, y2: bottom, stroke: "#888", width: 1})
}

// addFailedCross marks a point with no valid sample: a red cross at the
// plot's bottom, at x.
func addFailedCross(add func(shape), x, bottom float64, tip string) {
	y := bottom - 8
	add(shape{kind: "line", x: x - 4, y: y - 4, x2: x + 4, y2: y + 4, stroke: "#b00020", width: 2, tooltip: tip})
	add(shape{kind: "line", x: x - 4, y: y + 4, x2: x + 4, y2: y - 4, stroke: "#b00020", width: 2, tooltip: tip})
}

// rangeTicks are round values covering [lo, hi] with a margin, not from 0:
// a run-to-run change of a few percent must be visible.
func rangeTicks(lo, hi float64) []float64 {
	if math.IsInf(lo, 0) || math.IsInf(hi, 0) || math.IsNaN(lo) || math.IsNaN(hi) {
		return []float64{0, 1}
	}
	if hi == lo {
		pad := math.Max(math.Abs(hi)*0.05, 1e-9)
		lo, hi = lo-pad, hi+pad
	}
	span := hi - lo
	lo, hi = lo-span*0.05, hi+span*0.05
	step := niceStep(hi - lo)
	var t []float64
	for v := math.Floor(lo/step) * step; ; v += step {
		t = append(t, math.Round(v/step)*step)
		if v >= hi-step*1e-9 {
			break
		}
	}
	return t
}
