package report

// The knobs' sections: each test's metric against each swept
// knob, per mode, with the knee (curves); which knobs took effect, read
// back from the links and seen in the packets (in force); and rr latency
// idle and under load, as inflation (under load).

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/platform/labpolicy"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
)

// CurveView is one test against one swept knob: its chart and, per line,
// the values and the knee in words.
type CurveView struct {
	Test, Axis, Unit string
	// Metric is what the curve draws when not the test's own value: a
	// latency quantile against the offered rate ("p99 latency").
	Metric string
	Chart  *CurveChart
	File   string
	Rows   []CurveRow
}

// HasRatios says whether the curve's rows have ratios to the base value (a
// latency curve's have none: loadcurves.go).
func (cv *CurveView) HasRatios() bool {
	return slices.ContainsFunc(cv.Rows, func(r CurveRow) bool { return len(r.Ratios) > 0 })
}

// CurveRow is one line: its label, each value's median, the knee, and
// each value's median as a ratio to the base value's, with its 95% CI
// (what a cost axis, policies or ipblocks, is read as). On a policy axis
// with profiled cells, Enforcer is each value's NetworkPolicy enforcer
// CPU (enforcerCPU) in the stages EnforcerStages names.
type CurveRow struct {
	Line           string
	Values         []string
	Knee           string
	Ratios         []string
	EnforcerStages string
	Enforcer       []string
}

// HasEnforcer says whether the curve's rows have the policy enforcer's CPU.
func (cv *CurveView) HasEnforcer() bool {
	return slices.ContainsFunc(cv.Rows, func(r CurveRow) bool { return len(r.Enforcer) > 0 })
}

// line is a curve's identity: a cell's id without its test and point.
func lineOf(id results.CellID) results.CellID {
	id.Point, id.Test = "", ""
	return id
}

func lineLabel(id results.CellID) string {
	if s := id.Series(); s != "pod" {
		return id.Mode + " " + s
	}
	return id.Mode
}

// buildCurves makes a curve per test and axis with two values or more.
func buildCurves(f *results.File) []*CurveView {
	sw := f.Metadata.Settings.Sweep
	if sw == nil {
		return nil
	}
	var out []*CurveView
	for _, t := range testOrder(f.Cells) {
		for ai, a := range sw.Axes {
			if cv := buildCurve(f, *sw, t, ai, a); cv != nil {
				out = append(out, cv)
			}
			if slices.Contains(a.Knobs, string(knob.Rate)) {
				out = append(out, latencyCurves(f.Cells, *sw, t, ai, a)...)
			}
		}
	}
	return out
}

// curveLine is one line of a curve: its cells, by the axis's value index.
type curveLine struct {
	id    results.CellID
	cells []*results.Cell
}

// curveLines are test t's cells at the base or moving axis a (the ai-th)
// only, a line per mode and path; n counts the cells, unit is theirs.
func curveLines(cells []*results.Cell, sw results.Sweep, t string, ai int, a results.Axis) (lines []*curveLine, n int, unit string) {
	for _, c := range cells {
		if c.Test != t {
			continue
		}
		p, err := knob.ParsePoint(c.Point)
		if err != nil || len(p) != len(sw.Axes) {
			continue
		}
		if v := sw.Varies(p.Values()); v != -1 && v != ai {
			continue
		}
		vi := slices.Index(a.Values, p[ai].Value)
		if vi < 0 {
			continue
		}
		id := lineOf(c.ID())
		i := slices.IndexFunc(lines, func(l *curveLine) bool { return l.id == id })
		if i < 0 {
			lines = append(lines, &curveLine{id: id, cells: make([]*results.Cell, len(a.Values))})
			i = len(lines) - 1
		}
		lines[i].cells[vi] = c
		n++
		unit = c.Unit
	}
	return lines, n, unit
}

// buildCurve is test t against axis a (the ai-th): the cells at the base
// or moving a only.
func buildCurve(f *results.File, sw results.Sweep, t string, ai int, a results.Axis) *CurveView {
	lines, n, unit := curveLines(f.Cells, sw, t, ai, a)
	if len(lines) == 0 || len(a.Values) < 2 || n <= len(lines) {
		return nil
	}
	cv := &CurveView{Test: t, Axis: a.Key(), Unit: unit, File: "curve-" + t + "-" + strings.ReplaceAll(a.Key(), "+", "-")}
	cost := knob.IsPolicyAxis(a.Key()) // no knee; the enforcer's CPU under the ratios
	what := "median, 95% CI band, knee"
	if cost {
		what = "median, 95% CI band"
	}
	ch := &CurveChart{Title: fmt.Sprintf("%s (%s) against %s: %s", t, unit, a.Key(), what), Unit: unit, XLabel: a.Key(), X: a.Values}
	higher := analysis.HigherIsBetter(unit)
	if !higher {
		ch.Unit += " (lower is better)"
	}
	for _, l := range lines {
		cl := CurveLine{Label: lineLabel(l.id), Knee: -1}
		row := CurveRow{Line: cl.Label}
		for vi, c := range l.cells {
			pt := CurvePoint{Missing: c == nil}
			cell := "-"
			switch {
			case c == nil:
			case c.NotApplied != "":
				pt.Failed, pt.Tip, cell = true, fmt.Sprintf("%s=%s: not applied: %s", a.Key(), a.Values[vi], c.NotApplied), "not applied"
			case len(c.Values()) == 0:
				pt.Failed, pt.Tip, cell = true, fmt.Sprintf("%s=%s: %s", a.Key(), a.Values[vi], firstError(c)), "FAILED"
			default:
				v := c.Values()
				pt.Value = medianOf(c)
				cell = fmtValue(pt.Value)
				pt.Tip = fmt.Sprintf("%s %s=%s: %s %s (n=%d)", cl.Label, a.Key(), a.Values[vi], cell, unit, len(v))
				if lo, hi, _, ok := cellCI(c); ok {
					pt.Lo, pt.Hi, pt.HasCI = lo, hi, true
					pt.Tip += fmt.Sprintf(", 95%% CI [%s, %s]", fmtValue(lo), fmtValue(hi))
				}
			}
			cl.Points = append(cl.Points, pt)
			row.Values = append(row.Values, cell)
		}
		switch {
		case a.Key() == string(knob.Rate):
			// Against the offered rate, more is not "better": the knee is
			// where queues start to form, as on the latency curves.
			cl.Knee, cl.KneeTip = rateKnee(l.cells, a)
		case cost:
			// More policies never help: a cost axis has no knee, its
			// ratios to the first value say what each count costs.
			cl.Knee, cl.KneeTip = -1, "a cost: see the ratios to "+a.Key()+"="+a.Base()
		default:
			cl.Knee, cl.KneeTip = knee(l.cells, a, higher)
		}
		row.Knee = cl.KneeTip
		row.Ratios = ratiosToBase(l.cells, row.Values, higher)
		if cost {
			row.EnforcerStages, row.Enforcer = enforcerCPU(f, l.cells)
		}
		ch.Lines = append(ch.Lines, cl)
		cv.Rows = append(cv.Rows, row)
	}
	cv.Chart = ch
	return cv
}

// enforcerTitle heads a curve's table of enforcer CPU (enforcerCPU).
const enforcerTitle = "The NetworkPolicy enforcer's CPU, µs per unit the profile counts (transaction, connection or MB), and its share of the data path's CPU; read its cost as the change from the first value"

// enforcerCPU is each profiled cell's NetworkPolicy enforcer CPU per unit
// ("0.84 µs, 6.1%": the stages of the lab provider with its data path,
// labpolicy.EnforcerCPU, and their share of the data path's CPU), "-" for
// a cell without a profile; nil when no cell has one.
func enforcerCPU(f *results.File, cells []*results.Cell) (stages string, out []string) {
	found := false
	for _, c := range cells {
		v := "-"
		if c != nil {
			if st, us, share, ok := labpolicy.EnforcerCPU(f.PolicyLabProviderOf(c), c.Profile); ok {
				v, stages, found = fmt.Sprintf("%.2f µs, %.1f%%", us, 100*share), st, true
			}
		}
		out = append(out, v)
	}
	if !found {
		return "", nil
	}
	return stages, out
}

// knee walks the axis in order and stops at the first value whose next
// value is not significantly better (Mann-Whitney, analysis.Compare): more
// of the knob stops helping there. -1 when every step helps (no knee
// within the sweep) or there are too few measured values to tell.
func knee(cells []*results.Cell, a results.Axis, higher bool) (int, string) {
	prev := -1
	for i, c := range cells {
		if c == nil || len(c.Values()) == 0 {
			continue
		}
		if prev >= 0 {
			cmp := analysis.CompareCells(c, cells[prev], higher)
			if !cmp.Significant() || cmp.Verdict != analysis.Better {
				return prev, fmt.Sprintf("knee at %s=%s: %s=%s gives %.2fx (%s)", a.Key(), a.Values[prev], a.Key(), a.Values[i], cmp.Ratio, verdictWords(cmp))
			}
		}
		prev = i
	}
	if prev < 0 {
		return -1, "no measured value"
	}
	return -1, fmt.Sprintf("no knee: every step up to %s=%s helped significantly", a.Key(), a.Values[prev])
}

// ratiosToBase is each cell's median over the first's, with the ratio's
// bootstrap 95% CI and "~" when Mann-Whitney finds no significant
// difference; a cell without values keeps its word (values), and with no
// measured base there is no ratio.
func ratiosToBase(cells []*results.Cell, values []string, higher bool) []string {
	out := make([]string, len(cells))
	base := cells[0]
	for i, c := range cells {
		switch {
		case c == nil || len(c.Values()) == 0:
			out[i] = values[i]
		case base == nil || len(base.Values()) == 0:
			out[i] = "-"
		case i == 0:
			out[i] = "1"
		default:
			cmp := analysis.CompareCells(c, base, higher)
			out[i] = fmt.Sprintf("%.3f", cmp.Ratio)
			if cmp.HasCI {
				out[i] += fmt.Sprintf(" [%.3f, %.3f]", cmp.RatioCI[0], cmp.RatioCI[1])
			}
			if !cmp.Significant() {
				out[i] += " ~"
			}
		}
	}
	return out
}

func verdictWords(c analysis.Comparison) string {
	switch {
	case c.Verdict == analysis.NoVerdict:
		return "no verdict: " + c.Note
	case !c.Significant():
		return fmt.Sprintf("not significant, p=%.3f", c.P)
	}
	return fmt.Sprintf("%s, p=%.3f", c.Verdict.ResultsWord(), c.P)
}

// InForceRow is what the knobs of one mode, path and point did: each lab
// knob as read back, and the packets at both ends.
type InForceRow struct {
	Mode, Series, Test string
	State              string // "in force" or "not applied: why"
	// Knobs are, per lab knob (InForceKnobs), its values over the places
	// read back.
	Knobs               []string
	SenderAvg, SegAvg   string // bytes: per packet handed to the sender's device; per wire segment
	ReceiverAvg, MaxPkt string // bytes: per packet after GRO; the sender's largest
}

// buildInForce is a row per mode, path and point (the first test of each:
// a stream's packets say more than a transaction's), for runs that set
// knobs on links or have packet counts.
func buildInForce(f *results.File) []InForceRow {
	var rows []InForceRow
	seen := map[results.CellID]bool{}
	for _, t := range testOrder(f.Cells) {
		for _, c := range f.Cells {
			if c.Test != t || (c.Proofs == nil && c.Packets == nil) {
				continue
			}
			id := c.ID()
			id.Test = ""
			if seen[id] {
				continue
			}
			seen[id] = true
			r := InForceRow{Mode: c.Mode, Series: c.ID().Series(), Test: c.Test, State: "in force"}
			if c.NotApplied != "" {
				r.State = "not applied: " + c.NotApplied
			}
			for _, k := range InForceKnobs() {
				r.Knobs = append(r.Knobs, knobSummary(k, c.Proofs))
			}
			if p := c.Packets; p != nil {
				if s := p.Sender; s != nil {
					r.SenderAvg, r.SegAvg, r.MaxPkt = fmt.Sprintf("%.0f", s.AvgBytes), fmt.Sprintf("%.0f", s.AvgSegment), fmt.Sprint(s.MaxBytes)
				}
				if s := p.Receiver; s != nil {
					r.ReceiverAvg = fmt.Sprintf("%.0f", s.AvgBytes)
				} else if p.Note == results.PacketsUnseen {
					r.ReceiverAvg = "not seen: delivered past netif_receive_skb"
				}
			}
			rows = append(rows, r)
		}
	}
	if !knobsSet(f) {
		return nil
	}
	return rows
}

// knobsSet says whether the run set or swept a lab knob (the in-force
// table is for those; plain runs still keep the proof in JSON).
func knobsSet(f *results.File) bool {
	s := f.Metadata.Settings
	return slices.ContainsFunc(slices.Collect(maps.Keys(s.Knobs)), func(k string) bool { return knob.IsLinks(knob.Name(k)) }) ||
		(s.Sweep != nil && slices.ContainsFunc(s.Sweep.Axes, linksAxis))
}

// InForceKnobs are the lab knobs, the in-force table's columns.
func InForceKnobs() []string {
	var out []string
	for _, k := range knob.All {
		if k.Scope == knob.Lab {
			out = append(out, string(k.Name))
		}
	}
	return out
}

// knobSummary is what knob k's proofs found: each offload's states, or
// the distinct values, most common first.
func knobSummary(k string, proofs []results.KnobProof) string {
	var got []string
	for _, p := range proofs {
		if p.Knob == k {
			got = append(got, p.Got)
		}
	}
	if k == string(knob.Offload) {
		return offloadSummary(got)
	}
	return distinct(got)
}

// linksAxis says whether axis a sets the lab's links.
func linksAxis(a results.Axis) bool {
	return slices.ContainsFunc(a.Knobs, func(k string) bool { return knob.IsLinks(knob.Name(k)) })
}

// distinct is the values found, most common first: "9000 (all 11)", "8950 ×6, 9000 ×5".
func distinct(values []string) string {
	if len(values) == 0 {
		return ""
	}
	count := map[string]int{}
	var order []string
	for _, v := range values {
		if count[v] == 0 {
			order = append(order, v)
		}
		count[v]++
	}
	if len(order) == 1 {
		return fmt.Sprintf("%s (all %d)", order[0], len(values))
	}
	slices.SortStableFunc(order, func(a, b string) int { return count[b] - count[a] })
	var parts []string
	for _, v := range order {
		parts = append(parts, fmt.Sprintf("%s ×%d", v, count[v]))
	}
	return strings.Join(parts, ", ")
}

// offloadSummary is each feature's states over the links (each the
// offload knob's proof's Got): "gro off, tso on".
func offloadSummary(got []string) string {
	var links []map[string]string
	for _, g := range got {
		links = append(links, results.ParseFeatureStates(g))
	}
	var parts []string
	for _, f := range knob.Features {
		if f.Name == "rx" {
			continue
		}
		states := map[string]bool{}
		for _, l := range links {
			if s, ok := l[f.Name]; ok {
				states[strings.TrimSuffix(s, " (fixed)")] = true
			}
		}
		var ss []string
		for s := range states {
			ss = append(ss, s)
		}
		slices.Sort(ss)
		if len(ss) > 0 {
			parts = append(parts, f.Name+" "+strings.Join(ss, "/"))
		}
	}
	return strings.Join(parts, ", ")
}

// PolicyRow is one cell's NetworkPolicies (the policy knobs) and their
// proof.
type PolicyRow struct {
	Cell, State, Objects, Probe, Evaluated, Load string
}

// buildPolicies is a row per cell with policies.
func buildPolicies(f *results.File) []PolicyRow {
	var rows []PolicyRow
	for _, c := range f.Cells {
		p := c.Policies
		if p == nil {
			continue
		}
		r := PolicyRow{Cell: c.ID().String(), State: "in force", Objects: fmt.Sprintf("%d of %d", p.Objects, p.Want),
			Probe: p.Probe, Evaluated: fmt.Sprint(p.Evaluated), Load: fmt.Sprintf("%.2f", p.LoadSec)}
		if p.NotApplied != "" {
			r.State = "not applied: " + p.NotApplied
		}
		rows = append(rows, r)
	}
	return rows
}

// LoadRow is one rr cell under load beside the same cell idle.
type LoadRow struct {
	Mode, Series, Test, Load string
	Idle, Loaded             [3]string // p50, p99, p99.9 µs
	Inflation                [3]string // loaded / idle
}

// buildUnderLoad pairs each rr/crr cell of a load sweep with the same
// cell at the base load (idle when it is 0).
func buildUnderLoad(f *results.File) []LoadRow {
	sw := f.Metadata.Settings.Sweep
	if sw == nil {
		return nil
	}
	ai := slices.IndexFunc(sw.Axes, func(a results.Axis) bool { return slices.Contains(a.Knobs, string(knob.Load)) })
	if ai < 0 {
		return nil
	}
	base := map[results.CellID]*results.Cell{}
	key := func(c *results.Cell, p knob.Point) results.CellID {
		q := slices.Clone(p)
		q[ai].Value = ""
		id := c.ID()
		id.Point = q.String()
		return id
	}
	points := map[*results.Cell]knob.Point{}
	for _, c := range f.Cells {
		p, err := knob.ParsePoint(c.Point)
		if err != nil || len(p) != len(sw.Axes) || len(c.Latency) == 0 {
			continue
		}
		points[c] = p
		if p[ai].Value == sw.Axes[ai].Base() {
			base[key(c, p)] = c
		}
	}
	var rows []LoadRow
	for _, c := range f.Cells {
		p, ok := points[c]
		if !ok || p[ai].Value == sw.Axes[ai].Base() {
			continue
		}
		idle := base[key(c, p)]
		if idle == nil {
			continue
		}
		r := LoadRow{Mode: c.Mode, Series: lineOf(c.ID()).Series(), Test: c.Test, Load: p[ai].Value}
		if sw.Varies(p.Values()) != ai { // other axes off their base too (crossed)
			q := slices.Clone(p)
			q[ai] = knob.Value{Axis: q[ai].Axis, Value: sw.Axes[ai].Base()}
			r.Series += "{" + q.String() + "}"
		}
		for i, k := range []string{"p50", "p99", "p99.9"} {
			iv, iok := idle.Latency[k]
			lv, lok := c.Latency[k]
			r.Idle[i], r.Loaded[i] = fmtValue(iv), fmtValue(lv)
			if !iok {
				r.Idle[i] = TooFewSamples
			}
			if !lok {
				r.Loaded[i] = TooFewSamples
			}
			if iok && lok && iv > 0 {
				r.Inflation[i] = fmt.Sprintf("%.1fx", lv/iv)
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// What the knobs' sections say about themselves (Markdown and HTML alike).
var knobNotes = map[string]string{
	"curves": "Each test's median against each swept knob, one line per mode (and path), with its 95% CI as a band; the other knobs at their first value. " +
		"The knee is the last value before a step up that is not significantly better (Mann-Whitney, p < 0.05): beyond it, more of the knob stops helping; a cost axis (policies, ipblocks) has none. " +
		"A red cross marks a value not applied or failed. " +
		"Below each, the medians as ratios to the line's first value, with the ratio's bootstrap 95% CI (~: not significantly different, Mann-Whitney): a policy count's cost reads as its ratio to 0 policies. " +
		"On a policy axis with profiled cells (--profile), the NetworkPolicy enforcer's CPU per unit: the profile stages its data path runs in (its lab provider's, a cluster's enforcer's lab provider's), in µs and as a share of the cell's data-path CPU; " +
		"those stages also hold other work (a mode's own tc programs, a proxy's netfilter rules), so the enforcer's cost is the change from the first value. " +
		"Against a swept rate, each rr/crr test's p50, p99 and p99.9 (µs) are drawn against the rate offered (a share of the path's closed-loop maximum, or absolute), each with its 95% CI as a band and the latencies behind it (n); " +
		"there the knee is the lowest offered rate whose p99 is over 2x the p99 at the lowest rate, or whose achieved rate falls under 99% of the offered: where queues start to form.",
	"inforce": "What the kernel kept: every link of the lab's namespaces read back after the knobs were set (MTU, gso/gro max sizes, offloads), " +
		"and the packets of the measured windows: the average packet handed to the sender's device (a GSO packet whole), " +
		"the average segment on the wire (bytes over GSO segments), the sender's largest packet, and the average packet the receiver's stack got after GRO. " +
		"A setting the kernel refused or did not keep makes its cells \"not applied\", never measured as if set.",
	"policies": "Each cell's generated NetworkPolicies in force, proven in its proof sample (docs/policies-cost.md): the provider's objects read back against what the compiled policies make, " +
		"a flow the policies deny probed and dropped, the packets of the proof sample the provider decided by policy (new connections), and the provider's load time. " +
		"A cell without the proof is not applied, never measured as if its policies were set.",
	"underload": "rr latency percentiles (µs, medians over samples) with the path idle and while the load's iperf3 streams saturate it, client to server (flent's RRUL shape); inflation = loaded / idle.",
}

// markdownKnobs writes the knobs' sections (none without a sweep or knobs).
func markdownKnobs(w io.Writer, d *Doc) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	if len(d.Curves) > 0 {
		p("## Knobs: curves\n\n%s\n\n", knobNotes["curves"])
		for _, cv := range d.Curves {
			title := cv.Test
			if cv.Metric != "" {
				title += " " + cv.Metric
			}
			p("### %s against %s\n\n![%s against %s](%s.svg)\n\n", title, mdEsc(cv.Axis), title, mdEsc(cv.Axis), cv.File)
			head := []string{"mode"}
			for _, x := range cv.Chart.X {
				head = append(head, cv.Axis+"="+x)
			}
			var rows [][]string
			for _, r := range cv.Rows {
				rows = append(rows, append(append([]string{r.Line}, r.Values...), r.Knee))
			}
			MarkdownTable(w, append(head, "knee"), rows)
			if cv.HasRatios() {
				p("\nAs ratios to %s=%s (95%% CI; ~ not significant):\n\n", mdEsc(cv.Axis), cv.Chart.X[0])
				rows = nil
				for _, r := range cv.Rows {
					rows = append(rows, append([]string{r.Line}, r.Ratios...))
				}
				MarkdownTable(w, head, rows)
			}
			if cv.HasEnforcer() {
				p("\n%s:\n\n", enforcerTitle)
				rows = nil
				for _, r := range cv.Rows {
					if len(r.Enforcer) > 0 {
						rows = append(rows, append(append([]string{r.Line}, r.Enforcer...), r.EnforcerStages))
					}
				}
				MarkdownTable(w, append(slices.Clone(head), "stages"), rows)
			}
			p("\n")
		}
	}
	if len(d.InForce) > 0 {
		p("## Knobs in force\n\n%s\n\n", knobNotes["inforce"])
		var rows [][]string
		for _, r := range d.InForce {
			rows = append(rows, slices.Concat([]string{r.Mode, r.Series, r.Test, r.State}, r.Knobs, []string{r.SenderAvg, r.SegAvg, r.MaxPkt, r.ReceiverAvg}))
		}
		MarkdownTable(w, slices.Concat([]string{"mode", "path", "test", "state"}, InForceKnobs(), []string{"sender avg B", "segment avg B", "sender max B", "receiver avg B (after GRO)"}), rows)
		p("\n")
	}
	if len(d.Policies) > 0 {
		p("## Policies in force\n\n%s\n\n", knobNotes["policies"])
		var rows [][]string
		for _, r := range d.Policies {
			rows = append(rows, []string{r.Cell, r.State, r.Objects, r.Probe, r.Evaluated, r.Load})
		}
		MarkdownTable(w, []string{"cell", "state", "objects read back", "denied flow", "evaluated", "load s"}, rows)
		p("\n")
	}
	if len(d.UnderLoad) > 0 {
		p("## Latency under load\n\n%s\n\n", knobNotes["underload"])
		var rows [][]string
		for _, r := range d.UnderLoad {
			row := []string{r.Mode, r.Series, r.Test, r.Load}
			for i := range r.Idle {
				row = append(row, r.Idle[i], r.Loaded[i], r.Inflation[i])
			}
			rows = append(rows, row)
		}
		MarkdownTable(w, []string{"mode", "path", "test", "load", "p50 idle", "p50 loaded", "×", "p99 idle", "p99 loaded", "×", "p99.9 idle", "p99.9 loaded", "×"}, rows)
		p("\n")
	}
}
