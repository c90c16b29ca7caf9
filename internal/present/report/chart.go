package report

// Bar charts with 95% CI error bars. go-chart draws neither grouped bars nor
// error bars. gonum/plot draws both, but not this chart (tried, v0.17): its
// error bars sit on the category's centre, not on their bar (bars are offset
// in page units, error bars placed in data units); every series
// takes a slot in every group, so a mode without a service cell shows a gap;
// and its SVG has no per-bar tooltips or in-chart "FAILED" labels. So the
// layout is done here, once, as a list of shapes (a scene); svg.go writes the
// scene as hand-made SVG (inline in the HTML, and as .svg files) and png.go
// paints the same scene through go-chart's raster renderer (its embedded
// Roboto font and freetype), so both formats agree.

import (
	"fmt"
	"math"
	"strconv"
)

// BarChart is a horizontal grouped (or stacked) bar chart.
type BarChart struct {
	Title   string
	Unit    string     // value axis label
	Legend  []string   // colour names, by colour index (series, or stack parts)
	Groups  []BarGroup // one per mode
	Ref     *RefLine   // e.g. the ceiling
	Stacked bool       // bars are Parts stacked, coloured by part index
}

// BarGroup is a labelled group of bars (one mode).
type BarGroup struct {
	Label string
	Bars  []Bar
}

// Bar is one value with its interval.
type Bar struct {
	Color    int    // index into the palette (and Legend)
	Tip      string // tooltip text
	Value    float64
	Parts    []float64 // stacked charts: values per part, summing to Value
	Lo, Hi   float64   // 95% CI, when HasCI
	HasCI    bool
	Failed   bool // no valid sample: drawn as its Tip, not as a zero bar
	Expected bool // the failure was predicted: drawn grey, not red
}

// RefLine is a labelled vertical line across the plot.
type RefLine struct {
	Value float64
	Label string
}

// palette: distinguishable colours, also for colour-blind readers (Tableau 10).
var palette = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}

func colorOf(i int) string { return palette[i%len(palette)] }

// shape is one drawing primitive of a scene.
type shape struct {
	kind           string // "rect", "line", "text", "poly"
	x, y, w, h     float64
	x2, y2         float64
	fill, stroke   string
	width          float64
	dash           []float64 // a line's dash pattern (nil: solid)
	text           string
	size           float64
	anchor         string // "start", "middle", "end"
	bold           bool
	class, tooltip string
	pts            []float64 // "poly": x, y pairs of a closed polygon
	opacity        float64   // "poly": fill opacity (0: opaque)
}

// scene is a laid-out chart.
type scene struct {
	w, h   float64
	title  string
	shapes []shape
}

// newScene starts a chart with its title, cut to the chart's width.
func newScene(title string) *scene {
	s := &scene{w: chartWidth, title: title}
	s.add(shape{kind: "text", x: chartMargin, y: 20, text: fitText(title, titleSize, true, chartWidth-2*chartMargin), size: titleSize, bold: true, anchor: "start", fill: "#222"})
	return s
}

func (s *scene) add(sh shape) { s.shapes = append(s.shapes, sh) }

const (
	chartWidth  = 760.0
	chartMargin = 10.0
	titleSize   = 14.0
	// legendTop is where a legend (or the first line under the title)
	// starts.
	legendTop = 34.0
	barHeight = 18.0
	barGap    = 4.0
	groupGap  = 14.0
	fontSize  = 12.0
	// maxGroupLabel is the most room a group's label takes; a longer one
	// is cut.
	maxGroupLabel = 240.0
)

// layout turns a chart into shapes.
func (c *BarChart) layout() *scene {
	s := newScene(c.Title)

	labelW := 60.0
	for _, g := range c.Groups {
		labelW = math.Max(labelW, textWidth(g.Label, fontSize, false))
	}
	left := math.Min(labelW, maxGroupLabel) + 16
	right := 110.0
	top := 30.0
	if len(c.Legend) > 1 {
		var keys []legendItem
		for i, name := range c.Legend {
			keys = append(keys, legendItem{label: name, style: lineStyle{color: colorOf(i)}, box: true})
		}
		top = s.addLegend(keys, left, top) + 6
	}

	max := 0.0
	for _, g := range c.Groups {
		for _, b := range g.Bars {
			max = math.Max(max, b.Value)
			if b.HasCI {
				max = math.Max(max, b.Hi)
			}
		}
	}
	if c.Ref != nil {
		max = math.Max(max, c.Ref.Value)
	}
	ticks := niceTicks(max)
	axisMax := ticks[len(ticks)-1]
	plotW := chartWidth - left - right
	xOf := func(v float64) float64 { return left + plotW*v/axisMax }

	// Bars, group by group.
	y := top + 8
	plotTop := y
	for _, g := range c.Groups {
		n := float64(len(g.Bars))
		gh := n*barHeight + (n-1)*barGap
		s.add(shape{kind: "text", x: left - 8, y: y + gh/2 + 4, text: fitText(g.Label, fontSize, false, left-8), size: fontSize, anchor: "end", fill: "#222"})
		for _, b := range g.Bars {
			cy := y + barHeight/2
			if b.Failed {
				color := "#b00020"
				if b.Expected {
					color = "#666666"
				}
				s.add(shape{kind: "text", x: left + 4, y: cy + 4, text: fitText(b.Tip, 11, true, s.w-chartMargin-left-4), size: 11, anchor: "start", fill: color, bold: true})
				y += barHeight + barGap
				continue
			}
			if c.Stacked {
				x := left
				for i, p := range b.Parts {
					w := xOf(p) - left
					s.add(shape{kind: "rect", x: x, y: y, w: w, h: barHeight, fill: colorOf(i), class: "bar", tooltip: b.Tip})
					x += w
				}
			} else {
				s.add(shape{kind: "rect", x: left, y: y, w: xOf(b.Value) - left, h: barHeight, fill: colorOf(b.Color), class: "bar", tooltip: b.Tip})
			}
			end := xOf(b.Value)
			if b.HasCI {
				lo, hi := xOf(b.Lo), xOf(b.Hi)
				s.add(shape{kind: "line", x: lo, y: cy, x2: hi, y2: cy, stroke: "#222", width: 1.5, class: "ci"})
				s.add(shape{kind: "line", x: lo, y: cy - 5, x2: lo, y2: cy + 5, stroke: "#222", width: 1.5, class: "ci"})
				s.add(shape{kind: "line", x: hi, y: cy - 5, x2: hi, y2: cy + 5, stroke: "#222", width: 1.5, class: "ci"})
				end = math.Max(end, hi)
			}
			// A white backing keeps the value readable over grid and ceiling lines.
			s.add(shape{kind: "rect", x: end + 4, y: cy - 7, w: textWidth(fmtValue(b.Value), 11, false) + 4, h: 14, fill: "#ffffff"})
			s.add(shape{kind: "text", x: end + 6, y: cy + 4, text: fmtValue(b.Value), size: 11, anchor: "start", fill: "#222"})
			y += barHeight + barGap
		}
		y += groupGap - barGap
	}
	plotBottom := y - groupGap + 8

	// Axis, grid and the reference line go under the bars: prepend them.
	var under []shape
	for _, t := range ticks {
		x := xOf(t)
		under = append(under, shape{kind: "line", x: x, y: plotTop - 4, x2: x, y2: plotBottom, stroke: "#e3e3e3", width: 1})
		under = append(under, shape{kind: "text", x: x, y: plotBottom + 16, text: fmtTick(t, ticks[1]), size: 11, anchor: "middle", fill: "#555"})
	}
	under = append(under, shape{kind: "line", x: left, y: plotTop - 4, x2: left, y2: plotBottom, stroke: "#888", width: 1})
	under = append(under, shape{kind: "text", x: left + plotW/2, y: plotBottom + 34, text: fitText(c.Unit, 12, false, plotW), size: 12, anchor: "middle", fill: "#333"})
	if c.Ref != nil {
		x := xOf(c.Ref.Value)
		under = append(under, shape{kind: "line", x: x, y: plotTop - 6, x2: x, y2: plotBottom, stroke: "#666", width: 1, dash: markDash, class: "ref"})
		under = append(under, shape{kind: "text", x: x, y: plotTop - 9, text: fitText(c.Ref.Label, 10, false, x-chartMargin), size: 10, anchor: "end", fill: "#555"})
	}
	s.shapes = append(under, s.shapes...)
	s.h = plotBottom + 46
	return s
}

// niceTicks returns 0 and evenly spaced round values covering max.
func niceTicks(max float64) []float64 {
	if max <= 0 || math.IsNaN(max) || math.IsInf(max, 0) {
		return []float64{0, 1}
	}
	step := niceStep(max)
	var t []float64
	for v := 0.0; ; v += step {
		t = append(t, math.Round(v/step)*step)
		if v >= max*1.0001 {
			break
		}
	}
	return t
}

// niceStep is the round step (1, 2, 2.5 or 5 times a power of ten) that
// cuts span into about 5.
func niceStep(span float64) float64 {
	raw := span / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

// fmtTick prints an axis value with as many decimals as the tick step needs.
func fmtTick(v, step float64) string {
	d := 0
	if step > 0 && step < 1 {
		d = int(math.Ceil(-math.Log10(step) - 1e-9))
		if step*math.Pow(10, float64(d)) != math.Round(step*math.Pow(10, float64(d))) {
			d++ // 0.25 needs two decimals
		}
	} else if step > 0 && step != math.Round(step) {
		d = 1 // 2.5
	}
	return strconv.FormatFloat(v, 'f', d, 64)
}

// fmtValue prints a value with 3 significant digits (or as an integer when large).
func fmtValue(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.1f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	case a == 0:
		return "0"
	default:
		return fmt.Sprintf("%.3g", v)
	}
}
