package report

// A chart's legend: one key per series, left to right in rows that wrap
// at the chart's right margin, so no key is cut off however many there are.

// legendItem is one series' key: a short line in the series' style, or
// (bars) a box of its colour. bold marks vnetlab's own series.
type legendItem struct {
	label string
	style lineStyle
	box   bool
	bold  bool
}

const (
	legendSize     = 11.0
	legendLineKey  = 24.0 // a line's key: long enough to show its dash pattern
	legendBoxKey   = 12.0
	legendKeyGap   = 4.0  // from a key to its label
	legendItemGap  = 18.0 // between two items of a row
	legendRowPitch = 18.0
)

// addLegend lays items out from (left, top) and returns the y under
// their last row.
func (s *scene) addLegend(items []legendItem, left, top float64) float64 {
	right := s.w - chartMargin
	x, y := left, top
	for _, it := range items {
		key := legendLineKey
		if it.box {
			key = legendBoxKey
		}
		label := fitText(it.label, legendSize, it.bold, right-left-key-legendKeyGap)
		w := key + legendKeyGap + textWidth(label, legendSize, it.bold)
		if x > left && x+w > right {
			x, y = left, y+legendRowPitch
		}
		if it.box {
			s.add(shape{kind: "rect", x: x, y: y + 1, w: key, h: key, fill: it.style.color, class: "legend"})
		} else {
			s.add(shape{kind: "line", x: x, y: y + 7, x2: x + key, y2: y + 7, stroke: it.style.color, width: it.style.width, dash: it.style.dash, class: "legend"})
		}
		s.add(shape{kind: "text", x: x + key + legendKeyGap, y: y + 11, text: label, size: legendSize, bold: it.bold, anchor: "start", fill: "#333"})
		x += w + legendItemGap
	}
	return y + legendRowPitch
}
