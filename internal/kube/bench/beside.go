package bench

import (
	"context"

	"github.com/vnetlab/vnetlab/internal/runner"
)

// A lab beside the cluster (Spec.Lab): the lab's cells are planned by the
// lab runner (runner.Prepare: the same labs and cells `vnetlab run` would
// measure) and executed with the cluster's in one runner.Execute, so both
// sides see the same drifts of the machine, round by round. The results
// file holds both; `compare FILE` pairs them (analysis.SplitLabCluster).

// oneNodeLabel names a mode's cells on the one-node lab of
// Spec.LabSameNode: the two-node lab may measure the same mode (host), and
// a cell's name has no node count. compare pairs them by Cell.LabMode.
func oneNodeLabel(mode string) string { return mode + "-1node" }

// prepareLabs brings up the labs beside the cluster: Measure's, and the
// one-node lab of LabSameNode (plain modes, no options); the caller closes
// what it returns, also on error. With the policy knobs the labs load the
// same generated sets through policyLab, the lab provider with the data
// path of the cluster's enforcer (cluster.PolicyLabProvider), so that each
// lab policy cell has its cluster cell (analysis.clusterEquivalent).
func (s Spec) prepareLabs(ctx context.Context, policyLab string, prog runner.Progress) ([]*runner.Labs, error) {
	lab := s.Measure
	if lab.UsesPolicies() {
		lab.ClusterPolicies, lab.PolicyProviders = false, []string{policyLab}
	}
	specs := []runner.Spec{lab}
	if len(s.LabSameNode) > 0 {
		one := lab
		one.Nodes, one.LabPrefix, one.Modes = 1, "one", nil
		for _, m := range s.LabSameNode {
			one.Modes = append(one.Modes, runner.ModeVariant{Label: oneNodeLabel(m), Mode: m})
		}
		specs = append(specs, one)
	}
	var labs []*runner.Labs
	for _, spec := range specs {
		l, err := runner.Prepare(ctx, spec, prog)
		if err != nil {
			return labs, err
		}
		labs = append(labs, l)
	}
	return labs, nil
}

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
