package report

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/vnetlab/vnetlab/internal/results"
)

// PrintConvergence prints a `kube converge` table: per kind of change and
// node, the latencies' p50/p90/p99 with their 95% CIs and the largest, in
// ms, and how many changes a node did not apply.
func PrintConvergence(w io.Writer, c *results.Convergence) {
	what := "network programming latency, proxy " + c.Proxy
	if c.PolicyProvider != "" {
		what = fmt.Sprintf("policy apply latency, policy provider %s, %d policies and %d ipblocks present", c.PolicyProvider, c.Policies, c.IPBlocks)
	}
	fmt.Fprintf(w, "%s: %d changes, probes every %d µs (the resolution), %s\n",
		what, len(c.Changes), c.IntervalUS, c.End.Sub(c.Start).Round(1e9))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNODE\tCHANGES\tNOT APPLIED\tP50 MS\tP90 MS\tP99 MS\tMAX MS")
	for _, r := range c.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%.1f\n", r.Kind, r.Node, r.Changes, r.NotApplied, ms(r.P50), ms(r.P90), ms(r.P99), r.MaxUS/1000)
	}
	tw.Flush()
}

// ms is a quantile and its CI in milliseconds.
func ms(q results.QuantileCI) string {
	if q.CI == [2]float64{} {
		return fmt.Sprintf("%.1f", q.Value/1000)
	}
	return fmt.Sprintf("%.1f [%.1f, %.1f]", q.Value/1000, q.CI[0]/1000, q.CI[1]/1000)
}
