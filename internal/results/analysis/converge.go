package analysis

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/stats"
)

// A convergence file's statistics (kube converge, svc converge, policy
// converge): its rows from its changes' latencies, and what the report
// reads from them. The latencies themselves, each change paired with the
// first probe that shows it, are the measurement's
// (internal/measure/converge).

// AllNodes names the rows of the slowest node per change.
const AllNodes = "all nodes"

// ConvergeRows are c's rows: per kind of change (in the order the changes
// were written), per node (those with transitions, in name order) and for
// all nodes (per change, its slowest node; a change some node did not
// apply counts as not applied there). A metric that says a change was
// done more than two probe intervals before the first probe that showed
// it is early (Row.MetricEarly).
func ConvergeRows(c *results.Convergence) []results.ConvergeRow {
	var nodes []string
	for _, t := range c.Transitions {
		if !slices.Contains(nodes, t.Node) {
			nodes = append(nodes, t.Node)
		}
	}
	slices.Sort(nodes)
	var rows []results.ConvergeRow
	var kinds []string
	for _, ch := range c.Changes {
		if !slices.Contains(kinds, ch.Kind) {
			kinds = append(kinds, ch.Kind)
		}
	}
	for _, kind := range kinds {
		for _, n := range append(nodes, AllNodes) {
			row := results.ConvergeRow{Kind: kind, Node: n}
			var us, metric, write []float64
			for _, ch := range c.Changes {
				if ch.Kind != kind {
					continue
				}
				row.Changes++
				if ch.WriteUS > 0 {
					write = append(write, float64(ch.WriteUS))
				}
				countFates(&row, ch, n)
				if m, ok := nodeMetric(ch, n); ok {
					metric = append(metric, float64(m))
					if v, ok := nodeLatency(ch, n); ok && m+2*c.IntervalUS < v {
						row.MetricEarly++
					}
				}
				if n == AllNodes && len(ch.ShownBefore) > 0 || slices.Contains(ch.ShownBefore, n) {
					row.ShownBefore++
					continue
				}
				v, ok := nodeLatency(ch, n)
				if !ok {
					row.NotApplied++
					continue
				}
				us = append(us, float64(v))
			}
			if row.Changes == 0 {
				continue
			}
			row.P50, row.P90, row.P99 = quantile(us, 0.50), quantile(us, 0.90), quantile(us, 0.99)
			if len(us) > 0 {
				row.MaxUS = slices.Max(us)
			}
			if row.Metrics = len(metric); len(metric) > 0 {
				p50, p99 := quantile(metric, 0.50), quantile(metric, 0.99)
				row.Metric, row.MetricP99 = &p50, &p99
			}
			if len(write) > 0 {
				p50 := quantile(write, 0.50)
				row.Write = &p50
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// AfterWrite is the p50 and p99, with their CIs, of the changes of kind
// on node n (AllNodes: each change's slowest node), each latency less the
// change's write call (Change.WriteUS): from the API server's answer to the
// packet, what the proxy's watch, its sync and the data path took. A value
// can be below 0: a watch may deliver a change before the writer has the
// answer. ok is false when no such change was timed (a file from before
// write times, a lab's floor).
func AfterWrite(changes []results.Change, kind, n string) (p50, p99 results.QuantileCI, ok bool) {
	var us []float64
	for _, ch := range changes {
		if ch.Kind != kind || ch.WriteUS <= 0 || len(ch.ShownBefore) > 0 && (n == AllNodes || slices.Contains(ch.ShownBefore, n)) {
			continue
		}
		if v, ok := nodeLatency(ch, n); ok {
			us = append(us, float64(v-ch.WriteUS))
		}
	}
	if len(us) == 0 {
		return p50, p99, false
	}
	return quantile(us, 0.50), quantile(us, 0.99), true
}

// nodeLatency is ch's latency on node n, or on its slowest node (AllNodes,
// which needs every node to have applied it).
func nodeLatency(ch results.Change, n string) (int64, bool) {
	if n != AllNodes {
		v, ok := ch.LatencyUS[n]
		return v, ok
	}
	if len(ch.NotApplied) > 0 || len(ch.LatencyUS) == 0 {
		return 0, false
	}
	return slices.Max(slices.Collect(maps.Values(ch.LatencyUS))), true
}

// nodeMetric is ch's proxy metric on node n, or on its slowest node.
func nodeMetric(ch results.Change, n string) (int64, bool) {
	if n != AllNodes {
		v, ok := ch.MetricUS[n]
		return v, ok
	}
	if len(ch.MetricUS) == 0 || len(ch.MetricUS) < len(ch.LatencyUS)+len(ch.NotApplied)+len(ch.ShownBefore) {
		return 0, false
	}
	return slices.Max(slices.Collect(maps.Values(ch.MetricUS))), true
}

// countFates adds ch's kept connections on node n (every node's for
// AllNodes) to row.
func countFates(row *results.ConvergeRow, ch results.Change, n string) {
	for node, fates := range ch.Conns {
		if n != AllNodes && node != n {
			continue
		}
		for _, f := range fates {
			held, broken, stalled := &row.ConnsHeld, &row.ConnsBroken, &row.ConnsStalled
			if f.Gone {
				held, broken, stalled = &row.GoneConnsHeld, &row.GoneConnsBroken, &row.GoneConnsStalled
			}
			*held++
			switch {
			case f.Broken:
				*broken++
			case f.StallUS > 0:
				*stalled++
			}
		}
	}
}

// ControllerShare is the EndpointSlice controller's share from its
// changes' latencies (µs) and how many showed no slice in time.
func ControllerShare(latUS []int64, notApplied int) *results.ControllerShare {
	xs := make([]float64, len(latUS))
	for i, v := range latUS {
		xs[i] = float64(v)
	}
	out := &results.ControllerShare{Changes: len(latUS) + notApplied, NotApplied: notApplied, P50: quantile(xs, 0.50), P99: quantile(xs, 0.99)}
	if len(xs) > 0 {
		out.MaxUS = slices.Max(xs)
	}
	return out
}

// quantile is xs's q quantile with its bootstrap CI (none below 2 values).
func quantile(xs []float64, q float64) results.QuantileCI {
	if len(xs) == 0 {
		return results.QuantileCI{}
	}
	out := results.QuantileCI{Value: stats.EmpiricalQuantile(xs, q)}
	if len(xs) >= 2 {
		if lo, hi, ok := stats.BootstrapQuantileCI(xs, q); ok {
			out.CI = [2]float64{lo, hi}
		}
	}
	return out
}

// DisturbedCPUs is the other work's mean use over a sample, in CPUs,
// above which the changes it overlapped are flagged. The idle machine's
// other work (its shells, its logging) used 0.00-0.01 CPUs here in
// 10-second samples; a compile beside a run uses one or two.
const DisturbedCPUs = 0.1

// Disturbed is the sequence numbers of c's changes that overlapped a
// sample of the machine's other work above DisturbedCPUs: from the
// change's write to its slowest node's showing (its write alone when no
// node showed it). None for a file without the other work.
func Disturbed(c *results.Convergence) []int {
	if c.OtherWork == nil {
		return nil
	}
	var busy []results.OtherWorkSample
	for _, s := range c.OtherWork.Samples {
		if s.CPUs() > DisturbedCPUs {
			busy = append(busy, s)
		}
	}
	var seqs []int
	for _, ch := range c.Changes {
		end := ch.Written
		if len(ch.LatencyUS) > 0 {
			end += slices.Max(slices.Collect(maps.Values(ch.LatencyUS))) * 1000
		}
		if slices.ContainsFunc(busy, func(s results.OtherWorkSample) bool { return s.Start < end && ch.Written < s.End }) {
			seqs = append(seqs, ch.Seq)
		}
	}
	return seqs
}

// BusiestOtherWork is the sample of c's other work with the largest use
// (ok false without samples).
func BusiestOtherWork(c *results.Convergence) (busiest results.OtherWorkSample, ok bool) {
	if c.OtherWork == nil || len(c.OtherWork.Samples) == 0 {
		return busiest, false
	}
	return slices.MaxFunc(c.OtherWork.Samples, func(a, b results.OtherWorkSample) int { return cmp.Compare(a.CPUs(), b.CPUs()) }), true
}

// RateLimitGap splits a node's changes by how long after its previous
// change showed on that node they were written: kube-proxy syncs at most
// once a minSyncPeriod (1 s by default), so a change written sooner
// than that after its last sync waits for the period to end, and one
// written later goes out at once. The two groups' latencies side by side
// say whether a proxy's latency is its sync or its rate limit.
const RateLimitGap = time.Second

// GapSplit is one node's changes in the two groups: written within
// RateLimitGap of the node showing the previous change, or later.
type GapSplit struct {
	Node        string
	Soon, Later results.QuantileCI // p50 of each group's latencies, µs
	NSoon       int
	NLater      int
}

// SplitByGap is GapSplit per node of c (nodes in name order): each change
// that follows, in the run, a change the node showed, and that the node
// showed itself.
func SplitByGap(c *results.Convergence) []GapSplit {
	byNode := map[string][2][]float64{}
	for i := 1; i < len(c.Changes); i++ {
		prev, ch := c.Changes[i-1], c.Changes[i]
		for n, us := range ch.LatencyUS {
			before, ok := prev.LatencyUS[n]
			if !ok {
				continue
			}
			g := byNode[n]
			if gap := time.Duration(ch.Written - (prev.Written + before*1000)); gap < RateLimitGap {
				g[0] = append(g[0], float64(us))
			} else {
				g[1] = append(g[1], float64(us))
			}
			byNode[n] = g
		}
	}
	var out []GapSplit
	for n, g := range byNode {
		out = append(out, GapSplit{Node: n, Soon: quantile(g[0], 0.5), Later: quantile(g[1], 0.5), NSoon: len(g[0]), NLater: len(g[1])})
	}
	slices.SortFunc(out, func(a, b GapSplit) int { return cmp.Compare(a.Node, b.Node) })
	return out
}
