package runner

import (
	"fmt"
	"sort"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/stats"
)

// DefaultCVThreshold flags a cell as noisy above 10% coefficient of variation.
const DefaultCVThreshold = 0.10

// SummaryOptions say how cells are summarised.
type SummaryOptions struct {
	CVThreshold float64 // 0 = DefaultCVThreshold
	CIMethod    string  // stats.MethodBootstrapMedian (default) or stats.MethodStudentTMean
	Baseline    string  // mode label to compare with; "" = the first mode
}

// CIMethods lists the accepted CIMethod values.
var CIMethods = []string{stats.MethodBootstrapMedian, stats.MethodStudentTMean}

func (o SummaryOptions) withDefaults() SummaryOptions {
	if o.CVThreshold == 0 {
		o.CVThreshold = DefaultCVThreshold
	}
	if o.CIMethod == "" {
		o.CIMethod = stats.MethodBootstrapMedian
	}
	return o
}

// Analyze summarises every cell and compares each with its baseline cell.
// It only reads Samples, so a report can re-run it on a results file.
func Analyze(cells []*results.Cell, o SummaryOptions) {
	o = o.withDefaults()
	for _, c := range cells {
		SummarizeWith(c, o)
	}
	CompareToBaseline(cells, o.Baseline)
	CompareToPod(cells)
}

// CompareToPod fills VsPod for every service cell that has a pod cell of the
// same mode and test: the price of the clusterIP (seed 002's table).
func CompareToPod(cells []*results.Cell) {
	pod := map[string]*results.Cell{}
	for _, c := range cells {
		if c.Path == "pod" && c.Provider == "" {
			pod[c.Mode+"|"+c.Test] = c
		}
	}
	for _, c := range cells {
		c.VsPod = nil
		if b, ok := pod[c.Mode+"|"+c.Test]; ok && c.Provider != "" {
			c.VsPod = compare(c, b)
			c.VsPod.Baseline = b.Mode + "/pod"
		}
	}
}

// Summarize fills a cell's statistics with the default options.
func Summarize(c *results.Cell) { SummarizeWith(c, SummaryOptions{}) }

// SummarizeWith fills median/mean/min/max, the 95% CI, CV, the noisy flag,
// latency percentiles and the CPU block, from the valid samples only: a
// failed sample is counted in Failed and nowhere else.
func SummarizeWith(c *results.Cell, o SummaryOptions) {
	o = o.withDefaults()
	v := c.Values()
	c.Valid = len(v)
	c.Failed = len(c.Samples) - len(v)
	c.Median, c.Mean, c.Min, c.Max, c.CV, c.Noisy = 0, 0, 0, 0, 0, false
	c.CI95, c.CIMethod, c.Latency, c.CPU = nil, "", nil, nil
	if len(v) == 0 {
		return
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	c.Min, c.Max = s[0], s[len(s)-1]
	c.Median = stats.Median(v)
	c.Mean = stats.Mean(v)
	c.CV = stats.CV(v)
	c.Noisy = len(v) >= 2 && c.CV > o.CVThreshold
	var lo, hi float64
	var ok bool
	switch o.CIMethod {
	case stats.MethodStudentTMean:
		lo, hi, ok = stats.StudentTMeanCI(v)
	default:
		lo, hi, ok = stats.BootstrapMedianCI(v)
	}
	if ok {
		c.CI95, c.CIMethod = []float64{lo, hi}, o.CIMethod
	}
	c.Latency = latency(c.Samples)
	c.CPU = cpuCost(c.Samples)
}

// latency is the median over valid samples of each percentile the engine
// reported (p50, p90, p99, p99.9, mean).
func latency(samples []results.Sample) map[string]float64 {
	per := map[string][]float64{}
	for _, s := range samples {
		if !s.Valid {
			continue
		}
		for k, x := range s.Latency {
			per[k] = append(per[k], x)
		}
	}
	if len(per) == 0 {
		return nil
	}
	out := map[string]float64{}
	for k, xs := range per {
		out[k] = stats.Median(xs)
	}
	return out
}

// cpuCost is the median over valid samples of each CPU figure. Ratios are
// taken per sample first (each sample's CPU over its own bytes or
// transactions), then the median: a long sample and a short one weigh the same.
func cpuCost(samples []results.Sample) *results.CPUCost {
	var user, sys, irq, sirq, busy, perGB, perK, rxT, txT, rxGB, txGB []float64
	for _, s := range samples {
		if !s.Valid || s.CPU == nil {
			continue
		}
		c := s.CPU
		user, sys, irq, sirq = append(user, c.UserSec), append(sys, c.SystemSec), append(irq, c.IRQSec), append(sirq, c.SoftirqSec)
		busy = append(busy, c.BusySec())
		if gb := s.Bytes / 1e9; gb > 0 {
			perGB = append(perGB, c.BusySec()/gb)
			rxGB = append(rxGB, float64(c.NetRx)/gb)
			txGB = append(txGB, float64(c.NetTx)/gb)
		}
		if n := s.Transfers; n > 0 {
			perK = append(perK, c.BusySec()/(n/1000))
			rxT = append(rxT, float64(c.NetRx)/n)
			txT = append(txT, float64(c.NetTx)/n)
		}
	}
	if len(busy) == 0 {
		return nil
	}
	med := func(xs []float64) float64 {
		if len(xs) == 0 {
			return 0
		}
		return stats.Median(xs)
	}
	return &results.CPUCost{
		UserSec: med(user), SystemSec: med(sys), IRQSec: med(irq), SoftirqSec: med(sirq), BusySec: med(busy),
		Samples: len(busy),
		PerGB:   med(perGB), NetRxPerGB: med(rxGB), NetTxPerGB: med(txGB),
		PerKTrans: med(perK), NetRxPerTrans: med(rxT), NetTxPerTrans: med(txT),
	}
}

// CompareToBaseline fills VsBaseline for every cell that has a baseline cell
// (same path, provider and test; mode = baseline, or the first cell's mode
// when baseline is ""): ratio of medians with a bootstrap 95% CI, the
// Mann-Whitney U p-value, and a verdict that is "~" unless p < 0.05.
func CompareToBaseline(cells []*results.Cell, baseline string) {
	if len(cells) == 0 {
		return
	}
	baseline = results.Baseline(cells, baseline)
	key := func(c *results.Cell) string {
		return fmt.Sprintf("%s|%s|%s|%d", c.Path, c.Provider, c.Test, c.ExtraServices)
	}
	base := map[string]*results.Cell{}
	for _, c := range cells {
		if c.Mode == baseline {
			base[key(c)] = c
		}
	}
	for _, c := range cells {
		c.VsBaseline = nil
		b, ok := base[key(c)]
		if !ok {
			continue
		}
		c.VsBaseline = compare(c, b)
	}
}

func compare(c, b *results.Cell) *results.Comparison {
	cmp := &results.Comparison{Baseline: b.Mode, Test: stats.TestMannWhitney}
	x, y := c.Values(), b.Values()
	cmp.MinPValue = stats.MinMannWhitneyP(len(x), len(y))
	if c == b {
		cmp.Ratio, cmp.RatioCI95, cmp.PValue, cmp.Verdict = 1, []float64{1, 1}, 1, "baseline"
		return cmp
	}
	if len(x) == 0 || len(y) == 0 {
		cmp.Verdict, cmp.Note = "n/a", "no valid samples on one side"
		return cmp
	}
	if b.Median == 0 {
		cmp.Verdict, cmp.Note = "n/a", "baseline median is 0"
		return cmp
	}
	cmp.Ratio = c.Median / b.Median
	if lo, hi, ok := stats.RatioOfMediansCI(x, y); ok {
		cmp.RatioCI95 = []float64{lo, hi}
	}
	mw, err := stats.MannWhitney(x, y)
	if err != nil {
		cmp.Verdict, cmp.Note = "n/a", fmt.Sprintf("mann-whitney: %v", err)
		return cmp
	}
	cmp.PValue = mw.P
	if w, err := stats.WelchT(x, y); err == nil {
		cmp.WelchP = w.P
	}
	cmp.Significant = mw.Significant()
	switch {
	case !cmp.Significant || cmp.Ratio == 1:
		cmp.Verdict = "~"
	case cmp.Ratio > 1:
		cmp.Verdict = "faster"
	default:
		cmp.Verdict = "slower"
	}
	return cmp
}
