package report

import (
	"fmt"
	"io"

	"github.com/vnetlab/vnetlab/internal/results/analysis"
)

// Tolerance prints a kube run's --tolerance checks (analysis.HostChecks
// under tol): a line per pod cell against its host cell, or why there is
// nothing to check.
func Tolerance(w io.Writer, tol float64, checks []analysis.HostCheck) {
	fmt.Fprintf(w, "\nTolerance %g: each pod cell against host (fails when p < 0.05 and the whole 95%% CI is under %.2f)\n", tol, 1-tol)
	for _, h := range checks {
		fmt.Fprintln(w, "  "+h.String())
	}
	if len(checks) == 0 {
		fmt.Fprintln(w, "  nothing to check: no pod cell has a host cell of its placement and test")
	}
}
