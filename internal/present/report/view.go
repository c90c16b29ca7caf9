package report

// view.go turns a results file into what the terminal table and the
// Markdown and HTML documents show, so they all say exactly the same thing.

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
	"github.com/vnetlab/vnetlab/internal/results/stats"
	"github.com/vnetlab/vnetlab/internal/system/cpupin"
)

// CeilingMode is the mode whose cell is every test's ceiling: client and
// server in one namespace over loopback.
const CeilingMode = modes.Host

// Doc is a whole report. The terminal table (table.go) and the documents
// (markdown.go, the HTML template) render from it, so they say the same thing.
type Doc struct {
	Title    string
	Meta     []KV
	Skipped  []results.Skipped
	Baseline string      // the mode every cell's VsBaseline is against
	Cells    []*CellView // every cell, in the results file's order
	Tests    []*TestView // the same cells by test, grouped by mode
	CPU      []*CPUView
	Profiles []*ProfileView // where the CPU goes (run --profile)
	Seeds    []*SeedView
	NoSeeds  string // why no seed table is shown
	Warnings []string
	Configs  *ConfigTable // a kube run over several clusters (kubetable.go)
	// The knobs (knobs.go): each test against each swept knob, which
	// knobs took effect, rr latency idle and under load.
	Curves  []*CurveView
	InForce []InForceRow
	// InForceKnobs are InForce's knob columns.
	InForceKnobs []string
	UnderLoad    []LoadRow
	// Policies: each cell's NetworkPolicies and their proof (policy knobs).
	Policies []PolicyRow
}

// KV is one metadata line.
type KV struct{ Key, Value string }

// TestView is one test's section: a chart and a table.
type TestView struct {
	Test, Unit   string
	HigherBetter bool
	Ceiling      string // "host pod: 22.9 Gbit/s", or why there is none
	HasCeiling   bool
	HasBaseline  bool // some cell carries a vs-baseline comparison
	HasLatency   bool
	Cells        []*CellView
	Chart        *BarChart
	File         string // chart file name without extension
}

// CellView is one cell, formatted.
type CellView struct {
	Cell     *results.Cell
	ID       results.CellID
	Status   analysis.Status
	Mode     string
	Series   string // path, with the provider and generated services when there are (CellID.Series)
	Median   string // the median, or "FAILED" / "failed as expected"
	CI       string // "[lo, hi]" or ""
	CIMethod string
	CV       string // "4.2%", "" below 2 samples
	Noisy    bool
	N        string
	Ceiling  string // ratio to the ceiling with its CI
	Baseline string // ratio to the run's baseline with its verdict
	VsPod    string // a service cell over its mode's pod cell, with its verdict
	CPU      string // CPU cost per GB or per 1k transactions
	Latency  string // p50 / p99 in us
	Notes    string
}

// CPUView is one test's CPU cost.
type CPUView struct {
	Test, Per  string // Per: "GB" or "1k transactions"
	SoftirqPer string // "GB" or "transaction"
	Rows       []CPURow
	Chart      *BarChart
	File       string
}

// CPURow is one cell's CPU cost per unit of work, by class.
type CPURow struct {
	Mode, Series                 string
	User, System, Softirq, Total string
	Softirqs                     string // NET_RX softirqs per transaction or per GB
}

// Build makes the report's content from a results file.
func Build(f *results.File) *Doc {
	d := &Doc{Title: "vnetlab report", Skipped: f.Metadata.Skipped, Baseline: results.Baseline(f.Cells, f.Metadata.Settings.Baseline)}
	if f.Metadata.Scenario != "" {
		d.Title += ": " + f.Metadata.Scenario
	}
	d.Meta = metadata(f.Metadata, f.Cells)
	d.Configs = buildConfigTable(f)
	byTest := map[string][]*results.Cell{}
	for _, c := range f.Cells {
		byTest[c.Test] = append(byTest[c.Test], c)
	}
	views := map[*results.Cell]*CellView{}
	for _, t := range testOrder(f.Cells) {
		tv := buildTest(t, byTest[t])
		for _, cv := range tv.Cells {
			views[cv.Cell] = cv
		}
		d.Tests = append(d.Tests, tv)
		if cv := buildCPU(t, byTest[t]); cv != nil {
			d.CPU = append(d.CPU, cv)
		}
	}
	for _, c := range f.Cells {
		d.Cells = append(d.Cells, views[c])
	}
	d.Curves, d.InForce, d.UnderLoad, d.Policies = buildCurves(f), buildInForce(f), buildUnderLoad(f), buildPolicies(f)
	d.InForceKnobs = InForceKnobs()
	d.Seeds, d.NoSeeds = compareSeeds(f.Cells, f.Metadata.Skipped...)
	if e := f.Metadata.Emulation; e != "" {
		d.Warnings = append(d.Warnings, "measured under "+e)
	}
	if w := unpinnedWarning(f); w != "" {
		d.Warnings = append(d.Warnings, w)
	}
	if f.CountedInWindows() {
		d.Warnings = append(d.Warnings, "this run was "+results.CountedNote+"; so were the ratios beside the seeds'")
	}
	for _, c := range f.Cells {
		if c.Noisy {
			d.Warnings = append(d.Warnings, fmt.Sprintf("%s is noisy (CV %.1f%%): its differences are less certain than its interval suggests", c.ID(), c.CV*100))
		}
	}
	return d
}

func testOrder(cells []*results.Cell) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range engine.AllTests {
		for _, c := range cells {
			if c.Test == string(t) && !seen[c.Test] {
				seen[c.Test] = true
				out = append(out, c.Test)
			}
		}
	}
	for _, c := range cells {
		if !seen[c.Test] {
			seen[c.Test] = true
			out = append(out, c.Test)
		}
	}
	return out
}

// ceilingOf finds the host cell of a test (prefer path pod, no provider).
func ceilingOf(cells []*results.Cell) *results.Cell {
	var best *results.Cell
	for _, c := range cells {
		if c.Mode != CeilingMode {
			continue
		}
		if best == nil || (c.Path == "pod" && c.Provider == "" && !(best.Path == "pod" && best.Provider == "")) {
			best = c
		}
	}
	return best
}

// cellCI is the cell's 95% CI: the run's own when present, else (files
// written before runs recorded one) the run's default method computed here.
func cellCI(c *results.Cell) (lo, hi float64, method string, ok bool) {
	if len(c.CI95) == 2 {
		m := c.CIMethod
		if m == "" {
			m = "from results file"
		}
		return c.CI95[0], c.CI95[1], m, true
	}
	lo, hi, ok = analysis.CI(c.Values(), analysis.CIMethods[0])
	return lo, hi, analysis.CIMethods[0] + " (report)", ok
}

func buildTest(test string, cells []*results.Cell) *TestView {
	tv := &TestView{Test: test, File: "chart-" + test}
	if len(cells) > 0 {
		tv.Unit = cells[0].Unit
	}
	tv.HigherBetter = analysis.HigherIsBetter(tv.Unit)
	ceil := ceilingOf(cells)
	switch {
	case ceil == nil:
		tv.Ceiling = "this run has no host cell (loopback in one namespace) for " + test + ": no ratio to the ceiling"
	case ceil.Valid == 0:
		tv.Ceiling = "the host cell failed: no ratio to the ceiling"
	default:
		tv.HasCeiling = true
		tv.Ceiling = fmt.Sprintf("ceiling = %s (loopback in one namespace): %s %s", ceil.ID(), fmtValue(ceil.Median), ceil.Unit)
	}
	ch := &BarChart{Title: fmt.Sprintf("%s (%s), median and 95%% CI", test, tv.Unit), Unit: tv.Unit}
	if !tv.HigherBetter {
		ch.Unit += " (lower is better)"
	}
	if tv.HasCeiling {
		ch.Ref = &RefLine{Value: ceil.Median, Label: "ceiling (host) " + fmtValue(ceil.Median)}
	}
	seriesIdx := map[string]int{}
	groupIdx := map[string]int{}
	for _, c := range cells {
		s := c.ID().Series()
		if _, ok := seriesIdx[s]; !ok {
			seriesIdx[s] = len(ch.Legend)
			ch.Legend = append(ch.Legend, s)
		}
	}
	// Group by mode in first-appearance order; bars in legend order.
	sorted := append([]*results.Cell(nil), cells...)
	for _, c := range sorted {
		if _, ok := groupIdx[c.Mode]; !ok {
			groupIdx[c.Mode] = len(groupIdx)
		}
	}
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if groupIdx[a.Mode] != groupIdx[b.Mode] {
			return groupIdx[a.Mode] < groupIdx[b.Mode]
		}
		return seriesIdx[a.ID().Series()] < seriesIdx[b.ID().Series()]
	})
	if !tv.HasCeiling {
		ceil = nil
	}
	for _, c := range sorted {
		cv := cellView(c, ceil)
		tv.HasBaseline = tv.HasBaseline || cv.Baseline != ""
		tv.HasLatency = tv.HasLatency || cv.Latency != ""
		tv.Cells = append(tv.Cells, cv)
		bar := Bar{Color: seriesIdx[cv.Series], Failed: c.Valid == 0, Expected: cv.Status == analysis.FailedAsExpected || cv.Status == analysis.NotApplied,
			Tip: fmt.Sprintf("%s: %s (no valid sample)", cv.Series, cv.Median)}
		if c.Valid > 0 {
			bar.Value = c.Median
			bar.Tip = fmt.Sprintf("%s %s: %s %s (n=%d)", c.Mode, cv.Series, cv.Median, c.Unit, c.Valid)
			if lo, hi, _, ok := cellCI(c); ok {
				bar.Lo, bar.Hi, bar.HasCI = lo, hi, true
				bar.Tip += fmt.Sprintf(", 95%% CI %s", cv.CI)
			}
		}
		gi := len(ch.Groups) - 1
		if gi < 0 || ch.Groups[gi].Label != c.Mode {
			ch.Groups = append(ch.Groups, BarGroup{Label: c.Mode})
			gi++
		}
		ch.Groups[gi].Bars = append(ch.Groups[gi].Bars, bar)
	}
	tv.Chart = ch
	return tv
}

// cellView formats one cell; ceil is its test's ceiling cell, or nil.
func cellView(c *results.Cell, ceil *results.Cell) *CellView {
	id := c.ID()
	cv := &CellView{Cell: c, ID: id, Status: analysis.StatusOf(c), Mode: c.Mode, Series: id.Series(), N: fmt.Sprintf("%d", c.Valid),
		Median: medianText(c), Noisy: c.Noisy}
	if c.Failed > 0 {
		cv.N += fmt.Sprintf(" (%d failed)", c.Failed)
	}
	var notes []string
	switch cv.Status {
	case analysis.Failed:
		notes = append(notes, firstError(c))
	case analysis.FailedAsExpected:
		notes = append(notes, c.Note, firstError(c))
	case analysis.WorkedUnexpectedly:
		notes = append(notes, "predicted to fail, yet measured: "+c.Note)
	case analysis.NotApplied:
		notes = append(notes, "not applied: "+c.NotApplied)
	}
	if c.Valid > 0 {
		if lo, hi, m, ok := cellCI(c); ok {
			cv.CI, cv.CIMethod = fmt.Sprintf("[%s, %s]", fmtValue(lo), fmtValue(hi)), m
		} else {
			cv.CIMethod = "too few samples for a CI"
		}
		if c.CV > 0 {
			cv.CV = fmt.Sprintf("%.1f%%", c.CV*100)
		}
		if ceil != nil {
			cv.Ceiling = ratioText(c, ceil)
		}
		cv.CPU = cpuText(c.CPU)
	}
	if c.Noisy {
		notes = append(notes, "noisy")
	}
	if b := behindText(c); b != "" {
		notes = append(notes, b)
	}
	if m := c.RateMax; m != nil {
		notes = append(notes, rateMaxText(m, c.Unit))
	}
	if vb := c.VsBaseline; vb != nil {
		cv.Baseline = comparisonText(vb)
	}
	if vp := c.VsPod; vp != nil && c.Valid > 0 {
		cv.VsPod = comparisonText(vp)
	}
	if len(c.Latency) > 0 {
		cv.Latency = latencyText(c)
	}
	cv.Notes = strings.Join(notes, "; ")
	return cv
}

// Class is the CSS class of the cell's median in the HTML report.
func (cv *CellView) Class() string {
	switch cv.Status {
	case analysis.Failed:
		return "failed"
	case analysis.FailedAsExpected, analysis.NotApplied:
		return "expected"
	}
	return ""
}

// medianOf is a cell's median as the run recorded it, computed from the
// samples when the file has no statistics.
func medianOf(c *results.Cell) float64 {
	if c.Valid > 0 {
		return c.Median
	}
	return stats.Median(c.Values())
}

// medianText is medianOf a cell with samples, or what became of the cell.
func medianText(c *results.Cell) string {
	switch {
	case c.Valid > 0 || len(c.Values()) > 0:
		return fmtValue(medianOf(c))
	case analysis.StatusOf(c) == analysis.FailedAsExpected:
		return "failed as expected"
	case analysis.StatusOf(c) == analysis.NotApplied:
		return "not applied"
	}
	return "FAILED"
}

// ratioText is median/ceiling median with the bootstrap CI of that ratio.
func ratioText(c, ceil *results.Cell) string {
	if c == ceil {
		return "1 (ceiling)"
	}
	return ratioOf(c, ceil, 2)
}

// ratioOf is num's median over den's with the bootstrap CI of that ratio,
// digits decimals each.
func ratioOf(num, den *results.Cell, digits int) string {
	r := analysis.CompareCells(num, den, analysis.HigherIsBetter(num.Unit))
	var ci []float64
	if r.HasCI {
		ci = r.RatioCI[:]
	}
	return ratioWithCI(r.Ratio, ci, digits)
}

// ratioWithCI is a ratio and, when ci holds one ([low, high]), its CI,
// digits decimals each: "0.93 [0.91, 0.95]".
func ratioWithCI(ratio float64, ci []float64, digits int) string {
	s := strconv.FormatFloat(ratio, 'f', digits, 64)
	if len(ci) == 2 {
		s += " [" + strconv.FormatFloat(ci[0], 'f', digits, 64) + ", " + strconv.FormatFloat(ci[1], 'f', digits, 64) + "]"
	}
	return s
}

// comparisonText is a recorded comparison (vs baseline, vs pod): ratio, its
// CI, the verdict and p.
func comparisonText(vb *results.Comparison) string {
	switch analysis.ParseVerdict(vb.Verdict) {
	case analysis.Baseline:
		return "baseline"
	case analysis.NoVerdict:
		return "n/a (" + vb.Note + ")"
	}
	// A paired comparison is narrow enough for a third decimal.
	digits := 2
	if vb.Method == analysis.MethodPaired {
		digits = 3
	}
	s := ratioWithCI(vb.Ratio, vb.RatioCI95, digits) + " " + analysis.ParseVerdict(vb.Verdict).ResultsWord()
	if vb.Test != "" && !math.IsNaN(vb.PValue) {
		s += fmt.Sprintf(" (p=%.3f)", vb.PValue)
	}
	if vb.Method == analysis.MethodPaired && vb.HalfWidth > 0 {
		s += fmt.Sprintf(" ±%.1f%%", 100*vb.HalfWidth)
		switch {
		case vb.PrecisionMet == nil:
		case *vb.PrecisionMet:
			s += fmt.Sprintf(" met at %d", vb.MetAtRound)
		default:
			s += " not met"
		}
	}
	return s
}

// behindText says how far an open-loop cell's valid samples fell behind
// their schedule ("" when none did): the worst share of requests sent
// late or not at all, and the largest lag.
func behindText(c *results.Cell) string {
	var behind, offered int
	var share, lagUs float64
	for _, s := range c.Samples {
		if sc := s.Schedule; s.Valid && sc != nil {
			offered = int(sc.Offered)
			if sc.Behind {
				behind++
				share, lagUs = max(share, sc.LateShare()), max(lagUs, sc.MaxLagUs)
			}
		}
	}
	if behind == 0 {
		return ""
	}
	return fmt.Sprintf("behind its %d/s schedule in %d samples: up to %.1f%% of requests late or unsent, largest lag %s ms",
		offered, behind, 100*share, fmtValue(lagUs/1000))
}

// rateMaxText says what a cell at a share of its path's maximum offered,
// and what 100% was (results.RateMax).
func rateMaxText(m *results.RateMax, unit string) string {
	var cl []string
	for _, v := range m.ClosedLoop {
		cl = append(cl, fmtValue(v))
	}
	if m.Error != "" {
		return fmt.Sprintf("%g%% of the path's maximum: %s", 100*m.Share, m.Error)
	}
	return fmt.Sprintf("offered %s/s = %g%% of the path's closed-loop maximum %s %s (median of %s, measured before the rounds)",
		fmtValue(m.Offered), 100*m.Share, fmtValue(m.Max), unit, strings.Join(cl, ", "))
}

// rateMaxLines are the cells at a share of their path's maximum, one line
// per path: what 100% was, and what each share offered.
func rateMaxLines(cells []*results.Cell) []string {
	var order []string
	lines := map[string]string{}
	for _, c := range cells {
		m := c.RateMax
		if m == nil {
			continue
		}
		id := c.ID()
		id.Point = ""
		key := id.String()
		if _, ok := lines[key]; !ok {
			order = append(order, key)
			if m.Error != "" && m.Max == 0 {
				lines[key] = fmt.Sprintf("%s: %s", key, m.Error)
				continue
			}
			lines[key] = fmt.Sprintf("%s: 100%% = %s %s closed-loop (median of %d samples before the rounds); offered", key, fmtValue(m.Max), c.Unit, len(m.ClosedLoop))
		}
		if m.Max == 0 {
			continue
		}
		if m.Error != "" {
			lines[key] += fmt.Sprintf(" %g%%: not measured (%s)", 100*m.Share, m.Error)
		} else {
			lines[key] += fmt.Sprintf(" %g%% %s/s", 100*m.Share, fmtValue(m.Offered))
		}
	}
	var out []string
	for _, k := range order {
		out = append(out, lines[k])
	}
	return out
}

// pointText is a cell's sweep point as tables show it ("" when none).
func pointText(p string) string {
	if p == "" {
		return ""
	}
	return "{" + p + "}"
}

// shownQuantiles are the latency quantiles tables show.
var shownQuantiles = []string{"p50", "p99", "p99.9"}

// TooFewSamples stands in a table for a quantile with too few latencies
// behind it (results.Cell.LatencyTooFew).
const TooFewSamples = "too few samples"

// latencyText is a cell's p50, p99 and p99.9, each with the latencies
// behind it (once when they are the same), or TooFewSamples.
func latencyText(c *results.Cell) string {
	var parts []string
	counts := map[int]bool{}
	for _, k := range shownQuantiles {
		if n, ok := c.LatencySamples[k]; ok {
			counts[n] = true
		}
	}
	for _, k := range shownQuantiles {
		switch v, ok := c.Latency[k]; {
		case ok && len(counts) > 1:
			parts = append(parts, fmt.Sprintf("%s %s%s (n=%s)", k, fmtValue(v), quantileCIText(c, k), countText(c.LatencySamples[k])))
		case ok:
			parts = append(parts, fmt.Sprintf("%s %s%s", k, fmtValue(v), quantileCIText(c, k)))
		case slices.Contains(c.LatencyTooFew, k):
			parts = append(parts, k+" "+TooFewSamples)
		}
	}
	s := strings.Join(parts, ", ")
	if len(counts) == 1 {
		for n := range counts {
			s += fmt.Sprintf(" (n=%s)", countText(n))
		}
	}
	return s
}

// quantileCIText is " [lo, hi]", quantile k's 95% CI, or "" without one.
func quantileCIText(c *results.Cell, k string) string {
	q, ok := c.LatencyCI[k]
	if !ok || q.CI == [2]float64{} {
		return ""
	}
	return fmt.Sprintf(" [%s, %s]", fmtValue(q.CI[0]), fmtValue(q.CI[1]))
}

// countText is a count of latencies, short: 950, 3.9k, 1.2M.
func countText(n int) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1e4:
		return fmt.Sprintf("%.0fk", float64(n)/1e3)
	case n >= 1e3:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return strconv.Itoa(n)
}

func firstError(c *results.Cell) string {
	for _, s := range c.Samples {
		if !s.Valid && s.Error != "" {
			return "no valid sample: " + s.Error
		}
	}
	return "no valid sample"
}

func buildCPU(test string, cells []*results.Cell) *CPUView {
	var cv *CPUView
	for _, c := range cells {
		if c.CPU == nil || c.Valid == 0 {
			continue
		}
		per, perName, softirqs, softirqPer := c.CPU.PerGB, "GB", c.CPU.NetRxPerGB, "GB"
		if per == 0 && c.CPU.PerKTrans > 0 {
			per, perName, softirqs, softirqPer = c.CPU.PerKTrans, "1k transactions", c.CPU.NetRxPerTrans, "transaction"
		}
		if per == 0 {
			continue
		}
		if cv == nil {
			cv = &CPUView{Test: test, Per: perName, SoftirqPer: softirqPer, File: "cpu-" + test}
			cv.Chart = &BarChart{Title: fmt.Sprintf("%s: CPU-seconds per %s, by class", test, perName),
				Unit: "CPU-seconds per " + perName + " (lower is better)", Legend: []string{"user", "system", "softirq"}, Stacked: true}
		}
		total := c.CPU.UserSec + c.CPU.SystemSec + c.CPU.SoftirqSec
		parts := []float64{0, 0, 0}
		if total > 0 {
			parts = []float64{per * c.CPU.UserSec / total, per * c.CPU.SystemSec / total, per * c.CPU.SoftirqSec / total}
		}
		row := CPURow{Mode: c.Mode, Series: c.ID().Series(), User: fmtValue(parts[0]), System: fmtValue(parts[1]), Softirq: fmtValue(parts[2]), Total: fmtValue(per)}
		if softirqs > 0 {
			row.Softirqs = fmtValue(softirqs)
		}
		cv.Rows = append(cv.Rows, row)
		label := c.Mode
		if s := c.ID().Series(); s != "pod" {
			label += " " + s
		}
		cv.Chart.Groups = append(cv.Chart.Groups, BarGroup{Label: label, Bars: []Bar{{Value: per, Parts: parts,
			Tip: fmt.Sprintf("%s: %s CPU-s per %s (user %s, system %s, softirq %s)", label, fmtValue(per), perName, row.User, row.System, row.Softirq)}}})
	}
	return cv
}

func metadata(m results.Metadata, cells []*results.Cell) []KV {
	var kv []KV
	add := func(k, v string) {
		if v != "" {
			kv = append(kv, KV{k, v})
		}
	}
	add("machine", m.Hostname)
	add("kernel", m.Kernel)
	if m.CPUs > 0 {
		add("CPUs", fmt.Sprintf("%d", m.CPUs))
	}
	add("CPU model", m.CPUModel)
	add("emulation", m.Emulation)
	v := m.Vnetlab
	if m.Commit != "" {
		v += " (commit " + shortCommit(m.Commit) + ")"
	}
	add("vnetlab", v)
	var tools []string
	for k := range m.Tools {
		tools = append(tools, k)
	}
	sort.Strings(tools)
	for _, t := range tools {
		add("tool "+t, m.Tools[t])
	}
	add("command line", shellJoin(m.CommandLine))
	add("scenario", m.Scenario)
	if !m.Start.IsZero() {
		add("start", m.Start.UTC().Format(time.RFC3339))
	}
	if !m.End.IsZero() {
		e := m.End.UTC().Format(time.RFC3339)
		if !m.Start.IsZero() {
			e += fmt.Sprintf(" (%s)", m.End.Sub(m.Start).Round(time.Second))
		}
		add("end", e)
	}
	s := m.Settings
	set := fmt.Sprintf("duration %s, repeat %d, warmup %d", s.Duration, s.Repeat, s.Warmup)
	for _, k := range knob.All {
		if v, ok := s.Knobs[string(k.Name)]; ok {
			set += fmt.Sprintf(", %s %s", k.Name, strings.TrimSpace(v+" "+k.Unit))
		}
	}
	add("settings", set)
	if sw := s.Sweep; sw != nil {
		var axes []string
		for _, a := range sw.Axes {
			axes = append(axes, a.Key()+" "+strings.Join(a.Values, ", "))
		}
		how := "one at a time, the others at their first value"
		if sw.Cross {
			how = "every combination"
		}
		add("sweep", strings.Join(axes, "; ")+" ("+how+")")
	}
	add("CPU affinity", cpuAffinity(m.Settings.CPUAffinity, cells))
	return kv
}

// cpuAffinity says where each test's engines ran: "none: tcp_rr unpinned;
// tcp_stream unpinned", "auto: tcp_rr client CPU 1, server CPU 1; ...".
func cpuAffinity(setting string, cells []*results.Cell) string {
	var parts []string
	seen := map[string]bool{}
	for _, c := range cells {
		where := "unpinned"
		if a := c.CPUAffinity; a != nil {
			where = cpupin.Pins{Pinned: true, Client: a.Client, Server: a.Server}.Describe()
		}
		if k := c.Test + " " + where; !seen[k] {
			seen[k] = true
			parts = append(parts, k)
		}
	}
	out := strings.Join(parts, "; ")
	if setting != "" {
		out = setting + ": " + out
	}
	return out
}

// unpinnedWarning: request/response cells a lab run measured unpinned on a
// machine with few CPUs (a cluster's nodes are not this machine: no
// warning from its CPU count).
func unpinnedWarning(f *results.File) string {
	if f.Metadata.Cluster != nil {
		return ""
	}
	var tests []string
	for _, c := range f.Cells {
		if c.CPUAffinity == nil && engine.Test(c.Test).RequestResponse() && !slices.Contains(tests, c.Test) {
			tests = append(tests, c.Test)
		}
	}
	if len(tests) == 0 {
		return ""
	}
	return cpupin.UnpinnedWarning(strings.Join(tests, ", ")+" ran", f.Metadata.CPUs)
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// shellJoin quotes arguments the way a shell would need them.
func shellJoin(args []string) string {
	var out []string
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"'$`\\*?[]{}()<>|&;#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out = append(out, a)
	}
	return strings.Join(out, " ")
}
