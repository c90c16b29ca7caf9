package report

// Latency against offered load: for a sweep of the rate, each
// rr/crr test's p50, p99 and p99.9 against the rate offered, a line per
// mode (and path) with each quantile's 95% CI as a band, and each line's
// knee (analysis.Knee: where queues start to form).

import (
	"fmt"
	"slices"

	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
)

// latencyCurves are test t's latency quantiles against rate axis a (the
// ai-th): one curve per quantile shown; none for a test without latencies.
// The closed loop (rate max) offers no load and stays out.
func latencyCurves(cells []*results.Cell, sw results.Sweep, t string, ai int, a results.Axis) []*CurveView {
	lines, _, _ := curveLines(cells, sw, t, ai, a)
	var x []string
	var keep []int
	for i, v := range a.Values {
		if v != knob.Unlimited {
			x, keep = append(x, v), append(keep, i)
		}
	}
	if len(x) < 2 || !slices.ContainsFunc(lines, func(l *curveLine) bool {
		return slices.ContainsFunc(l.cells, func(c *results.Cell) bool { return c != nil && len(c.Latency) > 0 })
	}) {
		return nil
	}
	var out []*CurveView
	for _, q := range shownQuantiles {
		cv := &CurveView{Test: t, Axis: a.Key(), Unit: "µs", Metric: q + " latency",
			File: fmt.Sprintf("curve-%s-%s-%s", t, a.Key(), q)}
		ch := &CurveChart{Title: fmt.Sprintf("%s %s latency (µs) against the offered rate: median over samples, 95%% CI band, knee", t, q),
			Unit: "µs (lower is better; log scale)", XLabel: "offered rate (" + a.Key() + ")", X: x, LogY: true}
		for _, l := range lines {
			var at []*results.Cell
			for _, i := range keep {
				at = append(at, l.cells[i])
			}
			cl := CurveLine{Label: lineLabel(l.id)}
			row := CurveRow{Line: cl.Label}
			for vi, c := range at {
				pt, cell := latencyPoint(c, q, cl.Label, a.Key()+"="+x[vi])
				cl.Points = append(cl.Points, pt)
				row.Values = append(row.Values, cell)
			}
			cl.Knee, cl.KneeTip = rateKnee(at, results.Axis{Knobs: a.Knobs, Values: x})
			row.Knee = cl.KneeTip
			ch.Lines = append(ch.Lines, cl)
			cv.Rows = append(cv.Rows, row)
		}
		cv.Chart = ch
		out = append(out, cv)
	}
	return out
}

// latencyPoint is cell c's quantile q as a point of a latency curve, and
// its table text: the median over samples [95% CI] (n latencies).
func latencyPoint(c *results.Cell, q, line, at string) (CurvePoint, string) {
	pt := CurvePoint{Missing: c == nil}
	switch {
	case c == nil:
		return pt, "-"
	case len(c.Values()) == 0:
		pt.Failed, pt.Tip = true, fmt.Sprintf("%s %s: %s", line, at, firstError(c))
		return pt, "FAILED"
	case slices.Contains(c.LatencyTooFew, q):
		pt.Missing = true
		return pt, TooFewSamples
	}
	v, ok := c.Latency[q]
	if !ok {
		pt.Missing = true
		return pt, "-"
	}
	pt.Value = v
	cell := fmtValue(v) + quantileCIText(c, q)
	if ci := c.LatencyCI[q]; ci.CI != [2]float64{} {
		pt.Lo, pt.Hi, pt.HasCI = ci.CI[0], ci.CI[1], true
	}
	if n, ok := c.LatencySamples[q]; ok {
		cell += " (n=" + countText(n) + ")"
	}
	pt.Tip = fmt.Sprintf("%s %s: %s %s µs", line, at, q, cell)
	if m := c.RateMax; m != nil {
		pt.Tip += "; " + rateMaxText(m, c.Unit)
	}
	return pt, cell
}

// rateKnee is a line's knee against rate axis a (analysis.Knee: where
// queues start to form) over its open-loop cells, the closed loop's value
// (rate max) left out; the index is a's.
func rateKnee(cells []*results.Cell, a results.Axis) (int, string) {
	var at []*results.Cell
	var idx []int
	for i, v := range a.Values {
		if v != knob.Unlimited {
			at, idx = append(at, cells[i]), append(idx, i)
		}
	}
	k, why := analysis.Knee(at)
	if k < 0 {
		return -1, why
	}
	return idx[k], fmt.Sprintf("knee at %s=%s: %s", a.Key(), a.Values[idx[k]], why)
}
