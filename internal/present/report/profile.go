package report

import (
	"bytes"
	"fmt"
	"html/template"
	"io"

	"github.com/vnetlab/vnetlab/internal/measure/profile"
	"github.com/vnetlab/vnetlab/internal/present/explain"
	"github.com/vnetlab/vnetlab/internal/results"
)

// ProfileView is one test's "where the CPU goes" section (run --profile):
// a stacked stage bar per cell, the explanation of each cell against the
// baseline, and per cell its flame graph and the differential one against
// the baseline (inline SVG: hover titles, no script).
type ProfileView struct {
	Test      string
	Unit      string // per transaction, connection, MB
	Bars      template.HTML
	Sentences []string
	Cells     []ProfileCellView
	Missing   string // why flame graphs are absent (profile files not found)
	Overhead  string // what the profiler's own programs cost in these cells
	rows      []barRow
}

// ProfileCellView is one cell's flame graphs.
type ProfileCellView struct {
	Label string
	Flame template.HTML
	Diff  template.HTML // empty for the baseline
	Base  string
}

// buildProfiles makes the profile sections of f; resultsDir is where the
// results file lives (its cells' profile files are relative to it; "" when
// unknown: then there are bars and sentences, no flame graphs).
func buildProfiles(f *results.File, resultsDir string) []*ProfileView {
	var out []*ProfileView
	byTest := map[string]*ProfileView{}
	for _, c := range f.Cells {
		if c.Profile == nil {
			continue
		}
		v, ok := byTest[c.Test]
		if !ok {
			v = &ProfileView{Test: c.Test, Unit: c.Profile.Unit}
			byTest[c.Test] = v
			out = append(out, v)
		}
	}
	for _, v := range out {
		var rows []barRow
		for _, c := range f.Cells {
			if c.Test == v.Test && c.Profile != nil {
				rows = append(rows, barRow{Label: explain.Label(c), S: c.Profile})
			}
		}
		v.rows = rows
		v.Overhead = overheadNote(rows)
		var b bytes.Buffer
		if err := writeStageBars(&b, rows, profile.DefaultRules); err == nil {
			v.Bars = template.HTML(b.String()) // built from escaped text by package profile
		}
		pairs, _ := explain.Select(f, nil, v.Test)
		base := map[*results.Cell]*results.Cell{}
		for _, p := range pairs {
			base[p.B] = p.A
			if e, err := explain.Compare(p.A, p.B); err == nil {
				v.Sentences = append(v.Sentences, e.Sentence)
			}
		}
		if resultsDir == "" {
			v.Missing = "flame graphs need the profile files written beside the results (report reads them from the results file's directory)"
			continue
		}
		for _, c := range f.Cells {
			if c.Test != v.Test || c.Profile == nil {
				continue
			}
			cv, err := flameViews(resultsDir, c, base[c])
			if err != nil {
				v.Missing = err.Error()
				continue
			}
			v.Cells = append(v.Cells, cv)
		}
	}
	return out
}

// flameWidth fits the page's content width.
const flameWidth = 1020

func flameViews(resultsDir string, c, base *results.Cell) (ProfileCellView, error) {
	cv := ProfileCellView{Label: explain.Label(c)}
	p, us, err := profile.LoadStacks(resultsDir, c.Profile)
	if err != nil {
		return cv, fmt.Errorf("%s: %w", cv.Label, err)
	}
	o := profile.FlameOptions{Width: flameWidth, USPerSample: us, Unit: c.Profile.Unit, Title: fmt.Sprintf("%s %s: data-path CPU per %s", cv.Label, c.Test, c.Profile.Unit)}
	var b bytes.Buffer
	if err := profile.WriteFlameGraph(&b, p, profile.DefaultRules, o); err != nil {
		return cv, err
	}
	cv.Flame = template.HTML(b.String())
	if base == nil {
		return cv, nil
	}
	bp, bus, err := profile.LoadStacks(resultsDir, base.Profile)
	if err != nil {
		return cv, fmt.Errorf("%s: %w", explain.Label(base), err)
	}
	cv.Base = explain.Label(base)
	o.Base, o.BaseUSPerSample, o.BaseTitle = bp, bus, cv.Base
	o.Title = fmt.Sprintf("%s vs %s: red = more µs per %s, blue = less", cv.Label, cv.Base, o.Unit)
	b.Reset()
	if err := profile.WriteFlameGraph(&b, p, profile.DefaultRules, o); err != nil {
		return cv, err
	}
	cv.Diff = template.HTML(b.String())
	return cv, nil
}

// markdownProfiles writes the profile sections as a stage table (µs per
// unit, one column per cell) and the explanation sentences; the flame
// graphs are in report.html and the profile files.
func markdownProfiles(w io.Writer, views []*ProfileView) {
	if len(views) == 0 {
		return
	}
	fmt.Fprintf(w, "## Where the CPU goes\n\nrun --profile: data-path CPU µs per unit of work by stage, all CPUs (docs/profiling.md); flame graphs in report.html.\n\n")
	for _, v := range views {
		fmt.Fprintf(w, "### %s: data-path CPU per %s\n\n", v.Test, v.Unit)
		head := []string{"stage"}
		for _, r := range v.rows {
			head = append(head, r.Label)
		}
		mdRow(w, head)
		mdRow(w, dashes(len(head)))
		for _, id := range profile.DefaultRules.Order() {
			row := []string{profile.DefaultRules.Name(id)}
			any := false
			for _, r := range v.rows {
				c := r.S.Stage(id)
				if !profile.Counted(c.Kind) || c.US < 0.005 {
					row = append(row, "")
					continue
				}
				any = true
				row = append(row, fmt.Sprintf("%.2f", c.US))
			}
			if any {
				mdRow(w, row)
			}
		}
		total := []string{"**data path**"}
		for _, r := range v.rows {
			total = append(total, fmt.Sprintf("**%.2f**", r.S.DataPathUS))
		}
		mdRow(w, total)
		fmt.Fprintln(w)
		for _, s := range v.Sentences {
			fmt.Fprintf(w, "%s\n\n", s)
		}
		if v.Overhead != "" {
			fmt.Fprintf(w, "%s.\n\n", v.Overhead)
		}
	}
}

// overheadNote states the profiler's own measured cost in the cells (its
// tracepoint programs' stage), smallest and largest share of the data path.
func overheadNote(rows []barRow) string {
	lo, hi, n := 0.0, 0.0, 0
	for _, r := range rows {
		if r.S == nil || r.S.DataPathUS <= 0 {
			continue
		}
		var own float64
		for _, c := range r.S.Stages {
			if c.Kind == profile.KindOverhead {
				own += c.US
			}
		}
		share := own / r.S.DataPathUS
		if n == 0 || share < lo {
			lo = share
		}
		if n == 0 || share > hi {
			hi = share
		}
		n++
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("The profiler's own tracepoint programs cost %.1f%% to %.1f%% on top of the data path's CPU in these cells (measured, not counted above); its effect on the rate: docs/profiling.md#overhead", 100*lo, 100*hi)
}
