// Package report turns a results file into the terminal table, the
// Markdown and HTML documents and their charts, and run-to-run comparisons.
package report

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/stats"
)

// Table prints one row per cell (median, 95% CI, CV, comparison with the
// baseline, CPU cost, samples), then a legend saying which methods made those
// numbers, and every failed sample with its error. A run with a service path
// also shows each cell's provider, its generated services and "vs pod": the
// service cell over the same mode's pod cell (seed 002's clusterIP/podIP).
func Table(w io.Writer, f *results.File, markdown bool) {
	baseline := results.Baseline(f.Cells, f.Metadata.Settings.Baseline)
	hasLatency, svc := false, false
	for _, c := range f.Cells {
		if len(c.Latency) > 0 {
			hasLatency = true
		}
		if c.Provider != "" {
			svc = true
		}
	}
	t := table.NewWriter()
	t.SetOutputMirror(w)
	header := table.Row{"mode", "path"}
	if svc {
		header = append(header, "provider", "+services")
	}
	header = append(header, "test", "median", "95% CI", "CV", "vs "+baseline)
	if svc {
		header = append(header, "vs pod")
	}
	header = append(header, "CPU cost")
	if hasLatency {
		header = append(header, "p50/p99 us")
	}
	t.AppendHeader(append(header, "unit", "samples"))
	for _, c := range f.Cells {
		n := fmt.Sprintf("%d", c.Valid)
		if c.Failed > 0 {
			n += fmt.Sprintf(" + %d FAILED", c.Failed)
		}
		row := table.Row{c.Mode, c.Path}
		if svc {
			extra := ""
			if c.Provider != "" {
				extra = fmt.Sprint(c.ExtraServices)
			}
			row = append(row, c.Provider, extra)
		}
		row = append(row, c.Test)
		if c.Valid == 0 {
			row = append(row, "FAILED", "", "", "")
		} else {
			row = append(row, num(c.Median), ci(c.CI95), cv(c), vs(c.VsBaseline))
		}
		if svc {
			if c.Valid == 0 || c.Provider == "" {
				row = append(row, "")
			} else {
				row = append(row, vs(c.VsPod))
			}
		}
		if c.Valid == 0 {
			row = append(row, "")
		} else {
			row = append(row, cpuCost(c.CPU))
		}
		if hasLatency {
			row = append(row, latency(c.Latency))
		}
		t.AppendRow(append(row, c.Unit, n))
	}
	t.SetStyle(table.StyleLight)
	if markdown {
		t.RenderMarkdown()
	} else {
		t.Render()
	}
	legend(w, f, baseline)
	if svc {
		fmt.Fprintln(w, "vs pod: service cell over the same mode's pod-path cell (clusterIP/podIP), same method; +services: generated services loaded besides the tested ones.")
	}
	notes := map[string]bool{}
	for _, c := range f.Cells {
		if n := fmt.Sprintf("note %s/%s(%s): %s", c.Mode, c.Path, c.Provider, c.Note); c.Note != "" && !notes[n] {
			notes[n] = true
			fmt.Fprintln(w, n)
		}
	}
	for _, s := range f.Metadata.Skipped {
		who := s.Mode
		if s.Provider != "" {
			who += " with " + s.Provider
		}
		fmt.Fprintf(w, "skipped %s: %s\n", who, s.Reason)
	}
	for _, c := range f.Cells {
		for i, s := range c.Samples {
			if !s.Valid {
				fmt.Fprintf(w, "FAILED %s sample %d: %s\n", sampleCellName(c), i+1, s.Error)
			}
		}
	}
}

// sampleCellName is mode/path/test, with the provider and generated services of a service cell.
func sampleCellName(c *results.Cell) string {
	if c.Provider == "" {
		return fmt.Sprintf("%s/%s/%s", c.Mode, c.Path, c.Test)
	}
	p := c.Provider
	if c.ExtraServices > 0 {
		p += fmt.Sprintf("+%d", c.ExtraServices)
	}
	return fmt.Sprintf("%s/%s(%s)/%s", c.Mode, c.Path, p, c.Test)
}

// legend says how every column was computed, and warns when the sample
// counts make a significant verdict impossible.
func legend(w io.Writer, f *results.File, baseline string) {
	method := f.Metadata.Settings.CIMethod
	for _, c := range f.Cells {
		if c.CIMethod != "" {
			method = c.CIMethod
			break
		}
	}
	thr := f.Metadata.Settings.CVThreshold
	if thr == 0 {
		thr = 0.10
	}
	ciText := fmt.Sprintf("percentile bootstrap of the median (%d resamples, fixed seed)", stats.Resamples)
	if method == stats.MethodStudentTMean {
		ciText = "Student t interval of the mean"
	}
	fmt.Fprintf(w, "median of valid samples; 95%% CI: %s; CV = stddev/mean, NOISY above %.0f%%.\n", ciText, thr*100)
	fmt.Fprintf(w, "vs %s: ratio of medians [bootstrap 95%% CI] and a two-sided Mann-Whitney U verdict at p < 0.05: faster/slower, \"~\" = not significant.\n", baseline)
	fmt.Fprintln(w, "CPU cost: whole-machine user+system+irq+softirq seconds per GB received (streams) or per 1000 transactions (rr/crr); rx/t = NET_RX softirqs per transaction.")
	// Sample counts that cannot give p < 0.05, reported rather than hidden.
	tooFew := map[string]float64{}
	for _, c := range f.Cells {
		v := c.VsBaseline
		if v != nil && v.Verdict != "baseline" && v.Verdict != "n/a" && v.MinPValue >= stats.Alpha {
			base := 0
			for _, b := range f.Cells {
				if b.Mode == v.Baseline && b.Path == c.Path && b.Provider == c.Provider && b.Test == c.Test {
					base = b.Valid
				}
			}
			tooFew[fmt.Sprintf("%d vs %d", c.Valid, base)] = v.MinPValue
		}
	}
	if len(tooFew) > 0 {
		var parts []string
		for k, p := range tooFew {
			parts = append(parts, fmt.Sprintf("%s samples (smallest possible p %.2f)", k, p))
		}
		sort.Strings(parts)
		fmt.Fprintf(w, "note: Mann-Whitney cannot reach p < 0.05 with %s, so \"~\" there means \"too few samples to tell\": use --repeat 4 or more.\n", strings.Join(parts, ", "))
	}
}

func ci(v []float64) string {
	if len(v) != 2 {
		return "-"
	}
	return fmt.Sprintf("[%s, %s]", num(v[0]), num(v[1]))
}

func cv(c *results.Cell) string {
	if c.Valid < 2 {
		return "-"
	}
	s := fmt.Sprintf("%.1f%%", c.CV*100)
	if c.Noisy {
		s += " NOISY"
	}
	return s
}

func vs(v *results.Comparison) string {
	switch {
	case v == nil:
		return "-"
	case v.Verdict == "baseline" || v.Verdict == "n/a":
		return v.Verdict
	}
	s := fmt.Sprintf("%.3fx", v.Ratio)
	if len(v.RatioCI95) == 2 {
		s += fmt.Sprintf(" [%.3f, %.3f]", v.RatioCI95[0], v.RatioCI95[1])
	}
	return s + " " + v.Verdict
}

func cpuCost(c *results.CPUCost) string {
	switch {
	case c == nil:
		return "-"
	case c.PerGB > 0:
		return fmt.Sprintf("%.3f s/GB", c.PerGB)
	case c.PerKTrans > 0:
		return fmt.Sprintf("%.3f s/1k, %.1f rx/t", c.PerKTrans, c.NetRxPerTrans)
	default:
		return fmt.Sprintf("%.2f s busy", c.BusySec)
	}
}

func latency(l map[string]float64) string {
	p50, ok1 := l["p50"]
	p99, ok2 := l["p99"]
	if !ok1 || !ok2 {
		return "-"
	}
	return fmt.Sprintf("%.1f/%.1f", p50, p99)
}

func num(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 100:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}
