package analysis

import (
	"testing"

	"github.com/vnetlab/vnetlab/internal/results"
)

// A burst's quantiles are over every pod of every round; a second cluster
// twice as slow in each of 6 rounds reads 2, worse, with an interval
// around 2; with 3 rounds it has a ratio and no interval.
func TestReadiness(t *testing.T) {
	burst := func(scale float64, rounds int) results.Burst {
		b := results.Burst{Pods: 3}
		for i := range rounds {
			d := float64(i)
			b.Rounds = append(b.Rounds, results.Round{FirstPacketUS: []float64{scale * (100 + d), scale * (200 + d), scale * (300 + d)}, LastUS: scale * (310 + d)})
		}
		return b
	}
	run := &results.ReadinessRun{Clusters: []results.Readiness{
		{Name: "a", Bursts: []results.Burst{burst(1, 6)}},
		{Name: "b", Bursts: []results.Burst{burst(2, 6)}},
	}}
	Readiness(run)
	a := run.Clusters[0].Bursts[0]
	if a.P50.Value != 202 || a.MaxUS != 305 || a.Last.Value != 312 {
		t.Errorf("a: p50 %v, max %v, last %v; want 202, 305, 312", a.P50.Value, a.MaxUS, a.Last.Value)
	}
	if len(run.Comparisons) != 1 {
		t.Fatalf("%d comparisons, want 1", len(run.Comparisons))
	}
	c := run.Comparisons[0]
	if c.Cluster != "b" || c.Base != "a" || c.Rounds != 6 || c.Ratio != 2 || c.Verdict != Worse.String() ||
		!(c.RatioCI[0] <= 2 && c.RatioCI[1] >= 2 && c.RatioCI[0] > 1) {
		t.Errorf("comparison %+v: want b vs a over 6 rounds, 2 [≤2, ≥2] above 1, worse", c)
	}

	run.Clusters[0].Bursts[0], run.Clusters[1].Bursts[0] = burst(1, 3), burst(2, 3)
	Readiness(run)
	c = run.Comparisons[0]
	if c.Ratio != 2 || c.RatioCI != [2]float64{} || c.Note == "" {
		t.Errorf("3 rounds: %+v; want ratio 2, no interval and a note", c)
	}
}
