package bench

import "github.com/vnetlab/vnetlab/internal/runner"

// A lab beside the cluster (Spec.Lab): the lab's cells are planned by the
// lab runner (runner.Prepare: the same labs and cells `vnetlab run` would
// measure) and executed with the cluster's in one runner.Execute, so both
// sides see the same drifts of the machine, round by round. The results
// file holds both; `compare FILE` pairs them (analysis.SplitLabCluster).

// interleave orders lab and cluster cells a lab cell, then a cluster cell;
// the longer list's remaining cells follow in their order.
func interleave(lab, cluster []runner.Planned) []runner.Planned {
	out := make([]runner.Planned, 0, len(lab)+len(cluster))
	for i := 0; i < len(lab) || i < len(cluster); i++ {
		if i < len(lab) {
			out = append(out, lab[i])
		}
		if i < len(cluster) {
			out = append(out, cluster[i])
		}
	}
	return out
}
