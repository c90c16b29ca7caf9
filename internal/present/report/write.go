package report

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/vnetlab/vnetlab/internal/results"
)

// Write renders the report of f into dir: report.md, report.html (one
// self-contained file) and each chart as .svg and .png. Everything is
// rendered in memory first, so a failure leaves no half-written report.
// It returns the files written. resultsDir is the directory of the results
// file, where the profiled cells' stacks are (run --profile); "" when there
// is none (no flame graphs then).
func Write(dir string, f *results.File, resultsDir string) ([]string, error) {
	if len(f.Cells) == 0 {
		return nil, fmt.Errorf("the results file has no cells: nothing to report (was the run interrupted before its first sample?)")
	}
	d := Build(f)
	d.Profiles = buildProfiles(f, resultsDir)
	files := map[string][]byte{}
	var order []string
	put := func(name string, b []byte) {
		files[name] = b
		order = append(order, name)
	}
	var md, page bytes.Buffer
	Markdown(&md, d)
	if err := HTML(&page, d); err != nil {
		return nil, fmt.Errorf("render HTML: %w", err)
	}
	put("report.md", md.Bytes())
	put("report.html", page.Bytes())
	charts := map[string]*BarChart{}
	for _, t := range d.Tests {
		charts[t.File] = t.Chart
	}
	for _, c := range d.CPU {
		charts[c.File] = c.Chart
	}
	var names []string
	for _, t := range d.Tests {
		names = append(names, t.File)
	}
	for _, c := range d.CPU {
		names = append(names, c.File)
	}
	for _, n := range names {
		put(n+".svg", []byte(charts[n].SVG(true)))
		png, err := charts[n].PNG()
		if err != nil {
			return nil, fmt.Errorf("render %s.png: %w", n, err)
		}
		put(n+".png", png)
	}
	for _, cv := range d.Curves {
		put(cv.File+".svg", []byte(cv.Chart.SVG(true)))
		png, err := cv.Chart.PNG()
		if err != nil {
			return nil, fmt.Errorf("render %s.png: %w", cv.File, err)
		}
		put(cv.File+".png", png)
	}
	return WriteFiles(dir, order, files)
}

// WriteFiles writes files (rendered in memory) into dir, creating it, in
// order, and returns their paths.
func WriteFiles(dir string, order []string, files map[string][]byte) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report directory: %w", err)
	}
	var written []string
	for _, name := range order {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, files[name], 0o644); err != nil {
			return written, err
		}
		written = append(written, p)
	}
	return written, nil
}
