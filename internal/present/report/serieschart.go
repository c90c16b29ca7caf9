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

// markRoom is the room above the plot for the marks' labels.
const markRoom = 16.0

func (c *SeriesChart) layout() *scene {
	s := newScene(c.Title)
	top := legendTop
	if c.Subtitle != "" {
		s.add(shape{kind: "text", x: chartMargin, y: 38, text: fitText(c.Subtitle, 11, false, s.w-2*chartMargin), size: 11, anchor: "start", fill: "#555"})
		top = 50
	}
	p := newValuePlot(top+unitRoom+markRoom, len(c.Points), rangeTicks(c.valueRange()), false)
	p.above = markRoom
	p.drawFrame(s, c.Unit)
	step := p.step()
	for _, m := range c.Marks {
		x := plotLeft + step*float64(m.Before)
		color, label, dash := "#888888", "#555", markDash
		if m.Change {
			color, label, dash = "#d62728", "#b00020", nil
		}
		s.add(shape{kind: "line", x: x, y: p.top - 4, x2: x, y2: p.bottom, stroke: color, width: 1.5, dash: dash, tooltip: m.Tip})
		s.add(shape{kind: "text", x: x + 3, y: p.top - 6, text: fitText(m.Label, 10, false, s.w-chartMargin-x-3), size: 10, anchor: "start", fill: label})
	}
	for _, l := range c.Levels {
		y := p.yOf(l.Value)
		s.add(shape{kind: "line", x: p.xOf(l.From) - step/2, y: y, x2: p.xOf(l.To) + step/2, y2: y, stroke: colorOf(1), width: 2, tooltip: l.Tip})
	}
	prev := -1
	for i, pt := range c.Points {
		x := p.xOf(i)
		if pt.Failed {
			addFailedCross(s, x, p.bottom, pt.Tip)
			continue
		}
		if pt.HasCI {
			lo, hi := p.yOf(pt.Lo), p.yOf(pt.Hi)
			s.add(shape{kind: "line", x: x, y: lo, x2: x, y2: hi, stroke: "#222", width: 1.2, class: "ci"})
			s.add(shape{kind: "line", x: x - 3, y: lo, x2: x + 3, y2: lo, stroke: "#222", width: 1.2, class: "ci"})
			s.add(shape{kind: "line", x: x - 3, y: hi, x2: x + 3, y2: hi, stroke: "#222", width: 1.2, class: "ci"})
		}
		if prev >= 0 {
			s.add(shape{kind: "line", x: p.xOf(prev), y: p.yOf(c.Points[prev].Value), x2: x, y2: p.yOf(pt.Value), stroke: colorOf(0), width: 1})
		}
		s.add(shape{kind: "rect", x: x - 3.5, y: p.yOf(pt.Value) - 3.5, w: 7, h: 7, fill: colorOf(0), class: "point", tooltip: pt.Tip})
		prev = i
	}
	var labels []string
	for _, pt := range c.Points {
		labels = append(labels, pt.Label)
	}
	every := int(math.Ceil(float64(len(labels)) * 70 / p.width())) // a label per ~70 px
	s.h = p.drawXLabels(s, labels, every, 10, "")
	return s
}

// valueRange is the lowest and highest of the valid points' values and
// CIs.
func (c *SeriesChart) valueRange() (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, p := range c.Points {
		if p.Failed {
			continue
		}
		lo, hi = math.Min(lo, p.Value), math.Max(hi, p.Value)
		if p.HasCI {
			lo, hi = math.Min(lo, p.Lo), math.Max(hi, p.Hi)
		}
	}
	return lo, hi
}
