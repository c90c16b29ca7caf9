// Package report turns a results file into what people read: the terminal
// table (table.go), the seed-002 summary (summary.go), the comparison of two
// files (compare.go) and the Markdown/HTML documents with charts. All of them
// render the view model built in view.go; the numbers come from
// internal/analysis.
package report

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"

	"github.com/vnetlab/vnetlab/internal/analysis"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/stats"
)

// Table prints one row per cell (median, 95% CI, CV, comparison with the
// baseline, CPU cost, samples), then a legend saying which methods made those
// numbers, and every failed sample with its error. A run with a service path
// also shows each cell's provider, its generated services and "vs pod": the
// service cell over the same mode's pod cell (seed 002's clusterIP/podIP).
func Table(w io.Writer, f *results.File, markdown bool) {
	d := Build(f)
	hasLatency, svc := false, false
	for _, c := range d.Cells {
		hasLatency = hasLatency || c.Latency != ""
		svc = svc || c.ID.Provider != ""
	}
	t := table.NewWriter()
	t.SetOutputMirror(w)
	header := table.Row{"mode", "path"}
	if svc {
		header = append(header, "provider", "+services")
	}
	header = append(header, "test", "median", "95% CI", "CV", "vs "+d.Baseline)
	if svc {
		header = append(header, "vs pod")
	}
	header = append(header, "CPU cost")
	if hasLatency {
		header = append(header, "latency µs")
	}
	t.AppendHeader(append(header, "unit", "samples"))
	for _, c := range d.Cells {
		path := c.ID.Path
		if c.ID.Placement != "" { // a Kubernetes cell: same-node or cross-node
			path += "@" + c.ID.Placement
		}
		if c.ID.Family != "" { // an IPv6 cell (IPv4 is the default)
			path += " " + c.ID.Family
		}
		row := table.Row{c.Mode, path}
		if svc {
			extra := ""
			if c.ID.Provider != "" {
				extra = fmt.Sprint(c.ID.ExtraServices)
			}
			row = append(row, c.ID.Provider, extra)
		}
		cvText := c.CV
		if c.Noisy {
			cvText += " NOISY"
		}
		row = append(row, c.ID.Test, c.Median, c.CI, cvText, c.Baseline)
		if svc {
			row = append(row, c.VsPod)
		}
		row = append(row, c.CPU)
		if hasLatency {
			row = append(row, c.Latency)
		}
		t.AppendRow(append(row, c.Cell.Unit, c.N))
	}
	t.SetStyle(table.StyleLight)
	if markdown {
		t.RenderMarkdown()
	} else {
		t.Render()
	}
	legend(w, f, d.Baseline)
	for _, kv := range d.Meta {
		if kv.Key == "CPU affinity" {
			fmt.Fprintf(w, "CPU affinity: %s.\n", kv.Value)
		}
	}
	if u := unpinnedWarning(f); u != "" {
		fmt.Fprintf(w, "warning: %s\n", u)
	}
	if svc {
		fmt.Fprintln(w, "vs pod: service cell over the same mode's pod-path cell (clusterIP/podIP), same method; +services: generated services loaded besides the tested ones.")
	}
	outcomes(w, d)
	for _, s := range f.Metadata.Skipped {
		who := s.Mode
		if s.Provider != "" {
			who += " with " + s.Provider
		}
		fmt.Fprintf(w, "skipped %s: %s\n", who, s.Reason)
	}
}

// outcomes prints, under the table, the run's predictions and what became of
// them, then every failed sample of a cell that was not predicted to fail.
func outcomes(w io.Writer, d *Doc) {
	for _, c := range d.Cells {
		switch c.Status {
		case analysis.FailedAsExpected:
			fmt.Fprintf(w, "failed as expected %s: %s (%s)\n", c.ID, c.Cell.Note, firstError(c.Cell))
		case analysis.WorkedUnexpectedly:
			fmt.Fprintf(w, "WORKED UNEXPECTEDLY %s: %d valid samples, yet the run predicted: %s\n", c.ID, c.Cell.Valid, c.Cell.Note)
		}
	}
	for _, c := range d.Cells {
		if c.Status == analysis.FailedAsExpected {
			continue
		}
		for i, s := range c.Cell.Samples {
			if !s.Valid {
				fmt.Fprintf(w, "FAILED %s sample %d: %s\n", c.ID, i+1, s.Error)
			}
		}
	}
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
		thr = analysis.DefaultCVThreshold
	}
	ciText := fmt.Sprintf("percentile bootstrap of the median (%d resamples, fixed seed)", stats.Resamples)
	if method == stats.MethodStudentTMean {
		ciText = "Student t interval of the mean"
	}
	fmt.Fprintf(w, "median of valid samples; 95%% CI: %s; CV = stddev/mean, NOISY above %.0f%%.\n", ciText, thr*100)
	fmt.Fprintf(w, "vs %s: ratio of medians [bootstrap 95%% CI] and a two-sided Mann-Whitney U verdict at p < 0.05: faster/slower, \"~\" = not significant.\n", baseline)
	fmt.Fprintln(w, "CPU cost: whole-machine user+system+irq+softirq seconds per GB received (streams) or per 1000 transactions (rr/crr); rx/t = NET_RX softirqs per transaction.")
	// Sample counts that cannot give p < 0.05, reported rather than hidden.
	valid := map[results.CellID]int{}
	for _, c := range f.Cells {
		valid[c.ID()] = c.Valid
	}
	tooFew := map[string]float64{}
	for _, c := range f.Cells {
		v := c.VsBaseline
		if v == nil || v.MinPValue < stats.Alpha {
			continue
		}
		if verdict := analysis.ParseVerdict(v.Verdict); verdict == analysis.Baseline || verdict == analysis.NoVerdict {
			continue
		}
		base := c.ID()
		base.Mode = v.Baseline
		tooFew[fmt.Sprintf("%d vs %d", c.Valid, valid[base])] = v.MinPValue
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

// cpuText is a cell's CPU cost per unit of work.
func cpuText(c *results.CPUCost) string {
	switch {
	case c == nil:
		return ""
	case c.PerGB > 0:
		return fmt.Sprintf("%.3f s/GB", c.PerGB)
	case c.PerKTrans > 0:
		return fmt.Sprintf("%.3f s/1k, %.1f rx/t", c.PerKTrans, c.NetRxPerTrans)
	default:
		return fmt.Sprintf("%.2f s busy", c.BusySec)
	}
}
