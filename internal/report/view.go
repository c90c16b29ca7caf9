package report

// view.go turns a results file into what the Markdown and HTML documents
// show, so both say exactly the same thing.

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/vnetlab/vnetlab/internal/engine"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/topo"
)

// CeilingMode is the mode whose cell is every test's ceiling: client and
// server in one namespace over loopback.
const CeilingMode = topo.Host

// Doc is a whole report.
type Doc struct {
	Title    string
	Meta     []KV
	Skipped  []results.Skipped
	Tests    []*TestView
	CPU      []*CPUView
	Seeds    []*SeedView
	NoSeeds  string // why no seed table is shown
	Warnings []string
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
	Mode     string
	Series   string // path, with the provider when there is one
	Median   string
	CI       string // "[lo, hi]" or ""
	CIMethod string
	CV       string
	N        string
	Ceiling  string // ratio to the ceiling with its CI
	Baseline string // ratio to the run's baseline with its verdict
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
	d := &Doc{Title: "vnetlab report", Skipped: f.Metadata.Skipped}
	if f.Metadata.Scenario != "" {
		d.Title += ": " + f.Metadata.Scenario
	}
	d.Meta = metadata(f.Metadata)
	byTest := map[string][]*results.Cell{}
	for _, c := range f.Cells {
		byTest[c.Test] = append(byTest[c.Test], c)
	}
	for _, t := range testOrder(f.Cells) {
		tv := buildTest(t, byTest[t])
		d.Tests = append(d.Tests, tv)
		if cv := buildCPU(t, byTest[t]); cv != nil {
			d.CPU = append(d.CPU, cv)
		}
	}
	d.Seeds, d.NoSeeds = compareSeeds(f.Cells, f.Metadata.Skipped...)
	if e := f.Metadata.Emulation; e != "" {
		d.Warnings = append(d.Warnings, "measured under "+e)
	}
	for _, c := range f.Cells {
		if c.Noisy {
			d.Warnings = append(d.Warnings, fmt.Sprintf("%s is noisy (CV %.1f%%): its differences are less certain than its interval suggests", cellName(c), c.CV*100))
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

// HigherIsBetter tells the direction of a unit (throughput and rates up,
// latency down).
func HigherIsBetter(unit string) bool {
	switch strings.ToLower(unit) {
	case "us", "µs", "ms", "s", "ns":
		return false
	}
	return true
}

// series names a cell within its mode: its path, and provider if any.
func series(c *results.Cell) string {
	if c.Provider != "" {
		if c.ExtraServices > 0 {
			return fmt.Sprintf("%s/%s+%d", c.Path, c.Provider, c.ExtraServices)
		}
		return c.Path + "/" + c.Provider
	}
	return c.Path
}

func cellName(c *results.Cell) string {
	return fmt.Sprintf("%s %s %s", c.Mode, series(c), c.Test)
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

// cellCI is the cell's 95% CI: the run's own when present, else a bootstrap
// of the median computed here.
func cellCI(c *results.Cell) (lo, hi float64, method string, ok bool) {
	if len(c.CI95) == 2 {
		m := c.CIMethod
		if m == "" {
			m = "from results file"
		}
		return c.CI95[0], c.CI95[1], m, true
	}
	lo, hi, ok = MedianCI(c.Values())
	return lo, hi, "bootstrap-median (report)", ok
}

func buildTest(test string, cells []*results.Cell) *TestView {
	tv := &TestView{Test: test, File: "chart-" + test}
	if len(cells) > 0 {
		tv.Unit = cells[0].Unit
	}
	tv.HigherBetter = HigherIsBetter(tv.Unit)
	ceil := ceilingOf(cells)
	switch {
	case ceil == nil:
		tv.Ceiling = "this run has no host cell (loopback in one namespace) for " + test + ": no ratio to the ceiling"
	case ceil.Valid == 0:
		tv.Ceiling = "the host cell failed: no ratio to the ceiling"
	default:
		tv.HasCeiling = true
		tv.Ceiling = fmt.Sprintf("ceiling = %s %s (loopback in one namespace): %s %s", ceil.Mode, series(ceil), fmtValue(ceil.Median), ceil.Unit)
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
		s := series(c)
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
		return seriesIdx[series(a)] < seriesIdx[series(b)]
	})
	for _, c := range sorted {
		cv := &CellView{Cell: c, Mode: c.Mode, Series: series(c), N: fmt.Sprintf("%d", c.Valid)}
		if c.Failed > 0 {
			cv.N += fmt.Sprintf(" (%d failed)", c.Failed)
		}
		bar := Bar{Color: seriesIdx[cv.Series], Failed: c.Valid == 0, Tip: cv.Series}
		var notes []string
		if c.Valid == 0 {
			cv.Median = "FAILED"
			notes = append(notes, firstError(c))
		} else {
			cv.Median = fmtValue(c.Median)
			bar.Value = c.Median
			bar.Tip = fmt.Sprintf("%s %s: %s %s (n=%d)", c.Mode, cv.Series, fmtValue(c.Median), c.Unit, c.Valid)
			if lo, hi, m, ok := cellCI(c); ok {
				cv.CI, cv.CIMethod = fmt.Sprintf("[%s, %s]", fmtValue(lo), fmtValue(hi)), m
				bar.Lo, bar.Hi, bar.HasCI = lo, hi, true
				bar.Tip += fmt.Sprintf(", 95%% CI %s", cv.CI)
			} else {
				cv.CIMethod = "too few samples for a CI"
			}
			if c.CV > 0 {
				cv.CV = fmt.Sprintf("%.1f%%", c.CV*100)
			}
			if tv.HasCeiling {
				cv.Ceiling = ratioText(c, ceil)
			}
		}
		if c.Noisy {
			notes = append(notes, "noisy")
		}
		if vb := c.VsBaseline; vb != nil {
			tv.HasBaseline = true
			cv.Baseline = baselineText(vb)
		}
		if l := c.Latency; len(l) > 0 {
			tv.HasLatency = true
			cv.Latency = latencyText(l)
		}
		cv.Notes = strings.Join(notes, "; ")
		tv.Cells = append(tv.Cells, cv)
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

// ratioText is median/ceiling median with the bootstrap CI of that ratio.
func ratioText(c, ceil *results.Cell) string {
	r := c.Median / ceil.Median
	if c == ceil {
		return "1 (ceiling)"
	}
	s := fmt.Sprintf("%.2f", r)
	if lo, hi, ok := RatioCI(c.Values(), ceil.Values()); ok {
		s += fmt.Sprintf(" [%.2f, %.2f]", lo, hi)
	}
	return s
}

func baselineText(vb *results.Comparison) string {
	if vb.Verdict == "baseline" {
		return "baseline"
	}
	if vb.Verdict == "n/a" {
		return "n/a (" + vb.Note + ")"
	}
	s := fmt.Sprintf("%.2f", vb.Ratio)
	if len(vb.RatioCI95) == 2 {
		s += fmt.Sprintf(" [%.2f, %.2f]", vb.RatioCI95[0], vb.RatioCI95[1])
	}
	v := vb.Verdict
	if v == "" {
		v = "~"
	}
	s += " " + v
	if vb.Test != "" && !math.IsNaN(vb.PValue) {
		s += fmt.Sprintf(" (p=%.3f)", vb.PValue)
	}
	return s
}

func latencyText(l map[string]float64) string {
	var parts []string
	for _, k := range []string{"p50", "p99", "p99.9"} {
		if v, ok := l[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %s", k, fmtValue(v)))
		}
	}
	return strings.Join(parts, ", ")
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
		row := CPURow{Mode: c.Mode, Series: series(c), User: fmtValue(parts[0]), System: fmtValue(parts[1]), Softirq: fmtValue(parts[2]), Total: fmtValue(per)}
		if softirqs > 0 {
			row.Softirqs = fmtValue(softirqs)
		}
		cv.Rows = append(cv.Rows, row)
		label := c.Mode
		if series(c) != "pod" {
			label += " " + series(c)
		}
		cv.Chart.Groups = append(cv.Chart.Groups, BarGroup{Label: label, Bars: []Bar{{Value: per, Parts: parts,
			Tip: fmt.Sprintf("%s: %s CPU-s per %s (user %s, system %s, softirq %s)", label, fmtValue(per), perName, row.User, row.System, row.Softirq)}}})
	}
	return cv
}

func metadata(m results.Metadata) []KV {
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
	if s.Streams > 0 {
		set += fmt.Sprintf(", streams %d", s.Streams)
	}
	if s.Size > 0 {
		set += fmt.Sprintf(", size %d B", s.Size)
	}
	add("settings", set)
	return kv
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
