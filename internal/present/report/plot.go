package report

// What the curve and series charts share: a plot of values against evenly
// spaced positions (its frame, scale and labels), and the styles that keep
// many series apart.

import "math"

const (
	plotHeight = 240.0
	plotLeft   = 70.0
	plotRight  = 30.0
	// unitRoom is the room above a plot for its unit's label.
	unitRoom = 16.0
	// xLabelGap is the least space between two labels of the x axis.
	xLabelGap = 4.0
)

// lineStyle is how one series is drawn: its colour, dash pattern (nil:
// solid) and stroke width.
type lineStyle struct {
	color string
	dash  []float64
	width float64
}

// dashPatterns set series apart once the palette's colours are used up.
var dashPatterns = [][]float64{nil, {8, 4}, {2, 3}, {10, 3, 2, 3}}

// markDash is a marker line's pattern (a knee, a boundary, a reference).
var markDash = []float64{4, 3}

const (
	seriesLineWidth = 1.8
	ownLineWidth    = 3.2 // vnetlab's own series
)

// seriesStyle is the i-th series' style: the palette's colours solid,
// then again with each dash pattern in turn, so len(palette) *
// len(dashPatterns) series are told apart.
func seriesStyle(i int, own bool) lineStyle {
	st := lineStyle{color: colorOf(i), dash: dashPatterns[(i/len(palette))%len(dashPatterns)], width: seriesLineWidth}
	if own {
		st.width = ownLineWidth
	}
	return st
}

// valuePlot is the frame of values against n evenly spaced positions
// (or positions at, from 0 to 1), the y axis from its first tick to its
// last, on a log scale when log.
type valuePlot struct {
	top, bottom float64
	n           int
	at          []float64
	ticks       []float64
	log         bool
	// above is room kept over top for the plot's own labels (the series
	// chart's marks); the unit's label goes over it.
	above float64
}

func (p valuePlot) width() float64 { return chartWidth - plotLeft - plotRight }
func (p valuePlot) step() float64  { return p.width() / float64(max(p.n, 1)) }

func (p valuePlot) xOf(i int) float64 {
	if len(p.at) == p.n && p.n > 0 {
		return plotLeft + p.step()/2 + (p.width()-p.step())*p.at[i]
	}
	return plotLeft + p.step()*(float64(i)+0.5)
}

// yOf is v's height; on a log scale a value at or below zero sits at the
// bottom.
func (p valuePlot) yOf(v float64) float64 {
	lo, hi := p.ticks[0], p.ticks[len(p.ticks)-1]
	if p.log {
		if v <= 0 {
			return p.bottom
		}
		v, lo, hi = math.Log10(v), math.Log10(lo), math.Log10(hi)
	}
	return p.bottom - (p.bottom-p.top)*(v-lo)/(hi-lo)
}

// newValuePlot is a plot from top down.
func newValuePlot(top float64, n int, ticks []float64, log bool) valuePlot {
	return valuePlot{top: top, bottom: top + plotHeight, n: n, ticks: ticks, log: log}
}

// drawFrame draws a grid line and label per tick, the y and x axes, and
// the unit above the y axis.
func (p valuePlot) drawFrame(s *scene, unit string) {
	for _, t := range p.ticks {
		y := p.yOf(t)
		s.add(shape{kind: "line", x: plotLeft, y: y, x2: plotLeft + p.width(), y2: y, stroke: "#e3e3e3", width: 1})
		s.add(shape{kind: "text", x: plotLeft - 6, y: y + 4, text: fmtTick(t, p.ticks[1]-p.ticks[0]), size: 11, anchor: "end", fill: "#555"})
	}
	s.add(shape{kind: "line", x: plotLeft, y: p.top, x2: plotLeft, y2: p.bottom, stroke: "#888", width: 1})
	s.add(shape{kind: "line", x: plotLeft, y: p.bottom, x2: plotLeft + p.width(), y2: p.bottom, stroke: "#888", width: 1})
	s.add(shape{kind: "text", x: 14, y: p.top - p.above - 8, text: fitText(unit, 11, false, s.w-14-chartMargin), size: 11, anchor: "start", fill: "#333"})
}

// drawXLabels labels every every-th position under the plot, each cut to
// the room it has (up to its labelled neighbours, within the chart), and
// title under them; it returns the chart's height.
func (p valuePlot) drawXLabels(s *scene, labels []string, every int, size float64, title string) float64 {
	for i, l := range labels {
		if every <= 0 || i%every != 0 {
			continue
		}
		x := p.xOf(i)
		room := 2 * math.Min(x-chartMargin, s.w-chartMargin-x)
		if i >= every {
			room = math.Min(room, x-p.xOf(i-every))
		}
		if i+every < len(labels) {
			room = math.Min(room, p.xOf(i+every)-x)
		}
		room -= xLabelGap
		s.add(shape{kind: "text", x: x, y: p.bottom + 16, text: fitText(l, size, false, room), size: size, anchor: "middle", fill: "#555"})
	}
	if title == "" {
		return p.bottom + 30
	}
	s.add(shape{kind: "text", x: plotLeft + p.width()/2, y: p.bottom + 34, text: fitText(title, 12, false, p.width()), size: 12, anchor: "middle", fill: "#333"})
	return p.bottom + 44
}

// addFailedCross marks a point with no valid sample: a red cross at the
// plot's bottom, at x.
func addFailedCross(s *scene, x, bottom float64, tip string) {
	y := bottom - 8
	s.add(shape{kind: "line", x: x - 4, y: y - 4, x2: x + 4, y2: y + 4, stroke: "#b00020", width: 2, tooltip: tip})
	s.add(shape{kind: "line", x: x - 4, y: y + 4, x2: x + 4, y2: y - 4, stroke: "#b00020", width: 2, tooltip: tip})
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
