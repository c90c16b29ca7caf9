package converge

import (
	"cmp"
	"maps"
	"slices"

	"github.com/vnetlab/vnetlab/internal/results"
)

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
func BusiestOtherWork(c *results.Convergence) (results.OtherWorkSample, bool) {
	if c.OtherWork == nil || len(c.OtherWork.Samples) == 0 {
		return results.OtherWorkSample{}, false
	}
	return slices.MaxFunc(c.OtherWork.Samples, func(a, b results.OtherWorkSample) int { return cmp.Compare(a.CPUs(), b.CPUs()) }), true
}
