package explain

// Why one path's knee comes earlier than another's (explain
// --knob rate): each path's knee on its latency-versus-load curve
// (analysis.Knee), and, for the path whose knee comes at the lowest
// offered rate against the one whose comes last (or not at all), what a
// transaction costs each at the lowest load: the profile's data path per
// transaction when both were profiled, else the machine's CPU per
// transaction. Client, server and softirqs share one CPU (pinned), so a
// path that costs more per transaction runs out of it at a lower rate.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
)

// kneeLine is one path's cells along the rate axis, offered loads only.
type kneeLine struct {
	id    string
	cells []*results.Cell
	knee  int
	why   string
}

// offered is the rate the line offered at index i (0 when not known).
func (l kneeLine) offered(i int) float64 {
	for _, s := range l.cells[i].Samples {
		if s.Valid && s.Schedule != nil {
			return s.Schedule.Offered
		}
	}
	return 0
}

// KneeSentences are, per test of a run that swept the rate, one sentence
// saying why the earliest knee comes before the latest (only test, only
// modes when set).
func KneeSentences(f *results.File, test string, modes []string) ([]string, error) {
	sw := f.Metadata.Settings.Sweep
	ai := -1
	if sw != nil {
		ai = slices.IndexFunc(sw.Axes, func(a results.Axis) bool { return slices.Contains(a.Knobs, string(knob.Rate)) })
	}
	if ai < 0 {
		return nil, fmt.Errorf("the run did not sweep the rate: --knob rate explains a run with --sweep rate=10%%,50%%,...")
	}
	a := sw.Axes[ai]
	byTest := map[string][]*kneeLine{}
	var tests []string
	for _, ac := range axisCells(f, *sw, ai, test, modes) {
		c := ac.cell
		vi := slices.Index(a.Values, ac.value)
		if vi < 0 || ac.value == knob.Unlimited {
			continue
		}
		id := sameLine(c)
		ls := byTest[c.Test]
		i := slices.IndexFunc(ls, func(l *kneeLine) bool { return l.id == id })
		if i < 0 {
			if len(ls) == 0 {
				tests = append(tests, c.Test)
			}
			ls = append(ls, &kneeLine{id: id, cells: make([]*results.Cell, len(a.Values))})
			byTest[c.Test] = ls
			i = len(ls) - 1
		}
		ls[i].cells[vi] = c
	}
	var out []string
	for _, t := range tests {
		if s, ok := kneeSentence(a, byTest[t]); ok {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no two paths with measured latencies along the rate to compare (the test, or modes, left fewer)")
	}
	return out, nil
}

// kneeSentence compares the line whose knee comes at the lowest offered
// rate with the line whose comes last (none: last of all).
func kneeSentence(a results.Axis, lines []*kneeLine) (string, bool) {
	for _, l := range lines {
		l.cells = slices.DeleteFunc(l.cells, func(c *results.Cell) bool { return c == nil })
		l.knee, l.why = analysis.Knee(l.cells)
	}
	lines = slices.DeleteFunc(lines, func(l *kneeLine) bool { return len(l.cells) == 0 })
	if len(lines) < 2 {
		return "", false
	}
	at := func(l *kneeLine) float64 { // the offered rate of the knee; none: beyond every rate
		if l.knee < 0 {
			return 1e18
		}
		return l.offered(l.knee)
	}
	slices.SortStableFunc(lines, func(x, y *kneeLine) int {
		switch ax, ay := at(x), at(y); {
		case ax < ay:
			return -1
		case ax > ay:
			return 1
		}
		return 0
	})
	early, late := lines[0], lines[len(lines)-1]
	if at(early) == at(late) {
		return "", false
	}
	e0, l0 := early.cells[0], late.cells[0]
	s := fmt.Sprintf("%s: %s's knee comes before %s's (%s's %s; %s's %s)", e0.Test, e0.Mode, l0.Mode, e0.Mode, kneeAt(a, early), l0.Mode, kneeAt(a, late))
	ce, cl, what := perTransaction(e0, l0)
	if ce <= 0 || cl <= 0 {
		return s + "; neither cell's CPU per transaction was measured, so the reason is not shown.", true
	}
	s += fmt.Sprintf(": at the lowest load a transaction costs %s %.2f µs of %s against %.2f µs for %s (%.2fx)", e0.Mode, ce, what, cl, l0.Mode, ce/cl)
	if ce > cl {
		s += ", and with client, server and softirqs on one CPU the costlier path runs out of it at a lower rate"
	} else {
		s += ", so its CPU per transaction does not explain it: the machine's other load or the path's queueing does"
	}
	return s + ".", true
}

// kneeAt is "at rate=80%, 40000/s offered: p99 ..." or "none up to rate=95%".
func kneeAt(a results.Axis, l *kneeLine) string {
	if l.knee < 0 {
		return fmt.Sprintf("none up to %s=%s, %.0f/s offered", a.Key(), valueOf(l.cells[len(l.cells)-1], a.Key()), l.offered(len(l.cells)-1))
	}
	return fmt.Sprintf("at %s=%s, %.0f/s offered: %s", a.Key(), valueOf(l.cells[l.knee], a.Key()), l.offered(l.knee), l.why)
}

// perTransaction is what a transaction cost cells a and b: the profiled
// data path's µs when both were profiled, else the machine's CPU (µs of
// user, system, irq and softirq per transaction).
func perTransaction(a, b *results.Cell) (float64, float64, string) {
	if a.Profile != nil && b.Profile != nil && a.Profile.DataPathUS > 0 && b.Profile.DataPathUS > 0 {
		return a.Profile.DataPathUS, b.Profile.DataPathUS, "profiled data path (" + strings.TrimSpace(a.Profile.Unit) + ")"
	}
	if a.CPU == nil || b.CPU == nil {
		return 0, 0, ""
	}
	return 1000 * a.CPU.PerKTrans, 1000 * b.CPU.PerKTrans, "the machine's CPU"
}
