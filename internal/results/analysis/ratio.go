package analysis

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/stats"
)

// Metric is what a ratio divides, per valid sample of each cell.
type Metric string

const (
	MetricValue     Metric = "value"      // the test's own number (Gbit/s, trans/s, conn/s)
	MetricCPUPerGB  Metric = "cpu-per-gb" // busy CPU-seconds per GB received (streams)
	MetricCPUPerKTr Metric = "cpu-per-1k" // busy CPU-seconds per 1000 transactions (rr/crr)
)

// Metrics lists the accepted metrics, the default first.
var Metrics = []Metric{MetricValue, MetricCPUPerGB, MetricCPUPerKTr}

// Target is what a ratio must reach: at least Value (AtMost false) or at
// most Value (AtMost true, for costs such as CPU per GB).
type Target struct {
	Value  float64
	AtMost bool
}

// String is the target as written: ">= 1.00" or "<= 1.00".
func (t Target) String() string {
	op := ">="
	if t.AtMost {
		op = "<="
	}
	return fmt.Sprintf("%s %.2f", op, t.Value)
}

// ParseTarget reads ">=0.97", "<= 1", or a bare number (meaning >=).
func ParseTarget(s string) (Target, error) {
	t := Target{}
	v := strings.TrimSpace(s)
	switch {
	case strings.HasPrefix(v, ">="):
		v = v[2:]
	case strings.HasPrefix(v, "<="):
		v, t.AtMost = v[2:], true
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || f <= 0 {
		return t, fmt.Errorf("target %q: want >=R or <=R with R a positive ratio, e.g. >=0.97", s)
	}
	t.Value = f
	return t, nil
}

// Outcome says how a ratio's 95% CI sits against its target.
type Outcome int

const (
	Unresolved Outcome = iota // the CI straddles the target (or there is no CI)
	Met                       // the whole CI is on the target's side
	Short                     // the whole CI misses the target
)

func (o Outcome) String() string {
	switch o {
	case Met:
		return "MET"
	case Short:
		return "SHORT"
	}
	return "UNRESOLVED"
}

// CellRatio is one cell's metric over another's in the same results file,
// with the bootstrap 95% CI of the ratio of medians (Compare) and where it
// stands against a target.
type CellRatio struct {
	Num, Den   results.CellID
	Metric     Metric
	Comparison // Ratio, RatioCI, HasCI, P, Verdict (higher is better for MetricValue)
	Target     *Target
	Outcome    Outcome
}

// Judge places a ratio and its CI against t: Met when the whole interval is
// on the target's side, Short when the whole interval misses it, Unresolved
// otherwise (the run cannot tell: more repeats or a quieter machine).
func Judge(ratio float64, ci [2]float64, hasCI bool, t Target) Outcome {
	lo, hi := ci[0], ci[1]
	if !hasCI {
		return Unresolved
	}
	if t.AtMost {
		lo, hi = -hi, -lo
		t.Value = -t.Value
	}
	switch {
	case lo >= t.Value:
		return Met
	case hi < t.Value:
		return Short
	}
	return Unresolved
}

// RatioLine is x's median over base's with its bootstrap 95% CI and where
// it stands against t, as the benchmarks' rows print it:
// "0.999 [0.985, 1.008]  target >= 0.99  UNRESOLVED".
func RatioLine(x, base []float64, t Target) string {
	ratio, ci, ok := ratioCI(x, base)
	return fmt.Sprintf("%s  target %s  %s", ratioText(ratio, ci), t, Judge(ratio, ci, ok, t))
}

// RatioText is x's median over base's with its bootstrap 95% CI, without a
// target: "0.998 [0.988, 1.004]".
func RatioText(x, base []float64) string {
	ratio, ci, _ := ratioCI(x, base)
	return ratioText(ratio, ci)
}

func ratioCI(x, base []float64) (ratio float64, ci [2]float64, ok bool) {
	ci[0], ci[1], ok = stats.RatioOfMediansCI(x, base)
	return stats.Median(x) / stats.Median(base), ci, ok
}

func ratioText(ratio float64, ci [2]float64) string {
	return fmt.Sprintf("%.3f [%.3f, %.3f]", ratio, ci[0], ci[1])
}

// RatioOf divides cell num's metric by cell den's, both found in f by name
// (results.CellID.String(): "veth-ebpf/pod/tcp_rr",
// "veth-routed/service(ebpf+10000)/tcp_crr"); target may be nil.
func RatioOf(f *results.File, num, den string, m Metric, target *Target) (*CellRatio, error) {
	nc, err := findCell(f, num)
	if err != nil {
		return nil, err
	}
	dc, err := findCell(f, den)
	if err != nil {
		return nil, err
	}
	nm, err := metricCell(nc, m)
	if err != nil {
		return nil, err
	}
	dm, err := metricCell(dc, m)
	if err != nil {
		return nil, err
	}
	r := &CellRatio{Num: nc.ID(), Den: dc.ID(), Metric: m, Target: target}
	// A precision run's comparisons are at its last look's confidence.
	st := f.Metadata.Settings
	at := Options{Precision: st.Precision, Looks: st.Looks}.lookAt(len(st.Looks) - 1)
	r.Comparison = compareAt(nm, dm, m == MetricValue && HigherIsBetter(nc.Unit), at)
	if r.Note != "" && r.Ratio == 0 {
		return nil, fmt.Errorf("%s / %s: %s", num, den, r.Note)
	}
	if target != nil {
		r.Outcome = Judge(r.Ratio, r.RatioCI, r.HasCI, *target)
	}
	return r, nil
}

// metricCell is c with each sample's value its metric m: a sample
// without it (no CPU counters) is left out as a failed one, so the rounds
// of the others still pair (CompareCells).
func metricCell(c *results.Cell, m Metric) (*results.Cell, error) {
	if _, err := MetricValues(c, m); err != nil {
		return nil, err
	}
	out := *c
	out.Samples = make([]results.Sample, len(c.Samples))
	for i, s := range c.Samples {
		v, ok := metricOf(s, m)
		out.Samples[i] = results.Sample{Result: results.Result{Value: v}, Valid: s.Valid && ok, Start: s.Start, RoundIndex: s.RoundIndex, Slot: s.Slot}
	}
	return &out, nil
}

// metricOf is sample s's metric m; false when s lacks it.
func metricOf(s results.Sample, m Metric) (float64, bool) {
	switch m {
	case MetricValue:
		return s.Value, true
	case MetricCPUPerGB:
		if s.CPU != nil && s.Bytes > 0 {
			return s.CPU.BusySec() / (s.Bytes / 1e9), true
		}
	case MetricCPUPerKTr:
		if s.CPU != nil && s.Transfers > 0 {
			return s.CPU.BusySec() / (s.Transfers / 1000), true
		}
	}
	return 0, false
}

// MetricValues is the metric of each valid sample of c: its value, or its
// busy CPU-seconds per GB or per 1000 transactions (as the cell's cpu block,
// per sample before any median).
func MetricValues(c *results.Cell, m Metric) ([]float64, error) {
	if !slices.Contains(Metrics, m) {
		return nil, fmt.Errorf("metric %q: want one of %v", m, Metrics)
	}
	var out []float64
	for _, s := range c.Samples {
		if v, ok := metricOf(s, m); s.Valid && ok {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cell %s has no valid sample with %s", c.ID(), m)
	}
	return out, nil
}

// findCell is the cell of f named name (one of CellID.Names(): an IPv4
// cell also answers to its name with "ipv4" written out). Without one,
// the error names a few cells of the same mode (or any), not a whole
// sweep's.
func findCell(f *results.File, name string) (*results.Cell, error) {
	var near, all []string
	mode, _, _ := strings.Cut(name, "/")
	for _, c := range f.Cells {
		if slices.Contains(c.ID().Names(), name) {
			return c, nil
		}
		all = append(all, c.ID().String())
		if c.ID().Mode == mode {
			near = append(near, c.ID().String())
		}
	}
	which := "cells of " + mode
	if len(near) == 0 {
		which, near = "cells", all
	}
	const shown = 6
	more := ""
	if len(near) > shown {
		more = fmt.Sprintf(" and %d more; vnetlab report FILE lists them", len(near)-shown)
		near = near[:shown]
	}
	return nil, fmt.Errorf("no cell %q in the results file (%s: %s%s)", name, which, strings.Join(near, ", "), more)
}

// String is one line: "NUM / DEN  [metric]  1.02 [0.99, 1.05]  target >= 1.00  MET".
func (r *CellRatio) String() string {
	name := r.Num.String() + " / " + r.Den.String()
	if r.Metric != MetricValue {
		name += " (" + string(r.Metric) + ")"
	}
	ci := "[no CI]"
	if r.HasCI {
		ci = fmt.Sprintf("[%.3f, %.3f]", r.RatioCI[0], r.RatioCI[1])
	}
	s := fmt.Sprintf("%-72s %6.3f %-16s", name, r.Ratio, ci)
	if r.Target != nil {
		s += fmt.Sprintf("  target %s  %s", r.Target, r.Outcome)
	}
	return strings.TrimRight(s, " ")
}
