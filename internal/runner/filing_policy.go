package runner

import (
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/platform/labpolicy"
	"github.com/vnetlab/vnetlab/internal/results"
)

// policyProofOf is a cell's policy proof as it starts: the set in force
// and how long its load took; its prover fills the rest (filePolicySeen).
func policyProofOf(set knob.PolicySet, loadSec float64) *results.PolicyProof {
	return &results.PolicyProof{Policies: set.Policies, IPBlocks: set.IPBlocks, LoadSec: loadSec}
}

// filePolicySeen records in a cell's policy proof what its prover saw.
func filePolicySeen(pp *results.PolicyProof, s labpolicy.CellSeen) {
	pp.Objects, pp.Want, pp.Probe, pp.ProbeDenied, pp.Evaluated = s.Objects, s.Want, s.Probe, s.ProbeDenied, s.Evaluated
}
