package report

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/vnetlab/vnetlab/internal/results"
)

// PrintReadiness is kube readiness's table: per cluster and burst size, the
// pods' time from creation to first packet, in milliseconds; then each
// cluster against the first.
func PrintReadiness(w io.Writer, run *results.ReadinessRun) {
	fmt.Fprintf(w, "load average %s before, %s after\n", run.LoadBefore, run.LoadAfter)
	for _, c := range run.Clusters {
		if f := c.Cluster; f != nil {
			fmt.Fprintf(w, "%s: %d nodes, Kubernetes %s, CNI %s, proxy %s\n", c.Name, len(f.Nodes), f.ServerVersion, f.CNI, f.KubeProxyMode)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tPODS\tROUNDS\tFIRST PACKET p50 ms [95% CI]\tp90\tp99\tMAX\tLAST POD p50")
	for _, c := range run.Clusters {
		for _, b := range c.Bursts {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%.1f\t%s\n", c.Name, b.Pods, len(b.Rounds), ms(b.P50), ms(b.P90), ms(b.P99), b.MaxUS/1000, ms(b.Last))
		}
	}
	tw.Flush()
	if len(run.Comparisons) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tVS\tPODS\tROUNDS\tFIRST PACKET RATIO [95% CI]\tP\tVERDICT")
	for _, c := range run.Comparisons {
		ratio := fmt.Sprintf("%.3f", c.Ratio)
		if c.RatioCI != [2]float64{} {
			ratio += fmt.Sprintf(" [%.3f, %.3f]", c.RatioCI[0], c.RatioCI[1])
		}
		verdict := c.Verdict
		if c.Note != "" {
			verdict += " (" + c.Note + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%.3g\t%s\n", c.Cluster, c.Base, c.Pods, c.Rounds, ratio, c.P, verdict)
	}
	tw.Flush()
}
