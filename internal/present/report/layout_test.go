package report

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// crowdedLabels are n long, distinct series names, as a scale chart's
// proxy, path, E and pause make them.
func crowdedLabels(n int) []string {
	var l []string
	for i := range n {
		l = append(l, fmt.Sprintf("kube-proxy nftables (on veth-ebpf, run %d), E=10, pause 1.5s-2s", i+1))
	}
	return l
}

// crowdedScenes are every chart type of the package laid out with 16
// long labels: legends, group names, point and mark labels.
func crowdedScenes() map[string]*scene {
	labels := crowdedLabels(16)
	long := strings.Repeat("a long title that says what the chart shows, ", 3)
	bar := &BarChart{Title: long, Unit: long, Legend: labels, Ref: &RefLine{Value: 5, Label: long}}
	for i, l := range labels {
		g := BarGroup{Label: l, Bars: []Bar{{Color: i, Value: float64(i + 1), Lo: float64(i), Hi: float64(i + 2), HasCI: true, Tip: l}}}
		if i == 3 {
			g.Bars = append(g.Bars, Bar{Failed: true, Tip: long})
		}
		bar.Groups = append(bar.Groups, g)
	}
	curve := &CurveChart{Title: long, Unit: long, XLabel: long, LogY: true, XAt: []float64{0, 0.8, 0.9, 1}}
	for i := range 4 {
		curve.X = append(curve.X, labels[i])
	}
	for i, l := range labels {
		cl := CurveLine{Label: l, Knee: 3, KneeTip: l}
		for x := range curve.X {
			v := float64((i + 1) * (x + 1))
			cl.Points = append(cl.Points, CurvePoint{Value: v, Lo: v / 2, Hi: v * 2, HasCI: true, Failed: i == 5 && x == 0})
		}
		curve.Lines = append(curve.Lines, cl)
	}
	series := &SeriesChart{Title: long, Unit: long, Subtitle: long}
	for i, l := range labels {
		series.Points = append(series.Points, SeriesPoint{Label: l, Value: float64(i), Lo: float64(i) - 1, Hi: float64(i) + 1, HasCI: true, Failed: i == 7})
		series.Marks = append(series.Marks, SeriesMark{Before: i, Label: l, Change: i%2 == 0})
	}
	series.Levels = []SeriesLevel{{From: 0, To: 15, Value: 8}}
	return map[string]*scene{"bar": bar.layout(), "curve": curve.layout(), "series": series.layout()}
}

// bounds is the box a shape covers: a text's from its anchor and
// textWidth (the estimate the layout reserves room with), its height from
// its size.
func bounds(sh shape) (x0, y0, x1, y1 float64) {
	switch sh.kind {
	case "rect":
		return sh.x, sh.y, sh.x + sh.w, sh.y + sh.h
	case "line":
		h := sh.width / 2
		return math.Min(sh.x, sh.x2) - h, math.Min(sh.y, sh.y2) - h, math.Max(sh.x, sh.x2) + h, math.Max(sh.y, sh.y2) + h
	case "poly":
		x0, y0, x1, y1 = math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)
		for i := 0; i+1 < len(sh.pts); i += 2 {
			x0, x1 = math.Min(x0, sh.pts[i]), math.Max(x1, sh.pts[i])
			y0, y1 = math.Min(y0, sh.pts[i+1]), math.Max(y1, sh.pts[i+1])
		}
		return x0, y0, x1, y1
	}
	w := textWidth(sh.text, sh.size, sh.bold)
	switch sh.anchor {
	case "middle":
		x0 = sh.x - w/2
	case "end":
		x0 = sh.x - w
	default:
		x0 = sh.x
	}
	return x0, sh.y - sh.size*textAscent, x0 + w, sh.y + sh.size*textDescent
}

// Every chart type with 16 long labels keeps every text and mark inside
// its box.
func TestCrowdedChartsStayInTheirBox(t *testing.T) {
	for name, s := range crowdedScenes() {
		out := 0
		for _, sh := range s.shapes {
			x0, y0, x1, y1 := bounds(sh)
			if x0 < -0.01 || y0 < -0.01 || x1 > s.w+0.01 || y1 > s.h+0.01 {
				if out++; out <= 5 {
					t.Errorf("%s chart (%.0f x %.0f): %s %q covers (%.1f, %.1f)-(%.1f, %.1f), outside the box", name, s.w, s.h, sh.kind, sh.text, x0, y0, x1, y1)
				}
			}
		}
		if out > 5 {
			t.Errorf("%s chart: %d shapes outside the box in all", name, out)
		}
		// Centred labels on one line (an axis' labels) do not run into
		// each other.
		for i, a := range s.shapes {
			for _, b := range s.shapes[i+1:] {
				if a.kind != "text" || b.kind != "text" || a.anchor != "middle" || b.anchor != "middle" || a.y != b.y {
					continue
				}
				ax0, _, ax1, _ := bounds(a)
				bx0, _, bx1, _ := bounds(b)
				if ax0 < bx1 && bx0 < ax1 {
					t.Errorf("%s chart: labels %q and %q overlap", name, a.text, b.text)
				}
			}
		}
	}
}

// Sixteen series on one curve chart: every one has a key of its own style
// (colour and dash) with its whole label, and vnetlab's own line is the
// boldest and drawn last, on top.
func TestCrowdedCurveChartTellsSeriesApart(t *testing.T) {
	labels := crowdedLabels(16)
	ch := &CurveChart{Title: "t", Unit: "ms", X: []string{"0", "1"}}
	for i, l := range labels {
		ch.Lines = append(ch.Lines, CurveLine{Label: l, Knee: -1, Own: i == 12,
			Points: []CurvePoint{{Value: float64(i + 1)}, {Value: float64(i + 2)}}})
	}
	s := ch.layout()
	styles := map[string]bool{}
	var texts []string
	var last shape
	for _, sh := range s.shapes {
		switch {
		case sh.class == "legend":
			styles[fmt.Sprint(sh.stroke, sh.dash)] = true
		case sh.kind == "text":
			texts = append(texts, sh.text)
		case sh.kind == "line" && sh.class == "":
			last = sh
		}
	}
	if len(styles) != len(labels) {
		t.Errorf("%d distinct keys for %d series: %v", len(styles), len(labels), styles)
	}
	for _, l := range labels {
		if !slices.Contains(texts, l) {
			t.Errorf("legend label %q not drawn whole", l)
		}
	}
	if own := ch.style(12); last.stroke != own.color || last.width != ownLineWidth || ch.style(0).width >= ownLineWidth {
		t.Errorf("last line drawn %+v, want vnetlab's own (%+v) on top and bolder than the others (%+v)", last, own, ch.style(0))
	}
}
