package analysis

import (
	"math"
	"slices"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/stats"
)

// Analyze summarises every cell and compares each with its baseline cell and,
// for a service cell, with its mode's pod cell. It reads only the samples,
// so a report can re-run it on any results file.
func Analyze(cells []*results.Cell, o Options) {
	o = o.withDefaults()
	for _, c := range cells {
		Summarize(c, o)
	}
	o.compareRun(cells)
}

// compareAll fills every cell's comparisons (VsBaseline, VsPod) from its
// samples of rounds 1..at.rounds (0: all), at that look's confidence.
func compareAll(cells []*results.Cell, o Options, at look) {
	CompareToBaseline(cells, o.Baseline, at)
	CompareToPod(cells, at)
}

// Summarize fills a cell's statistics: median/mean/min/max, the 95% CI, CV,
// the noisy flag, latency percentiles, the CPU block and the status, from the
// valid samples only: a failed sample is counted in Failed and nowhere else.
func Summarize(c *results.Cell, o Options) {
	o = o.withDefaults()
	v := c.Values()
	c.Valid = len(v)
	c.Failed = 0
	for _, s := range c.Samples {
		if !s.Valid {
			c.Failed++
		}
	}
	c.Status = StatusOf(c).String()
	c.Median, c.Mean, c.Min, c.Max, c.CV, c.Noisy = 0, 0, 0, 0, 0, false
	c.CI95, c.CIMethod, c.Latency, c.CPU = nil, "", nil, nil
	c.LatencySamples, c.LatencyTooFew, c.LatencyCI = nil, nil, nil
	if len(v) == 0 {
		return
	}
	c.Min, c.Max = slices.Min(v), slices.Max(v)
	c.Median = stats.Median(v)
	c.Mean = stats.Mean(v)
	c.CV = stats.CV(v)
	c.Noisy = len(v) >= 2 && c.CV > o.CVThreshold
	if lo, hi, ok := CI(v, o.CIMethod); ok {
		c.CI95, c.CIMethod = []float64{lo, hi}, o.CIMethod
	}
	c.Latency, c.LatencySamples, c.LatencyTooFew, c.LatencyCI = latency(c.Samples)
	c.CPU = cpuCost(c.Samples)
}

// CI is the 95% interval of a cell's values by method (stats.MethodBootstrapMedian
// or stats.MethodStudentTMean). It needs 2 or more values: one value has no
// spread to give an interval.
func CI(v []float64, method string) (lo, hi float64, ok bool) {
	if len(v) < 2 {
		return 0, 0, false
	}
	if method == stats.MethodStudentTMean {
		return stats.StudentTMeanCI(v)
	}
	return stats.BootstrapMedianCI(v)
}

// latency is the median over valid samples of each percentile the engine
// reported (p50, p90, p99, p99.9, mean) and, when every valid sample said
// how many latencies its quantiles are from, the sum behind each quantile;
// a quantile some valid sample had too few latencies for
// (Quantile.MinSamples) is left out of the cell and named in tooFew (a
// median of the samples that had enough would hide the ones that had not).
// Each quantile kept comes with its 95% CI in cis: the bootstrap of the
// median over the samples (2 or more).
func latency(samples []results.Sample) (out map[string]float64, counts map[string]int, tooFew []string, cis map[string]results.QuantileCI) {
	per := map[string][]float64{}
	counts = map[string]int{}
	fewest, counted := 0, true
	for _, s := range samples {
		if !s.Valid {
			continue
		}
		if counted = counted && s.LatencySamples > 0; counted && (fewest == 0 || s.LatencySamples < fewest) {
			fewest = s.LatencySamples
		}
		for k, x := range s.Latency {
			per[k] = append(per[k], x)
			counts[k] += s.LatencySamples
		}
	}
	if len(per) == 0 {
		return nil, nil, nil, nil
	}
	out = map[string]float64{}
	for k, xs := range per {
		out[k] = stats.Median(xs)
	}
	if counted {
		delete(counts, "mean")
		for _, q := range results.LatencyQuantiles {
			if fewest < q.MinSamples() {
				delete(out, q.Key)
				delete(counts, q.Key)
				tooFew = append(tooFew, q.Key)
			}
		}
	} else {
		counts = nil
	}
	cis = map[string]results.QuantileCI{}
	for _, q := range results.LatencyQuantiles {
		v, ok := out[q.Key]
		if !ok {
			continue
		}
		qc := results.QuantileCI{Value: v}
		if lo, hi, ok := CI(per[q.Key], stats.MethodBootstrapMedian); ok {
			qc.CI = [2]float64{lo, hi}
		}
		cis[q.Key] = qc
	}
	return out, counts, tooFew, cis
}

// cpuCost is the median over valid samples of each CPU figure, for the
// cell and, in a cluster run, for each node. Ratios are taken per sample
// first (each sample's CPU over its own bytes or transactions), then the
// median: a long sample and a short one weigh the same.
func cpuCost(samples []results.Sample) *results.CPUCost {
	c := costOf(samples, func(s results.Sample) *results.SampleCPU { return s.CPU })
	nodes := map[string]bool{}
	for _, s := range samples {
		for n := range s.NodeCPU {
			nodes[n] = true
		}
	}
	for n := range nodes {
		nc := costOf(samples, func(s results.Sample) *results.SampleCPU { return s.NodeCPU[n] })
		if nc == nil {
			continue
		}
		if c == nil {
			c = &results.CPUCost{}
		}
		if c.Nodes == nil {
			c.Nodes = map[string]*results.CPUCost{}
		}
		c.Nodes[n] = nc
	}
	return c
}

// costOf is the medians of the counters pick finds in the valid samples.
func costOf(samples []results.Sample, pick func(results.Sample) *results.SampleCPU) *results.CPUCost {
	var user, sys, irq, sirq, busy, perGB, perK, rxT, txT, rxGB, txGB []float64
	for _, s := range samples {
		c := pick(s)
		if !s.Valid || c == nil {
			continue
		}
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

// CompareToBaseline fills VsBaseline for every cell that has a baseline cell:
// the cell of mode baseline (or the first cell's mode when baseline is "")
// with the same path, provider, generated services, placement, family and
// test.
func CompareToBaseline(cells []*results.Cell, baseline string, at look) {
	baseline = results.Baseline(cells, baseline)
	withoutMode := func(c *results.Cell) results.CellID {
		id := c.ID()
		id.Mode = ""
		return id
	}
	base := map[results.CellID]*results.Cell{}
	for _, c := range cells {
		if c.Mode == baseline {
			base[withoutMode(c)] = c
		}
	}
	for _, c := range cells {
		c.VsBaseline = nil
		if b, ok := base[withoutMode(c)]; ok {
			c.VsBaseline = compareCells(c, b, at)
		}
	}
}

// CompareToPod fills VsPod for every service cell that has a pod cell of the
// same mode, sweep point, placement, family and test (Cell.PodID): the
// price of the clusterIP (seed 002's table).
func CompareToPod(cells []*results.Cell, at look) {
	pod := results.PodCells(cells)
	for _, c := range cells {
		c.VsPod = nil
		if b, ok := pod[c.PodID()]; ok && c.Provider != "" {
			c.VsPod = compareCells(c, b, at)
			c.VsPod.Baseline = b.Mode + "/pod"
		}
	}
}

// compareCells is c against its reference b, as the results file records
// it: paired by round when they can be (CompareCells), from the rounds up
// to at's, at its confidence.
func compareCells(c, b *results.Cell, at look) *results.Comparison {
	cmp := Itself(len(b.Values()))
	if c != b {
		cmp = compareAt(c, b, HigherIsBetter(c.Unit), at)
	}
	return toResults(cmp, b.Mode)
}

func toResults(c Comparison, baseline string) *results.Comparison {
	r := &results.Comparison{Baseline: baseline, Test: stats.TestMannWhitney, Ratio: c.Ratio, MinPValue: c.MinP,
		Significant: c.Significant(), Verdict: c.Verdict.ResultsWord(), Note: c.Note, Method: c.Method, Pairs: c.Pairs}
	if c.Method == MethodPaired {
		r.Test = stats.TestSignedRank
	}
	if c.HasCI {
		r.RatioCI95 = c.RatioCI[:]
		if hw := c.HalfWidth(); !math.IsInf(hw, 0) && !math.IsNaN(hw) {
			r.HalfWidth = hw
		}
	}
	if c.Alpha != 0 && c.Alpha != stats.Alpha {
		r.Confidence = 1 - c.Alpha
	}
	if !math.IsNaN(c.P) {
		r.PValue = c.P
	}
	if !math.IsNaN(c.WelchP) {
		r.WelchP = c.WelchP
	}
	return r
}
