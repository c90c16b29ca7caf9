package history

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/vnetlab/vnetlab/internal/present/report"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
	"github.com/vnetlab/vnetlab/internal/results/stats"
)

const dateFormat = "2006-01-02 15:04"

func date(t time.Time) string { return t.UTC().Format(dateFormat) }

// run names run i as people count: "run 7".
func runName(i int) string { return fmt.Sprintf("run %d", i+1) }

// ChartFile is the name of a series' chart in the report directory.
func (s *Series) ChartFile() string {
	return "history-" + strings.Trim(unsafe.ReplaceAllString(s.ID.String(), "-"), "-") + ".svg"
}

var unsafe = regexp.MustCompile(`[^A-Za-z0-9_.+-]+`)

// Describe says what one change is, in one line.
func (h *History) Describe(s *Series, c Change) string {
	p := s.Points[c.Point]
	r := h.Runs[p.Run]
	ci := ""
	if c.HasCI {
		ci = fmt.Sprintf(" [%.3f, %.3f]", c.RatioCI[0], c.RatioCI[1])
	}
	verdict := c.Verdict.String()
	if c.Verdict == analysis.Same {
		verdict = "the spread changed, the level's CI holds 1"
	}
	line := fmt.Sprintf("%s, %s (%s): after/before ×%.3f%s, p = %.3f: %s", runName(p.Run), date(r.Start()), filepath.Base(r.File), c.Ratio, ci, c.P, verdict)
	if c.Newest {
		line += " (newest)"
	}
	return line
}

// method says how detection ran, for the report and the text output.
func (h *History) method() string {
	o := h.Options.EDivisive.WithDefaults()
	s := fmt.Sprintf("E-Divisive means (Matteson & James 2014) over each run's median, %d permutations, significance p < %g", o.Permutations, o.Alpha)
	var crossed []string
	for _, b := range h.Boundaries {
		if b.Crossed {
			crossed = append(crossed, fmt.Sprintf("%s (%s)", runName(b.Before), b))
		}
	}
	if len(crossed) > 0 {
		s += "; detection ran ACROSS the boundaries before " + strings.Join(crossed, ", ") + " (--across)"
	}
	if len(h.Boundaries) > len(crossed) {
		s += "; it does not cross the other boundaries"
	}
	return s
}

// Text writes the summary `history` prints.
func (h *History) Text(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	first, last := h.Runs[0], h.Runs[len(h.Runs)-1]
	p("%d runs, %s .. %s; %d %s\n", len(h.Runs), date(first.Start()), date(last.Start()), len(h.Series), plural(len(h.Series), "cell", "cells"))
	for _, b := range h.Boundaries {
		note := "detection does not cross it"
		if b.Crossed {
			note = "detection runs across it (--across)"
		}
		p("boundary before %s (%s): %s: %s\n", runName(b.Before), filepath.Base(h.Runs[b.Before].File), b, note)
	}
	if h.Detected {
		p("detection: %s\n", h.method())
	}
	for _, s := range h.Series {
		newest := s.Points[len(s.Points)-1]
		p("%s (%s): %d runs, newest %s\n", s.ID, s.Unit, len(s.Points), pointText(newest))
		for _, c := range s.Changes {
			p("  change at %s\n", h.Describe(s, c))
		}
		for _, n := range s.Notes {
			p("  %s\n", n)
		}
		if h.Detected && len(s.Changes) == 0 && len(s.Notes) == 0 {
			p("  no significant change\n")
		}
	}
}

func pointText(p Point) string {
	if p.Failed() {
		return "FAILED (no valid sample)"
	}
	c := p.Cell
	s := report.FormatValue(c.Median)
	if len(c.CI95) == 2 {
		s += fmt.Sprintf(" [%s, %s]", report.FormatValue(c.CI95[0]), report.FormatValue(c.CI95[1]))
	}
	return s
}

// Markdown writes the history as a Markdown document; each series' chart is
// the .svg file Write puts beside it.
func (h *History) Markdown(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("# vnetlab history\n\n")
	p("%d runs from %s to %s, each cell's median with its 95%% CI run after run.", len(h.Runs), date(h.Runs[0].Start()), date(h.Runs[len(h.Runs)-1].Start()))
	if len(h.Boundaries) > 0 {
		p(" Dashed lines mark boundaries: the runs on either side differ in kernel, CPU count or vnetlab version.")
	}
	if h.Detected {
		p(" Red lines mark change points found by %s; an orange line is the level of each segment.", h.method())
	}
	p("\n\n## Runs\n\n")
	boundaryBefore := map[int]Boundary{}
	for _, b := range h.Boundaries {
		boundaryBefore[b.Before] = b
	}
	var rows [][]string
	for i, r := range h.Runs {
		m := r.Data.Metadata
		mark := ""
		if b, ok := boundaryBefore[i]; ok {
			mark = "boundary: " + b.String()
		}
		rows = append(rows, []string{fmt.Sprint(i + 1), date(m.Start), filepath.Base(r.File), m.Vnetlab, m.Kernel, fmt.Sprint(m.CPUs), mark})
	}
	report.MarkdownTable(w, []string{"run", "start (UTC)", "file", "vnetlab", "kernel", "CPUs", ""}, rows)
	for _, s := range h.Series {
		p("\n## %s (%s)\n\n![%s](%s)\n\n", s.ID, s.Unit, s.ID, s.ChartFile())
		if h.Detected {
			if len(s.Changes) == 0 && len(s.Notes) == 0 {
				p("No significant change point.\n\n")
			}
			for _, c := range s.Changes {
				p("- change at %s\n", h.Describe(s, c))
			}
			for _, n := range s.Notes {
				p("- %s\n", n)
			}
			p("\n")
		}
		changeAt := map[int]Change{}
		for _, c := range s.Changes {
			changeAt[c.Point] = c
		}
		var rows [][]string
		prevRun := -1
		for i, pt := range s.Points {
			var marks []string
			for _, b := range h.Boundaries {
				if b.Before > prevRun && b.Before <= pt.Run && prevRun >= 0 {
					marks = append(marks, "boundary: "+b.String())
				}
			}
			if c, ok := changeAt[i]; ok {
				marks = append(marks, fmt.Sprintf("change ×%.3f, p = %.3f, %s", c.Ratio, c.P, c.Verdict))
			}
			prevRun = pt.Run
			c := pt.Cell
			median, ci := "FAILED", ""
			if !pt.Failed() {
				median = report.FormatValue(c.Median)
				if len(c.CI95) == 2 {
					ci = fmt.Sprintf("[%s, %s]", report.FormatValue(c.CI95[0]), report.FormatValue(c.CI95[1]))
				}
			}
			rows = append(rows, []string{fmt.Sprint(pt.Run + 1), date(h.Runs[pt.Run].Start()), median, ci, fmt.Sprint(len(pt.Values)), strings.Join(marks, "; ")})
		}
		report.MarkdownTable(w, []string{"run", "start (UTC)", "median", "95% CI", "n", ""}, rows)
	}
}

// Chart draws one series.
func (h *History) Chart(s *Series) *report.SeriesChart {
	c := &report.SeriesChart{Title: s.ID.String() + " over " + fmt.Sprint(len(s.Points)) + " runs", Unit: s.Unit}
	var cuts []int // point indices where a segment starts: uncrossed boundaries and changes
	prevRun := -1
	for i, pt := range s.Points {
		for _, b := range h.Boundaries {
			if prevRun >= 0 && b.Before > prevRun && b.Before <= pt.Run {
				label := string(b.Kinds[0])
				if len(b.Kinds) > 1 {
					label += "+"
				}
				if b.Crossed {
					label += " (crossed)"
				} else {
					cuts = append(cuts, i)
				}
				c.Marks = append(c.Marks, report.SeriesMark{Before: i, Label: label, Tip: b.String()})
			}
		}
		prevRun = pt.Run
		cell := pt.Cell
		sp := report.SeriesPoint{Label: h.pointLabel(pt.Run), Failed: pt.Failed(),
			Tip: fmt.Sprintf("%s, %s: %s %s (n=%d)", runName(pt.Run), filepath.Base(h.Runs[pt.Run].File), pointText(pt), s.Unit, len(pt.Values))}
		if !pt.Failed() {
			sp.Value = cell.Median
			if len(cell.CI95) == 2 {
				sp.Lo, sp.Hi, sp.HasCI = cell.CI95[0], cell.CI95[1], true
			}
		}
		c.Points = append(c.Points, sp)
	}
	for _, ch := range s.Changes {
		cuts = append(cuts, ch.Point)
		c.Marks = append(c.Marks, report.SeriesMark{Before: ch.Point, Change: true, Label: fmt.Sprintf("×%.3f p=%.3f", ch.Ratio, ch.P), Tip: h.Describe(s, ch)})
	}
	if h.Detected {
		c.Subtitle = "E-Divisive change points in red, segment levels in orange; dashed: kernel, CPU count or vnetlab changed"
		c.Levels = levels(s, cuts)
	}
	return c
}

// pointLabel is a run's x-axis label: its number and its day, or its time
// of day when every run is from one day.
func (h *History) pointLabel(run int) string {
	layout := "01-02"
	if first, last := h.Runs[0].Start().UTC(), h.Runs[len(h.Runs)-1].Start().UTC(); first.YearDay() == last.YearDay() && first.Year() == last.Year() {
		layout = "15:04"
	}
	return fmt.Sprintf("#%d %s", run+1, h.Runs[run].Start().UTC().Format(layout))
}

// levels is the pooled median of each segment between cuts.
func levels(s *Series, cuts []int) []report.SeriesLevel {
	starts := map[int]bool{0: true}
	for _, c := range cuts {
		starts[c] = true
	}
	var out []report.SeriesLevel
	from := 0
	for i := 1; i <= len(s.Points); i++ {
		if i < len(s.Points) && !starts[i] {
			continue
		}
		var v []float64
		for _, p := range s.Points[from:i] {
			v = append(v, p.Values...)
		}
		if len(v) > 0 {
			m := stats.Median(v)
			out = append(out, report.SeriesLevel{From: from, To: i - 1, Value: m, Tip: fmt.Sprintf("level %s %s", report.FormatValue(m), s.Unit)})
		}
		from = i
	}
	return out
}

// Write renders history.md and a chart per series (.svg and .png) into dir (in memory
// first, so a failure leaves nothing half-written) and returns the files.
func (h *History) Write(dir string) ([]string, error) {
	var md bytes.Buffer
	h.Markdown(&md)
	files := map[string][]byte{"history.md": md.Bytes()}
	order := []string{"history.md"}
	for _, s := range h.Series {
		chart := h.Chart(s)
		png, err := chart.PNG()
		if err != nil {
			return nil, fmt.Errorf("render %s: %w", s.ChartFile(), err)
		}
		pngFile := strings.TrimSuffix(s.ChartFile(), ".svg") + ".png"
		files[s.ChartFile()], files[pngFile] = []byte(chart.SVG(true)), png
		order = append(order, s.ChartFile(), pngFile)
	}
	return report.WriteFiles(dir, order, files)
}
