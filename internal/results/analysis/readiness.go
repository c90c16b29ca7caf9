package analysis

import (
	"math"
	"slices"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/stats"
)

// Readiness fills each burst's quantiles from its rounds (over every pod
// of every round, and the last pod's time over rounds) and sets each
// cluster after the first beside the first, burst size by burst size,
// round by round: each round's median first-packet time, paired
// (ComparePaired; lower is better).
func Readiness(run *results.ReadinessRun) {
	for c := range run.Clusters {
		for i := range run.Clusters[c].Bursts {
			b := &run.Clusters[c].Bursts[i]
			var all, last []float64
			for _, rd := range b.Rounds {
				all = append(all, rd.FirstPacketUS...)
				last = append(last, rd.LastUS)
			}
			b.P50, b.P90, b.P99 = quantile(all, 0.50), quantile(all, 0.90), quantile(all, 0.99)
			b.Last = quantile(last, 0.50)
			b.MaxUS = 0
			if len(all) > 0 {
				b.MaxUS = slices.Max(all)
			}
		}
	}
	run.Comparisons = nil
	if len(run.Clusters) < 2 {
		return
	}
	base := run.Clusters[0]
	for _, c := range run.Clusters[1:] {
		for i, b := range c.Bursts {
			if i >= len(base.Bursts) || base.Bursts[i].Pods != b.Pods {
				continue
			}
			x, y := roundMedians(b), roundMedians(base.Bursts[i])
			cmp := ComparePaired(x, y, false)
			rc := results.ReadinessComparison{Cluster: c.Name, Base: base.Name, Pods: b.Pods, Ratio: cmp.Ratio,
				Verdict: cmp.Verdict.String(), Rounds: cmp.Pairs, Note: cmp.Note}
			if cmp.HasCI {
				rc.RatioCI = cmp.RatioCI
			}
			if !math.IsNaN(cmp.P) {
				rc.P = cmp.P
			}
			if rc.Note == "" && cmp.Pairs < MinPairs {
				rc.Note = "fewer than 6 rounds: no interval, and no difference can be significant"
			}
			run.Comparisons = append(run.Comparisons, rc)
		}
	}
}

// roundMedians is each round's median first-packet time.
func roundMedians(b results.Burst) []float64 {
	out := make([]float64, len(b.Rounds))
	for i, rd := range b.Rounds {
		out[i] = stats.Median(rd.FirstPacketUS)
	}
	return out
}
