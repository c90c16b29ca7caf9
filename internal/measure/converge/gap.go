package converge

import (
	"cmp"
	"slices"
	"time"

	"github.com/vnetlab/vnetlab/internal/results"
)

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
