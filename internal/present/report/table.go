// Package report turns a results file into what people read: the terminal
// table (table.go), the seed-002 summary (summary.go), the comparison of two
// files (compare.go) and the Markdown/HTML documents with charts. All of them
// render the view model built in view.go; the numbers come from
// internal/results/analysis.
package report

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
	"github.com/vnetlab/vnetlab/internal/results/stats"
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
		if c.ID.PolicyProvider != "" { // the lab's NetworkPolicies' provider
			path += ":" + c.ID.PolicyProvider
		}
		if c.ID.Placement != "" { // a Kubernetes cell: same-node or cross-node
			path += "@" + c.ID.Placement
		}
		path += pointText(c.ID.Point) // a sweep's point: {rate=50%}
		if c.ID.Family != "" {        // an IPv6 cell (IPv4 is the default)
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
	if f.CountedInWindows() {
		fmt.Fprintf(w, "warning: this run was %s.\n", results.CountedNote)
	}
	for _, c := range d.Cells {
		if b := behindText(c.Cell); b != "" {
			fmt.Fprintf(w, "warning: %s/%s/%s%s %s.\n", c.Mode, c.ID.Path, c.ID.Test, pointText(c.ID.Point), b)
		}
	}
	for _, l := range rateMaxLines(f.Cells) {
		fmt.Fprintf(w, "rate: %s.\n", l)
	}
	if svc {
		fmt.Fprintln(w, "vs pod: service cell over the same mode's pod-path cell (clusterIP/podIP), same method; +services: generated services loaded besides the tested ones.")
	}
	nodeCPU(w, f)
	seedLines(w, d.Seeds)
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
	comparisonLegend(w, f, baseline)
	if slices.ContainsFunc(f.Cells, func(c *results.Cell) bool { return len(c.LatencyCI) > 0 }) {
		fmt.Fprintln(w, "latency µs: each quantile's median over the samples [percentile bootstrap 95% CI of that median, over the samples], n = the latencies behind it.")
	}
	fmt.Fprintln(w, "CPU cost: whole-machine user+system+irq+softirq seconds per GB received (streams) or per 1000 transactions (rr/crr); rx/t = NET_RX softirqs per transaction.")
	if c := f.Metadata.Cluster; c != nil && strings.HasPrefix(c.NodeCPU, results.NodeCPUProcStat) {
		fmt.Fprintln(w, "CPU cost of this cluster's cells: the client's and server's nodes' /proc/stat, added (each machine once), not this machine's.")
	}
	// Sample counts that cannot give p < 0.05, reported rather than hidden.
	valid := map[results.CellID]int{}
	for _, c := range f.Cells {
		valid[c.ID()] = c.Valid
	}
	tooFew := map[string]float64{}
	for _, c := range f.Cells {
		v := c.VsBaseline
		if v == nil || v.MinPValue < stats.Alpha || v.Method == analysis.MethodPaired {
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

// comparisonLegend says how the cells were compared with the baseline
// (paired by round, or unpaired) and, for a precision run, which
// comparisons met its target and after how many rounds.
func comparisonLegend(w io.Writer, f *results.File, baseline string) {
	var paired, unpaired, met, notMet int
	var rounds []int
	level := 0.0
	var widest *results.Comparison // the widest paired comparison
	for _, c := range f.Cells {
		for _, v := range c.Comparisons() {
			if v == nil || analysis.ParseVerdict(v.Verdict) == analysis.Baseline {
				continue
			}
			if v.Method == analysis.MethodPaired {
				paired++
				level = max(level, v.Confidence)
				if widest == nil || v.HalfWidth > widest.HalfWidth {
					widest = v
				}
			} else {
				unpaired++
			}
			if v.PrecisionMet != nil && *v.PrecisionMet {
				met++
				rounds = append(rounds, v.MetAtRound)
			} else if v.PrecisionMet != nil {
				notMet++
			}
		}
	}
	if level == 0 {
		level = 1 - stats.Alpha
	}
	conf := strconv.FormatFloat(level*100, 'f', -1, 64) + "%"
	alpha := strconv.FormatFloat(1-level, 'g', 3, 64)
	if paired > 0 {
		fmt.Fprintf(w, "vs %s: paired by round (%d comparisons): the ratio of each round's two samples, their Hodges-Lehmann centre [signed-rank %s CI] and a two-sided Wilcoxon signed-rank verdict at p < %s: faster/slower, \"~\" = not significant; ± = the interval's half-width.\n", baseline, paired, conf, alpha)
	}
	if unpaired > 0 {
		fmt.Fprintf(w, "vs %s, unpaired (%d comparisons: cells of different runs, fewer than %d rounds in common, or no rounds recorded): ratio of medians [bootstrap 95%% CI] and a two-sided Mann-Whitney U verdict at p < 0.05.\n", baseline, unpaired, analysis.MinPairs)
	}
	st := f.Metadata.Settings
	if st.Precision == 0 {
		if widest != nil && widest.HalfWidth > 0.02 {
			fmt.Fprintf(w, "note: the widest comparison is ±%.1f%% after %d rounds; about %d rounds would bring every one within ±2%%: run --precision 2%% goes on until they are.\n",
				100*widest.HalfWidth, widest.Pairs, analysis.RoundsFor(widest.HalfWidth, widest.Pairs, 0.02))
		}
		return
	}
	if met+notMet == 0 {
		fmt.Fprintf(w, "precision ±%s: no comparison was paired by round, so none could be run to it.\n", strconv.FormatFloat(st.Precision*100, 'f', -1, 64)+"%")
		return
	}
	slices.Sort(rounds)
	after := ""
	if len(rounds) > 0 {
		after = fmt.Sprintf(", after %d-%d rounds", rounds[0], rounds[len(rounds)-1])
	}
	fmt.Fprintf(w, "precision ±%s: %d of %d comparisons met it%s; the run took %s rounds within --max-time %s (looks at %s; each look's interval at its share of the 5%% error: docs/statistics.md).\n",
		strconv.FormatFloat(st.Precision*100, 'f', -1, 64)+"%", met, met+notMet, after, lastLook(st.Looks), st.MaxTime, strings.Trim(fmt.Sprint(st.Looks), "[]"))
}

// lastLook is the measured rounds at a precision run's last look.
func lastLook(looks []int) string {
	if len(looks) == 0 {
		return "?"
	}
	return strconv.Itoa(looks[len(looks)-1])
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

// nodeCPU prints each cluster cell's CPU per node per unit of work, split
// into user, system and softirq, and how it was read.
func nodeCPU(w io.Writer, f *results.File) {
	var lines []string
	for _, c := range f.Cells {
		if c.CPU == nil || len(c.CPU.Nodes) == 0 {
			continue
		}
		names := make([]string, 0, len(c.CPU.Nodes))
		for n := range c.CPU.Nodes {
			names = append(names, n)
		}
		sort.Strings(names)
		var parts []string
		for _, n := range names {
			parts = append(parts, n+" "+nodeCPUText(c.CPU.Nodes[n]))
		}
		lines = append(lines, fmt.Sprintf("  %s: %s", c.ID(), strings.Join(parts, "; ")))
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "CPU per node (user/system/softirq per unit of work):")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	for _, cl := range f.Metadata.Clusters {
		if cl.NodeCPU != "" {
			fmt.Fprintf(w, "  %s read by %s.\n", cl.Name, cl.NodeCPU)
		}
	}
	if cl := f.Metadata.Cluster; cl != nil && cl.NodeCPU != "" {
		fmt.Fprintf(w, "  read by %s.\n", cl.NodeCPU)
	}
}

// nodeCPUText is one node's cost per unit: "0.210 s/GB (0.050+0.160+0.000)".
func nodeCPUText(c *results.CPUCost) string {
	per, unit := c.PerGB, "s/GB"
	if per == 0 && c.PerKTrans > 0 {
		per, unit = c.PerKTrans, "s/1k"
	}
	if per == 0 || c.BusySec == 0 {
		return fmt.Sprintf("%.3f s busy (user %.3f, system %.3f, softirq %.3f)", c.BusySec, c.UserSec, c.SystemSec, c.SoftirqSec)
	}
	k := per / c.BusySec
	return fmt.Sprintf("%.3f %s (user %.3f, system %.3f, softirq %.3f)", per, unit, c.UserSec*k, c.SystemSec*k, c.SoftirqSec*k)
}
